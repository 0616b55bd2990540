"""Triples tables (TSV/CSV, OpenKE order)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgplm import KGStore
from kgplm.exceptions import ConfigurationError, DataFormatError, MissingFileError


def names(store: KGStore) -> set[tuple[str, str, str]]:
    return {(store.entity_name(h), store.relation_name(r), store.entity_name(t)) for h, r, t in store.triples.tolist()}


def test_tsv_and_csv(tmp_path: Path) -> None:
    tsv = tmp_path / "kg.tsv"
    tsv.write_text(
        "# comment\naspirin\ttreats\theadache\naspirin\ttreats\tfever\n\nfever\tsymptom_of\tflu\n", encoding="utf-8"
    )
    csv = tmp_path / "kg.csv"
    csv.write_text(
        'head,relation,tail\naspirin,treats,headache\naspirin,treats,fever\n"fever",symptom_of,flu\n', encoding="utf-8"
    )
    expected = {("aspirin", "treats", "headache"), ("aspirin", "treats", "fever"), ("fever", "symptom_of", "flu")}
    assert names(KGStore.from_triples(tsv, show_progress=False)) == expected
    assert names(KGStore.from_triples(csv, header=True, show_progress=False)) == expected


def test_openke_order(tmp_path: Path) -> None:
    path = tmp_path / "train2id.txt"
    path.write_text("2\n0 1 0\n1 2 1\n", encoding="utf-8")
    store = KGStore.from_triples(path, order="htr", delimiter=" ", skip_first_line=True, show_progress=False)
    assert names(store) == {("0", "0", "1"), ("1", "1", "2")}


def test_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text("a\tr\tb\na\tr\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        KGStore.from_triples(path, show_progress=False)
    assert caught.value.line == 2 and "2 fields" in str(caught.value) and str(path) in str(caught.value)
    with pytest.raises(ConfigurationError):
        KGStore.from_triples(path, order="hrr")
    with pytest.raises(MissingFileError):
        KGStore.from_triples(tmp_path / "none.tsv")
