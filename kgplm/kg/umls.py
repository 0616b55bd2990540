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

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from kgplm._io import iter_lines
from kgplm.exceptions import DataFormatError, MissingFileError
from kgplm.kg.collector import GraphCollector
from kgplm.kg.vocabulary import KGPLM_NAMESPACE, LABEL_ROLES, mint_iri

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["read_umls_rrf", "UMLS_LANGUAGES"]

UMLS_NAMESPACE = KGPLM_NAMESPACE + "umls/"
#: UMLS LAT codes → BCP 47 language tags
UMLS_LANGUAGES = {
    "ENG": "en", "CHI": "zh", "SPA": "es", "FRE": "fr", "GER": "de", "JPN": "ja", "KOR": "ko", "ITA": "it",
    "POR": "pt", "DUT": "nl", "RUS": "ru", "SWE": "sv", "CZE": "cs", "POL": "pl", "HUN": "hu", "NOR": "no",
    "FIN": "fi", "DAN": "da", "TUR": "tr", "GRE": "el", "HEB": "he", "ARA": "ar", "LAV": "lv", "EST": "et",
    "CRO": "hr", "BAQ": "eu", "UKR": "uk",
}
_COLUMNS = {"MRCONSO": 18, "MRREL": 16, "MRSTY": 6}


def _find(directory: Path, table: str, required: bool) -> Path | None:
    for name in (f"{table}.RRF", f"{table}.RRF.gz", f"{table.lower()}.rrf"):
        if (directory / name).is_file():
            return directory / name
    if required:
        raise MissingFileError(directory / f"{table}.RRF", f"UMLS {table} file")
    return None


def _rows(path: Path, table: str, show_progress: bool) -> Iterator[tuple[int, list[str]]]:
    expected = _COLUMNS[table]
    for line_number, line in tqdm(iter_lines(path), desc=f"reading {path.name}", unit=" rows", unit_scale=True,
                                  disable=not show_progress, leave=False):
        if not line:
            continue
        fields = line.split("|")
        if fields and fields[-1] == "":
            fields.pop()  # RRF lines end with a bar
        if len(fields) != expected:
            raise DataFormatError(f"{len(fields)} '|'-separated fields", path=path, line=line_number,
                                  expected=f"{expected} fields of {table}.RRF")
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
    """Read MRCONSO, MRREL and (when present) MRSTY from ``directory``."""
    directory = Path(directory)
    if not directory.is_dir():
        raise MissingFileError(directory, "UMLS directory")
    language_filter = set(languages) if languages is not None else None
    source_filter = set(sources) if sources is not None else None
    suppressed = set(suppress)
    collector = GraphCollector(source="umls", location=str(directory))
    name_role, alias_role = LABEL_ROLES.index("prefLabel"), LABEL_ROLES.index("altLabel")
    concept_iri = lambda cui: mint_iri(UMLS_NAMESPACE, "concept", cui)  # noqa: E731

    for _, fields in _rows(_find(directory, "MRCONSO", True), "MRCONSO", show_progress):
        cui, lat, ts, stt, ispref, sab, text, suppress_flag = (
            fields[0], fields[1], fields[2], fields[4], fields[6], fields[11], fields[14], fields[16])
        if (language_filter is not None and lat not in language_filter) or \
                (source_filter is not None and sab not in source_filter) or suppress_flag in suppressed:
            continue
        preferred = ts == "P" and stt == "PF" and ispref == "Y"
        collector.add_label(collector.entity(concept_iri(cui)), text, UMLS_LANGUAGES.get(lat, lat.lower()),
                            name_role if preferred else alias_role)

    known = collector.entity_index
    for _, fields in _rows(_find(directory, "MRREL", True), "MRREL", show_progress):
        cui1, rel, cui2, rela = fields[0], fields[3], fields[4], fields[7]
        if cui1 == cui2 or fields[14] in suppressed:
            continue
        head, tail = known.get(concept_iri(cui2)), known.get(concept_iri(cui1))
        if head is None or tail is None:
            continue
        name = rela or rel
        collector.add_triple(head, collector.relation(mint_iri(UMLS_NAMESPACE, "relation", name), name), tail)

    semantic_types = _find(directory, "MRSTY", False)
    if semantic_types is not None:
        for _, fields in _rows(semantic_types, "MRSTY", show_progress):
            entity = known.get(concept_iri(fields[0]))
            if entity is not None:
                collector.add_type(entity, collector.type(mint_iri(UMLS_NAMESPACE, "semantic_type", fields[1]), fields[3]))
    return collector.build(preferred_languages=preferred_languages,
                           extra_manifest={"prefixes": {"umls": UMLS_NAMESPACE + "concept/"}})
