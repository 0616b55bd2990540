"""PEPR fast mode: forward push with exact hubs, the tree (cavity) closure of the residual, and the deep
pushes that refine contested seeds (the PEPR equations and the paper are in :mod:`kgplm.kg.pepr`; the
compiled loops in :mod:`kgplm.kg.pepr.kernels`, :mod:`kgplm.kg.pepr.tree_kernels` and, for the
candidate rows, :mod:`kgplm.kg.pepr.candidate_kernels`).

Notation: P(a, b) = w(a, b) / deg(a) the walk, α the jump probability, G = Σ_t ((1 − α) P)^t the
expected discounted visits, so that ppr_u(v) = α G(u, v); π = deg / 2m; N(v) the neighbours of v.

1. Push with exact hubs
-----------------------
Andersen, Chung & Lang (2006) forward push from the seed s, to a threshold ε (the seed itself is always
pushed once), leaves an estimate p and a residual r with ``ppr_s = p + Σ_u r_u · ppr_u``. The ``num_hubs``
highest-degree entities ("hubs") are never pushed: their residual is resolved exactly with their
precomputed PPR vectors (Jeh & Widom 2003), iterated together with the global PageRank (one more column)
in float32 blocks of at most ``HUB_BLOCK_BYTES``, each row summed in float64 (:func:`exact_vectors`; all
64 default hubs in one block up to 1M entities, two at 4M), to an L1 change of a thousandth of the
run's finest push ε (:func:`hub_tolerance`: 1e-5 for the coarse push alone, 1e-6 with the default deep
pushes). On an undirected walk a hub candidate is exact (to the hub vector's tolerance) by
reversibility, ppr_s(h) = deg(h) / deg(s) · ppr_h(s), and a hub seed's row is its vector. What is left is
the residual r on non-hub entities, each below ε · deg(u).

2. The tree closure of the residual (undirected walks)
------------------------------------------------------
On a tree G factorises along the unique path from u to v (the last-exit decomposition)::

    G(u, v) = G_uu · Π_{(a→b) on the path} f(a→b),        f(a→b) = (1 − α) P(a, b) g_{b∖a}

with g_{b∖a} b's expected discounted returns when a is removed and G_uu u's own, both given by the
cavity recursion (β = (1 − α)²)::

    g_{b∖a} = 1 / (1 − β Σ_{c ∈ N(b)∖a} P(b, c) P(c, b) g_{c∖b})
    G_uu    = 1 / (1 − β Σ_{c ∈ N(u)}   P(u, c) P(c, u) g_{c∖u})

This is the variance recursion of Gaussian belief propagation for the precision matrix D − (1 − α) A
(g_{b∖a} = deg(b) / Ĵ_{b∖a}): exact on a tree, convergent on any graph because that matrix is diagonally
dominant, i.e. walk-summable (Malioutov, Johnson & Willsky, JMLR 2006), and on a graph with cycles it
counts the walks of the computation tree (Weiss & Freeman, Neural Computation 2001), missing the returns
around cycles. It is solved once per graph by Jacobi sweeps from g = 1 to ``CAVITY_TOL`` (each sweep reads
only the previous one, so the result does not depend on the number of threads; CMeKG: 22 sweeps, 0.5 s).
The closure counts the residual's visits to a candidate v along the non-backtracking tree paths of
length ≤ 2 (hubs are never walked through: their part is exact above)::

    T(v) = r_v G_vv + Σ_{x ∈ N(v)} f(x→v) · (r_x G_xx + Σ_{u ∈ N(x)∖v} r_u G_uu f(u→x))

    ppr_s(v) ≈ p(v) + Σ_h r_h · ppr_h(v) + α · T(v) + (1 − α)³ · R · π(v),       R = Σ_{u non-hub} r_u

The last, *mixing* term carries what the tree paths miss — the residual's walks around cycles, through
the hubs and the well-linked core, and from farther than two steps — spread as the stationary
distribution, with the weight the stepwise correction it replaces gave it. It is a heuristic and the
weakest part: on a finite tree it counts visits twice (the tests add a large disjoint chain to make it
negligible there), and on small dense graphs it overshoots (+8 % median on a 400-entity CMeKG
neighbourhood); without it recall falls (UMLS-shaped 115k, coarse push: 0.976 against 0.994). Variants
measured and rejected (same graph and push): the mixing mass reduced by the residual within two steps of
v (0.976); the residual's entries into hubs within two steps resolved with the hub vectors in its place
(0.978; with the mixing term as well 0.992); a cavity recursion with the hubs removed (0.9945, no
better). The inner sum A(x) is spread from the residual's support or pulled at each x ∈ N(v), whichever
touches fewer walk entries (a function of the graph and ε, not of the clock), and kept in a small hash table
per seed rather than in entity-sized arrays (at 4M entities those marks missed the cache at every probe).

An earlier closure was stepwise: α r(v) + α(1 − α)(P r)(v) + α(1 − α)²(P P r)(v) + (1 − α)³ R π(v)
(the residual's restart after zero, one and two exact steps), and ``α r + α(1 − α) P r + (1 − α)² R π`` after a
deep push. It undercounts the returns of a low-degree candidate and puts every later visit where the
walk would be after mixing, so high-degree candidates were ranked above low-degree ones whose returns
are worth more. A directed walk is not reversible, so neither the cavity recursion nor the hub-candidate
identity applies: directed walks keep the stepwise correction, with the global PageRank for π.

Measured (contested recall@10 against an exact PPR written with scipy alone, benchmarks/pepr.py; ε 1e-2,
64 hubs; wall time for every entity on a shared 2-core machine):

========================================  ====================  ====================
graph, jump (contested seeds sampled)     stepwise (before)     tree closure
========================================  ====================  ====================
UMLS-shaped 115k, paper (400)             0.9828, 6.5 s         0.9940, 9.2 s
UMLS-shaped 115k, paper; default rounds   0.9938, 37.7 s        0.9995, 50.1 s
CMeKG, paper (800)                        0.9771, 10.2 s        0.9853, 12.1 s
CMeKG, seed (800)                         0.9736, 10.9 s        see README
========================================  ====================  ====================

3. Contested seeds and the refinement
-------------------------------------
Only seeds with more than k candidates ("contested") can be ranked wrongly. The closure is exact on a
tree, so on a locally tree-like graph the coarse push ranks as well as a deep one; where the seed sits in
a cluster (CMeKG: a family of glaucoma types sharing the same eye tests) the walk keeps returning along
short cycles that the tree paths miss, and the error at a candidate exceeds the gaps at the k-th place.
What helps there is pushing deeper, which resolves the cycles near the seed exactly. When ``refine`` is on,
the contested seeds whose k-th and (k+1)-th coarse scores s_k, s_(k+1) are close,
``(s_k − s_(k+1)) / s_k < gap``, are pushed again from scratch to a small ε_r, in rounds
``refine_rounds = ((ε_1, gap_1), (ε_2, gap_2), …)``; round i takes the seeds of round i − 1 whose boundary
is still within gap_i. Each deep push is closed as above.

``refine="auto"`` (the default) refines only where the graph has short cycles around its contested
seeds: the median, over 512 evenly spaced contested seeds, of the share of 3-step walk mass from s to its
neighbours that does not just go back and forth on one edge (walks inside avoid the hubs)::

    share(s) = 1 − Σ_{v∈N(s)} P(s,v)·(P²(s,s) + P²(v,v) − P(v,s)P(s,v)) / Σ_{v∈N(s)} P³(s,v)

must reach ``CLUSTERED_SHARE`` = 0.05 (CMeKG 0.28; the UMLS-shaped graphs of
benchmarks/synthetic_umls.py 0.004; the 274k synthetic graph 0.007). Between the stepwise
closure and the tree closure the default was ``refine=True``, because the stepwise closure ranked the UMLS-shaped
graph's contested seeds at 0.977 although the graph is locally tree-like; the tree closure ranks them at
0.994 unrefined (115k), so "auto" is the default again and large tree-like graphs skip the deep pushes
(at 1M concepts the default rounds took 22 CPU-minutes and *lowered* the stepwise recall, 0.966 against
0.970). A seed that is itself a hub is exact and never refined.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from kgplm._csr import row_subset
from kgplm.kg.pepr.walk import choose_hubs, paper_jump_weights

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.pepr.walk import TransitionMatrix

__all__ = [
    "PushContext",
    "exact_vectors",
    "fast_candidate_scores",
    "hub_tolerance",
    "rows_to_refine",
    "short_cycle_share",
    "tree_closure",
]

#: bytes the hubs' power iteration may hold in its two float32 (entities × columns) blocks, padding
#: included; on larger graphs the hubs are iterated in narrower blocks (at 4M entities, 64 float64 hubs in
#: one block held 4.1 GB of the coarse push's 8.04 GB peak). A function of the graph's size
#: only, never of the machine: up to 1M entities the 64 default hubs and the global PageRank go in one
#: block (65 columns, padded to 72); at 4M in two, of 33 and 32 (padded to 40 and 32: 1.3 GB)
HUB_BLOCK_BYTES = 5 << 28

#: a block's columns are padded to a multiple of this (padding columns stay zero): a step over rows of 33
#: float32 columns took 1.94 s at 4M entities, over rows of 40 1.28 s and of 32 1.24 s (rows whose length
#: is a multiple of 32 bytes are read and summed with aligned vector loads)
HUB_COLUMN_ALIGN = 8

#: contiguous row stripes of the hub iteration (a constant, so that its L1 change is summed in the same
#: order whatever the threads)
HUB_STRIPES = 256

#: the cavity recursion stops when no cavity changes by more than this between two sweeps (CMeKG: 22
#: sweeps; the UMLS-shaped 4M set: 13), or after this many sweeps
CAVITY_TOL = 1e-12
CAVITY_MAX_SWEEPS = 200

#: the most keys the tree closure's table may take when it spreads a seed's residual (it pulls otherwise):
#: 8 MB of table a worker
SPREAD_KEYS = 1 << 18

#: the hubs' vectors are iterated until every column's L1 change is below this fraction of the finest
#: push ε of the run, kept within :data:`HUB_TOL_RANGE` (:func:`hub_tolerance`: why these values)
HUB_TOL_PER_EPSILON = 1e-3
HUB_TOL_RANGE = (1e-6, 1e-5)

#: ``refine="auto"`` refines when the median short-cycle share of the contested seeds reaches this
#: (measured: CMeKG 0.27, the locally tree-like 274k synthetic graph ≈ 0)
CLUSTERED_SHARE = 0.05

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PushContext:
    """What every push shares: the walk, the hubs with their exact seed-jump PPR vectors
    (``hub_vectors[:, slot]``), the exact global PageRank, the jump weights and, on an undirected walk,
    the tree closure's step factors (``outgoing`` / ``incoming`` per walk entry) and ``diagonal`` (G_uu per
    entity); empty arrays on a directed walk."""

    walk: "TransitionMatrix"
    alpha: float
    is_hub: np.ndarray
    hub_slot: np.ndarray
    hub_vectors: np.ndarray  # (n, hubs) float32
    global_scores: np.ndarray
    remainder_distribution: np.ndarray
    seed_weight: float
    global_weight: float
    outgoing: np.ndarray
    incoming: np.ndarray
    diagonal: np.ndarray
    reach: np.ndarray

    @classmethod
    def build(
        cls,
        walk: "TransitionMatrix",
        *,
        hubs: np.ndarray,
        alpha: float,
        jump: str,
        max_iter: int,
        batch_size: int,
        hub_tol: float = 1e-6,
    ) -> "PushContext":
        """``hubs``: the sorted entity ids resolved exactly (:func:`kgplm.kg.pepr.walk.choose_hubs`)."""
        n = walk.num_nodes
        needs_global = jump == "paper" or walk.directed
        hub_vectors, global_scores = exact_vectors(
            walk, hubs, alpha=alpha, with_global=needs_global, tol=hub_tol, max_iter=max_iter, batch_size=batch_size
        )
        is_hub = np.zeros(n, dtype=np.bool_)
        is_hub[hubs] = True
        hub_slot = np.full(n, -1, dtype=np.int64)
        hub_slot[hubs] = np.arange(len(hubs))
        seed_weight, global_weight = paper_jump_weights(n) if jump == "paper" else (1.0, 0.0)
        # where a spread-out residual ends up: the walk's stationary distribution deg / 2m when the walk
        # is undirected; the global PageRank approximates it on a directed walk
        if walk.directed:
            remainder_distribution = global_scores
            outgoing, incoming, diagonal, reach = np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64)
        else:
            from kgplm.kg.pepr.tree_kernels import closure_reach

            remainder_distribution = walk.degree / max(walk.degree.sum(), 1.0)
            outgoing, incoming, diagonal = tree_closure(walk, alpha, is_hub)
            reach = closure_reach(walk.push_indptr, walk.push_indices, is_hub)
        return cls(
            walk,
            alpha,
            is_hub,
            hub_slot,
            hub_vectors,
            global_scores,
            remainder_distribution,
            seed_weight,
            global_weight,
            outgoing,
            incoming,
            diagonal,
            reach,
        )

    def push_scores(
        self,
        seeds: np.ndarray,
        indptr: np.ndarray,
        neighbors: np.ndarray,
        *,
        epsilon: float,
        exact_steps: int,
        num_threads: int | None,
        show_progress: bool,
        description: str,
    ) -> np.ndarray:
        """Scores of each seed's candidates (CSR ``indptr`` over ``seeds``, aligned with ``neighbors``).

        An undirected walk closes the residual with the tree Green's function
        (:func:`kgplm.kg.pepr.tree_kernels.forward_push_tree_scores`); a directed one with ``exact_steps`` exact
        walk steps and the global PageRank (:func:`kgplm.kg.pepr.kernels.forward_push_scores`)."""
        import numba

        from kgplm.kg.pepr.kernels import forward_push_scores
        from kgplm.kg.pepr.tree_kernels import closure_bounds, forward_push_tree_scores

        walk = self.walk
        threads = num_threads or numba.get_num_threads()  # the caller's limit (kgplm.train's num_threads)
        previous = numba.get_num_threads()
        numba.set_num_threads(threads)
        scores = np.zeros(len(neighbors), dtype=np.float64)
        seeds = np.ascontiguousarray(seeds, dtype=np.int64)
        indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        neighbors = np.ascontiguousarray(neighbors, dtype=np.int64)
        rows = np.arange(len(seeds), dtype=np.int64)
        if not walk.directed:
            # seeds whose pull may keep more keys than a spread does go last, together: only their calls hold a
            # table that large (4M entities: 89 seeds, the largest 6.8M keys)
            bounds = closure_bounds(seeds, self.is_hub, walk.push_indptr, indptr, neighbors)
            rows = np.concatenate([rows[bounds <= SPREAD_KEYS], rows[bounds > SPREAD_KEYS]])
        # about a hundred calls, each a progress step: a call allocates each worker's entity-sized buffers,
        # whose pages fault in again (4M entities: 977 calls of 4096 seeds took tens of seconds that way)
        chunk = max(4096, threads * 1024, -(-len(seeds) // 100))
        try:
            with tqdm(
                total=len(seeds),
                desc=description,
                unit=" seeds",
                unit_scale=True,
                disable=not show_progress,
                leave=False,
            ) as progress:
                for begin in range(0, len(rows), chunk):
                    part = rows[begin : begin + chunk]
                    if walk.directed:
                        forward_push_scores(
                            seeds,
                            part,
                            self.alpha,
                            epsilon,
                            walk.push_indptr,
                            walk.push_indices,
                            walk.push_values,
                            walk.pull_indptr,
                            walk.pull_indices,
                            walk.pull_values,
                            walk.degree,
                            self.is_hub,
                            self.hub_slot,
                            self.hub_vectors,
                            indptr,
                            neighbors,
                            self.global_scores,
                            self.remainder_distribution,
                            self.seed_weight,
                            self.global_weight,
                            exact_steps,
                            threads,
                            scores,
                        )
                    else:
                        forward_push_tree_scores(
                            seeds,
                            part,
                            self.alpha,
                            epsilon,
                            walk.push_indptr,
                            walk.push_indices,
                            walk.push_values,
                            walk.degree,
                            self.is_hub,
                            self.hub_slot,
                            self.hub_vectors,
                            self.outgoing,
                            self.incoming,
                            self.diagonal,
                            self.reach,
                            bounds,
                            SPREAD_KEYS,
                            indptr,
                            neighbors,
                            self.global_scores,
                            self.remainder_distribution,
                            self.seed_weight,
                            self.global_weight,
                            threads,
                            scores,
                        )
                    progress.update(len(part))
        finally:
            numba.set_num_threads(previous)
        return scores


def exact_vectors(
    walk: "TransitionMatrix",
    hubs: np.ndarray,
    *,
    alpha: float,
    with_global: bool,
    tol: float,
    max_iter: int,
    batch_size: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The hubs' exact seed-jump PPR vectors, ``(n, hubs)`` float32, and (``with_global``) the global
    PageRank (uniform jump, dangling mass spread uniformly), ``(n,)``; zeros when not asked for.

    One power iteration for all of them: the global PageRank is one more column beside the hubs', so
    the walk is read once a step for both. Column c with jump vector j_c (one-hot at hub h, or uniform)::

        x_c ← (1 − α) P^T x_c + (α + (1 − α) Σ_{d dangling} x_c(d)) · j_c

    from the uniform vector, until every column's L1 change is below ``tol`` (the dangling walk restarts
    at the jump vector, as exact mode's ``dangling="jump"``). The blocks are float32 with each row summed
    in float64 (:func:`kgplm.kg.pepr.kernels.pagerank_step_float32`): half the bytes a step reads, and
    twice the columns a block of :data:`HUB_BLOCK_BYTES` holds, against the float64 blocks before
    (4M entities: 64 hubs in two blocks instead of four). A float32 entry's rounding, 6e-8 relative,
    adds at most 6e-8 to a column's L1 change, far below ``tol``.
    """
    from kgplm.kg.pepr.kernels import pagerank_step_float32

    n = walk.num_nodes
    jump_targets = np.concatenate([np.asarray(hubs, dtype=np.int64), [-1] if with_global else []]).astype(np.int64)
    hub_vectors = np.zeros((n, len(hubs)), dtype=np.float32)
    global_scores = np.zeros(n)
    if n == 0 or not len(jump_targets):
        return hub_vectors, global_scores
    started = time.perf_counter()
    steps = []
    # the most columns a block may have, padding included; then blocks of equal width, each padded
    limit = max(1, min(batch_size, HUB_BLOCK_BYTES // (2 * 4 * n)))
    align = HUB_COLUMN_ALIGN if limit >= HUB_COLUMN_ALIGN else 1  # blocks narrower than that are not padded
    limit -= limit % align
    num_blocks = -(-len(jump_targets) // limit)
    width = -(-len(jump_targets) // num_blocks)  # real columns per block
    values = walk.pull_values
    dangling = np.flatnonzero(walk.dangling)
    for begin in range(0, len(jump_targets), width):
        real = jump_targets[begin : begin + width]
        padded = -(-len(real) // align) * align  # ≤ limit
        # padding columns (target −2) start at zero, take no jump and stay zero, with zero change
        targets = np.concatenate([real, np.full(padded - len(real), -2, dtype=np.int64)])
        uniform = (targets == -1).astype(np.float64)  # the global column jumps uniformly, a hub's to itself
        live = (targets != -2).astype(np.float64)
        # contiguous row stripes, a fixed number (never the threads'): many, so that the heavy rows spread
        # over the threads, and the L1 change is summed in the same order on any machine
        parts = np.zeros((HUB_STRIPES, padded))  # (stripes, padded block): each stripe's L1 change
        current = np.zeros((n, padded), dtype=np.float32)  # (n, padded block)
        current[:, : len(real)] = np.float32(1.0 / n)
        step = np.empty_like(current)
        for iteration in range(1, max_iter + 1):
            restart = alpha + (1.0 - alpha) * current[dangling].sum(axis=0, dtype=np.float64)  # (block,)
            pagerank_step_float32(
                walk.pull_indptr,
                walk.pull_indices,
                values,
                current,
                1.0 - alpha,
                restart * uniform / n,
                targets,
                restart * (live - uniform),
                step,
                parts,
            )
            change = parts.sum(axis=0).max()
            current, step = step, current
            if change < tol:
                break
        else:
            logger.warning(
                "PEPR fast: hub iteration stopped at max_iter=%d with L1 change %.3g > tol %.3g", max_iter, change, tol
            )
        steps.append(iteration)
        # the hubs come first, the global column last: a block's hubs are a prefix, copied at once (a
        # column at a time read every row's cache line once a column: 8 s at 4M entities)
        num_block_hubs = int(np.count_nonzero(real >= 0))
        hub_vectors[:, begin : begin + num_block_hubs] = current[:, :num_block_hubs]
        if num_block_hubs < len(real):
            global_scores[:] = current[:, num_block_hubs]
    logger.info(
        "PEPR fast: exact vectors of %d hubs%s in %.1f s (blocks of %d columns, %s steps)",
        len(hubs),
        " and the global PageRank" if with_global else "",
        time.perf_counter() - started,
        width,
        "/".join(map(str, steps)),
    )
    return hub_vectors, global_scores


def hub_tolerance(finest_epsilon: float) -> float:
    """The L1 change at which the hubs' iteration stops, for a run whose finest push goes to ``finest_epsilon``:
    ``HUB_TOL_PER_EPSILON · ε`` within ``HUB_TOL_RANGE`` — 1e-5 for the coarse push alone (ε 1e-2), 1e-6
    (the float32 blocks' floor is ~1e-7) when contested seeds are pushed to ε ≤ 1e-3 (the default rounds).

    How the hub vectors' error reaches the scores: through the residual a push leaves at the hubs, by at
    most that residual (≤ 1 − α) times the vector's L1 error; through the global PageRank of the paper jump
    and of a directed walk's remainder; and, largest, through a hub candidate's score on an undirected
    walk, deg(h) / deg(s) · ppr_h(s), which multiplies the error of ppr_h at a low-degree seed by up to a
    thousand. Measured on the 1M UMLS-shaped set against exact PPR (tol 1e-10; the same 66 rows for each
    tolerance: the 16 whose scores moved most at 1e-5 and at 1e-4, and 48 random): at 1e-6 the 27 hub
    candidates' scores err by 3.0e-4 relative (median; max 6.4e-4) and the 281 others' by 1.1e-3 (median;
    max 1.3e-2: the closure's error, the same at every tolerance); at 1e-5 the hub candidates' by 6.2e-4
    (max 2.5e-3); at 1e-4 by 1.9e-3 (max 8.0e-3), as large as the closure's.
    So the iteration stops at 1e-5 when only the coarse push runs: at or below the closure's error, and
    the 4M set's hub blocks take 19/19 steps instead of 25/24 at 1e-6 (17/16 at 1e-4). The L1
    error itself is ≈ ρ / (1 − ρ) times the last change, ρ the iteration's rate (≈ 0.55 a step at 4M; at
    most 1 − α, which bounds the factor by (1 − α) / α ≈ 5.7)."""
    low, high = HUB_TOL_RANGE
    return float(min(high, max(low, HUB_TOL_PER_EPSILON * finest_epsilon)))


def tree_closure(
    walk: "TransitionMatrix",
    alpha: float,
    is_hub: np.ndarray,
    *,
    tol: float = CAVITY_TOL,
    max_iter: int = CAVITY_MAX_SWEEPS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The undirected walk's cavities (:func:`kgplm.kg.pepr.tree_kernels.tree_cavities`) as the closure's step
    factors per walk entry (``outgoing``, ``incoming``: :func:`kgplm.kg.pepr.tree_kernels.tree_step_factors`) and
    the diagonal G_uu."""
    from kgplm.kg.pepr.tree_kernels import reverse_edges, tree_cavities, tree_step_factors

    started = time.perf_counter()
    reverse = reverse_edges(walk.push_indptr, walk.push_indices)
    cavity, diagonal, sweeps = tree_cavities(
        walk.push_indptr, walk.push_indices, walk.push_values, reverse, alpha, tol, max_iter
    )
    outgoing, incoming = tree_step_factors(
        walk.push_indptr, walk.push_indices, walk.push_values, reverse, cavity, alpha, is_hub
    )
    logger.info(
        "PEPR fast: tree cavities of %d walk entries in %d sweeps, %.1f s",
        len(cavity),
        sweeps,
        time.perf_counter() - started,
    )
    return outgoing, incoming, diagonal


def rows_to_refine(indptr: np.ndarray, neighbors: np.ndarray, scores: np.ndarray, k: int, gap: float) -> np.ndarray:
    """Rows with more than ``k`` candidates whose k-th and (k+1)-th scores are within ``gap`` of each
    other, relative to the k-th: ``(s_k − s_{k+1}) / s_k < gap``."""
    from kgplm.kg.pepr.candidate_kernels import top_k_rows

    contested = np.flatnonzero(np.diff(indptr) > k)
    if not len(contested) or gap <= 0:
        return np.zeros(0, dtype=np.int64)
    sub_indptr, positions = row_subset(indptr, contested)
    chosen = np.empty((len(contested), k + 1), dtype=np.int64)  # top_k_rows writes every slot
    top_k_rows(sub_indptr, np.ascontiguousarray(neighbors[positions], dtype=np.int64), scores[positions], k + 1, chosen)
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
    graph the share is ≈ 0: the walk comes back near s only by retracing its steps. Computed per seed from
    its neighbourhood (:func:`kgplm.kg.pepr.kernels.short_cycle_shares`).
    """
    import numba

    from kgplm.kg.pepr.kernels import short_cycle_shares

    return short_cycle_shares(
        np.ascontiguousarray(seeds, dtype=np.int64),
        walk.push_indptr,
        walk.push_indices,
        walk.push_values,
        walk.pull_indptr,
        walk.pull_indices,
        walk.pull_values,
        is_hub,
        numba.get_num_threads(),
    )


def fast_candidate_scores(
    walk: "TransitionMatrix",
    seeds: np.ndarray,
    indptr: np.ndarray,
    neighbors: np.ndarray,
    *,
    k: int,
    epsilon: float,
    num_hubs: int,
    refine: bool | str,
    refine_rounds,
    num_threads: int | None,
    alpha: float,
    jump: str,
    max_iter: int,
    batch_size: int,
    show_progress: bool,
    cycle_sample: int = 512,
) -> tuple[np.ndarray, dict]:
    """Coarse push for every seed, then (``refine``: True, False or "auto") rounds of deep pushes.

    Round ``(round_epsilon, gap)`` pushes to ``round_epsilon`` the contested seeds whose k-th and
    (k+1)-th scores are still within ``gap`` (relative), among those the previous round refined.
    Returns the candidate scores and what was done: ``num_contested``, ``short_cycle_share`` (the
    median over up to ``cycle_sample`` contested seeds; "auto" refines when it reaches
    :data:`CLUSTERED_SHARE`), ``refined`` and ``num_refined`` (per round).
    """

    hubs = choose_hubs(walk, num_hubs)
    is_hub = np.zeros(walk.num_nodes, dtype=np.bool_)
    is_hub[hubs] = True
    contested = np.flatnonzero((np.diff(indptr) > k) & ~is_hub[seeds])  # a hub seed's scores are exact
    stats = {
        "num_contested": int(np.count_nonzero(np.diff(indptr) > k)),
        "short_cycle_share": None,
        "refined": False,
        "num_refined": [],
    }
    rounds = [(float(e), float(g)) for e, g in refine_rounds if e < epsilon]  # a round must push deeper
    refining = refine is not False and len(contested) > 0 and len(rounds) > 0
    if refining and refine == "auto":
        # decided before the hubs' vectors are held (their memory and the share's are not needed together);
        # evenly spaced, so that the decision is a pure function of the seeds
        sample = seeds[contested[np.linspace(0, len(contested) - 1, min(cycle_sample, len(contested))).astype(int)]]
        share = float(np.median(short_cycle_share(walk, sample, is_hub)))
        stats["short_cycle_share"] = round(share, 4) + 0.0  # no "-0.0"
        refining = share >= CLUSTERED_SHARE
        if not refining:
            logger.info(
                "PEPR fast: no refinement (short-cycle share %.3f < %.2f: locally tree-like graph)",
                share,
                CLUSTERED_SHARE,
            )
    finest = min([epsilon] + [e for e, _ in rounds]) if refining else epsilon
    stats["hub_tol"] = hub_tolerance(finest)
    context = PushContext.build(
        walk, hubs=hubs, alpha=alpha, jump=jump, max_iter=max_iter, batch_size=batch_size, hub_tol=stats["hub_tol"]
    )
    started = time.perf_counter()
    scores = context.push_scores(
        seeds,
        indptr,
        neighbors,
        epsilon=epsilon,
        exact_steps=2,
        num_threads=num_threads,
        show_progress=show_progress,
        description="PEPR (fast)",
    )
    logger.info("PEPR fast: %d seeds pushed (ε %g) in %.1f s", len(seeds), epsilon, time.perf_counter() - started)
    if not refining:
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
        scores[positions] = context.push_scores(
            seeds[rows],
            sub_indptr,
            np.ascontiguousarray(neighbors[positions]),
            epsilon=round_epsilon,
            exact_steps=1,
            num_threads=num_threads,
            show_progress=show_progress,
            description="PEPR (refine)",
        )
        logger.info(
            "PEPR fast: %d of %d contested seeds refined (deep push, ε %g, gap < %g) in %.1f s",
            len(rows),
            stats["num_contested"],
            round_epsilon,
            gap,
            time.perf_counter() - started,
        )
        candidates = rows
    return scores, stats
