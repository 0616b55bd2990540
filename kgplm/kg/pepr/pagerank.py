"""Personalised entity PageRank (PEPR) and top-K neighbour tables (SMedBERT §3.2).

Paper: Zhang et al., "SMedBERT: A Knowledge-Enhanced Pre-trained Language Model with Structured
Semantics for Medical Text Mining", ACL 2021, §3.2 "Top-K Entity Sorting".

Equations implemented
---------------------
Personalised PageRank iterates ``V_i = (1 − α) A V_{i−1} + α P`` with ``A`` the column-normalised
adjacency (random-walk transition) matrix, ``α`` the jump (restart) probability and ``P`` the jump
vector. PEPR personalises ``P`` per mention entity ``e_m``:

* ``jump="paper"`` (default): ``P[e_m] = 1``, ``P[e] = 1/Z`` for every other entity (Z = number
  of entities), then ``P`` is normalised to sum 1;
* ``jump="seed"``: ``P = one-hot(e_m)`` (classic personalised PageRank).

``V_0`` is initialised from corpus frequencies when they are given: ``V_e = t_e / T`` for entities
mentioned in the corpus (T = total mentions) and ``1/M`` for the others (M = number of entities),
normalised. The fixed point does not depend on ``V_0``; a good start saves iterations.
After convergence the entities are sorted by score and the top K form ``N(e_m)``.

Choices the paper leaves open (and the options that expose the alternatives)
--------------------------------------------------------------------------
* ``α`` is the *jump* probability, default 0.15 (networkx's ``alpha`` is the damping 1 − α = 0.85).
* The graph is **undirected** by default (``directed=False``): each triple is a walk edge in both
  directions, since medical relations are read both ways (a drug treats a disease; the disease
  is treated by the drug). ``directed=True`` walks head → tail only.
* ``A`` is normalised by out-degree, each triple counting once (two relations between the same
  pair give that pair twice the weight). Self-loops are ignored.
* Dangling entities (no out-edge; in the undirected graph only isolated entities) send their
  walk mass to the jump vector (``dangling="jump"``, networkx's default) or uniformly
  (``dangling="uniform"``).
* Candidates: SMedBERT's masked neighbour modelling needs the relation between ``e_m`` and each
  neighbour, so the default candidates are ``e_m``'s one-hop neighbours (both directions, with
  relation id and direction) ranked by PEPR score (``candidates="one_hop"``); a neighbour linked
  by several relations appears once, with its first relation (lowest relation id, out before
  in). ``candidates="any"`` ranks every other entity (relation −1 where no direct link exists).
  The seed itself is never its own neighbour.

Modes
-----
* ``mode="exact"``: batched power iteration — many seeds at once as a sparse × dense block —
  to an L1 tolerance. Matches networkx to 1e-8 (tests).
* ``mode="fast"`` (``candidates="one_hop"``): Andersen–Chung–Lang forward push from the seed with
  exactly resolved hubs (Jeh & Widom 2003), the residual closed with the tree (cavity) Green's
  function on an undirected walk, and deep pushes for the contested seeds whose k-th and (k+1)-th
  scores are close. The equations, what each approximation misses, the measurements behind the
  defaults (``epsilon`` 1e-2, ``num_hubs`` 64, ``refine="auto"``, ``refine_rounds``) and what was
  tried are in :mod:`kgplm.kg.pepr.fast`. The paper's jump vector is linear in its two parts,
  ``P = w_s · one-hot(e_m) + w_u · uniform``, so its PEPR is ``w_s · PPR_seed + w_u · PageRank_global``
  with one exact global PageRank shared by all seeds (exact when no isolated entity exists; otherwise
  dangling mass differs at order ε). Parallel over seeds on all cores with numba; a seed's row does
  not depend on the number of threads.
* ``mode="auto"`` (``budget_seconds``, default :data:`DEFAULT_BUDGET_SECONDS`; the default mode of
  :func:`top_k_neighbors`, ``KGStore.neighbors(ranked_by="pepr")``, ``kgplm.train`` and ``kgplm kg pepr``):
  exact mode when its *modelled* cost fits the budget, fast mode otherwise. The decision reads the graph and the settings only, never the clock, so the same
  call builds the same table on any machine at any load (a timed calibration, as before, chose exact
  on one run and fast on the other of two identical CMeKG calls: 102.9 s and 134.5 s against 120 s).
  The cost model counts exact mode's work: each power-iteration step multiplies the walk (nnz of the
  transition matrix plus one entry per entity for the dangling mass and the convergence check) by a
  block of seeds, and the L1 change contracts by at least (1 − α) per step from at most 2, so::

      steps ≤ min(max_iter, ⌊log(tol / 2) / log(1 − α)⌋ + 2)          (91 at α = 0.15, tol = 1e-6)
      units = seeds × steps × (nnz + entities)
      seconds = units × EXACT_SECONDS_PER_UNIT

  ``EXACT_SECONDS_PER_UNIT`` = 8.0e-10 is CPU time on one core, measured once on the development
  machine (2 cores, shared with other work during the measurement): CMeKG (115,157 entities, walk
  nnz 1,400,722), 256 evenly spaced seeds, 60 steps to tol 1e-6 from a uniform start, 18.65 s CPU
  (2.33e10 units). The step bound over-counts a typical run (60 of the bound's 91 here), so the
  model errs towards fast mode; on CMeKG it prices a seed at 0.11 s, so the 120 s default of
  ``kgplm.train`` takes exact mode up to ~1,090 seeds. The table's ``config`` records ``mode``,
  ``mode_requested``, ``budget_seconds``, ``exact_seconds_estimate`` (the model's), ``exact_cost``
  (its inputs) and ``mode_reason`` (a sentence), and :attr:`NeighborTable.mode`.

The reference SMedBERT code ranks each mention's neighbours by another entity's score; here every
row is ranked by its own seed's PEPR.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse
from tqdm.auto import tqdm

from kgplm._io import atomic_file
from kgplm.exceptions import ArtifactError, ConfigurationError, MissingFileError
from kgplm.kg.pepr.walk import TransitionMatrix, paper_jump_weights

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = [
    "personalized_pagerank",
    "global_pagerank",
    "top_k_neighbors",
    "NeighborTable",
    "one_hop_candidates",
    "exact_cost",
    "EXACT_SECONDS_PER_UNIT",
    "DEFAULT_BUDGET_SECONDS",
]

logger = logging.getLogger(__name__)

#: CPU seconds (one core) per unit of exact mode's work, one seed × one step × one walk entry; measured
#: once, never at run time (see the module docstring: CMeKG, 256 seeds, 18.65 s for 2.33e10 units).
EXACT_SECONDS_PER_UNIT = 8.0e-10

#: The modelled time ``mode="auto"`` (the default of :func:`top_k_neighbors`, ``kgplm.train`` and
#: ``kgplm kg pepr``) allows exact mode before it takes fast mode.
DEFAULT_BUDGET_SECONDS = 120.0


def _initial_vector(num_entities: int, frequencies: np.ndarray | None) -> np.ndarray:
    if frequencies is None:
        return np.full(num_entities, 1.0 / num_entities)
    frequencies = np.asarray(frequencies, dtype=np.float64)
    if frequencies.shape != (num_entities,) or (frequencies < 0).any():
        raise ConfigurationError(
            f"frequencies must be {num_entities} non-negative counts (one per entity), got shape {frequencies.shape}"
        )
    total = frequencies.sum()
    vector = np.where(frequencies > 0, frequencies / max(total, 1.0), 1.0 / num_entities)
    return vector / vector.sum()


def _check_common(alpha: float, jump: str, dangling: str) -> None:
    if not 0.0 < alpha < 1.0:
        raise ConfigurationError(f"alpha is the jump probability and must be in (0, 1), got {alpha}")
    if jump not in ("paper", "seed"):
        raise ConfigurationError(f"jump must be 'paper' or 'seed', got {jump!r}")
    if dangling not in ("jump", "uniform"):
        raise ConfigurationError(f"dangling must be 'jump' or 'uniform', got {dangling!r}")


def _resolve_seeds(store: "KGStore", seeds) -> np.ndarray:
    if seeds is None:
        return np.arange(store.num_entities, dtype=np.int64)
    if isinstance(seeds, (str, int, np.integer)):
        seeds = [seeds]
    resolved = np.array([store.entity_id(s) if isinstance(s, str) else int(s) for s in seeds], dtype=np.int64)
    bad = resolved[(resolved < 0) | (resolved >= store.num_entities)]
    if len(bad):
        raise ConfigurationError(f"seed ids {bad[:5].tolist()} are outside 0..{store.num_entities - 1}")
    return resolved


def _power_iteration(
    walk: TransitionMatrix,
    seeds: np.ndarray,
    *,
    alpha: float,
    jump: str,
    dangling: str,
    start: np.ndarray,
    tol: float,
    max_iter: int,
    dtype,
) -> tuple[np.ndarray, int]:
    """Exact PEPR for a block of seeds; returns scores of shape (n, len(seeds)) and iterations used.

    One step: ``V ← (1 − α) A V + (α + d) P`` with ``d`` the walk mass on dangling entities
    (sent to ``P``; with ``dangling="uniform"`` it is spread over all entities instead).
    """
    import numba

    from kgplm.kg.pepr.kernels import column_change, pagerank_step

    n, width = walk.num_nodes, len(seeds)
    columns = np.arange(width)
    if jump == "paper":
        seed_weight, uniform_weight = paper_jump_weights(n)
    else:
        seed_weight, uniform_weight = 1.0, 0.0
    dangling_nodes = np.flatnonzero(walk.dangling)
    values = walk.pull_values.astype(dtype)
    current = np.repeat(start.astype(dtype)[:, None], width, axis=1)  # (n, seeds)
    step = np.empty_like(current)
    workers = numba.get_num_threads()
    change = np.inf
    for iteration in range(1, max_iter + 1):
        dangling_mass = (1.0 - alpha) * current[dangling_nodes].sum(axis=0, dtype=np.float64)  # (seeds,)
        to_jump = alpha + (dangling_mass if dangling == "jump" else 0.0)  # mass that restarts via P
        base = to_jump * uniform_weight / n + (dangling_mass / n if dangling == "uniform" else 0.0)
        pagerank_step(
            walk.pull_indptr,
            walk.pull_indices,
            values,
            current,
            dtype(1.0 - alpha),
            np.broadcast_to(np.asarray(base, dtype=dtype), (width,)).copy(),
            step,
        )
        step[seeds, columns] += np.broadcast_to(to_jump * seed_weight, (width,)).astype(dtype)
        change = column_change(step, current, workers).max()
        current, step = step, current
        if change < tol:
            return current, iteration
    logger.warning("PEPR power iteration stopped at max_iter=%d with L1 change %.3g > tol %.3g", max_iter, change, tol)
    return current, max_iter


def _iterate_blocks(
    walk: TransitionMatrix,
    seeds: np.ndarray,
    *,
    batch_size: int,
    show_progress: bool = False,
    description: str = "PEPR (exact)",
    **iteration,
):
    """Yield ``(begin, block_seeds, scores (n, len(block)))`` over blocks of ``batch_size`` seeds."""
    blocks = range(0, len(seeds), batch_size)
    for begin in tqdm(blocks, desc=description, unit=" blocks", disable=not show_progress, leave=False):
        block = seeds[begin : begin + batch_size]
        scores, _ = _power_iteration(walk, block, **iteration)
        yield begin, block, scores


def personalized_pagerank(
    store: "KGStore",
    seeds,
    *,
    alpha: float = 0.15,
    jump: str = "paper",
    frequencies: np.ndarray | None = None,
    directed: bool = False,
    dangling: str = "jump",
    tol: float = 1e-10,
    max_iter: int = 1000,
    batch_size: int = 256,
    dtype=np.float64,
    show_progress: bool = False,
    walk: TransitionMatrix | None = None,
) -> np.ndarray:
    """Exact PEPR scores, shape ``(len(seeds), num_entities)``; each row sums to 1.

    Args:
        seeds: entity ids or names (one or many).
        alpha: jump probability α (networkx's ``alpha`` is ``1 - α``).
        jump: ``"paper"`` (seed 1, others 1/Z, normalised) or ``"seed"`` (one-hot).
        frequencies: corpus mention count per entity, used to initialise V_0.
        directed / dangling: see the module docstring.
        tol: stop when every column's L1 change is below ``tol``.
        batch_size: seeds per sparse × dense block.
    """
    _check_common(alpha, jump, dangling)
    seeds = _resolve_seeds(store, seeds)
    walk = walk or TransitionMatrix.from_store(store, directed=directed)
    start = _initial_vector(store.num_entities, frequencies)
    result = np.empty((len(seeds), store.num_entities), dtype=dtype)
    for begin, block, scores in _iterate_blocks(
        walk,
        seeds,
        batch_size=batch_size,
        show_progress=show_progress,
        alpha=alpha,
        jump=jump,
        dangling=dangling,
        start=start,
        tol=tol,
        max_iter=max_iter,
        dtype=dtype,
    ):
        result[begin : begin + len(block)] = scores.T
    return result


def global_pagerank(
    store: "KGStore",
    *,
    alpha: float = 0.15,
    directed: bool = False,
    tol: float = 1e-12,
    max_iter: int = 1000,
    walk: TransitionMatrix | None = None,
) -> np.ndarray:
    """Plain PageRank with a uniform jump vector (the ``w_u`` part of the paper's jump)."""
    walk = walk or TransitionMatrix.from_store(store, directed=directed)
    n = walk.num_nodes
    pull = scipy.sparse.csr_array((walk.pull_values, walk.pull_indices, walk.pull_indptr), shape=(n, n))
    vector = np.full(n, 1.0 / n)
    dangling = walk.dangling
    for _ in range(max_iter):
        updated = (1.0 - alpha) * (pull @ vector + vector[dangling].sum() / n) + alpha / n
        if np.abs(updated - vector).sum() < tol:
            return updated
        vector = updated
    return vector


# -- neighbour tables ----------------------------------------------------------------------------
@dataclass
class NeighborTable:
    """Top-K neighbours per seed: int arrays ``neighbors``, ``relations``, ``directions`` and float
    ``scores``, each of shape (num_seeds, K), −1 (scores 0) where a seed has fewer than K.

    ``directions``: 0 when the seed is the head of the triple (out), 1 when it is the tail (in),
    −1 for candidates without a direct link. Row i belongs to ``seeds[i]``.
    """

    seeds: np.ndarray
    neighbors: np.ndarray
    relations: np.ndarray
    directions: np.ndarray
    scores: np.ndarray
    config: dict[str, Any] = field(default_factory=dict)
    _row_index: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def k(self) -> int:
        return self.neighbors.shape[1]

    @property
    def mode(self) -> str | None:
        """The mode that computed the scores, ``"exact"`` or ``"fast"`` (also when ``"auto"`` was asked;
        ``config["mode_requested"]`` says so); None for a table saved without it."""
        return self.config.get("mode")

    def __len__(self) -> int:
        return len(self.seeds)

    def row_of(self, entity: int) -> int:
        """Row index of a seed entity (its first row if it is a seed several times)."""
        if self._row_index is None:
            # built once: entity id → first row, −1 for non-seeds (seeds are not assumed sorted)
            size = int(self.seeds.max()) + 1 if len(self.seeds) else 0
            index = np.full(size, -1, dtype=np.int64)
            unique, first = np.unique(np.asarray(self.seeds, dtype=np.int64), return_index=True)
            index[unique] = first
            self._row_index = index
        entity = int(entity)
        row = self._row_index[entity] if 0 <= entity < len(self._row_index) else -1
        if row < 0:
            raise ConfigurationError(f"entity {entity} is not a seed of this neighbour table")
        return int(row)

    def save(self, path: str | os.PathLike) -> Path:
        """Write as ``.npz`` (arrays) with the configuration as JSON inside; atomic."""
        path = Path(path)
        with atomic_file(path, "wb") as handle:
            np.savez(
                handle,
                seeds=self.seeds,
                neighbors=self.neighbors,
                relations=self.relations,
                directions=self.directions,
                scores=self.scores,
                config=np.frombuffer(json.dumps(self.config).encode("utf-8"), dtype=np.uint8),
            )
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "NeighborTable":
        path = Path(path)
        if not path.is_file():
            raise MissingFileError(path, "neighbour table")
        import zipfile

        try:
            with np.load(path, allow_pickle=False) as data:
                missing = {"seeds", "neighbors", "relations", "directions", "scores"} - set(data.files)
                if missing:
                    raise ArtifactError(f"{path} is not a neighbour table: missing {sorted(missing)}")
                config = json.loads(data["config"].tobytes().decode("utf-8")) if "config" in data.files else {}
                return cls(
                    data["seeds"], data["neighbors"], data["relations"], data["directions"], data["scores"], config
                )
        except (zipfile.BadZipFile, EOFError, ValueError, OSError) as error:
            if isinstance(error, ArtifactError):
                raise
            raise ArtifactError(
                f"{path}: not a complete neighbour table ({type(error).__name__}: {error}); it is "
                f"damaged (cut short or overwritten): compute it again"
            ) from None

    def to_frame(self, store: "KGStore", entity) -> "Any":
        """One seed's row as a DataFrame with names."""
        import pandas as pd

        row = self.row_of(store.entity_id(entity) if isinstance(entity, str) else int(entity))
        keep = self.neighbors[row] >= 0
        return pd.DataFrame(
            {
                "neighbor": [store.entity_name(int(n)) for n in self.neighbors[row][keep]],
                "neighbor_id": self.neighbors[row][keep],
                "relation": [store.relation_name(int(r)) if r >= 0 else None for r in self.relations[row][keep]],
                "direction": [("out", "in")[d] if d >= 0 else None for d in self.directions[row][keep]],
                "score": self.scores[row][keep],
            }
        )


def one_hop_candidates(store: "KGStore", seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per seed, distinct one-hop neighbours (no self) with their first relation and direction.

    Returns CSR ``indptr`` over seeds and aligned ``neighbors``, ``relations``, ``directions``.
    Within a seed, rows are sorted by (neighbour, direction, relation) and the first row per
    neighbour is kept: out before in, lowest relation id first.
    """
    from kgplm.kg.pepr.candidate_kernels import compact_rows, one_hop_rows

    arrays = store.arrays
    out_indptr, in_indptr = np.asarray(arrays["out_indptr"]), np.asarray(arrays["in_indptr"])
    seeds = np.ascontiguousarray(seeds, dtype=np.int64)
    bounds = out_indptr[seeds + 1] - out_indptr[seeds] + in_indptr[seeds + 1] - in_indptr[seeds]
    row_start = np.zeros(len(seeds) + 1, dtype=np.int64)
    np.cumsum(bounds, out=row_start[1:])
    total = int(row_start[-1])
    # int32 relation ids and int8 directions: 5 bytes a candidate fewer (400 MB at 4M concepts)
    neighbors, relations, directions = np.empty(total, np.int64), np.empty(total, np.int32), np.empty(total, np.int8)
    row_counts = np.zeros(len(seeds), dtype=np.int64)
    one_hop_rows(
        seeds,
        out_indptr,
        np.asarray(arrays["out_neighbors"]),
        np.asarray(arrays["out_relations"]),
        in_indptr,
        np.asarray(arrays["in_neighbors"]),
        np.asarray(arrays["in_relations"]),
        max(int(store.num_relations), 1),
        row_start,
        neighbors,
        relations,
        directions,
        row_counts,
    )
    # the filled prefix of each seed's slots, as CSR
    indptr = np.zeros(len(seeds) + 1, dtype=np.int64)
    np.cumsum(row_counts, out=indptr[1:])
    kept = int(indptr[-1])
    columns = np.empty(kept, np.int64), np.empty(kept, np.int32), np.empty(kept, np.int8)
    compact_rows(row_start, indptr, neighbors, relations, directions, *columns)
    return (indptr, *columns)


def _select_top_k(indptr, neighbors, relations, directions, scores, k) -> tuple[np.ndarray, ...]:
    """Top k candidates per seed by score (ties: lower neighbour id first), −1 padded."""
    from kgplm.kg.pepr.candidate_kernels import gather_top_k, tie_ranks, top_k_rows

    num_seeds = len(indptr) - 1
    # Scores equal to 7 significant digits of the seed's best score are ties, which go to the lower
    # neighbour id, so that a table does not depend on the order sums were taken in (fast mode's scores
    # carry larger approximation errors, which the rounding does not hide).
    rounded = np.empty(len(scores))
    tie_ranks(np.ascontiguousarray(indptr, dtype=np.int64), np.ascontiguousarray(scores, dtype=np.float64), rounded)
    positions = np.empty((num_seeds, k), dtype=np.int64)  # top_k_rows writes every slot, −1 past a row's end
    top_k_rows(indptr, np.ascontiguousarray(neighbors, dtype=np.int64), rounded, k, positions)
    shape = (num_seeds, k)
    table = (
        np.empty(shape, dtype=np.int64),
        np.empty(shape, dtype=np.int64),
        np.empty(shape, dtype=np.int8),
        np.empty(shape, dtype=np.float32),
    )
    gather_top_k(positions, neighbors, relations, directions, scores, *table)
    return table


def _exact_candidate_scores(
    walk,
    seeds,
    candidate_indptr,
    candidate_neighbors,
    *,
    alpha,
    jump,
    dangling,
    start,
    tol,
    max_iter,
    batch_size,
    dtype,
    show_progress,
) -> np.ndarray:
    scores = np.zeros(len(candidate_neighbors), dtype=np.float64)
    for begin, block, block_scores in _iterate_blocks(
        walk,
        seeds,
        batch_size=batch_size,
        show_progress=show_progress,
        alpha=alpha,
        jump=jump,
        dangling=dangling,
        start=start,
        tol=tol,
        max_iter=max_iter,
        dtype=dtype,
    ):
        for column in range(len(block)):
            lo, hi = candidate_indptr[begin + column], candidate_indptr[begin + column + 1]
            scores[lo:hi] = block_scores[candidate_neighbors[lo:hi], column]
    return scores


def _exact_any_candidates(
    store, walk, seeds, k, *, alpha, jump, dangling, start, tol, max_iter, batch_size, dtype, show_progress
):
    """Top-k over all entities (exact mode, candidates="any"); relation/direction from one-hop links."""
    hop_indptr, hop_neighbors, hop_relations, hop_directions = one_hop_candidates(store, seeds)
    result = [
        np.full((len(seeds), k), -1, dtype=np.int64),
        np.full((len(seeds), k), -1, dtype=np.int64),
        np.full((len(seeds), k), -1, dtype=np.int8),
        np.zeros((len(seeds), k), dtype=np.float32),
    ]
    for begin, block, block_scores in _iterate_blocks(
        walk,
        seeds,
        batch_size=batch_size,
        show_progress=show_progress,
        description="PEPR (exact, any)",
        alpha=alpha,
        jump=jump,
        dangling=dangling,
        start=start,
        tol=tol,
        max_iter=max_iter,
        dtype=dtype,
    ):
        for column, seed in enumerate(block.tolist()):
            column_scores = block_scores[:, column].astype(np.float64)
            column_scores[seed] = -np.inf
            top = np.argpartition(-column_scores, min(k, len(column_scores) - 1))[: k + 1]
            top = top[np.lexsort((top, -column_scores[top]))][:k]
            top = top[np.isfinite(column_scores[top])]
            row = begin + column
            lo, hi = hop_indptr[row], hop_indptr[row + 1]
            link = dict(
                zip(hop_neighbors[lo:hi].tolist(), zip(hop_relations[lo:hi].tolist(), hop_directions[lo:hi].tolist()))
            )
            result[0][row, : len(top)] = top
            result[3][row, : len(top)] = column_scores[top]
            for j, node in enumerate(top.tolist()):
                relation, direction = link.get(node, (-1, -1))
                result[1][row, j] = relation
                result[2][row, j] = direction
    return result


def top_k_neighbors(
    store: "KGStore",
    seeds=None,
    *,
    k: int = 10,
    candidates: str = "one_hop",
    mode: str = "auto",
    alpha: float = 0.15,
    jump: str = "paper",
    frequencies: np.ndarray | None = None,
    directed: bool = False,
    dangling: str = "jump",
    tol: float = 1e-6,
    max_iter: int = 1000,
    batch_size: int = 256,
    epsilon: float = 1e-2,
    num_hubs: int = 64,
    refine: bool | str = "auto",
    refine_rounds: tuple[tuple[float, float], ...] = ((5e-6, 0.05), (2e-6, 0.002)),
    budget_seconds: float | None = DEFAULT_BUDGET_SECONDS,
    num_threads: int | None = None,
    show_progress: bool = True,
) -> NeighborTable:
    """Rank each seed's candidate neighbours by PEPR and keep the top ``k``.

    Args:
        seeds: entity ids or names; None means every entity (rows in entity id order).
        k: neighbours per seed (the paper's K = 10).
        candidates: ``"one_hop"`` (default: linked neighbours, with relation and direction) or ``"any"``.
        mode: ``"exact"`` (batched power iteration to ``tol``), ``"fast"`` (forward push with ``epsilon``
            and ``num_hubs`` exactly resolved hubs, then the refinement; one_hop candidates) or ``"auto"``
            (default): exact when its cost, modelled from the graph and the settings (:func:`exact_cost`, no
            clock), fits ``budget_seconds``, fast otherwise; always exact for ``candidates="any"`` or
            ``dangling="uniform"``, which fast mode does not compute. The mode used is
            :attr:`NeighborTable.mode` (``config["mode"]``), why in ``config["mode_reason"]``.
        num_hubs: fast mode's exactly resolved highest-degree entities; their PPR vectors are iterated to an L1
            change of a thousandth of the finest push ε, within [1e-6, 1e-5] (``config["hub_tol"]``).
        refine: fast mode's deep pushes of the contested seeds whose boundary is close: ``"auto"`` (default:
            only when the graph has short cycles around its contested seeds, where the tree closure
            misses returns), True or False. See :mod:`kgplm.kg.pepr.fast`.
        refine_rounds: ``(push ε, gap)`` per round: a round pushes to ε again the seeds whose k-th and
            (k+1)-th scores are within ``gap`` of each other (relative), among those the previous round
            refined. See the module docstring.
        budget_seconds: the modelled time (one core of the calibration machine) ``mode="auto"`` allows
            exact mode (default :data:`DEFAULT_BUDGET_SECONDS`).
        num_threads: numba threads for fast mode (default: numba's current count: all cores unless limited,
            e.g. by ``kgplm.train``'s ``num_threads``).

    Other arguments as in :func:`personalized_pagerank`.
    """
    _check_common(alpha, jump, dangling)
    if k < 1:
        raise ConfigurationError(f"k must be at least 1, got {k}")
    if candidates not in ("one_hop", "any"):
        raise ConfigurationError(f"candidates must be 'one_hop' or 'any', got {candidates!r}")
    if mode not in ("exact", "fast", "auto"):
        raise ConfigurationError(f"mode must be 'exact', 'fast' or 'auto', got {mode!r}")
    if mode == "fast" and dangling != "jump":
        raise ConfigurationError(
            f"mode={mode!r} pushes, which sends dangling mass to the jump vector; use dangling='jump'"
        )
    if mode == "fast" and candidates == "any":
        raise ConfigurationError(
            f"mode={mode!r} pushes, which ranks one-hop candidates; use mode='exact' for candidates='any'"
        )
    if mode == "auto" and (budget_seconds is None or not budget_seconds >= 0):
        raise ConfigurationError(
            f"mode='auto' needs budget_seconds ≥ 0 (the time exact mode may take), got {budget_seconds!r}"
        )
    if refine not in (True, False, "auto"):
        raise ConfigurationError(f"refine must be True, False or 'auto', got {refine!r}")
    refine_rounds = [tuple(level) for level in refine_rounds]
    if any(len(level) != 2 or not level[0] > 0 or not level[1] >= 0 for level in refine_rounds):
        raise ConfigurationError(f"refine_rounds must be (push ε > 0, gap ≥ 0) pairs, got {refine_rounds!r}")
    seeds = _resolve_seeds(store, seeds)
    walk = TransitionMatrix.from_store(store, directed=directed)
    start = _initial_vector(store.num_entities, frequencies)
    config = {
        "k": k,
        "candidates": candidates,
        "mode": mode,
        "alpha": alpha,
        "jump": jump,
        "directed": directed,
        "dangling": dangling,
        "tol": tol,
        "epsilon": epsilon,
        "num_hubs": num_hubs,
        "frequencies": frequencies is not None,
        "num_entities": store.num_entities,
    }
    common = dict(
        alpha=alpha,
        jump=jump,
        dangling=dangling,
        start=start,
        tol=tol,
        max_iter=max_iter,
        batch_size=batch_size,
        dtype=np.float64,
        show_progress=show_progress,
    )
    if mode == "auto" and (candidates == "any" or dangling != "jump"):
        setting = "candidates='any'" if candidates == "any" else f"dangling={dangling!r}"
        config.update(
            mode="exact",
            mode_requested="auto",
            budget_seconds=budget_seconds,
            mode_reason=f"exact: {setting} is computed by exact mode only",
        )
        mode = "exact"
    if candidates == "any":
        config.setdefault("mode_reason", "exact: requested")
        columns = _exact_any_candidates(store, walk, seeds, k, **common)
        return NeighborTable(seeds, *columns, config=config)
    indptr, neighbors, relations, directions = one_hop_candidates(store, seeds)
    if mode == "auto":
        choice = _auto_choice(walk, len(seeds), budget_seconds, alpha=alpha, tol=tol, max_iter=max_iter)
        config.update(mode_requested="auto", budget_seconds=budget_seconds, **choice)
    elif "mode_reason" not in config:
        config.update(mode_reason=f"{mode}: requested")
    if config["mode"] == "exact":
        scores = _exact_candidate_scores(walk, seeds, indptr, neighbors, **common)
    elif config["mode"] == "fast":
        from kgplm.kg.pepr.fast import fast_candidate_scores

        scores, stats = fast_candidate_scores(
            walk,
            seeds,
            indptr,
            neighbors,
            k=k,
            epsilon=epsilon,
            num_hubs=num_hubs,
            refine=refine,
            refine_rounds=refine_rounds,
            num_threads=num_threads,
            alpha=alpha,
            jump=jump,
            max_iter=max_iter,
            batch_size=batch_size,
            show_progress=show_progress,
        )
        config.update(refine=refine, refine_rounds=[list(level) for level in refine_rounds], **stats)
    del walk  # the walk (1.2 GB at 4M concepts) is not needed to select the top k
    columns = _select_top_k(indptr, neighbors, relations, directions, scores, k)
    return NeighborTable(seeds, *columns, config=config)


def exact_cost(walk: TransitionMatrix, num_seeds: int, *, alpha: float, tol: float, max_iter: int) -> dict:
    """Exact mode's modelled cost for ``num_seeds`` seeds (module docstring, ``mode="auto"``): a pure
    function of the graph and the settings. Returns ``seeds``, ``steps`` (the bound), ``walk_entries``
    (nnz + entities), ``units`` and ``seconds`` (units × :data:`EXACT_SECONDS_PER_UNIT`)."""
    steps = int(min(max_iter, math.floor(math.log(tol / 2.0) / math.log(1.0 - alpha)) + 2)) if tol < 2 else 1
    entries = int(len(walk.pull_indices) + walk.num_nodes)
    units = int(num_seeds) * steps * entries
    return {
        "seeds": int(num_seeds),
        "steps": steps,
        "walk_entries": entries,
        "units": units,
        "seconds_per_unit": EXACT_SECONDS_PER_UNIT,
        "seconds": units * EXACT_SECONDS_PER_UNIT,
    }


def _auto_choice(walk, num_seeds, budget_seconds, *, alpha, tol, max_iter) -> dict:
    """``mode="auto"``: exact when the modelled cost fits ``budget_seconds``, fast otherwise; no clock."""
    cost = exact_cost(walk, num_seeds, alpha=alpha, tol=tol, max_iter=max_iter)
    mode = "exact" if cost["seconds"] <= budget_seconds else "fast"
    reason = (
        f"{mode}: exact mode modelled at {cost['seconds']:.3g} s ({cost['seeds']} seeds × ≤ {cost['steps']} "
        f"steps × {cost['walk_entries']:,} walk entries × {EXACT_SECONDS_PER_UNIT:g} s) "
        f"{'≤' if mode == 'exact' else '>'} budget {budget_seconds:g} s"
    )
    logger.info("PEPR auto: %s", reason)
    return {"mode": mode, "exact_seconds_estimate": cost["seconds"], "exact_cost": cost, "mode_reason": reason}
