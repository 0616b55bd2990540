"""Personalised entity PageRank (PEPR) and top-K neighbour tables (SMedBERT §3.2).

The equations, the choices the paper leaves open and the three modes are in
:mod:`kgplm.kg.pepr.pagerank`; the layout:

* :mod:`~kgplm.kg.pepr.pagerank` — the public API: :func:`personalized_pagerank`,
  :func:`global_pagerank`, :func:`top_k_neighbors`, :class:`NeighborTable`, :func:`exact_cost`
  (exact mode's batched power iteration and the ``auto`` mode's cost model);
* :mod:`~kgplm.kg.pepr.walk` — the random walk (:class:`TransitionMatrix`), the paper's jump
  vector in two parts (:func:`paper_jump_weights`) and the hubs (:func:`~kgplm.kg.pepr.walk.choose_hubs`);
* :mod:`~kgplm.kg.pepr.fast` — the fast estimator (forward push, exact hubs, tree closure, deep
  pushes of contested seeds), its equations and its measured defaults;
* :mod:`~kgplm.kg.pepr.kernels`, :mod:`~kgplm.kg.pepr.tree_kernels`,
  :mod:`~kgplm.kg.pepr.candidate_kernels` — the compiled (numba) loops.
"""

from kgplm.kg.pepr.pagerank import (
    DEFAULT_BUDGET_SECONDS,
    EXACT_SECONDS_PER_UNIT,
    NeighborTable,
    exact_cost,
    global_pagerank,
    one_hop_candidates,
    personalized_pagerank,
    top_k_neighbors,
)
from kgplm.kg.pepr.walk import TransitionMatrix, paper_jump_weights

__all__ = [
    "personalized_pagerank",
    "global_pagerank",
    "top_k_neighbors",
    "NeighborTable",
    "TransitionMatrix",
    "paper_jump_weights",
    "one_hop_candidates",
    "exact_cost",
    "EXACT_SECONDS_PER_UNIT",
    "DEFAULT_BUDGET_SECONDS",
]
