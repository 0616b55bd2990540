"""PEPR fast mode: forward push with exact hubs, and the deep push that refines contested seeds.

The equations, the refinement rule and the measurements behind the defaults are stated in the
docstring of :mod:`kgplm.kg.pepr` ("Modes"); this module holds the code that runs them. The
compiled loops are in :mod:`kgplm.kg._pepr_kernels`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from kgplm._csr import row_subset

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.pepr import TransitionMatrix
    from kgplm.kg.store import KGStore

__all__ = ["PushContext", "fast_candidate_scores", "rows_to_refine", "short_cycle_share"]

#: bytes the hubs' power iteration may hold in its two float64 (entities × hubs) blocks; on larger graphs
#: the hubs are iterated in narrower blocks (at 4M entities, 64 hubs in one block held 4.1 GB of the
#: coarse push's 8.04 GB peak; issue 30.3). A function of the graph's size only, never of the machine:
#: up to 1M entities all 64 default hubs still go in one block, as before.
HUB_BLOCK_BYTES = 1 << 30

#: ``refine="auto"`` refines when the median short-cycle share of the contested seeds reaches this
#: (measured: CMeKG 0.27, the locally tree-like 274k synthetic graph ≈ 0)
CLUSTERED_SHARE = 0.05

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PushContext:
    """What every push shares: the walk, the hubs with their exact seed-jump PPR vectors
    (``hub_vectors[:, slot]``), the exact global PageRank and the jump weights."""

    walk: "TransitionMatrix"
    alpha: float
    is_hub: np.ndarray
    hub_slot: np.ndarray
    hub_vectors: np.ndarray  # (n, hubs) float32
    global_scores: np.ndarray
    remainder_distribution: np.ndarray
    seed_weight: float
    global_weight: float

    @classmethod
    def build(cls, store: "KGStore", walk: "TransitionMatrix", *, num_hubs: int, alpha: float, jump: str,
              max_iter: int, batch_size: int, hub_tol: float = 1e-6) -> "PushContext":
        from kgplm.kg.pepr import _choose_hubs, _iterate_blocks, global_pagerank, paper_jump_weights

        n = walk.num_nodes
        started = time.perf_counter()
        hubs = _choose_hubs(walk, num_hubs)
        hub_vectors = np.zeros((n, len(hubs)), dtype=np.float32)  # exact seed-jump PPR of each hub
        # iterated in float64: in float32 the rounding of a hub's many in-edges can keep the L1 change
        # above hub_tol until max_iter (seen on CMeKG subgraphs); stored in float32
        width = max(1, min(batch_size, HUB_BLOCK_BYTES // (2 * 8 * max(n, 1))))  # hubs per block
        for begin, block, vectors in _iterate_blocks(walk, hubs, batch_size=width, alpha=alpha, jump="seed",
                                                     dangling="jump", start=np.full(n, 1.0 / n), tol=hub_tol,
                                                     max_iter=max_iter, dtype=np.float64):
            hub_vectors[:, begin : begin + len(block)] = vectors
        logger.info("PEPR fast: exact vectors of %d hubs (degree ≥ %g) in %.1f s", len(hubs),
                    walk.degree[hubs].min() if len(hubs) else 0, time.perf_counter() - started)
        is_hub = np.zeros(n, dtype=np.bool_)
        is_hub[hubs] = True
        hub_slot = np.full(n, -1, dtype=np.int64)
        hub_slot[hubs] = np.arange(len(hubs))
        needs_global = jump == "paper" or walk.directed
        global_scores = global_pagerank(store, alpha=alpha, walk=walk) if needs_global else np.zeros(n)
        seed_weight, global_weight = paper_jump_weights(n) if jump == "paper" else (1.0, 0.0)
        # where a spread-out residual ends up: the walk's stationary distribution deg / 2m when the walk
        # is undirected; the global PageRank approximates it on a directed walk
        if walk.directed:
            remainder_distribution = global_scores
        else:
            remainder_distribution = walk.degree / max(walk.degree.sum(), 1.0)
        return cls(walk, alpha, is_hub, hub_slot, hub_vectors, global_scores, remainder_distribution, seed_weight,
                   global_weight)

    def push_scores(self, seeds: np.ndarray, indptr: np.ndarray, neighbors: np.ndarray, *, epsilon: float,
                    exact_steps: int, num_threads: int | None, show_progress: bool, description: str) -> np.ndarray:
        """Scores of each seed's candidates (CSR ``indptr`` over ``seeds``, aligned with ``neighbors``)."""
        import numba

        from kgplm.kg._pepr_kernels import forward_push_scores

        walk = self.walk
        threads = num_threads or numba.config.NUMBA_NUM_THREADS
        previous = numba.get_num_threads()
        numba.set_num_threads(threads)
        scores = np.zeros(len(neighbors), dtype=np.float64)
        chunk = max(4096, threads * 1024)
        try:
            with tqdm(total=len(seeds), desc=description, unit=" seeds", unit_scale=True, disable=not show_progress,
                      leave=False) as progress:
                for begin in range(0, len(seeds), chunk):
                    end = min(begin + chunk, len(seeds))
                    lo, hi = indptr[begin], indptr[end]
                    part = np.zeros(hi - lo, dtype=np.float64)
                    forward_push_scores(seeds[begin:end], self.alpha, epsilon, walk.push_indptr, walk.push_indices,
                                        walk.push_values, walk.pull_indptr, walk.pull_indices, walk.pull_values,
                                        walk.degree, self.is_hub, self.hub_slot, self.hub_vectors,
                                        indptr[begin : end + 1] - lo, neighbors[lo:hi], self.global_scores,
                                        self.remainder_distribution, self.seed_weight, self.global_weight,
                                        not walk.directed, exact_steps, threads, part)
                    scores[lo:hi] = part
                    progress.update(end - begin)
        finally:
            numba.set_num_threads(previous)
        return scores


def rows_to_refine(indptr: np.ndarray, neighbors: np.ndarray, scores: np.ndarray, k: int, gap: float) -> np.ndarray:
    """Rows with more than ``k`` candidates whose k-th and (k+1)-th scores are within ``gap`` of each
    other, relative to the k-th: ``(s_k − s_{k+1}) / s_k < gap``."""
    from kgplm.kg._pepr_kernels import top_k_rows

    contested = np.flatnonzero(np.diff(indptr) > k)
    if not len(contested) or gap <= 0:
        return np.zeros(0, dtype=np.int64)
    sub_indptr, positions = row_subset(indptr, contested)
    chosen = np.full((len(contested), k + 1), -1, dtype=np.int64)
    top_k_rows(sub_indptr, np.ascontiguousarray(neighbors[positions], dtype=np.int64), scores[positions], k + 1,
               chosen)
    kth = scores[positions[chosen[:, k - 1]]]
    next_best = scores[positions[chosen[:, k]]]
    close = (kth - next_best) < gap * np.abs(kth)
    return contested[close]


def short_cycle_share(walk: "TransitionMatrix", seeds: np.ndarray, is_hub: np.ndarray) -> np.ndarray:
    """Per seed s, the share of the 3-step walk mass from s to its (non-hub) neighbours that runs around
    a short cycle rather than back and forth on one edge, over walks whose inner steps avoid the hubs
    (the push resolves hub visits exactly)::

        total(s)   = Σ_{v ∈ N(s)} P³(s, v)
        trivial(s) = Σ_{v ∈ N(s)} P(s, v) · (P²(s, s) + P²(v, v) − P(v, s) P(s, v))
        share(s)   = (total − trivial) / total

    (walks s→u→s→v and s→v→x→v; s→v→s→v is in both terms and counted once). On a locally tree-like
    graph the share is ≈ 0: the walk comes back near s only by retracing its steps.
    """
    import scipy.sparse

    n = walk.num_nodes
    push = scipy.sparse.csr_array((walk.push_values, walk.push_indices, walk.push_indptr), shape=(n, n))
    keep = (~is_hub).astype(np.float64)
    avoid_hubs = scipy.sparse.diags_array(keep)
    seeds = np.asarray(seeds, dtype=np.int64)
    columns = np.arange(len(seeds))
    start = scipy.sparse.csr_array((np.ones(len(seeds)), (seeds, columns)), shape=(n, len(seeds)))
    one = (avoid_hubs @ (push.T @ start)).tocsc()  # (n, seeds): P(s, ·) on non-hubs, one column per seed
    two = (avoid_hubs @ (push.T @ one)).tocsc()  # P²(s, ·) through and onto non-hubs
    neighbour = one.copy()
    neighbour.data[:] = 1.0  # (n, seeds): indicator of s's non-hub neighbours
    into_neighbours = push @ neighbour  # (n, seeds): Σ_{v ∈ N(s)} P(x, v)
    total = np.asarray(two.multiply(into_neighbours).sum(axis=0)).ravel()
    return_two = np.asarray((push @ avoid_hubs).multiply(push.T).sum(axis=1)).ravel()  # Σ_{x non-hub} P(v,x) P(x,v)
    first = one.tocoo()  # entries P(s, v): row v, column of s
    back = np.asarray(push[first.row, seeds[first.col]]).ravel() * keep[seeds[first.col]]  # P(v, s), s non-hub
    via_seed = np.asarray(two[seeds, columns]).ravel()[first.col]  # P²(s, s)
    per_entry = first.data * (via_seed + return_two[first.row] - back * first.data)
    trivial = np.bincount(first.col, weights=per_entry, minlength=len(seeds))
    return np.divide(total - trivial, total, out=np.zeros(len(seeds)), where=total > 0)


def fast_candidate_scores(store: "KGStore", walk: "TransitionMatrix", seeds: np.ndarray, indptr: np.ndarray,
                          neighbors: np.ndarray, *, k: int, epsilon: float, num_hubs: int, refine: bool | str,
                          refine_rounds, num_threads: int | None, alpha: float, jump: str, max_iter: int,
                          batch_size: int, show_progress: bool, cycle_sample: int = 512) -> tuple[np.ndarray, dict]:
    """Coarse push for every seed, then (``refine``: True, False or "auto") rounds of deep pushes.

    Round ``(round_epsilon, gap)`` pushes to ``round_epsilon`` the contested seeds whose k-th and
    (k+1)-th scores are still within ``gap`` (relative), among those the previous round refined.
    Returns the candidate scores and what was done: ``num_contested``, ``short_cycle_share`` (the
    median over up to ``cycle_sample`` contested seeds; "auto" refines when it reaches
    :data:`CLUSTERED_SHARE`), ``refined`` and ``num_refined`` (per round).
    """
    context = PushContext.build(store, walk, num_hubs=num_hubs, alpha=alpha, jump=jump, max_iter=max_iter,
                                batch_size=batch_size)
    started = time.perf_counter()
    scores = context.push_scores(seeds, indptr, neighbors, epsilon=epsilon, exact_steps=2, num_threads=num_threads,
                                 show_progress=show_progress, description="PEPR (fast)")
    logger.info("PEPR fast: %d seeds pushed (ε %g) in %.1f s", len(seeds), epsilon, time.perf_counter() - started)
    contested = np.flatnonzero((np.diff(indptr) > k) & ~context.is_hub[seeds])  # a hub seed's scores are exact
    stats = {"num_contested": int(np.count_nonzero(np.diff(indptr) > k)), "short_cycle_share": None,
             "refined": False, "num_refined": []}
    rounds = [(float(e), float(g)) for e, g in refine_rounds if e < epsilon]  # a round must push deeper
    if refine is False or not len(contested) or not rounds:
        return scores, stats
    if refine == "auto":
        # evenly spaced, so that the decision is a pure function of the seeds
        sample = seeds[contested[np.linspace(0, len(contested) - 1, min(cycle_sample, len(contested))).astype(int)]]
        share = float(np.median(short_cycle_share(walk, sample, context.is_hub)))
        stats["short_cycle_share"] = round(share, 4) + 0.0  # no "-0.0"
        if share < CLUSTERED_SHARE:
            logger.info("PEPR fast: no refinement (short-cycle share %.3f < %.2f: locally tree-like graph)", share,
                        CLUSTERED_SHARE)
            return scores, stats
    stats["refined"] = True
    candidates = contested
    for round_epsilon, gap in rounds:
        rows = np.intersect1d(rows_to_refine(indptr, neighbors, scores, k, gap), candidates)
        stats["num_refined"].append(int(len(rows)))
        if not len(rows):
            break
        started = time.perf_counter()
        sub_indptr, positions = row_subset(indptr, rows)
        scores[positions] = context.push_scores(seeds[rows], sub_indptr, np.ascontiguousarray(neighbors[positions]),
                                                epsilon=round_epsilon, exact_steps=1, num_threads=num_threads,
                                                show_progress=show_progress, description="PEPR (refine)")
        logger.info("PEPR fast: %d of %d contested seeds refined (deep push, ε %g, gap < %g) in %.1f s", len(rows),
                    stats["num_contested"], round_epsilon, gap, time.perf_counter() - started)
        candidates = rows
    return scores, stats
