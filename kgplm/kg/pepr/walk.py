"""The random walk of PEPR: the transition matrix of a store, the paper's jump vector split in two parts,
and the hubs whose vectors the fast estimator resolves exactly (the equations are in
:mod:`kgplm.kg.pepr.pagerank`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["TransitionMatrix", "choose_hubs", "paper_jump_weights"]


@dataclass(frozen=True)
class TransitionMatrix:
    """The random walk of a store, in the forms the kernels need.

    ``pull_*``: CSR whose row v lists the entities u walking into v with value w(u→v)/deg(u).
    ``push_*``: CSR whose row u lists where u walks to, with the same values.
    ``degree``: weighted out-degree (0 for dangling entities).
    """

    pull_indptr: np.ndarray
    pull_indices: np.ndarray
    pull_values: np.ndarray
    push_indptr: np.ndarray
    push_indices: np.ndarray
    push_values: np.ndarray
    degree: np.ndarray
    directed: bool

    @property
    def num_nodes(self) -> int:
        return len(self.degree)

    @property
    def dangling(self) -> np.ndarray:
        return self.degree == 0

    @classmethod
    def from_store(cls, store: "KGStore", *, directed: bool = False) -> "TransitionMatrix":
        store.require_links("PEPR")
        n = store.num_entities
        # int32 entity ids while they fit: the push's closure streams the rows of every residual entity, and
        # 4-byte ids are a third fewer bytes a walk entry (with its float32 factor) than 8-byte ones
        index = np.int32 if n < 2**31 else np.int64
        if not directed:
            # from the store's adjacency in one compiled pass (4M entities: 19 s through scipy's COO → CSR)
            from kgplm.kg.pepr.kernels import undirected_walk

            arrays = store.arrays
            indptr, indices, push_values, pull_values, degree = undirected_walk(
                np.asarray(arrays["out_indptr"]),
                np.asarray(arrays["out_neighbors"]),
                np.asarray(arrays["in_indptr"]),
                np.asarray(arrays["in_neighbors"]),
                index,
            )
            return cls(indptr, indices, pull_values, indptr, indices, push_values, degree, directed)
        triples = np.asarray(store.triples)
        keep = triples[:, 0] != triples[:, 2]  # self-loops are ignored
        heads, tails = triples[keep, 0].astype(np.int64), triples[keep, 2].astype(np.int64)
        walk = scipy.sparse.csr_array((np.ones(len(heads)), (heads, tails)), shape=(n, n))
        walk.sum_duplicates()  # (u, v) = number of triples linking u to v
        degree = np.asarray(walk.sum(axis=1)).ravel()
        inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
        push = scipy.sparse.csr_array(scipy.sparse.diags(inverse) @ walk)
        pull = push.T.tocsr()
        pull.sort_indices()
        push.sort_indices()
        return cls(
            pull.indptr.astype(np.int64),
            pull.indices.astype(index),
            pull.data.astype(np.float64),
            push.indptr.astype(np.int64),
            push.indices.astype(index),
            push.data.astype(np.float64),
            degree,
            directed,
        )


def paper_jump_weights(num_entities: int) -> tuple[float, float]:
    """``(w_s, w_u)`` with ``P_paper = w_s · one-hot(seed) + w_u · uniform`` (uniform = 1/Z everywhere)."""
    z = float(num_entities)
    normaliser = 1.0 + (z - 1.0) / z
    return (1.0 - 1.0 / z) / normaliser, 1.0 / normaliser


def choose_hubs(walk: TransitionMatrix, num_hubs: int) -> np.ndarray:
    """The ``num_hubs`` entities of highest walk degree (ties: the lower id), sorted by id."""
    degree = walk.degree
    num_hubs = int(min(num_hubs, np.count_nonzero(degree)))
    if num_hubs <= 0:
        return np.zeros(0, dtype=np.int64)
    return np.sort(np.argsort(-degree, kind="stable")[:num_hubs])
