"""Numba kernels behind :mod:`kgplm.text.linking`: a character trie walked from every position.

The trie is stored in CSR form: node ``n``'s children are ``child_codes[child_ptr[n]:child_ptr[n+1]]``
(sorted code points, found by binary search) with node ids ``child_nodes[...]``;
``terminal[n]`` is the dictionary entry ending at ``n`` or -1.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["find_matches"]


@numba.njit(cache=True, nogil=True, inline="always")
def _child(node, code, child_ptr, child_codes, child_nodes):  # pragma: no cover - compiled
    low = child_ptr[node]
    high = child_ptr[node + 1] - 1
    while low <= high:
        middle = (low + high) >> 1
        value = child_codes[middle]
        if value == code:
            return child_nodes[middle]
        if value < code:
            low = middle + 1
        else:
            high = middle - 1
    return -1


@numba.njit(cache=True, nogil=True)
def find_matches(codes, begins_word, ends_word, child_ptr, child_codes, child_nodes, terminal, nested, starts,
                 ends, entries):  # pragma: no cover - compiled
    """Fill ``starts/ends/entries`` with matches in ``codes``; return their count, or -1 when full.

    Not nested: leftmost-longest, non-overlapping. Nested: every match, by start then longest
    first. ``begins_word[i]`` / ``ends_word[i]``: character i begins / ends with a Latin letter or
    digit (after NFKC). A match must not start right after a character that ends with one when
    its own first character begins with one, and likewise at its end.
    """
    size = codes.shape[0]
    capacity = starts.shape[0]
    count = 0
    position = 0
    while position < size:
        if begins_word[position] and position > 0 and ends_word[position - 1]:
            position += 1
            continue
        node = 0
        cursor = position
        best_end = -1
        best_entry = -1
        group_start = count
        while cursor < size:
            node = _child(node, codes[cursor], child_ptr, child_codes, child_nodes)
            if node < 0:
                break
            cursor += 1
            entry = terminal[node]
            if entry >= 0:
                if not (ends_word[cursor - 1] and cursor < size and begins_word[cursor]):
                    if nested:
                        if count == capacity:
                            return -1
                        starts[count] = position
                        ends[count] = cursor
                        entries[count] = entry
                        count += 1
                    else:
                        best_end = cursor
                        best_entry = entry
        if nested:
            # longest first within one start
            low = group_start
            high = count - 1
            while low < high:
                ends[low], ends[high] = ends[high], ends[low]
                entries[low], entries[high] = entries[high], entries[low]
                low += 1
                high -= 1
            position += 1
        elif best_end >= 0:
            if count == capacity:
                return -1
            starts[count] = position
            ends[count] = best_end
            entries[count] = best_entry
            count += 1
            position = best_end
        else:
            position += 1
    return count


def build_trie(patterns: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """CSR trie arrays of distinct ``patterns`` (entry i = patterns[i]).

    Patterns are inserted in sorted order, so each one only adds the nodes after its longest
    common prefix with the previous pattern, and siblings come out in code-point order.
    """
    order = sorted(range(len(patterns)), key=patterns.__getitem__)
    terminal = [-1]
    parents: list[int] = []
    codes: list[int] = []
    path = [0]  # path[d] = node at depth d along the previous pattern
    previous = ""
    for entry in order:
        pattern = patterns[entry]
        common = 0
        limit = min(len(pattern), len(previous))
        while common < limit and pattern[common] == previous[common]:
            common += 1
        del path[common + 1:]
        for char in pattern[common:]:
            node = len(terminal)
            terminal.append(-1)
            parents.append(path[-1])
            codes.append(ord(char))
            path.append(node)
        terminal[path[len(pattern)]] = entry
        previous = pattern
    parents_array = np.asarray(parents, dtype=np.int64)
    by_parent = np.argsort(parents_array, kind="stable")  # children of a node stay in code order
    child_ptr = np.zeros(len(terminal) + 1, dtype=np.int64)
    child_ptr[1:] = np.cumsum(np.bincount(parents_array, minlength=len(terminal)))
    child_codes = np.asarray(codes, dtype=np.int32)[by_parent]
    child_nodes = (by_parent + 1).astype(np.int32)
    return child_ptr, child_codes, child_nodes, np.asarray(terminal, dtype=np.int32)
