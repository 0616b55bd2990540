"""UMLS Metathesaurus RRF files as a :class:`KGStore`.

Reads, from one directory (``.RRF`` or ``.RRF.gz``; column layouts of the UMLS Reference Manual):

* ``MRCONSO.RRF`` — ``CUI|LAT|TS|LUI|STT|SUI|ISPREF|AUI|SAUI|SCUI|SDUI|SAB|TTY|CODE|STR|SRL|SUPPRESS|CVF|``:
  one entity per CUI. Each string is a label in its language (LAT mapped to BCP 47: ENG → en,
  CHI → zh, ...). The concept's preferred string per language (TS=P, STT=PF, ISPREF=Y) is a name;
  every other string is an alias. Rows with SUPPRESS in ``suppress`` (default O, E, Y) are skipped.
* ``MRREL.RRF`` — ``CUI1|AUI1|STYPE1|REL|CUI2|AUI2|STYPE2|RELA|RUI|SRUI|SAB|SL|RG|DIR|SUPPRESS|CVF|``:
  UMLS defines REL/RELA as the relationship *of the second concept to the first*, so a row
  becomes the triple ``(CUI2, RELA or REL, CUI1)``. Rows linking a concept to itself and rows
  whose concepts are not in MRCONSO (after the filters) are skipped.
* ``MRSTY.RRF`` — ``CUI|TUI|STN|STY|ATUI|CVF|``: semantic types; a concept may have several.

``languages`` and ``sources`` restrict MRCONSO rows (LAT codes and SAB names).
"""

from __future__ import annotations

import logging
import os
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path

from tqdm.auto import tqdm

import numpy as np

from kgplm._io import iter_lines
from kgplm.exceptions import DataFormatError, EmptyGraphError, MissingFileError
from kgplm.kg.adjacency import compile_adjacency, unique_rows
from kgplm.kg.collector import compile_labels, compile_types, empty_attributes
from kgplm.kg.store import STORE_FORMAT_VERSION, KGStore
from kgplm.kg.strings import StringTable
from kgplm.kg.vocabulary import KGPLM_NAMESPACE, LABEL_ROLES, mint_iri

__all__ = ["read_umls_rrf", "UMLS_LANGUAGES"]

UMLS_NAMESPACE = KGPLM_NAMESPACE + "umls/"
#: UMLS LAT codes → BCP 47 language tags
UMLS_LANGUAGES = {
    "ENG": "en",
    "CHI": "zh",
    "SPA": "es",
    "FRE": "fr",
    "GER": "de",
    "JPN": "ja",
    "KOR": "ko",
    "ITA": "it",
    "POR": "pt",
    "DUT": "nl",
    "RUS": "ru",
    "SWE": "sv",
    "CZE": "cs",
    "POL": "pl",
    "HUN": "hu",
    "NOR": "no",
    "FIN": "fi",
    "DAN": "da",
    "TUR": "tr",
    "GRE": "el",
    "HEB": "he",
    "ARA": "ar",
    "LAV": "lv",
    "EST": "et",
    "CRO": "hr",
    "BAQ": "eu",
    "UKR": "uk",
}
logger = logging.getLogger(__name__)
_COLUMNS = {"MRCONSO": 18, "MRREL": 16, "MRSTY": 6}


def _ints(values: array, dtype) -> np.ndarray:
    """A typed array column as numpy (a view; empty columns included)."""
    return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype=dtype)


def _find(directory: Path, table: str, required: bool) -> Path | None:
    for name in (f"{table}.RRF", f"{table}.RRF.gz", f"{table.lower()}.rrf"):
        if (directory / name).is_file():
            return directory / name
    if required:
        raise MissingFileError(directory / f"{table}.RRF", f"UMLS {table} file")
    return None


def _rows(path: Path, table: str, show_progress: bool) -> Iterator[tuple[int, list[str]]]:
    expected = _COLUMNS[table]
    for line_number, line in tqdm(
        iter_lines(path),
        desc=f"reading {path.name}",
        unit=" rows",
        unit_scale=True,
        disable=not show_progress,
        leave=False,
    ):
        if not line:
            continue
        fields = line.split("|")
        if fields and fields[-1] == "":
            fields.pop()  # RRF lines end with a bar
        if len(fields) != expected:
            raise DataFormatError(
                f"{len(fields)} '|'-separated fields",
                path=path,
                line=line_number,
                expected=f"{expected} fields of {table}.RRF",
            )
        yield line_number, fields


def read_umls_rrf(
    directory: str | os.PathLike,
    *,
    languages: Iterable[str] | None = None,
    sources: Iterable[str] | None = None,
    suppress: Iterable[str] = ("O", "E", "Y"),
    preferred_languages: tuple[str, ...] = ("zh", "en", ""),
    show_progress: bool = True,
) -> KGStore:
    """Read MRCONSO, MRREL and (when present) MRSTY from ``directory``, streaming.

    The files are read row by row and never held: each kept row adds a few integers to typed
    arrays (``array.array``), each distinct string is kept once (interned while MRCONSO is read,
    then packed into the store's UTF-8 :class:`~kgplm.kg.strings.StringTable`), and the label,
    triple and type tables are compiled with numpy sorts instead of Python sets of tuples. The
    result is the store :class:`~kgplm.kg.collector.GraphCollector` would build from the same rows
    (same ids, same order), at a fraction of its memory: the collector measured 3.1 GB
    for 1M concepts.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise MissingFileError(directory, "UMLS directory")
    language_filter = frozenset(languages) if languages is not None else None
    source_filter = frozenset(sources) if sources is not None else None
    suppressed = frozenset(suppress)
    name_role, alias_role = LABEL_ROLES.index("prefLabel"), LABEL_ROLES.index("altLabel")

    # -- MRCONSO: concepts and their strings -------------------------------------------------
    concept_index: dict[str, int] = {}
    string_index: dict[str, int] = {}
    language_tags: list[str] = [""]
    language_ids: dict[str, int] = {}  # LAT code → index into language_tags
    label_entities, label_strings = array("i"), array("i")
    label_languages, label_roles = array("h"), array("b")
    for _, fields in _rows(_find(directory, "MRCONSO", True), "MRCONSO", show_progress):
        cui, lat, sab, suppress_flag = fields[0], fields[1], fields[11], fields[16]
        if (
            (language_filter is not None and lat not in language_filter)
            or (source_filter is not None and sab not in source_filter)
            or suppress_flag in suppressed
        ):
            continue
        entity = concept_index.setdefault(cui, len(concept_index))
        text = fields[14]
        string = string_index.setdefault(text, len(string_index))
        language = language_ids.get(lat)
        if language is None:
            tag = UMLS_LANGUAGES.get(lat, lat.lower())
            if tag in language_tags:
                language = language_ids[lat] = language_tags.index(tag)
            else:
                language = language_ids[lat] = len(language_tags)
                language_tags.append(tag)
        label_entities.append(entity)
        label_strings.append(string)
        label_languages.append(language)
        preferred = fields[2] == "P" and fields[4] == "PF" and fields[6] == "Y"
        label_roles.append(name_role if preferred else alias_role)
    num_entities = len(concept_index)
    if num_entities == 0:
        raise EmptyGraphError(
            f"the UMLS files in {directory} have no concept left after the filters "
            f"(languages={sorted(language_filter) if language_filter else None}, "
            f"sources={sorted(source_filter) if source_filter else None}, "
            f"suppress={sorted(suppressed)})"
        )
    strings = StringTable.from_strings(string_index)  # dicts keep insertion order: ids are positions
    num_strings = len(string_index)
    del string_index
    labels = compile_labels(
        _ints(label_entities, dtype=np.int32),
        _ints(label_strings, dtype=np.int32),
        _ints(label_languages, dtype=np.int16),
        _ints(label_roles, dtype=np.int8),
        num_entities=num_entities,
        num_strings=num_strings,
        language_tags=language_tags,
        preferred_languages=preferred_languages,
    )
    del label_entities, label_strings, label_languages, label_roles

    # -- MRREL: REL/RELA is the relationship of CUI2 to CUI1 -----------------------------------
    relation_index: dict[str, int] = {}
    heads, relations, tails = array("i"), array("i"), array("i")
    for _, fields in _rows(_find(directory, "MRREL", True), "MRREL", show_progress):
        cui1, cui2 = fields[0], fields[4]
        if cui1 == cui2 or fields[14] in suppressed:
            continue
        head, tail = concept_index.get(cui2), concept_index.get(cui1)
        if head is None or tail is None:
            continue
        name = fields[7] or fields[3]
        relation = relation_index.get(name)
        if relation is None:
            relation = relation_index[name] = len(relation_index)
        heads.append(head)
        relations.append(relation)
        tails.append(tail)
    triples = np.stack(
        [_ints(heads, dtype=np.int32), _ints(relations, dtype=np.int32), _ints(tails, dtype=np.int32)], axis=1
    )
    del heads, relations, tails
    raw_count = len(triples)
    triples = unique_rows(triples, (num_entities, len(relation_index), num_entities))
    if not len(triples):
        logger.warning(
            "UMLS in %s has no relation between kept concepts: %d concepts with names and types only "
            "(PEPR and KG embeddings need links)",
            directory,
            num_entities,
        )

    # -- MRSTY: semantic types ---------------------------------------------------------------
    type_index: dict[str, int] = {}
    type_names: list[str] = []
    typed_entities, typed_types = array("i"), array("i")
    semantic_types = _find(directory, "MRSTY", False)
    if semantic_types is not None:
        for _, fields in _rows(semantic_types, "MRSTY", show_progress):
            entity = concept_index.get(fields[0])
            if entity is None:
                continue
            type_id = type_index.get(fields[1])
            if type_id is None:
                type_id = type_index[fields[1]] = len(type_index)
                type_names.append(fields[3])
            typed_entities.append(entity)
            typed_types.append(type_id)
    type_indptr, type_ids = compile_types(
        _ints(typed_entities, dtype=np.int32), _ints(typed_types, dtype=np.int32), num_entities, len(type_index)
    )
    entity_iris = StringTable.from_strings(mint_iri(UMLS_NAMESPACE, "concept", cui) for cui in concept_index)
    del concept_index

    arrays = compile_adjacency(triples, num_entities)
    arrays.update(type_indptr=type_indptr, type_ids=type_ids, **labels, **empty_attributes(num_entities))
    manifest = {
        "format_version": STORE_FORMAT_VERSION,
        "source": "umls",
        "location": str(directory),
        "num_entities": num_entities,
        "num_relations": len(relation_index),
        "num_triples": int(len(triples)),
        "duplicate_triples": int(raw_count - len(triples)),
        "relation_iris": [mint_iri(UMLS_NAMESPACE, "relation", name) for name in relation_index],
        "relation_names": list(relation_index),
        "type_iris": [mint_iri(UMLS_NAMESPACE, "semantic_type", tui) for tui in type_index],
        "type_names": type_names,
        "attribute_predicate_iris": [],
        "attribute_predicate_names": [],
        "languages": language_tags,
        "datatypes": [""],
        "preferred_languages": list(preferred_languages),
        "merged_entities": 0,
        "prefixes": {"umls": UMLS_NAMESPACE + "concept/"},
    }
    return KGStore(manifest=manifest, arrays=arrays, entity_iris=entity_iris, strings=strings)
