"""Numba kernels behind :mod:`kgplm.text.linking`: a character trie walked from every position.

The trie is stored in CSR form, built by :func:`build_trie` with its nodes numbered breadth-first;
the kernels read it packed (one 8-byte :data:`NODE_ROW` record per node, and one more closing the
table): node ``n``'s children are ``children[nodes[n].child_start:nodes[n + 1].child_start]``, their
code points sorted ascending and found by binary search (the child at ``children[k]`` is node
``k + 1``). ``nodes[n].terminal`` says what ends at ``n``:

* ``e >= 0``: dictionary entry ``e`` (any case), and no capitals-only entry;
* ``-1``: nothing;
* ``-3 - k`` with ``k < len(word_weights)``: no entry, but the node's string is a word of the
  segmentation dictionary with log-probability ``word_weights[k]`` (the words' distinct
  frequencies, so the table is a few KB and stays in cache);
* ``-3 - len(word_weights) - x``: the node has an entry to use when the matched text is all capital
  letters (short abbreviations match only in capitals), ``capitals[x, 1]``, and ``capitals[x, 0]`` is
  its any-case value in the three forms above.

A node that is an entry counts as a name, whatever its word weight. The root's children are also
in ``root_children``, indexed by code point.

:func:`link_documents` takes many documents' code points at once (one call per batch: a call per
short document cost more than its matching) and normalises each document into codes with per-code
flags: ``alnum`` (a Latin letter or digit), ``char_start`` / ``char_end`` (the code begins / ends one
source character: a character such as ``Ⅱ`` normalises to two codes, and a match must not begin or
end inside it) and ``capital`` (its source character is a capital letter); each document is then
matched alone.

Measured on the dialogue corpus (``benchmarks/linking.py``): a walk step is a few dependent
memory reads; what cost most was around the kernel (normalising with numpy and calling it per
document), not in it. Replacing the binary search below the root's children by a hash table of
two-character prefixes made the kernel slower (the searched rows of frequent first characters
stay in cache; the hash probes do not).
"""

from __future__ import annotations

import numba
import numpy as np

from kgplm.text import _linking_trie as _trie

__all__ = ["link_documents", "build_trie", "root_table", "node_terminals", "NODE_ROW", "LONGEST", "NESTED", "BEST_PATH"]

LONGEST, NESTED, BEST_PATH = 0, 1, 2


@numba.njit(cache=True, nogil=True, inline="always")
def _root_child(code, root_children):  # pragma: no cover - compiled
    """The root has thousands of children (every first character): a direct table."""
    return root_children[code] if code < root_children.shape[0] else -1


@numba.njit(cache=True, nogil=True, inline="always")
def _child(node, code, nodes, children):  # pragma: no cover - compiled
    """The child of a non-root ``node`` by ``code`` (binary search), or -1. The walks look the first
    character up with :func:`_root_child` before their loop: a root test inside this function cost
    ~3x the whole no-match step (measured on a 260k-character text)."""
    low = nodes[node].child_start
    high = nodes[node + 1].child_start - 1  # the next row starts where this one's children end
    while low <= high:
        middle = (low + high) >> 1
        value = children[middle]
        if value == code:
            return middle + 1
        if value < code:
            low = middle + 1
        else:
            high = middle - 1
    return -1


@numba.njit(cache=True, nogil=True, inline="always")
def _emit(starts, ends, entries, count, start, end, entry):  # pragma: no cover - compiled
    """Append a match; the new count, or -1 when the arrays are full."""
    if count == starts.shape[0]:
        return -1
    starts[count] = start
    ends[count] = end
    entries[count] = entry
    return count + 1


@numba.njit(cache=True, nogil=True, inline="always")
def _entry(node, cursor, alnum, char_end, all_capital, nodes, capitals, word_weights):  # pragma: no cover - compiled
    """The entry the text matched up to ``cursor`` (trie ``node``) ends; -1 when none, ``-3 - w`` when none but
    the node is word ``w`` of the segmentation dictionary, -2 when no match may end there (inside a
    character's codes, or a Latin word goes on)."""
    if not char_end[cursor - 1] or (alnum[cursor - 1] and cursor < alnum.shape[0] and alnum[cursor]):
        return -2
    terminal = nodes[node].terminal
    if terminal >= -1 or -3 - terminal < word_weights.shape[0]:  # an entry, nothing, or a word
        return terminal
    row = -3 - word_weights.shape[0] - terminal  # a capitals-only entry ends here too
    return capitals[row, 1] if all_capital else capitals[row, 0]


@numba.njit(cache=True, nogil=True, inline="always")
def _longest_at(
    position, limit, codes, alnum, char_end, capital, root_children, nodes, children, capitals, word_weights
):  # pragma: no cover - compiled
    """(end, entry) of the longest dictionary entry at ``position`` ending by ``limit``; (-1, -1) when none."""
    cursor = position
    all_capital = True
    best_end = -1
    best_entry = -1
    node = _root_child(codes[cursor], root_children) if cursor < limit else -1
    while node >= 0:
        all_capital = all_capital and capital[cursor]
        cursor += 1
        entry = _entry(node, cursor, alnum, char_end, all_capital, nodes, capitals, word_weights)
        if entry >= 0:
            best_end = cursor
            best_entry = entry
        if cursor >= limit:
            break
        node = _child(node, codes[cursor], nodes, children)
    return best_end, best_entry


@numba.njit(cache=True, nogil=True)
def _match_document(
    codes,
    alnum,
    char_start,
    char_end,
    capital,
    root_children,
    nodes,
    children,
    capitals,
    word_weights,
    name_weight,
    unknown_weight,
    mode,
    best,
    choice_end,
    choice_entry,
    starts,
    ends,
    entries,
    count,
):  # pragma: no cover - compiled
    """Append the matches in one document's ``codes`` to ``starts/ends/entries`` from ``count`` on; return the
    new count, or -1 when the arrays are full. ``best``, ``choice_end``, ``choice_entry``: scratch of at
    least ``len(codes) + 1`` elements.

    A match (and a word) must begin at a character start that does not continue a Latin word
    (``alnum`` before and at its start) and end at a character end that a Latin word does not
    continue. Modes:

    * ``LONGEST``: leftmost-longest, non-overlapping;
    * ``NESTED``: every match, by start then longest first;
    * ``BEST_PATH``: the matches on the best segmentation of the text, jieba's route: the path of
      words maximising Σ log-probability, where a dictionary entry counts ``name_weight``, any other
      word its ``word_weights`` value and a character that starts no word ``unknown_weight``; ties go to
      the longer word. A name that would cut a word of a better path (恢复视力 → 复视) is not on it;
      names inside a path word that is no name (肿瘤 in 肿瘤医院, 手术 in 做手术) are matched
      leftmost-longest within that word, so they respect its boundaries. The route's sums start at
      0 at the document's end, so a document's mentions do not depend on the documents linked with it.
    """
    size = codes.shape[0]
    best[size] = 0.0
    skip_to = 0
    for index in range(size):
        position = size - 1 - index if mode == BEST_PATH else index
        if not char_start[position]:
            continue
        if mode == LONGEST and position < skip_to:
            continue
        if mode == BEST_PATH:  # fall back to one character (what jieba does with a character outside its words)
            following = position + 1
            while following < size and not char_start[following]:
                following += 1
            best[position] = unknown_weight + best[following]
            choice_end[position] = following
            choice_entry[position] = -1
        if alnum[position] and position > 0 and alnum[position - 1]:
            continue
        if mode == LONGEST:
            end, entry = _longest_at(
                position, size, codes, alnum, char_end, capital, root_children, nodes, children, capitals, word_weights
            )
            if entry >= 0:
                count = _emit(starts, ends, entries, count, position, end, entry)
                if count < 0:
                    return -1
                skip_to = end
            continue
        cursor = position
        all_capital = True
        group_start = count
        node = _root_child(codes[cursor], root_children)
        while node >= 0:
            all_capital = all_capital and capital[cursor]
            cursor += 1
            entry = _entry(node, cursor, alnum, char_end, all_capital, nodes, capitals, word_weights)
            if entry != -2:  # -2: no match may end here
                if mode == BEST_PATH:
                    if entry >= 0:
                        weight = name_weight
                    elif entry <= -3:
                        weight = word_weights[-3 - entry]
                    else:
                        weight = -np.inf
                    if weight > -np.inf and weight + best[cursor] >= best[position]:
                        best[position] = weight + best[cursor]
                        choice_end[position] = cursor
                        choice_entry[position] = max(entry, -1)
                elif entry >= 0:  # NESTED
                    count = _emit(starts, ends, entries, count, position, cursor, entry)
                    if count < 0:
                        return -1
            if cursor >= size:
                break
            node = _child(node, codes[cursor], nodes, children)
        if mode == NESTED:
            # longest first within one start
            low = group_start
            high = count - 1
            while low < high:
                ends[low], ends[high] = ends[high], ends[low]
                entries[low], entries[high] = entries[high], entries[low]
                low += 1
                high -= 1
    if mode == BEST_PATH:
        position = 0
        while position < size:
            if not char_start[position]:
                position += 1
                continue
            word_end = choice_end[position]
            if choice_entry[position] >= 0:
                count = _emit(starts, ends, entries, count, position, word_end, choice_entry[position])
                if count < 0:
                    return -1
                position = word_end
                continue
            inner = position  # a word that is no name: the names inside it, leftmost-longest
            while inner < word_end:
                if char_start[inner] and not (alnum[inner] and inner > 0 and alnum[inner - 1]):
                    end, entry = _longest_at(
                        inner,
                        word_end,
                        codes,
                        alnum,
                        char_end,
                        capital,
                        root_children,
                        nodes,
                        children,
                        capitals,
                        word_weights,
                    )
                    if entry >= 0:
                        count = _emit(starts, ends, entries, count, inner, end, entry)
                        if count < 0:
                            return -1
                        inner = end
                        continue
                inner += 1
            position = word_end
    return count


@numba.njit(cache=True, nogil=True)
def _normalize_document(
    raw,
    single,
    length,
    expansion_start,
    expansions,
    capital_of,
    alnum_of,
    codes,
    source,
    char_start,
    char_end,
    capital,
    alnum,
):  # pragma: no cover - compiled
    """Write the normalised codes of the characters ``raw`` and their flags (module docstring) into the
    scratch arrays; return the number of codes. ``source[k]``: the character code ``k`` comes from."""
    size = 0
    for character in range(raw.shape[0]):
        point = raw[character]
        pieces = length[point]
        for within in range(pieces):
            code = single[point] if pieces == 1 else expansions[expansion_start[point] + within]
            codes[size] = code
            source[size] = character
            char_start[size] = within == 0
            char_end[size] = within == pieces - 1
            capital[size] = capital_of[point]
            alnum[size] = alnum_of[code]
            size += 1
    return size


@numba.njit(cache=True, nogil=True)
def link_documents(
    raw,
    document_starts,
    single,
    length,
    expansion_start,
    expansions,
    capital_of,
    alnum_of,
    root_children,
    nodes,
    children,
    capitals,
    word_weights,
    name_weight,
    unknown_weight,
    mode,
    matches,
    document_counts,
):  # pragma: no cover - compiled
    """Match every document of ``raw`` (code points, document ``d`` at ``document_starts[d]:document_starts[d + 1]``)
    in one call: normalise it (per-character tables of :mod:`kgplm.text.linking`), match it alone
    (:func:`_match_document`) and write its matches as character offsets within it; ``document_counts[d]``
    gets its number of matches. ``matches``: (3, capacity) rows of match starts, ends and entries. Returns the
    total, or -1 when ``matches`` is full."""
    starts, ends, entries = matches[0], matches[1], matches[2]
    documents = document_starts.shape[0] - 1
    longest = 0
    for document in range(documents):
        codes_of = 0
        for character in range(document_starts[document], document_starts[document + 1]):
            codes_of += length[raw[character]]
        longest = max(longest, codes_of)
    codes = np.empty(longest, dtype=np.int32)
    source = np.empty(longest, dtype=np.int64)
    char_start = np.empty(longest, dtype=np.bool_)
    char_end = np.empty(longest, dtype=np.bool_)
    capital = np.empty(longest, dtype=np.bool_)
    alnum = np.empty(longest, dtype=np.bool_)
    best = np.empty(longest + 1)
    choice_end = np.empty(longest + 1, dtype=np.int64)
    choice_entry = np.empty(longest + 1, dtype=np.int64)
    count = 0
    for document in range(documents):
        size = _normalize_document(
            raw[document_starts[document] : document_starts[document + 1]],
            single,
            length,
            expansion_start,
            expansions,
            capital_of,
            alnum_of,
            codes,
            source,
            char_start,
            char_end,
            capital,
            alnum,
        )
        first = count
        count = _match_document(
            codes[:size],
            alnum[:size],
            char_start[:size],
            char_end[:size],
            capital[:size],
            root_children,
            nodes,
            children,
            capitals,
            word_weights,
            name_weight,
            unknown_weight,
            mode,
            best,
            choice_end,
            choice_entry,
            starts,
            ends,
            entries,
            count,
        )
        if count < 0:
            return -1
        for match in range(first, count):  # codes → characters of the document
            starts[match] = source[starts[match]]
            ends[match] = source[ends[match] - 1] + 1
        document_counts[document] = count - first
    return count


def build_trie(patterns: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The trie of ``patterns``: ``child_ptr``, ``child_codes`` (CSR: node n's children have the codes
    ``child_codes[child_ptr[n]:child_ptr[n + 1]]``, ascending, and the ids ``child_ptr[n] + 1 ...``) and
    ``node_of``, the node where pattern i ends (equal patterns end at the same node).

    The nodes are numbered breadth-first: a node's children get consecutive ids (the id is the
    position in ``child_codes`` + 1, so no array of child ids is needed) and the short prefixes,
    which every text position walks through, lie together in memory; numbered depth-first (the
    insertion order) they were spread over the whole table and every step missed the cache. Built
    from flat UTF-8 arrays by :mod:`kgplm.text._linking_trie` (what the linker's dictionary uses
    directly, without this list of strings).
    """
    flat, offsets = _trie.encode_strings(patterns)
    order = _trie.sort_strings(flat, offsets)
    first = _trie.distinct(flat, offsets, order)
    strings = order[first]
    lcp, per_depth = _trie.trie_levels(flat, offsets, strings)
    rows = np.zeros((int(per_depth.sum()) + 1, 2), dtype=np.int64)
    children = np.empty(len(rows) - 2, dtype=np.int32)
    node_of_string = np.empty(len(strings), dtype=np.int64)
    _trie.fill_trie(flat, offsets, strings, lcp, per_depth, rows, children, node_of_string)
    node_of = np.empty(len(patterns), dtype=np.int64)
    node_of[order] = node_of_string[np.cumsum(first) - 1]
    child_ptr = rows[:, 0]
    return child_ptr, children, node_of


#: one row of the node table: what every trie step reads. ``nodes[n + 1].child_start`` ends node ``n``'s children (a
#: last row closes the table); ``terminal`` (module docstring) what ends at the node. 8 bytes a node instead of 24
#: (53M nodes at 1M UMLS concepts): the word weights are a table of the words' distinct
#: frequencies and the rare capitals-only entries a table of their own, so a step reads one row, as before
NODE_ROW = np.dtype([("child_start", np.int32), ("terminal", np.int32)], align=True)


def node_terminals(
    nodes: np.ndarray, capitals: np.ndarray, word_weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(entry, capitals_entry, word)`` of every node, each -1 where none: what ``terminal`` encodes, unpacked
    (for tests and inspection; the kernels read ``terminal`` directly)."""
    terminal = np.asarray(nodes["terminal"], dtype=np.int64)
    classes = len(word_weights)
    row = -3 - classes - terminal
    has_capital = row >= 0
    any_case = terminal.copy()
    any_case[has_capital] = capitals[row[has_capital], 0]
    capital = np.full(len(terminal), -1, dtype=np.int64)
    capital[has_capital] = capitals[row[has_capital], 1]
    word = np.where(any_case <= -3, -3 - any_case, -1)
    return np.maximum(any_case, -1), capital, word


def root_table(nodes: np.ndarray, children: np.ndarray) -> np.ndarray:
    """The root's children by code point (−1: none), up to the largest first character."""
    first, last = int(nodes[0]["child_start"]), int(nodes[1]["child_start"])
    codes = children[first:last]
    table = np.full(int(codes.max()) + 1 if len(codes) else 0, -1, dtype=np.int32)
    table[codes] = np.arange(first, last, dtype=np.int32) + 1
    return table
