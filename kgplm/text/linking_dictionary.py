"""The entity linker's dictionary (patterns, ranked candidates) and trie, built from arrays.

What :class:`~kgplm.text.linking.EntityLinker` links is specified in :mod:`kgplm.text.linking`; this
module builds it without one Python object per name. Built with a dict and a list per pattern, a
list of every surface and normalised pattern and a dict from string to trie node, the linker over
a 1M-concept UMLS-shaped store (3.8M strings, 52.8M trie nodes) peaked at 6.24 GB. Here:

* the names are read from the store's compact name index a chunk at a time (normalised and
  filtered chunk by chunk, so only one chunk's strings exist at once) into one UTF-8 byte array of
  patterns with an integer array per fact (the name's key in the index, whether it is an
  abbreviation matched only in capitals);
* the jieba words of the best-path segmentation join the same arrays, and one stable sort by
  code point (:func:`kgplm.text._linking_trie.sort_strings`) brings equal strings together:
  each run of equal strings is one trie string, and its names one or two dictionary entries
  (``any case`` and ``capitals``);
* entries are numbered as the dicts numbered them (any-case patterns in order of their first
  name, then capitals-only ones in order of their first name), each entry's candidates are the
  distinct entities of its names (a capitals entry also gets those of the any-case names of the
  same letters), ranked by the linker's rule (own display name, then degree, then id) with one
  ``np.lexsort`` over (entry, entity) pairs;
* the trie is built level by level into its final arrays (:mod:`kgplm.text._linking_trie`): 8
  bytes a node plus 2 for its code (4 when a name has a character beyond the Basic Multilingual
  Plane), and no node-sized intermediate.

At 1M concepts the process (store loaded, its name index, this build) now peaks at 1.93 GB.

``tests/text/test_linking_dictionary.py`` checks every array against a plain dict-and-list
reference build on random name sets.
"""

from __future__ import annotations

import logging
import math
import re
import unicodedata
from array import array
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

import numba
import numpy as np

from kgplm._memory import release_free_heap
from kgplm.kg.strings import StringTable
from kgplm.text import _linking_trie as _trie
from kgplm.text import linking_filters as _filters
from kgplm.text._linking_kernels import NODE_ROW, root_table
from kgplm.text.linking_persistence import CandidateTable

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["LinkerDictionary", "build_dictionary", "NAMES_PER_CHUNK"]

logger = logging.getLogger(__name__)

_ABBREVIATION = re.compile(r"[A-Z]{2,4}")
_SPACE = re.compile(r"\s")
#: names read, normalised and filtered per pass (only one chunk's Python strings exist at a time)
NAMES_PER_CHUNK = 1 << 16
ANY_CASE, CAPITALS, WORD = 0, 1, 2  # the kinds of strings sorted together


class LinkerDictionary(NamedTuple):
    patterns: StringTable  # entry → its normalised pattern
    candidates: CandidateTable  # entry → its entities, best first
    automaton: tuple[np.ndarray, ...]  # root_children, nodes, children, capitals, word_weights
    num_names: int  # distinct patterns
    name_weight: float
    unknown_weight: float


class _Strings:
    """Growing UTF-8 strings with one integer per string for what it is (``kind``) and refers to (``value``)."""

    def __init__(self) -> None:
        self.pieces: list[np.ndarray] = []
        self.lengths: list[np.ndarray] = []
        self.kinds = array("b")
        self.values = array("q")

    def add(self, strings: list[str], kinds: Iterable[int], values: Iterable[int]) -> None:
        if not strings:
            return
        flat, offsets = _trie.encode_strings(strings)
        self.pieces.append(flat)
        self.lengths.append(np.diff(offsets))
        self.kinds.extend(kinds)
        self.values.extend(values)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        flat = np.concatenate(self.pieces) if self.pieces else np.zeros(0, dtype=np.uint8)
        self.pieces = []
        offsets = np.zeros(len(self.kinds) + 1, dtype=np.int64)
        if self.lengths:
            np.cumsum(np.concatenate(self.lengths), out=offsets[1:])
        return (
            flat,
            offsets,
            np.frombuffer(self.kinds, dtype=np.int8).copy(),
            np.frombuffer(self.values, dtype=np.int64).copy(),
        )


def _name_source(store: "KGStore | None", names: dict[str, Iterable[int]] | None):
    """``(texts(first, last), count, owner_indptr, owners)``: the surfaces before stripping and each one's entities."""
    if names is not None:
        surfaces = list(names)
        rows = [list(names[surface]) for surface in surfaces]
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, rows), dtype=np.int64, count=len(rows)), out=indptr[1:])
        owners = np.fromiter((entity for row in rows for entity in row), dtype=np.int64, count=int(indptr[-1]))
        return (lambda first, last: surfaces[first:last]), len(surfaces), indptr, owners
    lookup = store.name_lookup()
    release_free_heap()  # what building the index freed: the trie arrays allocated later never reuse it
    indptr, owners = lookup.owner_csr()
    return (lambda first, last: [lookup.key(key) for key in range(first, last)]), len(lookup), indptr, owners


def _read_names(
    store,
    names,
    normalize: Callable[[list[str]], list[str]],
    *,
    min_length: int,
    stop: set[str],
    exclude_numeric: bool,
    case_sensitive_abbreviations: bool,
    allowed: np.ndarray | None,
    strings: _Strings,
):
    """Add every kept name's pattern to ``strings`` (kind ANY_CASE or CAPITALS, value: its key); return the
    owner CSR and how many surfaces the segmenter adds to jieba's dictionary."""
    texts, count, indptr, owners = _name_source(store, names)
    indptr = np.asarray(indptr, dtype=np.int64)
    if allowed is not None:  # keys with an allowed entity (the others are no names)
        allowed_owners = np.concatenate([[0], np.cumsum(allowed[np.asarray(owners)], dtype=np.int64)])
        has_allowed = allowed_owners[indptr[1:]] > allowed_owners[indptr[:-1]]
    else:
        has_allowed = np.diff(indptr) > 0  # a name without entities links nothing
    segmenter_names = 0
    for first in range(0, count, NAMES_PER_CHUNK):
        keys, surfaces = [], []
        for key, text in enumerate(texts(first, min(first + NAMES_PER_CHUNK, count)), start=first):
            if "\x00" not in text:  # NUL joins the names normalised together
                keys.append(key)
                surfaces.append(text.strip())
        # what Segmenter's add_word does to jieba's total: every name it adds counts NAME_FREQUENCY
        segmenter_names += sum(len(n) >= 2 and not _SPACE.search(n) for n in surfaces)
        kept, kinds, values = [], [], []
        for key, name, pattern in zip(keys, surfaces, normalize(surfaces)):
            if len(pattern) < min_length or (exclude_numeric and _filters.has_no_letter(pattern)):
                continue
            if not has_allowed[key]:
                continue
            written_in_capitals = _ABBREVIATION.fullmatch(unicodedata.normalize("NFKC", name)) is not None
            if pattern in stop and not written_in_capitals:  # "AS" (ankylosing spondylitis) is no stop word
                continue
            kept.append(pattern)
            kinds.append(CAPITALS if case_sensitive_abbreviations and written_in_capitals else ANY_CASE)
            values.append(key)
        strings.add(kept, kinds, values)
    return indptr, owners, segmenter_names


@numba.njit(cache=True, nogil=True)
def _runs(flat, offsets, order, kinds, values):  # pragma: no cover - compiled
    """Per run of equal strings (in sorted order): its first string, the first any-case and capitals
    names (lowest index, or -1) and the largest word frequency (0: no word); per string, its run."""
    first = _trie.distinct(flat, offsets, order)
    count = 0
    for k in range(order.shape[0]):
        count += first[k]
    representative = np.empty(count, dtype=np.int32)
    first_any = np.full(count, -1, dtype=np.int32)
    first_capital = np.full(count, -1, dtype=np.int32)
    frequency = np.zeros(count, dtype=np.int64)
    run_of = np.empty(order.shape[0], dtype=np.int32)
    run = -1
    for k in range(order.shape[0]):
        item = order[k]
        if first[k]:
            run += 1
            representative[run] = item
        run_of[item] = run
        kind = kinds[item]
        if kind == 0 and first_any[run] < 0:  # stable sort: the first of its kind is the lowest index
            first_any[run] = item
        elif kind == 1 and first_capital[run] < 0:
            first_capital[run] = item
        elif kind == 2:
            frequency[run] = max(frequency[run], values[item])
    return representative, first_any, first_capital, frequency, run_of


@numba.njit(cache=True, nogil=True)
def _entry_pairs(
    kinds, values, run_of, entry_any, entry_capital, indptr, owners, allowed, filtered
):  # pragma: no cover
    """(entry, entity) of every allowed owner of every name; the owners of an any-case name also go to the
    capitals entry of the same letters. Pairs may repeat."""
    total = 0
    for item in range(kinds.shape[0]):
        if kinds[item] == 2:
            continue
        size = indptr[values[item] + 1] - indptr[values[item]]
        total += size * (2 if kinds[item] == 0 and entry_capital[run_of[item]] >= 0 else 1)
    pair_entries = np.empty(total, dtype=np.int64)
    pair_entities = np.empty(total, dtype=np.int64)
    count = 0
    for item in range(kinds.shape[0]):
        kind = kinds[item]
        if kind == 2:
            continue
        run = run_of[item]
        for position in range(indptr[values[item]], indptr[values[item] + 1]):
            entity = owners[position]
            if filtered and not allowed[entity]:
                continue
            if kind == 0:
                pair_entries[count] = entry_any[run]
                pair_entities[count] = entity
                count += 1
                if entry_capital[run] >= 0:
                    pair_entries[count] = entry_capital[run]
                    pair_entities[count] = entity
                    count += 1
            else:
                pair_entries[count] = entry_capital[run]
                pair_entities[count] = entity
                count += 1
    return pair_entries[:count], pair_entities[:count]


@numba.njit(cache=True, nogil=True)
def _same_strings(flat, offsets, items, other_flat, other_offsets, others):  # pragma: no cover - compiled
    """``items[k]``'s string (of ``flat``) equals ``others[k]``'s (of ``other_flat``), for every k."""
    same = np.zeros(items.shape[0], dtype=np.bool_)
    for k in range(items.shape[0]):
        start, end = offsets[items[k]], offsets[items[k] + 1]
        other_start, other_end = other_offsets[others[k]], other_offsets[others[k] + 1]
        if end - start != other_end - other_start:
            continue
        equal = True
        for j in range(end - start):
            if flat[start + j] != other_flat[other_start + j]:
                equal = False
                break
        same[k] = equal
    return same


def _own_names(
    store: "KGStore", entities: np.ndarray, normalize_display: Callable[[str], str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(flat, offsets, usable)`` of the normalised display names of ``entities`` (a chunk at a time);
    ``usable`` is False where a name holds a NUL (the separator; it equals no pattern)."""
    pieces, lengths, usable = [], [], []
    for first in range(0, len(entities), NAMES_PER_CHUNK):
        chunk = [
            normalize_display(store.entity_name(int(entity))) for entity in entities[first : first + NAMES_PER_CHUNK]
        ]
        usable.extend("\x00" not in name for name in chunk)
        flat, offsets = _trie.encode_strings([name.replace("\x00", "") for name in chunk])
        pieces.append(flat)
        lengths.append(np.diff(offsets))
    flat = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint8)
    offsets = np.zeros(len(entities) + 1, dtype=np.int64)
    if lengths:
        np.cumsum(np.concatenate(lengths), out=offsets[1:])
    return flat, offsets, np.asarray(usable, dtype=bool)


def _rank(
    pair_entries: np.ndarray,
    pair_entities: np.ndarray,
    num_entries: int,
    store,
    degree,
    flat,
    offsets,
    entry_string: np.ndarray,
    normalize_display,
) -> CandidateTable:
    """The candidate table: each entry's distinct entities ranked by (not its own display name, −degree, id)."""
    order = np.lexsort((pair_entities, pair_entries))
    pair_entries, pair_entities = pair_entries[order], pair_entities[order]
    keep = np.ones(len(pair_entries), dtype=bool)
    keep[1:] = (pair_entries[1:] != pair_entries[:-1]) | (pair_entities[1:] != pair_entities[:-1])
    pair_entries, pair_entities = pair_entries[keep], pair_entities[keep]
    del order, keep
    indptr = np.zeros(num_entries + 1, dtype=np.int64)
    np.cumsum(np.bincount(pair_entries, minlength=num_entries), out=indptr[1:])
    ambiguous = np.flatnonzero(np.diff(indptr)[pair_entries] > 1)  # pairs of entries with several entities
    if len(ambiguous) and store is not None:
        not_own = np.ones(len(pair_entries), dtype=np.int8)
        entities, which = np.unique(pair_entities[ambiguous], return_inverse=True)
        name_flat, name_offsets, usable = _own_names(store, entities, normalize_display)
        which = which.reshape(-1).astype(np.int64)
        same = _same_strings(flat, offsets, entry_string[pair_entries[ambiguous]], name_flat, name_offsets, which)
        not_own[ambiguous] = ~(same & usable[which])
        minus_degree = -np.asarray(degree, dtype=np.int64)[pair_entities]
        order = np.lexsort((pair_entities, minus_degree, not_own, pair_entries))
        pair_entities = pair_entities[order]
    return CandidateTable(indptr, pair_entities.astype(np.int64))


def build_dictionary(
    store: "KGStore | None",
    names: dict[str, Iterable[int]] | None,
    *,
    normalize: Callable[[list[str]], list[str]],
    normalize_display: Callable[[str], str],
    min_length: int,
    stop: set[str],
    exclude_numeric: bool,
    case_sensitive_abbreviations: bool,
    allowed: np.ndarray | None,
    word_boundaries: str | None,
) -> LinkerDictionary:
    """The linker's patterns, candidates and automaton (module docstring). ``normalize``: names → patterns
    as the linker matches them (hyphens as spaces with ``hyphen_variants``); ``normalize_display``:
    a display name as :func:`~kgplm.text.linking.normalize_for_matching` gives it; ``stop``: the
    normalised stop words; ``allowed``: which entities may be linked (None: all)."""
    from kgplm.text.segmentation import NAME_FREQUENCY, jieba_dictionary

    strings = _Strings()
    indptr, owners, segmenter_names = _read_names(
        store,
        names,
        normalize,
        min_length=min_length,
        stop=stop,
        exclude_numeric=exclude_numeric,
        case_sensitive_abbreviations=case_sensitive_abbreviations,
        allowed=allowed,
        strings=strings,
    )
    total = 1
    if word_boundaries == "jieba":
        frequencies, total = jieba_dictionary()
        words = [word for word, frequency in frequencies.items() if frequency > 0]
        positive = [frequency for frequency in frequencies.values() if frequency > 0]
        normalized_words = normalize(words)
        del words
        strings.add(normalized_words, [WORD] * len(positive), positive)
        del normalized_words, positive
        total += NAME_FREQUENCY * segmenter_names
    flat, offsets, kinds, values = strings.arrays()
    del strings
    order = _trie.sort_strings(flat, offsets)
    representative, first_any, first_capital, frequency, run_of = _runs(flat, offsets, order, kinds, values)
    del order
    # entries as the dicts numbered them: any-case patterns by first name, then capitals-only ones
    any_runs = np.flatnonzero(first_any >= 0)
    any_runs = any_runs[np.argsort(first_any[any_runs], kind="stable")]
    capital_runs = np.flatnonzero(first_capital >= 0)
    capital_runs = capital_runs[np.argsort(first_capital[capital_runs], kind="stable")]
    entry_any = np.full(len(representative), -1, dtype=np.int32)
    entry_any[any_runs] = np.arange(len(any_runs))
    entry_capital = np.full(len(representative), -1, dtype=np.int32)
    entry_capital[capital_runs] = len(any_runs) + np.arange(len(capital_runs))
    entry_runs = np.concatenate([any_runs, capital_runs])
    num_entries = len(entry_runs)
    num_names = int(np.count_nonzero((first_any >= 0) | (first_capital >= 0)))
    del any_runs, capital_runs, first_any, first_capital
    filtered = allowed is not None
    pair_entries, pair_entities = _entry_pairs(
        kinds,
        values,
        run_of,
        entry_any,
        entry_capital,
        indptr,
        np.asarray(owners, dtype=np.int64),
        allowed if filtered else np.zeros(0, dtype=np.bool_),
        filtered,
    )
    del kinds, values, run_of
    degree = None
    if store is not None:
        out_degree, in_degree = store.degrees()
        degree = out_degree + in_degree
    candidates = _rank(
        pair_entries,
        pair_entities,
        num_entries,
        store,
        degree,
        flat,
        offsets,
        representative[entry_runs],
        normalize_display,
    )
    del pair_entries, pair_entities, degree
    blob, blob_offsets = _trie.gather_strings(flat, offsets, representative[entry_runs])
    patterns = StringTable(blob, blob_offsets)
    del entry_runs
    # what each run's node holds (_linking_kernels' NODE_ROW): its any-case entry, else -3 - k for a word of
    # frequency class k, else -1; runs with a capitals-only entry point to their row of `capitals` instead
    classes, word_class = np.unique(frequency[frequency > 0], return_inverse=True)
    word_weights = np.log(classes.astype(float)) - math.log(total)
    run_terminal = entry_any
    is_word = (frequency > 0) & (entry_any < 0)
    run_terminal[is_word] = -3 - word_class.reshape(-1)[is_word[frequency > 0]]
    del frequency, word_class, is_word, entry_any
    capital_runs = np.flatnonzero(entry_capital >= 0)
    capitals = np.stack([run_terminal[capital_runs], entry_capital[capital_runs]], axis=1).astype(np.int32)
    run_terminal[capital_runs] = -3 - len(classes) - np.arange(len(capital_runs), dtype=np.int32)
    del capital_runs, entry_capital
    lcp, per_depth = _trie.trie_levels(flat, offsets, representative)
    num_nodes = int(per_depth.sum())
    if num_nodes >= 2**31:
        raise ValueError(f"a trie of {num_nodes:,} nodes does not fit int32 node ids")
    nodes = np.zeros(num_nodes + 1, dtype=NODE_ROW)  # a last row closes the table
    # a byte from 0xF0 up starts a code point above the Basic Multilingual Plane; without one, every child code
    # fits 16 bits (2 bytes a node instead of 4: 107 MB at 1M UMLS concepts)
    code_type = np.uint16 if not len(flat) or int(flat.max()) < 0xF0 else np.int32
    children = np.empty(num_nodes - 1, dtype=code_type)
    node_of = np.empty(len(representative), dtype=np.int32)
    _trie.fill_trie(
        flat, offsets, representative, lcp, per_depth, nodes.view(np.int32).reshape(num_nodes + 1, 2), children, node_of
    )
    del flat, offsets, lcp, representative
    nodes["terminal"] = -1
    nodes["terminal"][node_of] = run_terminal
    del node_of, run_terminal
    automaton = (root_table(nodes, children), nodes, children, capitals, word_weights)
    return LinkerDictionary(
        patterns, candidates, automaton, num_names, math.log(NAME_FREQUENCY) - math.log(total), -math.log(total)
    )
