"""Numba kernels of PEPR fast mode's tree (cavity) closure on an undirected walk (the math is in
:mod:`kgplm.kg.pepr.fast`): the cavity recursion, the closure's step factors and costs, and the push
scored with it. The push itself and its buffers are shared with the directed walk's closure in
:mod:`kgplm.kg.pepr.kernels`."""

from __future__ import annotations

import numba
import numpy as np

from kgplm.kg.pepr.kernels import hub_seed_scores, push_buffers, push_one, reset_push

__all__ = [
    "reverse_edges",
    "tree_cavities",
    "tree_step_factors",
    "forward_push_tree_scores",
    "closure_reach",
    "closure_bounds",
]


def reverse_edges(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """``reverse[e]`` = the position of edge (b → a) for the edge e = (a → b) of a CSR whose pattern is
    symmetric and whose rows are sorted (filled in one pass by :func:`_fill_reverse_edges`). int32 where the
    positions fit (the 4M-concept graph's 37M entries do): the cavity sweeps read it at every entry, and
    half the bytes is half the traffic."""
    reverse = np.empty(indices.shape[0], dtype=np.int32 if indices.shape[0] < 2**31 else np.int64)
    _fill_reverse_edges(indptr, indices, reverse)
    return reverse


@numba.njit(cache=True, nogil=True)
def _fill_reverse_edges(indptr, indices, reverse):  # pragma: no cover - compiled
    """:func:`reverse_edges` into ``reverse``, in one pass over the rows in order: row b's entries are
    sorted, so its entry into a is the next one not yet paired when the rows a are taken in increasing
    order (a cursor per row; 4M concepts: 0.9 s, against 3.1–4.1 s for a binary search per entry on two
    threads)."""
    cursor = indptr[:-1].copy()
    for a in range(indptr.shape[0] - 1):
        for e in range(indptr[a], indptr[a + 1]):
            b = indices[e]
            reverse[e] = cursor[b]
            cursor[b] += 1


@numba.njit(parallel=True, cache=True, nogil=True)
def _out_and_back(indptr, values, reverse):  # pragma: no cover - compiled
    """``out_and_back[e]`` = P(a, b) P(b, a) for the entry e = (a → b): the same for e and its reverse."""
    out_and_back = np.empty(values.shape[0])
    for a in numba.prange(indptr.shape[0] - 1):
        for e in range(indptr[a], indptr[a + 1]):
            out_and_back[e] = values[e] * values[reverse[e]]
    return out_and_back


@numba.njit(parallel=True, cache=True, nogil=True)
def _return_sums(indptr, out_and_back, cavity, out):  # pragma: no cover - compiled
    """``out[u]`` = Σ_{c ∈ N(u)} P(u, c) P(c, u) g_{c∖u}: u's one-step-out-and-back walks, each weighted by
    c's cavity returns."""
    for a in numba.prange(indptr.shape[0] - 1):
        total = 0.0
        for e in range(indptr[a], indptr[a + 1]):
            total += out_and_back[e] * cavity[e]
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
    # P(a, b) P(b, a) once, read in order: a sweep then reads two entries out of order (returns[b] and the
    # reverse entry's cavity) rather than four (4M concepts: 1.7 s a sweep before)
    out_and_back = _out_and_back(indptr, values, reverse)
    cavity = np.ones(indices.shape[0])
    following = np.empty(indices.shape[0])
    returns = np.zeros(num_rows)  # Σ_c P(u, c) P(c, u) g_{c∖u}
    change = np.zeros(num_rows)
    sweeps = 0
    while sweeps < max_iter:
        sweeps += 1
        _return_sums(indptr, out_and_back, cavity, returns)
        for a in numba.prange(num_rows):
            largest = 0.0
            for e in range(indptr[a], indptr[a + 1]):
                back = reverse[e]  # (b → a): its term is b's walk back into a, the removed node
                updated = 1.0 / (1.0 - beta * (returns[indices[e]] - out_and_back[e] * cavity[back]))
                largest = max(largest, abs(updated - cavity[e]))
                following[e] = updated
            change[a] = largest
        cavity, following = following, cavity
        if change.max() < tol:
            break
    _return_sums(indptr, out_and_back, cavity, returns)
    diagonal = 1.0 / (1.0 - beta * returns)
    return cavity, diagonal, sweeps


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
def forward_push_tree_scores(
    seeds,
    rows,
    alpha,
    epsilon,
    push_indptr,
    push_indices,
    push_values,
    degree,
    is_hub,
    hub_slot,
    hub_vectors,
    outgoing,
    incoming,
    diagonal,
    reach,
    bounds,
    spread_keys,
    candidate_indptr,
    candidate_indices,
    global_scores,
    remainder_distribution,
    seed_weight,
    global_weight,
    num_workers,
    out_scores,
):  # pragma: no cover
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
    most_candidates = 1
    for position in range(num_rows):
        row = rows[position]
        largest = max(largest, bounds[row])
        most_candidates = max(most_candidates, candidate_indptr[row + 1] - candidate_indptr[row])
    while capacity < 2 * largest:
        capacity *= 2
    for worker in numba.prange(num_workers):
        estimate, residual, queued, touched, queue, hub_residual = push_buffers(num_nodes, num_hubs)
        visits = np.zeros(num_nodes)  # r_u G_uu on non-hub residual nodes
        table_keys = np.full(capacity, -1, dtype=np.int64)
        table_arriving = np.zeros(capacity)
        used = np.empty(capacity // 2, dtype=np.int64)  # the occupied slots, in insertion order
        seen = np.zeros(capacity // 8, dtype=np.int64)  # bitsets of the spread's sources, 8 bits a slot
        shared = np.zeros(capacity // 8, dtype=np.int64)
        reached_hubs = np.empty(num_hubs, dtype=np.int64)
        # a spread's walk entries v → x into shared x, per candidate v (see _close_tree)
        candidate_offset = np.full(num_nodes, -1, dtype=np.int32)
        through = np.empty(most_candidates)
        pair_offsets = np.empty(capacity // 2, dtype=np.int32)
        pair_entries = np.empty(capacity // 2, dtype=np.int64)
        pair_slots = np.empty(capacity // 2, dtype=np.int64)
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
            _close_tree(
                seed,
                start,
                end,
                alpha,
                push_indptr,
                push_indices,
                degree,
                is_hub,
                hub_slot,
                hub_vectors,
                outgoing,
                incoming,
                diagonal,
                reach,
                max(spread_keys, bounds[row]),
                candidate_indices,
                global_scores,
                remainder_distribution,
                seed_weight,
                global_weight,
                estimate,
                residual,
                touched,
                num_touched,
                hub_residual,
                reached_hubs,
                visits,
                table_keys,
                table_arriving,
                used,
                seen,
                shared,
                candidate_offset,
                through,
                pair_offsets,
                pair_entries,
                pair_slots,
                out_scores,
            )
            reset_push(touched, num_touched, is_hub, hub_slot, hub_residual, estimate, residual, queued)


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


@numba.njit(inline="always")
def _hashed(x):  # pragma: no cover - compiled
    """Multiplicative hashing (Knuth's 2654435761), its high bits folded into the low ones a mask keeps."""
    return (x * 2654435761) ^ ((x * 2654435761) >> 16)


@numba.njit(inline="always")
def _probe(table_keys, x, mask):  # pragma: no cover - compiled
    """The slot of key x in an open-addressing table (linear probing): x's slot, or the empty one (−1)
    where it would go. Inlined by numba where it is called (a call per probe cost 19 ns against 6)."""
    slot = _hashed(x) & mask
    while table_keys[slot] != -1 and table_keys[slot] != x:
        slot = (slot + 1) & mask
    return slot


@numba.njit(inline="always")
def _has_bit(bits, bit):  # pragma: no cover - compiled
    return (bits[bit >> 6] & (np.int64(1) << (bit & 63))) != 0


@numba.njit(cache=True, nogil=True)
def _close_tree(
    seed,
    start,
    end,
    alpha,
    push_indptr,
    push_indices,
    degree,
    is_hub,
    hub_slot,
    hub_vectors,
    outgoing,
    incoming,
    diagonal,
    reach,
    spread_keys_limit,
    candidate_indices,
    global_scores,
    remainder_distribution,
    seed_weight,
    global_weight,
    estimate,
    residual,
    touched,
    num_touched,
    hub_residual,
    reached_hubs,
    visits,
    table_keys,
    table_arriving,
    used,
    seen,
    shared,
    candidate_offset,
    through,
    pair_offsets,
    pair_entries,
    pair_slots,
    out_scores,
):  # pragma: no cover - compiled
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
    # (the caller's: the larger of :data:`kgplm.kg.pepr.fast.SPREAD_KEYS` and the pull's bound). The
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
    # the table: keys x, −1 an empty slot, probed by _probe (inlined)
    num_used = 0
    # Spreading, A(x) is kept only where it can change a candidate's T: at an x with two or more sources
    # among the residual's support (u itself, or u's walk entry into x) and the rows of the candidates the
    # push emptied (r_v = 0). At an x with one source, that source is the candidate v whose T reads it
    # (A(x) = r_v G_vv f(v→x), and T subtracts exactly that), or no candidate reads it at all. Sources are
    # counted in two bitsets of 8 bits a table slot (a hash collision only keeps an x needlessly), which
    # stay in the first-level cache where most x of a high-degree u's row went into the table (4M entities:
    # 28 µs a seed of 38)
    bit_mask = 8 * (mask + 1) - 1
    if spreading:
        for word in range((mask + 1) // 8):
            seen[word] = 0
            shared[word] = 0
        for k in range(start - num_touched, end):
            if k < start:  # the residual's support: u itself and its walk entries
                u = touched[k - start + num_touched]
                if visits[u] == 0.0:
                    continue
                first = push_indptr[u] - 1
            else:  # a candidate the push emptied: its walk entries
                u = candidate_indices[k]
                if is_hub[u] or visits[u] != 0.0:
                    continue
                first = push_indptr[u]
            for e in range(first, push_indptr[u + 1]):
                if e < push_indptr[u]:
                    x = u
                elif outgoing[e] != 0.0:  # 0 exactly when push_indices[e] is a hub
                    x = push_indices[e]
                else:
                    continue
                bit = _hashed(x) & bit_mask
                if _has_bit(seen, bit):
                    shared[bit >> 6] |= np.int64(1) << (bit & 63)
                seen[bit >> 6] |= np.int64(1) << (bit & 63)
        # T(v) reads A(x) only at the shared x of v's row (0 elsewhere, above): the walk entries v → x into
        # a shared x are listed as they are met here, (v's offset, entry, slot), in row order, and T is summed
        # over them rather than over v's whole row again, most of whose x are not shared (4M entities:
        # Σ deg(v)² = 3.7e9 probes; the time saved there was within the machine's ±10 % noise, and on CMeKG's
        # contested seeds a coarse push went from 0.19 to 0.18 ms, bit-identical)
        for k in range(start, end):
            v = candidate_indices[k]
            if not is_hub[v] and candidate_offset[v] < 0:  # a repeated candidate reads its first's sum
                candidate_offset[v] = k - start
                through[k - start] = 0.0
        num_pairs = 0
        for i in range(num_touched):
            u = touched[i]
            if visits[u] == 0.0:
                continue
            offset = candidate_offset[u]
            for e in range(push_indptr[u] - 1, push_indptr[u + 1]):
                if e < push_indptr[u]:  # u itself: A(u) starts with r_u G_uu
                    x, value = u, visits[u]
                elif outgoing[e] != 0.0:
                    x, value = push_indices[e], visits[u] * outgoing[e]
                else:
                    continue
                bit = _hashed(x) & bit_mask
                if not _has_bit(shared, bit):
                    continue
                slot = _probe(table_keys, x, mask)
                if table_keys[slot] == -1:
                    table_keys[slot] = x
                    used[num_used] = slot
                    num_used += 1
                table_arriving[slot] += value
                if offset >= 0 and e >= push_indptr[u]:
                    pair_offsets[num_pairs] = offset
                    pair_entries[num_pairs] = e
                    pair_slots[num_pairs] = slot
                    num_pairs += 1
        for k in range(start, end):  # the candidates the push emptied: their shared x already in the table
            v = candidate_indices[k]
            if is_hub[v] or visits[v] != 0.0 or candidate_offset[v] != k - start:
                continue
            for e in range(push_indptr[v], push_indptr[v + 1]):
                if incoming[e] == 0.0:
                    continue
                x = push_indices[e]
                bit = _hashed(x) & bit_mask
                if not _has_bit(shared, bit):
                    continue
                slot = _probe(table_keys, x, mask)
                if table_keys[slot] != -1:  # an x no residual reached adds nothing: r_v = 0 here
                    pair_offsets[num_pairs] = k - start
                    pair_entries[num_pairs] = e
                    pair_slots[num_pairs] = slot
                    num_pairs += 1
        for i in range(num_pairs):
            e = pair_entries[i]
            own = visits[candidate_indices[start + pair_offsets[i]]]
            through[pair_offsets[i]] += incoming[e] * (table_arriving[pair_slots[i]] - own * outgoing[e])
    else:
        for k in range(start, end):
            v = candidate_indices[k]
            if is_hub[v]:
                continue
            for e in range(push_indptr[v], push_indptr[v + 1]):
                x = push_indices[e]
                if outgoing[e] == 0.0:
                    continue
                slot = _probe(table_keys, x, mask)
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
            if spreading:
                through_v = through[candidate_offset[v]]
            else:
                through_v = 0.0
                for e in range(push_indptr[v], push_indptr[v + 1]):
                    if incoming[e] == 0.0:  # x a hub: the closure does not walk through it
                        continue
                    # visits arriving at x (none when x is not in the table), less the walk v → x that would
                    # step straight back
                    x = push_indices[e]
                    slot = _probe(table_keys, x, mask)
                    arriving = table_arriving[slot] if table_keys[slot] != -1 else 0.0
                    through_v += incoming[e] * (arriving - own * outgoing[e])
            total += alpha * (own + through_v) + remainder_weight * remaining * remainder_distribution[v]
        out_scores[k] = seed_weight * total + global_weight * global_scores[v]
    for i in range(num_used):
        table_keys[used[i]] = -1
        table_arriving[used[i]] = 0.0
    if spreading:
        for k in range(start, end):
            candidate_offset[candidate_indices[k]] = -1
    for i in range(num_touched):
        visits[touched[i]] = 0.0
