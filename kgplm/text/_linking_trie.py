"""Sorting strings and building the linker's trie from flat UTF-8 arrays (numba), no Python object per string.

At UMLS scale the linker's dictionary holds millions of names (3.8M strings for 1M concepts): held
as Python strings, lists and dicts they cost several GB. Here the strings are one
``uint8`` array ``flat`` of UTF-8 bytes, string ``i`` at ``flat[offsets[i]:offsets[i + 1] - 1]`` (each
followed by one separator byte, not part of it), and everything else is an integer array.

* :func:`sort_strings`: a stable order of the strings by code point (UTF-8 byte order is code-point
  order): a ``np.argsort`` of a 63-bit key packing the first 7 bytes, then a merge sort of each run of
  equal keys comparing the rest.
* :func:`trie_levels` / :func:`fill_trie`: the trie of the distinct sorted strings with its nodes
  numbered breadth-first, siblings in code order, built level by level without a queue: the
  nodes at depth ``d`` in breadth-first order are the distinct ``d``-code prefixes in sorted order,
  and string ``r`` (after its predecessor, with which it shares ``lcp[r]`` codes) creates exactly
  the nodes at depths ``lcp[r] + 1 … len(r)``. So node ids are ``level_start[d]`` plus a running count
  per depth, and a node's children get consecutive ids (the child of ``children[k]`` is node
  ``k + 1``): the numbering :func:`kgplm.text._linking_kernels.build_trie` documents, with
  only ``children`` and the node rows as node-sized arrays (no parents, argsort or renumbering).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["sort_strings", "distinct", "trie_levels", "fill_trie", "encode_strings", "gather_strings"]

#: bytes packed into the sort key (9 bits each: byte + 1, 0 past the end, so shorter sorts first)
_KEY_BYTES = 7


def encode_strings(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(flat, offsets)`` of ``strings`` (UTF-8, lone surrogates kept; each followed by a NUL separator)."""
    if not strings:
        return np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64)
    flat = np.frombuffer(("\x00".join(strings) + "\x00").encode("utf-8", "surrogatepass"), dtype=np.uint8)
    offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    offsets[1:] = np.flatnonzero(flat == 0) + 1
    if len(offsets) != len(strings) + 1:
        raise ValueError("a string holds a NUL, the separator")
    return flat, offsets


@numba.njit(cache=True, nogil=True)
def _prefix_keys(flat, offsets):  # pragma: no cover - compiled
    count = offsets.shape[0] - 1
    keys = np.empty(count, dtype=np.uint64)
    for i in range(count):
        start = offsets[i]
        length = offsets[i + 1] - 1 - start
        key = np.uint64(0)
        for j in range(_KEY_BYTES):
            key = key << np.uint64(9)
            if j < length:
                key = key | np.uint64(flat[start + j] + 1)
        keys[i] = key
    return keys


@numba.njit(cache=True, nogil=True, inline="always")
def _compare(flat, offsets, a, b, skip):  # pragma: no cover - compiled
    """-1, 0 or 1: string ``a`` against string ``b`` from byte ``skip`` on (bytes, shorter first)."""
    end_a = offsets[a + 1] - 1
    end_b = offsets[b + 1] - 1
    pos_a = min(offsets[a] + skip, end_a)
    pos_b = min(offsets[b] + skip, end_b)
    while pos_a < end_a and pos_b < end_b:
        x = flat[pos_a]
        y = flat[pos_b]
        if x != y:
            return -1 if x < y else 1
        pos_a += 1
        pos_b += 1
    if pos_a == end_a and pos_b == end_b:
        return 0
    return -1 if pos_a == end_a else 1


@numba.njit(cache=True, nogil=True)
def _sort_runs(flat, offsets, order, keys):  # pragma: no cover - compiled
    """Stable merge sort (insertion sort when short) of each run of equal ``keys[order]`` by the bytes after the key."""
    count = order.shape[0]
    buffer = np.empty(count, dtype=order.dtype)
    low = 0
    while low < count:
        high = low + 1
        while high < count and keys[order[high]] == keys[order[low]]:
            high += 1
        if high - low > 1:
            if high - low <= 16:
                for i in range(low + 1, high):
                    item = order[i]
                    j = i - 1
                    while j >= low and _compare(flat, offsets, order[j], item, _KEY_BYTES) > 0:
                        order[j + 1] = order[j]
                        j -= 1
                    order[j + 1] = item
            else:
                width = 1
                while width < high - low:
                    for left in range(low, high, 2 * width):
                        middle = min(left + width, high)
                        right = min(left + 2 * width, high)
                        i, j, k = left, middle, left
                        while i < middle and j < right:
                            if _compare(flat, offsets, order[i], order[j], _KEY_BYTES) <= 0:  # stable: left first
                                buffer[k] = order[i]
                                i += 1
                            else:
                                buffer[k] = order[j]
                                j += 1
                            k += 1
                        while i < middle:
                            buffer[k] = order[i]
                            i += 1
                            k += 1
                        while j < right:
                            buffer[k] = order[j]
                            j += 1
                            k += 1
                    for k in range(low, high):
                        order[k] = buffer[k]
                    width *= 2
        low = high


def sort_strings(flat: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The indices of the strings in code-point order, equal strings in index order (a stable sort)."""
    keys = _prefix_keys(flat, offsets)
    order = np.argsort(keys, kind="stable").astype(np.int64)
    _sort_runs(flat, offsets, order, keys)
    return order


@numba.njit(cache=True, nogil=True)
def distinct(flat, offsets, order):  # pragma: no cover - compiled
    """``first[k]``: the string at sorted position ``k`` differs from the one before (the first of its run)."""
    first = np.ones(order.shape[0], dtype=np.bool_)
    for k in range(1, order.shape[0]):
        first[k] = _compare(flat, offsets, order[k - 1], order[k], 0) != 0
    return first


@numba.njit(cache=True, nogil=True, inline="always")
def _decode(flat, position):  # pragma: no cover - compiled
    """The code point at byte ``position`` of UTF-8 ``flat`` and the position after it."""
    lead = np.int64(flat[position])
    if lead < 0x80:
        return lead, position + 1
    if lead < 0xE0:
        return ((lead & 0x1F) << 6) | (np.int64(flat[position + 1]) & 0x3F), position + 2
    if lead < 0xF0:
        return (
            ((lead & 0x0F) << 12) | ((np.int64(flat[position + 1]) & 0x3F) << 6) | (np.int64(flat[position + 2]) & 0x3F)
        ), position + 3
    return (
        ((lead & 0x07) << 18)
        | ((np.int64(flat[position + 1]) & 0x3F) << 12)
        | ((np.int64(flat[position + 2]) & 0x3F) << 6)
        | (np.int64(flat[position + 3]) & 0x3F)
    ), position + 4


@numba.njit(cache=True, nogil=True)
def trie_levels(flat, offsets, strings):  # pragma: no cover - compiled
    """For the distinct strings ``strings`` (indices, in sorted order): each one's common prefix with the
    one before (``lcp``, in code points) and the number of trie nodes at each depth (``per_depth[d]``,
    root at depth 0)."""
    count = strings.shape[0]
    lcp = np.zeros(count, dtype=np.int32)
    longest = 0
    for r in range(count):
        longest = max(longest, offsets[strings[r] + 1] - 1 - offsets[strings[r]])
    per_depth = np.zeros(longest + 2, dtype=np.int64)
    per_depth[0] = 1
    for r in range(count):
        position = offsets[strings[r]]
        end = offsets[strings[r] + 1] - 1
        common = 0
        if r > 0:
            other = offsets[strings[r - 1]]
            other_end = offsets[strings[r - 1] + 1] - 1
            while position < end and other < other_end:
                code, following = _decode(flat, position)
                other_code, other_following = _decode(flat, other)
                if code != other_code:
                    break
                common += 1
                position = following
                other = other_following
        lcp[r] = common
        depth = common
        while position < end:
            _, position = _decode(flat, position)
            depth += 1
            per_depth[depth] += 1
    return lcp, per_depth


@numba.njit(cache=True, nogil=True)
def fill_trie(flat, offsets, strings, lcp, per_depth, rows, children, node_of):  # pragma: no cover - compiled
    """Write the trie of the sorted distinct ``strings``: ``children[k]``, the code of node ``k + 1``;
    ``rows[n, 0]``, where node ``n``'s children begin in ``children`` (``rows[n + 1, 0]``: where they end;
    ``rows`` has a row more than the trie has nodes); ``node_of[r]``, the node where string ``r`` ends
    (``lcp`` and ``per_depth`` from :func:`trie_levels`)."""
    depths = per_depth.shape[0]
    cursor = np.zeros(depths, dtype=np.int64)  # the next id at each depth
    total = 0
    for depth in range(depths):
        cursor[depth] = total
        total += per_depth[depth]
    path = np.zeros(depths, dtype=np.int64)  # path[d]: the node at depth d along the current string
    for r in range(strings.shape[0]):
        position = offsets[strings[r]]
        end = offsets[strings[r] + 1] - 1
        depth = 0
        while depth < lcp[r]:
            _, position = _decode(flat, position)
            depth += 1
        while position < end:
            code, position = _decode(flat, position)
            depth += 1
            node = cursor[depth]
            cursor[depth] += 1
            children[node - 1] = code
            rows[path[depth - 1], 0] += 1  # fanout, made the start of the children below
            path[depth] = node
        node_of[r] = path[depth]
    running = 0
    for node in range(rows.shape[0]):
        fanout = rows[node, 0]
        rows[node, 0] = running
        running += fanout


@numba.njit(cache=True, nogil=True)
def gather_strings(flat, offsets, strings):  # pragma: no cover - compiled
    """``(blob, blob_offsets)``: the bytes of ``strings`` (indices), in that order, without separators."""
    total = 0
    for k in range(strings.shape[0]):
        total += offsets[strings[k] + 1] - 1 - offsets[strings[k]]
    blob = np.empty(total, dtype=np.uint8)
    blob_offsets = np.zeros(strings.shape[0] + 1, dtype=np.int64)
    cursor = 0
    for k in range(strings.shape[0]):
        for position in range(offsets[strings[k]], offsets[strings[k] + 1] - 1):
            blob[cursor] = flat[position]
            cursor += 1
        blob_offsets[k + 1] = cursor
    return blob, blob_offsets
