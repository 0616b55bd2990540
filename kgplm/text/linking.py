"""Mention detection and entity linking: every KG name and alias found in text at exact offsets.

``EntityLinker(store).link(text)`` returns ``Mention(start, end, entity_id, surface)`` with
character offsets into ``text`` (end exclusive, ``text[start:end] == surface``).

How matching works:

* Dictionary: every label of every entity (display names, ``skos:altLabel``, synonyms, English
  names; what ``store.labels`` lists), at least ``min_length`` characters long.
* Normalisation, per character, as the tokenizer of a kgplm vocabulary sees it: NFKC, then case
  folding of every character whose lower case is one character. Full-width forms are ASCII
  (``ＭＲＩ`` = ``MRI``), ``Ⅱ`` is ``II`` and ``㎎`` is ``mg``. One character may become several
  codes; offsets stay exact because every code remembers its character and a match may neither
  begin nor end inside one character's codes (``I型`` is not found in ``Ⅱ型``). Names and text are
  normalised the same way; ``surface`` is the original text.
* Abbreviations: a name of 2–4 capital Latin letters (``AS``, ``CT``, ``HBV``) matches only text in
  capitals (full-width capitals included), so English ``as`` is not ankylosing spondylitis. Text
  that was lower-cased wholesale (the released cMedQANER texts) then loses such mentions; pass
  ``case_sensitive_abbreviations=False`` for it.
* Automaton: a character trie of the normalised names, walked from each text position by a
  numba kernel. ``benchmarks/linking.py`` measures it against ``pyahocorasick`` and a pure-Python
  trie.
* Word boundaries for Latin text: a match whose first (last) character is a Latin letter or
  digit must not be preceded (followed) by one, so ``MRI`` is not found inside ``MRIs`` and
  ``B1`` not inside ``B12`` (judged on the normalised codes: ``Ⅱ`` after ``MRI`` is a Latin letter).
  Chinese has no such boundaries.
* Selection (``word_boundaries="jieba"``, the default): the mentions are the KG names on the best
  segmentation of the text, the route :class:`kgplm.text.segmentation.Segmenter` takes — jieba's
  dictionary plus every KG name at frequency 20,000, the path maximising the summed
  log-probabilities of its words — computed in the same numba walk. Leftmost-longest matching
  cut words: 恢复视力 linked 复视 (diplopia), 降低头部 低头, 防止痛风 止痛, 和安定 和安; on the best path
  恢复/视力, 降低/头部, 防止/痛风, 和/安定 win. Deviation from jieba: the text is normalised first
  (case-folded, NFKC) and the route runs over the whole text rather than over jieba's blocks of
  Chinese and alphanumerics; no HMM for unknown words (it only joins characters outside every
  word, so names are unaffected). ``word_boundaries=None`` keeps leftmost-longest,
  non-overlapping matching; ``nested=True`` returns every match, including names inside longer
  names (EMBERT, nested NER).
* Disambiguation: a surface that names several entities links to the one whose display name it
  is, then to the best connected one (most triples), then the lowest id; ``Mention.candidates``
  keeps all of them.

The SMedBERT reference code detects mentions with a character trie over word pieces joined back
into strings, which loses every name containing Latin letters or digits; here names and text
are matched as characters and mapped to tokens only afterwards (:mod:`kgplm.text.alignment`).
"""

from __future__ import annotations

import logging
import os
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from kgplm.exceptions import ConfigurationError
from kgplm.kg.strings import StringTable
from kgplm.text import _linking_kernels as _kernels
from kgplm.text import linking_filters as _filters
from kgplm.text.linking_dictionary import build_dictionary
from kgplm.text.linking_persistence import load_linker_arrays, save_linker_arrays

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["Mention", "EntityLinker", "normalize_for_matching", "WORD_BOUNDARIES", "build_linker", "recorded_linker"]

logger = logging.getLogger(__name__)

WORD_BOUNDARIES = ("jieba", None)


class Mention(NamedTuple):
    """A linked mention: ``text[start:end] == surface`` names entity ``entity_id``.

    ``candidates`` lists every entity the surface names, best first (``entity_id`` is the first).
    """

    start: int
    end: int
    entity_id: int
    surface: str
    candidates: tuple[int, ...] = ()


class _Tables(NamedTuple):
    """Per code point: its normalised code (−1 when it expands to several), the expansion's length
    and place in ``expansions``, and whether it is a capital letter; per normalised code: Latin letter or digit;
    the normalised codes again with hyphens as spaces."""

    single: np.ndarray
    length: np.ndarray
    expansion_start: np.ndarray
    expansions: np.ndarray
    capital: np.ndarray
    alnum: np.ndarray
    single_spaced: np.ndarray  # ``single`` with every hyphen a space (``hyphen_variants``)
    expansions_spaced: np.ndarray  # ``expansions`` with every hyphen a space


_TABLES: _Tables | None = None


def _fold(char: str) -> str:
    compatible = unicodedata.normalize("NFKC", char) or char
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in compatible)


def _character_tables() -> _Tables:
    global _TABLES
    if _TABLES is None:
        size = sys.maxunicode + 1
        single = np.arange(size, dtype=np.int32)
        length = np.ones(size, dtype=np.int32)
        expansion_start = np.zeros(size, dtype=np.int64)
        capital = np.zeros(size, dtype=np.bool_)
        expansions: list[int] = []
        for code in range(size):
            if 0xD800 <= code <= 0xDFFF:
                continue
            char = chr(code)
            if code < 128:
                single[code] = ord(char.lower())
                capital[code] = "A" <= char <= "Z"
                continue
            folded = _fold(char)
            compatible = unicodedata.normalize("NFKC", char)
            capital[code] = bool(compatible) and all("A" <= c <= "Z" for c in compatible)
            if len(folded) == 1:
                single[code] = ord(folded)
            else:
                single[code] = -1
                length[code] = len(folded)
                expansion_start[code] = len(expansions)
                expansions.extend(map(ord, folded))
        alnum = np.zeros(size, dtype=np.bool_)
        alnum[[ord(c) for c in "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"]] = True
        hyphens = np.array([ord(c) for c in _filters.HYPHENS], dtype=np.int32)
        single_spaced = np.where(np.isin(single, hyphens), np.int32(32), single)
        expansion_codes = np.asarray(expansions, dtype=np.int32)
        expansions_spaced = np.where(np.isin(expansion_codes, hyphens), np.int32(32), expansion_codes)
        _TABLES = _Tables(
            single, length, expansion_start, expansion_codes, capital, alnum, single_spaced, expansions_spaced
        )
    return _TABLES


class _Normalized(NamedTuple):
    codes: np.ndarray  # (codes,) normalised code points
    source: np.ndarray | None  # (codes,) the character each code comes from; None: one code per character
    char_start: np.ndarray
    char_end: np.ndarray
    capital: np.ndarray
    alnum: np.ndarray


def _normalize(text: str) -> _Normalized:
    """``text`` as codes with their flags (the kernels normalise linked text themselves, from the same tables)."""
    raw = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.int32)
    tables = _character_tables()
    lengths = tables.length[raw]
    single = tables.single
    if (lengths == 1).all():
        codes = single[raw]
        every = np.ones(len(codes), dtype=np.bool_)
        return _Normalized(codes, None, every, every, tables.capital[raw], tables.alnum[codes])
    source = np.repeat(np.arange(len(raw)), lengths)  # (codes,)
    first = np.cumsum(lengths) - lengths  # the first code of each character
    within = np.arange(len(source)) - first[source]
    expanded = tables.expansions[
        np.minimum(tables.expansion_start[raw][source] + within, max(len(tables.expansions) - 1, 0))
    ]
    codes = np.where(lengths[source] == 1, single[raw][source], expanded).astype(np.int32)
    return _Normalized(
        codes, source, within == 0, within == lengths[source] - 1, tables.capital[raw][source], tables.alnum[codes]
    )


_HYPHEN_TO_SPACE = str.maketrans(dict.fromkeys(_filters.HYPHENS, " "))


def normalize_for_matching(text: str) -> str:
    """NFKC and one-character case folding, per character (``Ⅱ`` → ``ii``, ``ＡＢｃ　１`` → ``abc 1``)."""
    return _normalize(text).codes.tobytes().decode("utf-32-le", "surrogatepass")


class EntityLinker:
    """Find the names and aliases of ``store``'s entities in text (see the module docstring).

    Args:
        store: the knowledge graph whose labels form the dictionary.
        min_length: shortest name matched, in characters (single characters are mostly noise).
        nested: return every match instead of the selected non-overlapping ones.
        names: an explicit ``{surface: [entity ids]}`` dictionary instead of the store's labels.
        word_boundaries: ``"jieba"``: the names on the best segmentation path; ``None``:
            leftmost-longest matching.
        case_sensitive_abbreviations: names of 2–4 capital letters match only capitals.
        stop_words, exclude_numeric, hyphen_variants, entity_types, roots: which names and entities
            may be linked (:mod:`kgplm.text.linking_filters`; the defaults suit English ontologies
            and leave Chinese names alone).
    """

    def __init__(
        self,
        store: "KGStore | None" = None,
        *,
        min_length: int = 2,
        nested: bool = False,
        names: dict[str, Iterable[int]] | None = None,
        word_boundaries: str | None = "jieba",
        case_sensitive_abbreviations: bool = True,
        stop_words: str | Iterable[str] | None = "english",
        exclude_numeric: bool = True,
        hyphen_variants: bool = True,
        entity_types: Iterable[str] | None = None,
        roots: Iterable[int | str] | None = None,
    ) -> None:
        if min_length < 1:
            raise ConfigurationError(f"min_length must be at least 1, got {min_length}")
        if store is None and names is None:
            raise ConfigurationError("EntityLinker needs a store or a names dictionary")
        if word_boundaries not in WORD_BOUNDARIES:
            raise ConfigurationError(f"word_boundaries must be one of {WORD_BOUNDARIES}, got {word_boundaries!r}")
        if store is None and (entity_types is not None or roots is not None):
            raise ConfigurationError("entity_types= and roots= need a store")
        self.store = store
        self.min_length = min_length
        self.nested = nested
        self.word_boundaries = word_boundaries
        self.hyphen_variants = hyphen_variants
        allowed = _filters.allowed_entities(store, entity_types, roots) if store is not None else None
        stop = set(self._normalize_names(sorted(_filters.resolve_stop_words(stop_words))))
        # arrays, not a Python object per name: millions of names at UMLS size (linking_dictionary)
        built = build_dictionary(
            store,
            names,
            normalize=self._normalize_names,
            normalize_display=normalize_for_matching,
            min_length=min_length,
            stop=stop,
            exclude_numeric=exclude_numeric,
            case_sensitive_abbreviations=case_sensitive_abbreviations,
            allowed=allowed,
            word_boundaries=word_boundaries,
        )
        self.patterns = built.patterns
        self._candidates = built.candidates
        self._best_entity = self._candidates.best()
        self._automaton = built.automaton
        self._name_weight = built.name_weight
        self._unknown_weight = built.unknown_weight
        self.num_names = built.num_names
        self._set_kernel_tables()
        self._settings = {
            "min_length": min_length,
            "nested": nested,
            "word_boundaries": word_boundaries,
            "case_sensitive_abbreviations": case_sensitive_abbreviations,
            "stop_words": stop_words if stop_words is None or isinstance(stop_words, str) else sorted(stop_words),
            "exclude_numeric": exclude_numeric,
            "hyphen_variants": hyphen_variants,
            "entity_types": None if entity_types is None else sorted(entity_types),
            "roots": None if roots is None else [str(root) for root in roots],
            "names": "store" if names is None else "explicit",
        }
        logger.info("entity linker: %d distinct names, %d trie nodes", self.num_names, len(self._automaton[1]) - 1)

    # -- persistence ----------------------------------------------------------------------------
    def save(self, directory: "str | os.PathLike") -> Path:
        """Write the linker (patterns, ranked candidates, trie) as ``.npy`` arrays and a JSON manifest,
        atomically; :meth:`load` memory-maps them (:mod:`kgplm.text.linking_persistence`)."""
        store = self.store
        manifest = {
            "settings": self._settings,
            "num_names": self.num_names,
            "name_weight": self._name_weight,
            "unknown_weight": self._unknown_weight,
            "store": None
            if store is None
            else {"source": store.source, "num_entities": store.num_entities, "num_triples": store.num_triples},
        }
        directory = save_linker_arrays(
            directory, manifest, self._pattern_table(), self._candidates, self._best_entity, self._automaton
        )
        logger.info("saved the entity linker (%d names) to %s", self.num_names, directory)
        return directory

    @classmethod
    def load(
        cls, directory: "str | os.PathLike", *, store: "KGStore | None" = None, mmap: bool = True
    ) -> "EntityLinker":
        """A linker saved by :meth:`save`; its arrays are memory-mapped (read from disk only where matching
        touches them) unless ``mmap=False``. ``store``, when given, must be the store it was built from
        (same source and counts); :meth:`count` needs it or ``num_entities``.

        ``mmap=False`` reads the arrays into memory, where numpy puts large arrays on transparent huge
        pages: with millions of names the trie spans GBs (1.6 GB of nodes at 4M UMLS-shaped concepts) and
        each walk step is a random read, which on a memory-mapped file's 4 KB pages misses the TLB far
        more often. It costs the arrays' size in RSS; ``benchmarks/scale.py``'s ``linker_link`` row
        measures both loads."""
        manifest, patterns, candidates, best_entity, automaton = load_linker_arrays(directory, mmap)
        recorded = manifest.get("store")
        if store is not None and recorded is not None:
            found = {"source": store.source, "num_entities": store.num_entities, "num_triples": store.num_triples}
            if found != recorded:
                raise ConfigurationError(
                    f"the linker saved at {directory} was built from a store with {recorded}, not this one ({found})"
                )
        settings = manifest["settings"]
        linker = cls.__new__(cls)
        linker.store = store
        linker.min_length = settings["min_length"]
        linker.nested = settings["nested"]
        linker.word_boundaries = settings["word_boundaries"]
        linker.hyphen_variants = settings["hyphen_variants"]
        linker.patterns = patterns
        linker._candidates = candidates
        linker._best_entity = best_entity
        linker._automaton = automaton
        linker._name_weight = float(manifest["name_weight"])
        linker._unknown_weight = float(manifest["unknown_weight"])
        linker.num_names = int(manifest["num_names"])
        linker._settings = settings
        linker._set_kernel_tables()
        return linker

    def _pattern_table(self) -> StringTable:
        return self.patterns if isinstance(self.patterns, StringTable) else StringTable.from_strings(self.patterns)

    def _normalize_names(self, names: list[str]) -> list[str]:
        """``names`` as the linker matches them (one pass, joined by NUL, which no kept name contains)."""
        joined = normalize_for_matching("\x00".join(names))
        if self.hyphen_variants:
            joined = joined.translate(_HYPHEN_TO_SPACE)
        return joined.split("\x00") if names else []

    def _set_kernel_tables(self) -> None:
        """What every kernel call takes besides the text: the per-character tables and the automaton."""
        tables = _character_tables()
        self._kernel_tables = (
            tables.single_spaced if self.hyphen_variants else tables.single,
            tables.length,
            tables.expansion_start,
            tables.expansions_spaced if self.hyphen_variants else tables.expansions,
            tables.capital,
            tables.alnum,
            *self._automaton,
            self._name_weight,
            self._unknown_weight,
        )

    # -- matching -------------------------------------------------------------------------------
    def find(self, text: str, *, nested: bool | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(starts, ends, entries)`` arrays of the matches in ``text`` (character offsets; entries index
        ``patterns``)."""
        if not isinstance(text, str):
            raise ConfigurationError(f"find() takes a str, got {type(text).__name__}")
        return self._find_batch([text], nested)[0]

    def find_many(
        self, texts: Iterable[str], *, nested: bool | None = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """:meth:`find` of each text, in order, lazily: one kernel call per batch of about
        ``BATCH_CHARACTERS`` characters (a call per short document cost more than its matching). Each
        text is matched alone, so the result is that of :meth:`find` text by text."""
        batch: list[str] = []
        characters = 0
        for text in texts:
            if not isinstance(text, str):
                raise ConfigurationError(f"find_many() takes str texts, got a {type(text).__name__}")
            batch.append(text)
            characters += len(text)
            if characters >= self.BATCH_CHARACTERS:
                yield from self._find_batch(batch, nested)
                batch, characters = [], 0
        if batch:
            yield from self._find_batch(batch, nested)

    #: characters per kernel call of :meth:`find_many` (its match arrays take about 12 bytes per character)
    BATCH_CHARACTERS = 1 << 20

    def _find_batch(self, texts: list[str], nested: bool | None) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        nested = self.nested if nested is None else nested
        mode = _kernels.NESTED if nested else _kernels.BEST_PATH if self.word_boundaries else _kernels.LONGEST
        if len(texts) == 1:  # find(): the fewest numpy calls (a short text's matching costs about as much)
            raw = np.frombuffer(texts[0].encode("utf-32-le", "surrogatepass"), dtype=np.int32)
            document_starts = np.array((0, len(raw)), dtype=np.int64)
        else:
            raw = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.int32)
            document_starts = np.zeros(len(texts) + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=document_starts[1:])
        counts = np.empty(len(texts), dtype=np.int64)
        capacity = max(16, len(raw) // (1 if nested else 2) + 1)
        while True:
            matches = np.empty((3, capacity), dtype=np.int64)  # starts, ends, entries
            count = _kernels.link_documents(raw, document_starts, *self._kernel_tables, mode, matches, counts)
            if count >= 0:
                break
            capacity *= 4
        if len(texts) == 1:
            return [(matches[0, :count], matches[1, :count], matches[2, :count])]
        bounds = [0, *np.cumsum(counts).tolist()]
        starts, ends, entries = matches[0], matches[1], matches[2]
        # slices, not np.split: its per-piece overhead was a fifth of the matching time on short documents
        return [(starts[low:high], ends[low:high], entries[low:high]) for low, high in zip(bounds, bounds[1:])]

    def best_entities(self, entries: np.ndarray) -> np.ndarray:
        """The top-ranked entity of each match entry of :meth:`find` (what :meth:`link` reports)."""
        return self._best_entity[np.asarray(entries, dtype=np.int64).reshape(-1)]

    def link(self, text: str, *, nested: bool | None = None) -> list[Mention]:
        """Mentions in ``text``, sorted by start (then longest first)."""
        if not isinstance(text, str):
            raise ConfigurationError(f"link() takes a str, got {type(text).__name__}")
        starts, ends, entries = self.find(text, nested=nested)
        return self._mentions(text, starts, ends, entries)

    def _mentions(self, text: str, starts: np.ndarray, ends: np.ndarray, entries: np.ndarray) -> list[Mention]:
        rows = self._candidates.rows(entries)
        return [
            Mention(start, end, row[0], text[start:end], row)
            for start, end, row in zip(starts.tolist(), ends.tolist(), rows)
        ]

    def link_many(self, texts: Iterable[str], *, nested: bool | None = None) -> list[list[Mention]]:
        """:meth:`link` of each text (matched in batches: :meth:`find_many`)."""
        texts = list(texts)
        return [
            self._mentions(text, starts, ends, entries)
            for text, (starts, ends, entries) in zip(texts, self.find_many(texts, nested=nested))
        ]

    def count(self, texts: Iterable[str], num_entities: int | None = None) -> np.ndarray:
        """Mentions per entity over ``texts`` (the corpus frequencies PEPR can start from)."""
        if num_entities is None:
            if self.store is None:
                raise ConfigurationError("count() needs num_entities when the linker has no store")
            num_entities = self.store.num_entities
        counts = np.zeros(num_entities, dtype=np.int64)
        for _, _, entries in self.find_many(texts, nested=False):
            np.add.at(counts, self.best_entities(entries), 1)
        return counts


def build_linker(store: "KGStore", options: dict | None = None, texts=None) -> tuple["EntityLinker", dict]:
    """The linker of ``kgplm.train(linking=options)``, and a report of what the corpus pass dropped.

    ``texts``: a callable returning the corpus texts, needed only for ``common_word_share``.
    """
    options = _filters.linking_settings(options)
    share = options.pop("common_word_share")
    linker = EntityLinker(store, **options)
    report: dict = {}
    if share is not None:
        if texts is None:
            raise ConfigurationError("common_word_share needs the corpus texts")
        common = _filters.common_names(linker, texts(), share)
        report["common_names"] = common
        logger.info(
            "linking: %d names occur in more than %.1f%% of the documents and are dropped: %s",
            len(common),
            100 * share,
            ", ".join(f"{name} ({value:.1%})" for name, value in list(common.items())[:20]),
        )
        if common:
            stop_words = _filters.resolve_stop_words(options["stop_words"]) | set(common)
            linker = EntityLinker(store, **{**options, "stop_words": sorted(stop_words)})
    return linker, report


def recorded_linker(store: "KGStore", run_config: dict) -> "EntityLinker":
    """The linker a pre-training run linked its corpus with, rebuilt from its ``run_config.json``.

    Fine-tuning must find the mentions pre-training found: the recorded options (``linking``) and the
    names its corpus pass dropped (``stages.linking.common_names``) give the same linker without the
    corpus. A run made before linking options existed gets :data:`~kgplm.text.linking_filters.LINKING_BEFORE_OPTIONS`.
    """
    if "linking" not in run_config:
        options = dict(_filters.LINKING_BEFORE_OPTIONS)
    else:
        options = _filters.linking_settings(run_config["linking"])
    options.pop("common_word_share")
    common = run_config.get("stages", {}).get("linking", {}).get("common_names") or {}
    if common:
        options["stop_words"] = sorted(_filters.resolve_stop_words(options["stop_words"]) | set(common))
    return EntityLinker(store, **options)
