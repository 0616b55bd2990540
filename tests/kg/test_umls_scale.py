"""The UMLS-shaped generator (benchmarks/synthetic_umls.py) and the streaming RRF import on its output.

The reference store is built by hand: the RRF files are parsed with pandas and fed, row by row,
to :class:`GraphCollector` (whose per-row label compilation is independent of the numpy one the
streaming reader uses) following the UMLS Reference Manual: CUI2 —REL/RELA→ CUI1, suppressed rows
skipped, the TS=P/STT=PF/ISPREF=Y string a name.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import synthetic_umls  # noqa: E402

from kgplm import KGStore  # noqa: E402
from kgplm.kg.collector import GraphCollector  # noqa: E402
from kgplm.kg.umls import UMLS_LANGUAGES, UMLS_NAMESPACE  # noqa: E402
from kgplm.kg.vocabulary import LABEL_ROLES, mint_iri  # noqa: E402

CONSO = [
    "CUI",
    "LAT",
    "TS",
    "LUI",
    "STT",
    "SUI",
    "ISPREF",
    "AUI",
    "SAUI",
    "SCUI",
    "SDUI",
    "SAB",
    "TTY",
    "CODE",
    "STR",
    "SRL",
    "SUPPRESS",
    "CVF",
]
REL = [
    "CUI1",
    "AUI1",
    "STYPE1",
    "REL",
    "CUI2",
    "AUI2",
    "STYPE2",
    "RELA",
    "RUI",
    "SRUI",
    "SAB",
    "SL",
    "RG",
    "DIR",
    "SUPPRESS",
    "CVF",
]
STY = ["CUI", "TUI", "STN", "STY", "ATUI", "CVF"]


def read_rrf(path: Path, columns: list[str]) -> pd.DataFrame:
    frame = pd.read_csv(path, sep="|", header=None, dtype=str, keep_default_na=False, quoting=3)
    assert frame.shape[1] == len(columns) + 1 and (frame.iloc[:, -1] == "").all()  # every line ends with a bar
    frame = frame.iloc[:, :-1]
    frame.columns = columns
    return frame


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("umls") / "rrf"
    synthetic_umls.write_synthetic_umls(directory, 400, seed=3, chunk_size=150)
    return directory


def hand_built(directory: Path, languages=None, sources=None) -> KGStore:
    conso = read_rrf(directory / "MRCONSO.RRF", CONSO)
    keep = ~conso.SUPPRESS.isin(["O", "E", "Y"])
    if languages is not None:
        keep &= conso.LAT.isin(languages)
    if sources is not None:
        keep &= conso.SAB.isin(sources)
    collector = GraphCollector(source="umls", location=str(directory))
    for row in conso[keep].itertuples():
        preferred = row.TS == "P" and row.STT == "PF" and row.ISPREF == "Y"
        collector.add_label(
            collector.entity(mint_iri(UMLS_NAMESPACE, "concept", row.CUI)),
            row.STR,
            UMLS_LANGUAGES[row.LAT],
            LABEL_ROLES.index("prefLabel" if preferred else "altLabel"),
        )
    known = collector.entity_index
    for row in read_rrf(directory / "MRREL.RRF", REL).itertuples():
        head, tail = (known.get(mint_iri(UMLS_NAMESPACE, "concept", cui)) for cui in (row.CUI2, row.CUI1))
        if row.CUI1 == row.CUI2 or row.SUPPRESS != "N" or head is None or tail is None:
            continue
        name = row.RELA or row.REL
        collector.add_triple(head, collector.relation(mint_iri(UMLS_NAMESPACE, "relation", name), name), tail)
    for row in read_rrf(directory / "MRSTY.RRF", STY).itertuples():
        entity = known.get(mint_iri(UMLS_NAMESPACE, "concept", row.CUI))
        if entity is not None:
            collector.add_type(entity, collector.type(mint_iri(UMLS_NAMESPACE, "semantic_type", row.TUI), row.STY))
    return collector.build(
        preferred_languages=("zh", "en", ""), extra_manifest={"prefixes": {"umls": UMLS_NAMESPACE + "concept/"}}
    )


def test_generator_is_seeded_and_streams_in_the_rrf_layout(tmp_path: Path, generated: Path) -> None:
    again = tmp_path / "again"
    counts = synthetic_umls.write_synthetic_umls(again, 400, seed=3, chunk_size=150)
    for table in ("MRCONSO", "MRREL", "MRSTY"):
        assert (again / f"{table}.RRF").read_bytes() == (generated / f"{table}.RRF").read_bytes()
    other = synthetic_umls.write_synthetic_umls(tmp_path / "other", 400, seed=4, chunk_size=150)
    assert (tmp_path / "other" / "MRREL.RRF").read_bytes() != (generated / "MRREL.RRF").read_bytes()
    assert other["concepts"] == 400 and not list(again.glob("*.tmp"))

    conso, rel, sty = (
        read_rrf(generated / f"{t}.RRF", c) for t, c in (("MRCONSO", CONSO), ("MRREL", REL), ("MRSTY", STY))
    )
    assert len(conso) == counts["strings"] and len(rel) == counts["relation_rows"]
    assert len(sty) == counts["semantic_type_rows"]
    assert conso.CUI.nunique() == 400 and 3.5 < len(conso) / 400 < 4.5  # about 4 strings a concept
    assert set(conso.LAT) >= {"ENG", "SPA", "FRE", "CHI"} and conso.SAB.nunique() >= 8
    # one preferred string per concept and language, never suppressed
    preferred = conso[(conso.TS == "P") & (conso.STT == "PF") & (conso.ISPREF == "Y")]
    assert not preferred.duplicated(["CUI", "LAT"]).any()
    assert len(preferred) == len(conso[["CUI", "LAT"]].drop_duplicates()) and (preferred.SUPPRESS == "N").all()
    assert set(conso.SUPPRESS) == {"N", "O", "E", "Y"} and conso.STR.duplicated().any()  # shared strings
    # every relation row has its inverse row, with the inverse REL/RELA
    inverse = {forward: backward for forward, backward, _ in synthetic_umls.RELATION_PAIRS}
    rows = list(zip(rel.CUI1, rel.REL, rel.RELA, rel.CUI2))
    for (cui1, rel_, rela, cui2), (back1, back_rel, back_rela, back2) in zip(rows[::2], rows[1::2]):
        assert (back1, back2) == (cui2, cui1) and (back_rel, back_rela) == inverse[(rel_, rela)]
    assert {"PAR", "CHD", "RB", "RN", "RO", "SY"} <= set(rel.REL) and (rel.RELA == "").any()
    degree = pd.concat([rel.CUI1, rel.CUI2]).value_counts()
    assert degree.iloc[0] > 10 * degree.median()  # heavy-tailed: hubs
    assert sty.TUI.value_counts().index[0] == "T047" and sty.CUI.duplicated().any()


@pytest.mark.parametrize("filters", [{}, {"languages": ["ENG", "CHI"]}, {"sources": ["MSH", "MSHSPA", "NCI"]}])
def test_streaming_import_equals_the_hand_built_store(generated: Path, filters: dict) -> None:
    store = KGStore.from_umls_rrf(generated, show_progress=False, **filters)
    expected = hand_built(generated, **filters)
    assert store.num_entities == expected.num_entities > 100
    assert store.equals(expected)


def test_streaming_import_by_hand(generated: Path) -> None:
    """Names, aliases, languages, REL direction and suppressed rows on the generated files, read with pandas."""
    store = KGStore.from_umls_rrf(generated, show_progress=False)
    conso = read_rrf(generated / "MRCONSO.RRF", CONSO)
    kept = conso[conso.SUPPRESS == "N"]
    cui_of = {i: iri.rsplit("/", 1)[1] for i, iri in enumerate(store.entity_iris)}
    labels = {
        (cui_of[e], text, language, role) for e in range(store.num_entities) for text, language, role in store.labels(e)
    }
    expected = {
        (
            row.CUI,
            row.STR,
            UMLS_LANGUAGES[row.LAT],
            "prefLabel" if (row.TS, row.STT, row.ISPREF) == ("P", "PF", "Y") else "altLabel",
        )
        for row in kept.itertuples()
    }
    assert labels == expected
    hidden = set(zip(conso.CUI[conso.SUPPRESS != "N"], conso.STR[conso.SUPPRESS != "N"])) - set(zip(kept.CUI, kept.STR))
    assert hidden and not hidden & {(cui, text) for cui, text, _, _ in labels}  # suppressed strings are skipped
    # the display name: the Chinese preferred string where there is one, else the English one
    for entity in range(0, store.num_entities, 37):
        rows = kept[(kept.CUI == cui_of[entity]) & (kept.TS == "P")]
        chinese = rows[rows.LAT == "CHI"]
        assert store.entity_name(entity) == (chinese if len(chinese) else rows[rows.LAT == "ENG"]).STR.iloc[0]
    rel = read_rrf(generated / "MRREL.RRF", REL)
    rel = rel[(rel.SUPPRESS == "N") & (rel.CUI1 != rel.CUI2)]
    triples = {(cui_of[h], store.relation_name(r), cui_of[t]) for h, r, t in store.triples.tolist()}
    assert triples == set(zip(rel.CUI2, np.where(rel.RELA != "", rel.RELA, rel.REL), rel.CUI1))


def test_save_load_is_memory_mapped_and_equal(generated: Path, tmp_path: Path) -> None:
    store = KGStore.from_umls_rrf(generated, show_progress=False)
    loaded = KGStore.load(store.save(tmp_path / "store"))
    assert isinstance(loaded.triples, np.memmap) and loaded.equals(store)
    name = store.entity_name(5)
    assert loaded.entity_id(store.entity_iri(5)) == 5 and 5 in loaded.entity_ids(name)
