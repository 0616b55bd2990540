"""Numba kernels of the candidate tables behind :mod:`kgplm.kg.pepr`: each seed's distinct one-hop
neighbours, compacted to CSR, and the top k of each row by score (ties to the lower neighbour id)."""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["compact_rows", "gather_top_k", "one_hop_rows", "tie_ranks", "top_k_rows"]


@numba.njit(parallel=True, cache=True, nogil=True)
def one_hop_rows(
    seeds,
    out_indptr,
    out_neighbors,
    out_relations,
    in_indptr,
    in_neighbors,
    in_relations,
    num_relations,
    row_start,
    neighbors,
    relations,
    directions,
    row_counts,
):  # pragma: no cover
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
                if ranks[other] > ranks[position] or (
                    ranks[other] == ranks[position] and neighbors[other] < neighbors[position]
                ):
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


@numba.njit(parallel=True, cache=True, nogil=True)
def compact_rows(
    row_start, indptr, slots_neighbors, slots_relations, slots_directions, neighbors, relations, directions
):  # pragma: no cover - compiled
    """Copy each seed's filled slots (``row_start[i]`` on, ``indptr[i + 1] − indptr[i]`` of them) to its CSR
    row ``indptr[i] : indptr[i + 1]`` (4M entities: 75M slots; a numpy mask built with two ``np.repeat`` of
    that length took 3 s)."""
    for i in numba.prange(indptr.shape[0] - 1):
        source = row_start[i]
        for target in range(indptr[i], indptr[i + 1]):
            neighbors[target] = slots_neighbors[source]
            relations[target] = slots_relations[source]
            directions[target] = slots_directions[source]
            source += 1


@numba.njit(parallel=True, cache=True, nogil=True)
def tie_ranks(indptr, scores, ranks):  # pragma: no cover - compiled
    """Per row, ``ranks = round(scores / row_max · 1e7)`` (``row_max`` 1 where the row's best score is not
    positive): scores equal to 7 significant digits of the row's best are ties. One pass per row instead
    of numpy's ``reduceat``, ``repeat``, divide and round over every candidate."""
    for row in numba.prange(indptr.shape[0] - 1):
        start, end = indptr[row], indptr[row + 1]
        if start == end:
            continue
        best = scores[start]
        for position in range(start + 1, end):
            if best != best:  # a NaN is the row's maximum, as in numpy (and then no scale: 1)
                break
            if scores[position] > best or scores[position] != scores[position]:
                best = scores[position]
        scale = best if best > 0 else 1.0
        for position in range(start, end):
            ranks[position] = np.round(scores[position] / scale * 1e7)


@numba.njit(parallel=True, cache=True, nogil=True)
def gather_top_k(
    chosen, neighbors, relations, directions, scores, table_neighbors, table_relations, table_directions, table_scores
):  # pragma: no cover - compiled
    """The table's columns from the chosen positions (rows, k; −1 padded): −1 (scores 0) where none (4M
    rows: numpy's ``nonzero`` and four fancy-indexed scatters took 1–3 s)."""
    num_rows, k = chosen.shape
    for row in numba.prange(num_rows):
        for slot in range(k):
            position = chosen[row, slot]
            if position >= 0:
                table_neighbors[row, slot] = neighbors[position]
                table_relations[row, slot] = relations[position]
                table_directions[row, slot] = directions[position]
                table_scores[row, slot] = scores[position]
            else:
                table_neighbors[row, slot] = -1
                table_relations[row, slot] = -1
                table_directions[row, slot] = -1
                table_scores[row, slot] = 0.0
