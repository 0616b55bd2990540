"""Numba kernels behind :mod:`kgplm.kg.pepr` (kept apart so that the math module stays readable).

All kernels take a transition matrix in "pull" CSR form: row ``v`` lists the entities ``u`` that
walk into ``v`` and ``values[k] = weight(u → v) / degree(u)``, so one step of the walk is
``y[v] = Σ_k values[k] · x[indices[k]]``.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["pagerank_step", "pagerank_step_float32", "column_change", "forward_push_scores", "one_hop_rows", "top_k_rows", "reverse_edges",
           "tree_cavities", "tree_step_factors", "forward_push_tree_scores", "closure_reach", "closure_bounds", "short_cycle_shares"]


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
def pagerank_step_float32(indptr, indices, values, x, damping, base, out, num_stripes):  # pragma: no cover
    """:func:`pagerank_step` for float32 blocks: each row is summed in float64 and rounded once when stored,
    so a hub's thousands of in-edges add no float32 rounding (which kept the L1 change above 1e-6 on
    CMeKG subgraphs when the sum itself was float32). Rows are split into ``num_stripes`` contiguous
    stripes, each with its own float64 accumulator; every row is computed alone, so the result does not
    depend on the stripes or threads."""
    num_rows, width = x.shape
    stripe = (num_rows + num_stripes - 1) // num_stripes
    for part in numba.prange(num_stripes):
        total = np.empty(width)  # float64
        for row in range(part * stripe, min(num_rows, (part + 1) * stripe)):
            for column in range(width):
                total[column] = 0.0
            for k in range(indptr[row], indptr[row + 1]):
                source = indices[k]
                weight = values[k]
                for column in range(width):
                    total[column] += weight * x[source, column]
            for column in range(width):
                out[row, column] = damping * total[column] + base[column]


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


@numba.njit(parallel=True, cache=True, nogil=True)
def reverse_edges(indptr, indices):  # pragma: no cover - compiled
    """``reverse[e]`` = the position of edge (b → a) for the edge e = (a → b) of a CSR whose pattern is
    symmetric and whose rows are sorted (a binary search in row b)."""
    num_rows = indptr.shape[0] - 1
    reverse = np.empty(indices.shape[0], dtype=np.int64)
    for a in numba.prange(num_rows):
        for e in range(indptr[a], indptr[a + 1]):
            b = indices[e]
            lo, hi = indptr[b], indptr[b + 1]
            while lo < hi:
                middle = (lo + hi) // 2
                if indices[middle] < a:
                    lo = middle + 1
                else:
                    hi = middle
            reverse[e] = lo
    return reverse


@numba.njit(parallel=True, cache=True, nogil=True)
def _return_sums(indptr, values, reverse, cavity, out):  # pragma: no cover - compiled
    """``out[u]`` = Σ_{c ∈ N(u)} P(u, c) P(c, u) g_{c∖u}: u's one-step-out-and-back walks, each weighted by
    c's cavity returns."""
    for a in numba.prange(indptr.shape[0] - 1):
        total = 0.0
        for e in range(indptr[a], indptr[a + 1]):
            total += values[e] * values[reverse[e]] * cavity[e]
        out[a] = total


@numba.njit(parallel=True, cache=True, nogil=True)
def tree_cavities(indptr, indices, values, reverse, alpha, tol, max_iter):  # pragma: no cover - compiled
    """Fixed point of the cavity (Gaussian belief propagation) recursion of the discounted walk.

    For the edge e = (a → b), ``cavity[e]`` = g_{b∖a}, b's expected discounted visits to itself when a is
    removed; ``diagonal[u]`` = G_uu. With P(a, b) = ``values`` and β = (1 − α)²::

        g_{b∖a} = 1 / (1 − β Σ_{c ∈ N(b)∖a} P(b, c) P(c, b) g_{c∖b})
        G_uu    = 1 / (1 − β Σ_{c ∈ N(u)}   P(u, c) P(c, u) g_{c∖u})

    Jacobi sweeps from g = 1 (each reads the previous sweep only, so the result does not depend on the
    number of threads) until the largest change is below ``tol`` or after ``max_iter`` sweeps. Returns
    (cavity, diagonal, sweeps).
    """
    num_rows = indptr.shape[0] - 1
    beta = (1.0 - alpha) * (1.0 - alpha)
    cavity = np.ones(indices.shape[0])
    following = np.empty(indices.shape[0])
    returns = np.zeros(num_rows)  # Σ_c P(u, c) P(c, u) g_{c∖u}
    change = np.zeros(num_rows)
    sweeps = 0
    while sweeps < max_iter:
        sweeps += 1
        _return_sums(indptr, values, reverse, cavity, returns)
        for a in numba.prange(num_rows):
            largest = 0.0
            for e in range(indptr[a], indptr[a + 1]):
                back = reverse[e]  # (b → a): its term is b's walk back into a, the removed node
                updated = 1.0 / (1.0 - beta * (returns[indices[e]] - values[back] * values[e] * cavity[back]))
                largest = max(largest, abs(updated - cavity[e]))
                following[e] = updated
            change[a] = largest
        cavity, following = following, cavity
        if change.max() < tol:
            break
    _return_sums(indptr, values, reverse, cavity, returns)
    diagonal = 1.0 / (1.0 - beta * returns)
    return cavity, diagonal, sweeps


@numba.njit(cache=True, nogil=True)
def _push_one(seed, alpha, epsilon, push_indptr, push_indices, push_values, degree, is_hub,
              estimate, residual, queued, touched, queue):  # pragma: no cover - compiled
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
def _push_buffers(num_nodes, num_hubs):  # pragma: no cover - compiled
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
def _hub_seed_scores(seed, start, end, candidate_indices, hub_slot, hub_vectors, global_scores, seed_weight,
                     global_weight, out_scores):  # pragma: no cover - compiled
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
def _reset_push(touched, num_touched, is_hub, hub_slot, hub_residual, estimate, residual,
                queued):  # pragma: no cover - compiled
    for i in range(num_touched):
        node = touched[i]
        if is_hub[node]:
            hub_residual[hub_slot[node]] = 0.0
        estimate[node] = 0.0
        residual[node] = 0.0
        queued[node] = False


@numba.njit(parallel=True, cache=True, nogil=True)
def forward_push_scores(seeds, rows, alpha, epsilon, push_indptr, push_indices, push_values, pull_indptr, pull_indices,
                        pull_values, degree, is_hub, hub_slot, hub_vectors, candidate_indptr, candidate_indices,
                        global_scores, remainder_distribution, seed_weight, global_weight, exact_steps,
                        num_workers, out_scores):  # pragma: no cover
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
        estimate, residual, queued, touched, queue, hub_residual = _push_buffers(num_nodes, num_hubs)
        step_one = np.zeros(num_nodes)  # (P r)(w) on non-hub w
        reached = np.empty(num_nodes, dtype=np.int64)  # where step_one is non-zero, for the reset
        for position in range(worker, num_rows, num_workers):
            row = rows[position]
            seed = seeds[row]
            start, end = candidate_indptr[row], candidate_indptr[row + 1]
            if is_hub[seed]:
                _hub_seed_scores(seed, start, end, candidate_indices, hub_slot, hub_vectors, global_scores,
                                 seed_weight, global_weight, out_scores)
                continue
            num_touched = _push_one(seed, alpha, epsilon, push_indptr, push_indices, push_values, degree,
                                    is_hub, estimate, residual, queued, touched, queue)
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
            _reset_push(touched, num_touched, is_hub, hub_slot, hub_residual, estimate, residual, queued)


@numba.njit(parallel=True, cache=True, nogil=True)
def tree_step_factors(indptr, indices, values, reverse, cavity, alpha, is_hub):  # pragma: no cover - compiled
    """The tree closure's step factors f(a→b) = (1 − α) P(a, b) g_{b∖a}, per walk entry e = (a → b):
    ``outgoing[e]`` = f(a→b), ``incoming[e]`` = f(b→a); each is 0 when its far end (b) is a hub, whose
    residual the push resolves exactly and through which the closure does not walk. Stored in float32
    (4 bytes an entry each: 300 MB for the 37M entries of the 4M-concept graph); a factor's rounding,
    6e-8 relative, is below the score's float32 rounding in the table."""
    outgoing = np.empty(indices.shape[0], dtype=np.float32)
    incoming = np.empty(indices.shape[0], dtype=np.float32)
    for a in numba.prange(indptr.shape[0] - 1):
        for e in range(indptr[a], indptr[a + 1]):
            if is_hub[indices[e]]:
                outgoing[e] = 0.0
                incoming[e] = 0.0
            else:
                back = reverse[e]
                outgoing[e] = (1.0 - alpha) * values[e] * cavity[e]
                incoming[e] = (1.0 - alpha) * values[back] * cavity[back]
    return outgoing, incoming


@numba.njit(parallel=True, cache=True, nogil=True)
def forward_push_tree_scores(seeds, rows, alpha, epsilon, push_indptr, push_indices, push_values, degree, is_hub,
                             hub_slot, hub_vectors, outgoing, incoming, diagonal, reach, bounds, spread_keys,
                             candidate_indptr, candidate_indices, global_scores, remainder_distribution, seed_weight,
                             global_weight, num_workers, out_scores):  # pragma: no cover
    """PEPR scores of each seed's candidates on an undirected walk: push, resolve hub residuals exactly,
    and close the non-hub residual r with the tree (cavity) Green's function. For seed s, candidate v::

        score = w_s · (p(v) + Σ_h r_h · H[v, h] + α · T(v) + (1 − α)³ · R · π(v)) + w_g · g(v)
        T(v)  = r_v G_vv + Σ_{x ∈ N(v)} f(x→v) · (A(x) − r_v G_vv f(v→x))
        A(x)  = r_x G_xx + Σ_{u ∈ N(x)} r_u G_uu f(u→x)

    (``outgoing`` / ``incoming`` hold f, :func:`tree_step_factors`). T(v) is the residual's expected
    discounted visits to v along tree paths of length ≤ 2, non-backtracking (exact on a tree, where
    G(u, v) = G_uu Π f over the path); hubs are never walked through. A(x) is spread from the residual's
    support when that is cheaper (a coarse push) and pulled at each x ∈ N(v) otherwise (a deep push, whose
    residual covers far more than the candidates' neighbourhoods); the choice is a function of the graph and
    ε only. A hub candidate's score is exact, ppr_s(v) = deg(v) / deg(s) · ppr_v(s), and a hub seed's row
    is its exact vector.
    """
    num_nodes = degree.shape[0]
    num_rows = rows.shape[0]
    num_hubs = hub_vectors.shape[1]
    # A(x) is kept for the x where it is needed in a small open-addressing table (keys x, −1 empty) rather
    # than in entity-sized arrays: its probes stay in cache, where marks in a 4M-entity array each missed
    # it. Sized once, at most half full: a pull keeps at most ``bounds`` (Σ deg over a seed's non-hub
    # candidates) keys, a spread at most the larger of that and ``spread_keys``
    capacity = 64
    largest = spread_keys
    for position in range(num_rows):
        largest = max(largest, bounds[rows[position]])
    while capacity < 2 * largest:
        capacity *= 2
    for worker in numba.prange(num_workers):
        estimate, residual, queued, touched, queue, hub_residual = _push_buffers(num_nodes, num_hubs)
        visits = np.zeros(num_nodes)  # r_u G_uu on non-hub residual nodes
        table_keys = np.full(capacity, -1, dtype=np.int64)
        table_arriving = np.zeros(capacity)
        used = np.empty(capacity // 2, dtype=np.int64)  # the occupied slots, in insertion order
        reached_hubs = np.empty(num_hubs, dtype=np.int64)
        for position in range(worker, num_rows, num_workers):
            row = rows[position]
            seed = seeds[row]
            start, end = candidate_indptr[row], candidate_indptr[row + 1]
            if is_hub[seed]:
                _hub_seed_scores(seed, start, end, candidate_indices, hub_slot, hub_vectors, global_scores,
                                 seed_weight, global_weight, out_scores)
                continue
            num_touched = _push_one(seed, alpha, epsilon, push_indptr, push_indices, push_values, degree,
                                    is_hub, estimate, residual, queued, touched, queue)
            _close_tree(seed, start, end, alpha, push_indptr, push_indices, degree, is_hub, hub_slot, hub_vectors,
                        outgoing, incoming, diagonal, reach, max(spread_keys, bounds[row]), candidate_indices,
                        global_scores, remainder_distribution, seed_weight, global_weight, estimate, residual, touched, num_touched, hub_residual,
                        reached_hubs, visits, table_keys, table_arriving, used, out_scores)
            _reset_push(touched, num_touched, is_hub, hub_slot, hub_residual, estimate, residual, queued)


@numba.njit(parallel=True, cache=True, nogil=True)
def closure_reach(push_indptr, push_indices, is_hub):  # pragma: no cover - compiled
    """Per entity v, Σ deg(x) over its non-hub neighbours x: what pulling A at v's neighbours reads, and,
    for a seed, how many keys its pull may keep (one per walk entry of its non-hub candidates)."""
    num_rows = push_indptr.shape[0] - 1
    reach = np.zeros(num_rows, dtype=np.int64)
    for v in numba.prange(num_rows):
        total = 0
        for e in range(push_indptr[v], push_indptr[v + 1]):
            x = push_indices[e]
            if not is_hub[x]:
                total += push_indptr[x + 1] - push_indptr[x]
        reach[v] = total
    return reach


@numba.njit(parallel=True, cache=True, nogil=True)
def closure_bounds(seeds, is_hub, push_indptr, candidate_indptr, candidate_indices):  # pragma: no cover
    """Per seed, Σ deg(v) over its non-hub candidates v: the most keys the tree closure's pull keeps for
    it (one per walk entry out of those candidates)."""
    bounds = np.zeros(seeds.shape[0], dtype=np.int64)
    for position in numba.prange(seeds.shape[0]):
        bound = 0
        for k in range(candidate_indptr[position], candidate_indptr[position + 1]):
            v = candidate_indices[k]
            if not is_hub[v]:
                bound += push_indptr[v + 1] - push_indptr[v]
        bounds[position] = bound
    return bounds


@numba.njit(cache=True, nogil=True)
def _close_tree(seed, start, end, alpha, push_indptr, push_indices, degree, is_hub, hub_slot, hub_vectors, outgoing,
                incoming, diagonal, reach, spread_keys_limit, candidate_indices, global_scores, remainder_distribution,
                seed_weight, global_weight, estimate, residual, touched, num_touched, hub_residual, reached_hubs, visits,
                table_keys, table_arriving, used, out_scores):  # pragma: no cover - compiled
    """One pushed seed's candidate scores (:func:`forward_push_tree_scores`): the hubs' exact part and the
    tree closure of the non-hub residual. Leaves ``visits`` and the table empty again."""
    remainder_weight = (1.0 - alpha) ** 3
    remaining = 0.0  # R: the residual mass on non-hub nodes
    spread_cost = 0
    num_residual = 0
    for i in range(num_touched):
        node = touched[i]
        if is_hub[node]:
            hub_residual[hub_slot[node]] = residual[node]
        elif residual[node] != 0.0:
            remaining += residual[node]
            visits[node] = residual[node] * diagonal[node]
            spread_cost += push_indptr[node + 1] - push_indptr[node]
            num_residual += 1
    # A(x) is needed at the non-hub neighbours x of the non-hub candidates. It is spread from the
    # residual's support when that touches fewer walk entries than pulling it at each such x would (a
    # coarse push; every x the residual reaches goes in the table, and the ones no candidate needs cost
    # nothing) and pulled at each x otherwise (a deep push, whose residual covers far more than the
    # candidates' neighbourhoods). The pull's cost is bounded by Σ reach(v) over the candidates, reach
    # precomputed per entity (:func:`closure_reach`), and its keys by Σ deg(v); the spread's keys are the
    # residual's support and its walk entries, and it is taken only when they fit ``spread_keys_limit``
    # (the caller's: the larger of :data:`kgplm.kg._pepr_fast.SPREAD_KEYS` and the pull's bound). The
    # decision is the graph's and ε's, never the batch's or the clock's
    bound = 0
    pull_cost = 0
    for k in range(start, end):
        v = candidate_indices[k]
        if not is_hub[v]:
            bound += push_indptr[v + 1] - push_indptr[v]
            pull_cost += reach[v]
    spread_keys = num_residual + spread_cost
    spreading = spread_keys <= pull_cost and spread_keys <= spread_keys_limit
    keys = spread_keys if spreading else bound
    mask = 63  # the table is a prefix of the buffer: a power of two at least twice the keys it may hold
    while mask + 1 < 2 * keys:
        mask = 2 * mask + 1
    # the table: multiplicative hashing (Knuth's 2654435761, its high bits folded into the low ones that the
    # mask keeps), linear probing, −1 an empty slot; its probes are written out where they are used, as a
    # call per probe cost 19 ns against 6
    num_used = 0
    if spreading:
        for i in range(num_touched):
            u = touched[i]
            if visits[u] == 0.0:
                continue
            for e in range(push_indptr[u] - 1, push_indptr[u + 1]):
                if e < push_indptr[u]:  # u itself: A(u) starts with r_u G_uu
                    x, value = u, visits[u]
                elif outgoing[e] != 0.0:  # 0 exactly when push_indices[e] is a hub
                    x, value = push_indices[e], visits[u] * outgoing[e]
                else:
                    continue
                slot = ((x * 2654435761) ^ ((x * 2654435761) >> 16)) & mask
                while table_keys[slot] != -1 and table_keys[slot] != x:
                    slot = (slot + 1) & mask
                if table_keys[slot] == -1:
                    table_keys[slot] = x
                    used[num_used] = slot
                    num_used += 1
                table_arriving[slot] += value
    else:
        for k in range(start, end):
            v = candidate_indices[k]
            if is_hub[v]:
                continue
            for e in range(push_indptr[v], push_indptr[v + 1]):
                x = push_indices[e]
                if outgoing[e] == 0.0:
                    continue
                slot = ((x * 2654435761) ^ ((x * 2654435761) >> 16)) & mask
                while table_keys[slot] != -1 and table_keys[slot] != x:
                    slot = (slot + 1) & mask
                if table_keys[slot] == -1:
                    table_keys[slot] = x
                    used[num_used] = slot
                    num_used += 1
        for i in range(num_used):
            x = table_keys[used[i]]
            total = visits[x]
            for e in range(push_indptr[x], push_indptr[x + 1]):
                total += visits[push_indices[e]] * incoming[e]  # f(u→x); 0 for a hub u
            table_arriving[used[i]] = total
    num_hub_residuals = 0
    for h in range(hub_residual.shape[0]):  # the hubs the residual reached, listed once for every candidate
        if hub_residual[h] != 0.0:
            reached_hubs[num_hub_residuals] = h
            num_hub_residuals += 1
    for k in range(start, end):
        v = candidate_indices[k]
        if is_hub[v] and degree[seed] > 0:
            # undirected walk: ppr_s(v) · deg(s) = ppr_v(s) · deg(v), and ppr_v is exact
            total = degree[v] / degree[seed] * hub_vectors[seed, hub_slot[v]]
        else:
            through_hubs = 0.0  # Σ_h r_h · H[v, h]: what the residual left on the hubs sends to v, exactly
            for i in range(num_hub_residuals):
                through_hubs += hub_residual[reached_hubs[i]] * hub_vectors[v, reached_hubs[i]]
            total = estimate[v] + through_hubs
            own = visits[v]
            through = 0.0
            for e in range(push_indptr[v], push_indptr[v + 1]):
                if incoming[e] == 0.0:  # x a hub: the closure does not walk through it
                    continue
                # visits arriving at x (none when x is not in the table), less the walk v → x that would
                # step straight back
                x = push_indices[e]
                slot = ((x * 2654435761) ^ ((x * 2654435761) >> 16)) & mask
                while table_keys[slot] != -1 and table_keys[slot] != x:
                    slot = (slot + 1) & mask
                arriving = table_arriving[slot] if table_keys[slot] != -1 else 0.0
                through += incoming[e] * (arriving - own * outgoing[e])
            total += alpha * (own + through) + remainder_weight * remaining * remainder_distribution[v]
        out_scores[k] = seed_weight * total + global_weight * global_scores[v]
    for i in range(num_used):
        table_keys[used[i]] = -1
        table_arriving[used[i]] = 0.0
    for i in range(num_touched):
        visits[touched[i]] = 0.0


@numba.njit(cache=True, nogil=True)
def _walk_entry(indptr, indices, values, row, column):  # pragma: no cover - compiled
    """values at (row, column) of a CSR with sorted rows (a binary search), 0 when absent."""
    lo, hi = indptr[row], indptr[row + 1]
    while lo < hi:
        middle = (lo + hi) // 2
        if indices[middle] < column:
            lo = middle + 1
        else:
            hi = middle
    return values[lo] if lo < indptr[row + 1] and indices[lo] == column else 0.0


@numba.njit(parallel=True, cache=True, nogil=True)
def short_cycle_shares(seeds, push_indptr, push_indices, push_values, pull_indptr, pull_indices, pull_values, is_hub,
                       num_workers):  # pragma: no cover
    """:func:`kgplm.kg._pepr_fast.short_cycle_share` for each seed, reading only its neighbourhood (the
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


@numba.njit(parallel=True, cache=True, nogil=True)
def one_hop_rows(seeds, out_indptr, out_neighbors, out_relations, in_indptr, in_neighbors, in_relations,
                 num_relations, row_start, neighbors, relations, directions, row_counts):  # pragma: no cover
    """Per seed, its distinct one-hop neighbours (no self), each with its first (direction, relation).

    Out-edges come before in-edges and the lowest relation id first. Seed ``i`` may use the slots
    ``row_start[i] : row_start[i + 1]`` of the output arrays (its out- plus in-degree); the number
    it fills, in ascending neighbour order, goes to ``row_counts[i]``.
    """
    for i in numba.prange(seeds.shape[0]):
        seed = seeds[i]
        size = row_start[i + 1] - row_start[i]
        keys = np.empty(size, dtype=np.int64)
        used = 0
        for j in range(out_indptr[seed], out_indptr[seed + 1]):
            if out_neighbors[j] != seed:
                keys[used] = (np.int64(out_neighbors[j]) * 2) * num_relations + out_relations[j]
                used += 1
        for j in range(in_indptr[seed], in_indptr[seed + 1]):
            if in_neighbors[j] != seed:
                keys[used] = (np.int64(in_neighbors[j]) * 2 + 1) * num_relations + in_relations[j]
                used += 1
        keys = np.sort(keys[:used])
        base = row_start[i]
        filled = 0
        previous = -1
        for key in keys:
            neighbor = key // (2 * num_relations)
            if neighbor == previous:
                continue
            previous = neighbor
            rest = key - neighbor * 2 * num_relations
            neighbors[base + filled] = neighbor
            directions[base + filled] = rest // num_relations
            relations[base + filled] = rest % num_relations
            filled += 1
        row_counts[i] = filled


@numba.njit(parallel=True, cache=True, nogil=True)
def top_k_rows(indptr, neighbors, ranks, k, chosen):  # pragma: no cover
    """Per row, the positions of its ``k`` best candidates: highest ``ranks`` first, ties to the lower
    neighbour id; ``chosen`` (rows, k) is filled in that order and −1 padded."""
    for row in numba.prange(indptr.shape[0] - 1):
        filled = 0
        for position in range(indptr[row], indptr[row + 1]):
            # insertion into the sorted prefix chosen[row, :filled]
            slot = filled
            while slot > 0:
                other = chosen[row, slot - 1]
                if ranks[other] > ranks[position] or (ranks[other] == ranks[position]
                                                      and neighbors[other] < neighbors[position]):
                    break
                slot -= 1
            if slot >= k:
                continue
            last = min(filled, k - 1)
            for shift in range(last, slot, -1):
                chosen[row, shift] = chosen[row, shift - 1]
            chosen[row, slot] = position
            if filled < k:
                filled += 1
        for slot in range(filled, k):
            chosen[row, slot] = -1
