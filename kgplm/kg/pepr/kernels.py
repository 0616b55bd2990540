"""Numba kernels behind :mod:`kgplm.kg.pepr` (kept apart so that the math module stays readable): the power
iteration, the forward push and its directed-walk closure, the refinement's short-cycle share and the
undirected walk; the undirected walk's tree closure is in :mod:`kgplm.kg.pepr.tree_kernels`, the candidate
tables in :mod:`kgplm.kg.pepr.candidate_kernels`.

All kernels take a transition matrix in "pull" CSR form: row ``v`` lists the entities ``u`` that
walk into ``v`` and ``values[k] = weight(u → v) / degree(u)``, so one step of the walk is
``y[v] = Σ_k values[k] · x[indices[k]]``.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "pagerank_step",
    "pagerank_step_float32",
    "column_change",
    "forward_push_scores",
    "short_cycle_shares",
    "undirected_walk",
]


@numba.njit(parallel=True, cache=True, nogil=True)
def pagerank_step(indptr, indices, values, x, damping, base, out):  # pragma: no cover - compiled
    """One fused PageRank step for a block: ``out = damping · (M @ x) + base`` (base per column).

    The jump terms that differ per row (the seed's own jump) are added by the caller.
    """
    num_rows, width = x.shape
    for row in numba.prange(num_rows):
        for column in range(width):
            out[row, column] = 0.0
        for k in range(indptr[row], indptr[row + 1]):
            source = indices[k]
            weight = values[k]
            for column in range(width):
                out[row, column] += weight * x[source, column]
        for column in range(width):
            out[row, column] = damping * out[row, column] + base[column]


@numba.njit(parallel=True, cache=True, nogil=True)
def pagerank_step_float32(
    indptr, indices, values, x, damping, base, jump_rows, jump_mass, out, change_parts
):  # pragma: no cover - compiled
    """One step of a float32 block, ``out = damping · (M @ x) + base`` plus ``jump_mass[c]`` at row
    ``jump_rows[c]`` of column c (−1: none), and each stripe's L1 change ``Σ |out − x|`` per column in
    ``change_parts`` (stripes, width): the change is summed as the step is written, not in a second pass
    over both blocks. Each row is summed in float64 and rounded once when stored, so a hub's thousands of
    in-edges add no float32 rounding (which kept the L1 change above 1e-6 on CMeKG subgraphs when the sum
    itself was float32). The rows are split into ``change_parts.shape[0]`` contiguous stripes, a number
    the caller fixes: every row is computed alone and every stripe's change in row order, so neither the
    step nor the change depends on the threads."""
    num_rows, width = x.shape
    num_stripes = change_parts.shape[0]
    stripe = (num_rows + num_stripes - 1) // num_stripes
    for part in numba.prange(num_stripes):
        total = np.empty(width)  # float64
        for column in range(width):
            change_parts[part, column] = 0.0
        for row in range(part * stripe, min(num_rows, (part + 1) * stripe)):
            for column in range(width):
                total[column] = 0.0
            for k in range(indptr[row], indptr[row + 1]):
                source = indices[k]
                weight = values[k]
                for column in range(width):
                    total[column] += weight * x[source, column]
            for column in range(width):
                value = damping * total[column] + base[column]
                if jump_rows[column] == row:
                    value += jump_mass[column]
                out[row, column] = value
                change_parts[part, column] += abs(np.float64(out[row, column]) - np.float64(x[row, column]))


@numba.njit(parallel=True, cache=True, nogil=True)
def column_change(new, old, num_workers):  # pragma: no cover - compiled
    """Per-column L1 distance between two (n, b) blocks, reduced over ``num_workers`` row stripes."""
    num_rows, width = new.shape
    partial = np.zeros((num_workers, width))
    for worker in numba.prange(num_workers):
        for row in range(worker, num_rows, num_workers):
            for column in range(width):
                partial[worker, column] += abs(new[row, column] - old[row, column])
    return partial.sum(axis=0)


@numba.njit(cache=True, nogil=True)
def push_one(
    seed,
    alpha,
    epsilon,
    push_indptr,
    push_indices,
    push_values,
    degree,
    is_hub,
    estimate,
    residual,
    queued,
    touched,
    queue,
):  # pragma: no cover - compiled
    """Andersen–Chung–Lang forward push from ``seed`` with the seed as jump target.

    Leaves ``estimate`` (p) and ``residual`` (r) such that ppr_seed = p + Σ_u r_u · ppr_u.
    Hubs are never pushed: their residual is resolved exactly by the caller with precomputed
    hub vectors. Non-hub nodes are pushed while r_u ≥ ε · deg(u); the seed is always pushed once,
    so that a coarse ε still spreads the seed's mass to its candidates. Dangling nodes send their
    walk mass back to the seed (the jump vector). Returns the number of touched nodes.
    """
    num_touched = 0
    num_pushes = 0  # the seed itself is always pushed once, whatever ε
    head = 0
    tail = 0
    residual[seed] = 1.0
    touched[num_touched] = seed
    num_touched += 1
    queued[seed] = True
    queue[tail] = seed
    tail += 1
    capacity = queue.shape[0]
    while head != tail:
        node = queue[head]
        head += 1
        if head == capacity:
            head = 0
        queued[node] = False
        mass = residual[node]
        if is_hub[node] or (mass < epsilon * max(degree[node], 1.0) and not (node == seed and num_pushes == 0)):
            continue
        num_pushes += 1
        estimate[node] += alpha * mass
        residual[node] = 0.0
        start, end = push_indptr[node], push_indptr[node + 1]
        if start == end:  # dangling: the walk jumps back to the seed
            residual[seed] += (1.0 - alpha) * mass
            if not queued[seed]:
                queued[seed] = True
                queue[tail] = seed
                tail += 1
                if tail == capacity:
                    tail = 0
            continue
        for k in range(start, end):
            target = push_indices[k]
            if residual[target] == 0.0 and estimate[target] == 0.0:
                touched[num_touched] = target
                num_touched += 1
            residual[target] += (1.0 - alpha) * mass * push_values[k]
            if not queued[target] and not is_hub[target] and residual[target] >= epsilon * max(degree[target], 1.0):
                queued[target] = True
                queue[tail] = target
                tail += 1
                if tail == capacity:
                    tail = 0
    return num_touched


@numba.njit(cache=True, nogil=True)
def push_buffers(num_nodes, num_hubs):  # pragma: no cover - compiled
    """One worker's push state: estimate p, residual r, the queue and its flags, the touched list and
    the residual left on the hubs; each is reset after a seed over its touched entries only."""
    estimate = np.zeros(num_nodes)
    residual = np.zeros(num_nodes)
    queued = np.zeros(num_nodes, dtype=np.bool_)
    touched = np.empty(num_nodes, dtype=np.int64)
    queue = np.empty(num_nodes + 1, dtype=np.int64)
    hub_residual = np.zeros(num_hubs)
    return estimate, residual, queued, touched, queue, hub_residual


@numba.njit(cache=True, nogil=True)
def hub_seed_scores(
    seed, start, end, candidate_indices, hub_slot, hub_vectors, global_scores, seed_weight, global_weight, out_scores
):  # pragma: no cover - compiled
    """A hub seed needs no push: its candidates' scores come from its own exact vector."""
    slot = hub_slot[seed]
    for k in range(start, end):
        v = candidate_indices[k]
        out_scores[k] = seed_weight * hub_vectors[v, slot] + global_weight * global_scores[v]


@numba.njit(cache=True, nogil=True)
def _through_hubs(v, hub_residual, hub_vectors):  # pragma: no cover - compiled
    """Σ_h r_h · H[v, h]: what the residual left on the hubs sends to v, exactly."""
    total = 0.0
    for h in range(hub_residual.shape[0]):
        if hub_residual[h] != 0.0:
            total += hub_residual[h] * hub_vectors[v, h]
    return total


@numba.njit(cache=True, nogil=True)
def reset_push(
    touched, num_touched, is_hub, hub_slot, hub_residual, estimate, residual, queued
):  # pragma: no cover - compiled
    for i in range(num_touched):
        node = touched[i]
        if is_hub[node]:
            hub_residual[hub_slot[node]] = 0.0
        estimate[node] = 0.0
        residual[node] = 0.0
        queued[node] = False


@numba.njit(parallel=True, cache=True, nogil=True)
def forward_push_scores(
    seeds,
    rows,
    alpha,
    epsilon,
    push_indptr,
    push_indices,
    push_values,
    pull_indptr,
    pull_indices,
    pull_values,
    degree,
    is_hub,
    hub_slot,
    hub_vectors,
    candidate_indptr,
    candidate_indices,
    global_scores,
    remainder_distribution,
    seed_weight,
    global_weight,
    exact_steps,
    num_workers,
    out_scores,
):  # pragma: no cover
    """PEPR scores of each seed's candidates: push, resolve hub residuals exactly, correct the rest.

    For seed s and candidate v, with ``exact_steps`` = 2::

        score = w_s · (p(v) + Σ_h r_h · H[v, h] + C(v)) + w_g · g(v)
        C(v)  = α · r(v) + α (1 − α) · (P r)(v) + α (1 − α)² · (P P r)(v) + (1 − α)³ · R · π(v)

    and with ``exact_steps`` = 1 (the deep push of the refinement, where r is small everywhere)::

        C(v)  = α · r(v) + α (1 − α) · (P r)(v) + (1 − α)² · R · π(v)

    where ``(P r)(v)`` is pulled at v alone (cost deg(v)), not spread from r's whole support.

    ``H[:, h]`` is hub h's exact seed-jump PPR, g the exact global PageRank (paper jump). C(v)
    estimates what the residual r left on non-hub nodes (R = Σ r_u) still sends to v: its restart
    at v after zero, one and two walk steps (steps into hubs are left out, as hubs are resolved
    exactly), and the rest of the walk spread as ``remainder_distribution`` π (the directed walk's
    global PageRank). ``P r`` is spread once from the residual's support (``step_one``), then
    ``P P r`` is pulled at each candidate. Only directed walks use this closure (an undirected walk is
    closed by :func:`forward_push_tree_scores`), so a hub candidate is estimated like any other: the
    reversibility that makes it exact there does not hold. Candidates are given per seed in CSR form;
    scores are written to ``out_scores`` aligned with ``candidate_indices``.
    """
    num_nodes = degree.shape[0]
    num_rows = rows.shape[0]
    num_hubs = hub_vectors.shape[1]
    restart_two_steps = alpha * (1.0 - alpha) * (1.0 - alpha)
    remainder_weight = (1.0 - alpha) ** 3
    for worker in numba.prange(num_workers):
        estimate, residual, queued, touched, queue, hub_residual = push_buffers(num_nodes, num_hubs)
        step_one = np.zeros(num_nodes)  # (P r)(w) on non-hub w
        reached = np.empty(num_nodes, dtype=np.int64)  # where step_one is non-zero, for the reset
        for position in range(worker, num_rows, num_workers):
            row = rows[position]
            seed = seeds[row]
            start, end = candidate_indptr[row], candidate_indptr[row + 1]
            if is_hub[seed]:
                hub_seed_scores(
                    seed,
                    start,
                    end,
                    candidate_indices,
                    hub_slot,
                    hub_vectors,
                    global_scores,
                    seed_weight,
                    global_weight,
                    out_scores,
                )
                continue
            num_touched = push_one(
                seed,
                alpha,
                epsilon,
                push_indptr,
                push_indices,
                push_values,
                degree,
                is_hub,
                estimate,
                residual,
                queued,
                touched,
                queue,
            )
            remaining = 0.0  # R: the residual mass on non-hub nodes
            num_reached = 0
            for i in range(num_touched):
                node = touched[i]
                mass = residual[node]
                if is_hub[node]:
                    hub_residual[hub_slot[node]] = mass
                    continue
                remaining += mass
                if mass == 0.0 or exact_steps == 1:
                    continue
                for j in range(push_indptr[node], push_indptr[node + 1]):
                    target = push_indices[j]
                    if is_hub[target]:
                        continue
                    if step_one[target] == 0.0:
                        reached[num_reached] = target
                        num_reached += 1
                    step_one[target] += mass * push_values[j]
            for k in range(start, end):
                v = candidate_indices[k]
                # p(v), the hubs' exact part, and C(v) for the non-hub residual
                total = estimate[v] + alpha * residual[v] + _through_hubs(v, hub_residual, hub_vectors)
                if exact_steps == 1:
                    one_step = 0.0  # (P r)(v) over the non-hub residual, pulled at v
                    for j in range(pull_indptr[v], pull_indptr[v + 1]):
                        if not is_hub[pull_indices[j]]:
                            one_step += residual[pull_indices[j]] * pull_values[j]
                    if not is_hub[v]:
                        total += alpha * (1.0 - alpha) * one_step
                    total += (1.0 - alpha) * (1.0 - alpha) * remaining * remainder_distribution[v]
                    out_scores[k] = seed_weight * total + global_weight * global_scores[v]
                    continue
                two_steps = 0.0
                for j in range(pull_indptr[v], pull_indptr[v + 1]):
                    two_steps += step_one[pull_indices[j]] * pull_values[j]
                if not is_hub[v]:
                    total += alpha * (1.0 - alpha) * step_one[v]
                total += restart_two_steps * two_steps
                total += remainder_weight * remaining * remainder_distribution[v]
                out_scores[k] = seed_weight * total + global_weight * global_scores[v]
            for i in range(num_reached):
                step_one[reached[i]] = 0.0
            reset_push(touched, num_touched, is_hub, hub_slot, hub_residual, estimate, residual, queued)


@numba.njit(cache=True, nogil=True)
def sorted_position(indices, lo, hi, value):  # pragma: no cover - compiled
    """The first position in the sorted ``indices[lo:hi]`` whose entry is not below ``value`` (a binary
    search; ``hi`` when every entry is)."""
    while lo < hi:
        middle = (lo + hi) // 2
        if indices[middle] < value:
            lo = middle + 1
        else:
            hi = middle
    return lo


@numba.njit(cache=True, nogil=True)
def _walk_entry(indptr, indices, values, row, column):  # pragma: no cover - compiled
    """values at (row, column) of a CSR with sorted rows, 0 when absent."""
    position = sorted_position(indices, indptr[row], indptr[row + 1], column)
    return values[position] if position < indptr[row + 1] and indices[position] == column else 0.0


@numba.njit(parallel=True, cache=True, nogil=True)
def short_cycle_shares(
    seeds, push_indptr, push_indices, push_values, pull_indptr, pull_indices, pull_values, is_hub, num_workers
):  # pragma: no cover
    """:func:`kgplm.kg.pepr.fast.short_cycle_share` for each seed, reading only its neighbourhood (the
    sparse-matrix form before it multiplied whole matrices: 13 s for 512 seeds at 4M entities)."""
    num_nodes = push_indptr.shape[0] - 1
    shares = np.zeros(seeds.shape[0])
    for worker in numba.prange(num_workers):
        two = np.zeros(num_nodes)  # P²(s, b) through a non-hub a onto a non-hub b
        reached = np.empty(num_nodes, dtype=np.int64)
        for position in range(worker, seeds.shape[0], num_workers):
            s = seeds[position]
            num_reached = 0
            for e in range(push_indptr[s], push_indptr[s + 1]):
                a = push_indices[e]
                if is_hub[a]:
                    continue
                for f in range(push_indptr[a], push_indptr[a + 1]):
                    b = push_indices[f]
                    if is_hub[b]:
                        continue
                    if two[b] == 0.0:
                        reached[num_reached] = b
                        num_reached += 1
                    two[b] += push_values[e] * push_values[f]
            total = 0.0  # Σ_{v ∈ N(s)} P³(s, v), inner steps on non-hubs, v a non-hub neighbour
            trivial = 0.0
            via_seed = two[s] if not is_hub[s] else 0.0  # P²(s, s)
            for e in range(push_indptr[s], push_indptr[s + 1]):
                v = push_indices[e]
                if is_hub[v]:
                    continue
                step = push_values[e]  # P(s, v)
                for g in range(pull_indptr[v], pull_indptr[v + 1]):  # the x that walk into v, P(x, v)
                    total += two[pull_indices[g]] * pull_values[g]
                return_two = 0.0  # P²(v, v) through non-hubs
                for f in range(push_indptr[v], push_indptr[v + 1]):
                    x = push_indices[f]
                    if not is_hub[x]:
                        return_two += push_values[f] * _walk_entry(push_indptr, push_indices, push_values, x, v)
                back = _walk_entry(push_indptr, push_indices, push_values, v, s) if not is_hub[s] else 0.0
                trivial += step * (via_seed + return_two - back * step)
            shares[position] = (total - trivial) / total if total > 0 else 0.0
            for i in range(num_reached):
                two[reached[i]] = 0.0
    return shares


@numba.njit(cache=True, nogil=True)
def _linked_sorted(u, out_indptr, out_neighbors, in_indptr, in_neighbors):  # pragma: no cover - compiled
    """u's out- and in-neighbours (one per triple, self-loops left out), sorted."""
    size = out_indptr[u + 1] - out_indptr[u] + in_indptr[u + 1] - in_indptr[u]
    linked = np.empty(size, dtype=np.int64)
    used = 0
    for j in range(out_indptr[u], out_indptr[u + 1]):
        if out_neighbors[j] != u:
            linked[used] = out_neighbors[j]
            used += 1
    for j in range(in_indptr[u], in_indptr[u + 1]):
        if in_neighbors[j] != u:
            linked[used] = in_neighbors[j]
            used += 1
    return np.sort(linked[:used])


@numba.njit(parallel=True, cache=True, nogil=True)
def undirected_walk(out_indptr, out_neighbors, in_indptr, in_neighbors, index_dtype):  # pragma: no cover
    """The undirected walk from a store's adjacency: row u lists u's distinct neighbours v (sorted; no
    self-loops) with w(u, v) = the number of triples linking them either way; ``degree[u]`` = Σ_v w(u, v);
    ``push_values`` = w(u, v) · (1 / deg(u)) and ``pull_values`` (row v, source u) = w(u, v) · (1 / deg(u))
    on the same pattern. Returns (indptr, indices, push_values, pull_values, degree)."""
    num_rows = out_indptr.shape[0] - 1
    counts = np.zeros(num_rows + 1, dtype=np.int64)
    for u in numba.prange(num_rows):
        linked = _linked_sorted(u, out_indptr, out_neighbors, in_indptr, in_neighbors)
        distinct = 0
        for j in range(linked.shape[0]):
            if j == 0 or linked[j] != linked[j - 1]:
                distinct += 1
        counts[u + 1] = distinct
    indptr = np.cumsum(counts)
    indices = np.empty(indptr[num_rows], dtype=index_dtype)
    weights = np.empty(indptr[num_rows])
    degree = np.zeros(num_rows)
    for u in numba.prange(num_rows):
        linked = _linked_sorted(u, out_indptr, out_neighbors, in_indptr, in_neighbors)
        position = indptr[u] - 1
        for j in range(linked.shape[0]):
            if j == 0 or linked[j] != linked[j - 1]:
                position += 1
                indices[position] = linked[j]
                weights[position] = 0.0
            weights[position] += 1.0
            degree[u] += 1.0
    inverse = np.zeros(num_rows)
    for u in numba.prange(num_rows):
        if degree[u] > 0:
            inverse[u] = 1.0 / degree[u]
    push_values = np.empty(indptr[num_rows])
    pull_values = np.empty(indptr[num_rows])
    for u in numba.prange(num_rows):
        for e in range(indptr[u], indptr[u + 1]):
            push_values[e] = inverse[u] * weights[e]
            pull_values[e] = inverse[indices[e]] * weights[e]
    return indptr, indices, push_values, pull_values, degree
