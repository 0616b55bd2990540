"""Mention detection and entity linking: every KG name and alias found in text at exact offsets.

``EntityLinker(store).link(text)`` returns ``Mention(start, end, entity_id, surface)`` with
character offsets into ``text`` (end exclusive, ``text[start:end] == surface``).

How matching works:

* Dictionary: every label of every entity (display names, ``skos:altLabel``, synonyms, English
  names; what ``store.labels`` lists), at least ``min_length`` characters long.
* Normalisation, length-preserving so that offsets stay exact: full-width ASCII → half-width
  (``ＭＲＩ`` = ``MRI``), ideographic space → space, and case folding of every character whose
  lower case is one character. Names and text are normalised the same way; ``surface`` is the
  original text.
* Automaton: a character trie of the normalised names, walked from each text position by a
  numba kernel. For leftmost-longest matching this gives what an Aho–Corasick automaton gives;
  ``benchmarks/linking.py`` measures it against ``pyahocorasick`` (slower here: its automaton
  over 135k Chinese names costs about 2 µs per character) and a pure-Python trie.
* Word boundaries for Latin text: a match whose first (last) character is a Latin letter or
  digit must not be preceded (followed) by one, so ``MRI`` is not found inside ``MRIs`` and
  ``B1`` not inside ``B12``. "Latin letter or digit" is judged on the NFKC form, as the tokenizer
  sees it (``Ⅱ`` is ``II``, ``ｂ`` is ``b``). Chinese has no such boundaries and matches anywhere.
* Selection: by default leftmost-longest and non-overlapping (scan left to right, take the
  longest name starting at the leftmost free position). ``nested=True`` returns every match,
  including names inside longer names (EMBERT, nested NER).
* Disambiguation: a surface that names several entities links to the one whose display name it
  is, then to the best connected one (most triples), then the lowest id; ``Mention.candidates``
  keeps all of them.

The SMedBERT reference code detects mentions with a character trie over word pieces joined back
into strings, which loses every name containing Latin letters or digits; here names and text
are matched as characters and mapped to tokens only afterwards (:mod:`kgplm.text.alignment`).
"""

from __future__ import annotations

import logging
import sys
import unicodedata
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from kgplm.exceptions import ConfigurationError
from kgplm.text import _linking_kernels as _kernels

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["Mention", "EntityLinker", "normalize_for_matching"]

logger = logging.getLogger(__name__)


class Mention(NamedTuple):
    """A linked mention: ``text[start:end] == surface`` names entity ``entity_id``.

    ``candidates`` lists every entity the surface names, best first (``entity_id`` is the first).
    """

    start: int
    end: int
    entity_id: int
    surface: str
    candidates: tuple[int, ...] = ()


_TABLES: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


def _character_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per code point: its matching form, and whether its NFKC form begins / ends with a Latin
    letter or digit (so that ``Ⅱ`` after ``MRI`` counts as part of a Latin word, as the tokenizer sees it)."""
    global _TABLES
    if _TABLES is None:
        size = sys.maxunicode + 1
        table = np.arange(size, dtype=np.int32)
        begins = np.zeros(size, dtype=np.bool_)
        ends = np.zeros(size, dtype=np.bool_)
        for code in range(size):
            if 0xD800 <= code <= 0xDFFF:
                continue
            char = chr(code)
            target = chr(code - 0xFEE0) if 0xFF01 <= code <= 0xFF5E else (" " if code == 0x3000 else char)
            lowered = target.lower()
            table[code] = ord(lowered if len(lowered) == 1 else target)
            if code < 128:
                begins[code] = ends[code] = char.isalnum()
            elif not char.isspace():
                compatible = unicodedata.normalize("NFKC", char)
                if compatible:
                    begins[code] = compatible[0].isascii() and compatible[0].isalnum()
                    ends[code] = compatible[-1].isascii() and compatible[-1].isalnum()
        _TABLES = (table, begins, ends)
    return _TABLES


def normalized_codes(text: str) -> np.ndarray:
    """The normalised code points of ``text`` as int32, one per character."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.int32)
    return _character_tables()[0][codes]


def normalize_for_matching(text: str) -> str:
    """Full-width → half-width and one-character case folding; ``len`` never changes."""
    return normalized_codes(text).tobytes().decode("utf-32-le", "surrogatepass")


class EntityLinker:
    """Find the names and aliases of ``store``'s entities in text (see the module docstring).

    Args:
        store: the knowledge graph whose labels form the dictionary.
        min_length: shortest name matched, in characters (single characters are mostly noise).
        nested: return every match instead of the leftmost-longest non-overlapping ones.
        names: an explicit ``{surface: [entity ids]}`` dictionary instead of the store's labels.
    """

    def __init__(self, store: "KGStore | None" = None, *, min_length: int = 2, nested: bool = False,
                 names: dict[str, Iterable[int]] | None = None) -> None:
        if min_length < 1:
            raise ConfigurationError(f"min_length must be at least 1, got {min_length}")
        if store is None and names is None:
            raise ConfigurationError("EntityLinker needs a store or a names dictionary")
        self.store = store
        self.min_length = min_length
        self.nested = nested
        surfaces = store.name_index() if names is None else {k: list(v) for k, v in names.items()}
        degree = None
        if store is not None:
            out_degree, in_degree = store.degrees()
            degree = out_degree + in_degree
        kept = [surface.strip() for surface in surfaces if "\x00" not in surface]
        kept_entities = [surfaces[surface] for surface in surfaces if "\x00" not in surface]
        # normalise every name in one pass (joined by NUL, which no kept name contains)
        normalized = normalize_for_matching("\x00".join(kept)).split("\x00")
        by_pattern: dict[str, list[int]] = {}
        for pattern, entities in zip(normalized, kept_entities):
            if len(pattern) < min_length:
                continue
            bucket = by_pattern.setdefault(pattern, [])
            for entity in entities:
                if entity not in bucket:
                    bucket.append(entity)
        self.patterns = list(by_pattern)
        display_names = {}
        if store is not None:
            ambiguous = {entity for entities in by_pattern.values() if len(entities) > 1 for entity in entities}
            display_names = {entity: normalize_for_matching(store.entity_name(entity)) for entity in ambiguous}
        self._candidates = [self._rank_candidates(pattern, by_pattern[pattern], degree, display_names)
                            for pattern in self.patterns]
        self._trie = _kernels.build_trie(self.patterns)
        self.num_names = len(self.patterns)
        logger.info("entity linker: %d distinct names, %d trie nodes", self.num_names, len(self._trie[3]))

    @staticmethod
    def _rank_candidates(pattern: str, entities: list[int], degree, display_names: dict[int, str]) -> tuple[int, ...]:
        if len(entities) == 1:
            return (entities[0],)

        def key(entity: int):
            own_name = display_names.get(entity) == pattern
            return (not own_name, -(int(degree[entity]) if degree is not None else 0), entity)

        return tuple(sorted(entities, key=key))

    # -- matching -------------------------------------------------------------------------------
    def find(self, text: str, *, nested: bool | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(starts, ends, entries)`` arrays of the matches in ``text`` (entries index ``patterns``)."""
        nested = self.nested if nested is None else nested
        raw = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.int32)
        table, begins, ends_table = _character_tables()
        codes, begins_word, ends_word = table[raw], begins[raw], ends_table[raw]
        capacity = max(16, len(codes) // (1 if nested else 2) + 1)
        while True:
            starts = np.empty(capacity, dtype=np.int64)
            ends = np.empty(capacity, dtype=np.int64)
            entries = np.empty(capacity, dtype=np.int64)
            count = _kernels.find_matches(codes, begins_word, ends_word, *self._trie, nested, starts, ends, entries)
            if count >= 0:
                return starts[:count], ends[:count], entries[:count]
            capacity *= 4

    def best_entities(self, entries: np.ndarray) -> np.ndarray:
        """The top-ranked entity of each match entry of :meth:`find` (what :meth:`link` reports)."""
        return np.array([self._candidates[entry][0] for entry in np.asarray(entries).tolist()], dtype=np.int64)

    def link(self, text: str, *, nested: bool | None = None) -> list[Mention]:
        """Mentions in ``text``, sorted by start (then longest first)."""
        if not isinstance(text, str):
            raise ConfigurationError(f"link() takes a str, got {type(text).__name__}")
        starts, ends, entries = self.find(text, nested=nested)
        candidates = self._candidates
        return [Mention(start, end, candidates[entry][0], text[start:end], candidates[entry])
                for start, end, entry in zip(starts.tolist(), ends.tolist(), entries.tolist())]

    def link_many(self, texts: Iterable[str], *, nested: bool | None = None) -> list[list[Mention]]:
        """:meth:`link` for many texts in one kernel call (texts joined by a NUL that no name contains)."""
        texts = list(texts)
        if not texts:
            return []
        joined = "\x00".join(texts)
        starts, ends, entries = self.find(joined, nested=nested)
        offsets = np.cumsum([0] + [len(text) + 1 for text in texts])
        owners = np.searchsorted(offsets, starts, side="right") - 1
        local_starts = (starts - offsets[owners]).tolist()
        local_ends = (ends - offsets[owners]).tolist()
        results: list[list[Mention]] = [[] for _ in texts]
        candidates = self._candidates
        for owner, start, end, local_start, local_end, entry in zip(
                owners.tolist(), starts.tolist(), ends.tolist(), local_starts, local_ends, entries.tolist()):
            ranked = candidates[entry]
            results[owner].append(Mention(local_start, local_end, ranked[0], joined[start:end], ranked))
        return results

    def count(self, texts: Iterable[str], num_entities: int | None = None) -> np.ndarray:
        """Mentions per entity over ``texts`` (the corpus frequencies PEPR can start from)."""
        if num_entities is None:
            if self.store is None:
                raise ConfigurationError("count() needs num_entities when the linker has no store")
            num_entities = self.store.num_entities
        counts = np.zeros(num_entities, dtype=np.int64)
        for text in texts:
            _, _, entries = self.find(text, nested=False)
            np.add.at(counts, self.best_entities(entries), 1)
        return counts
