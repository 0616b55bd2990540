"""UMLS RRF files, written in the real column layout of MRCONSO, MRREL and MRSTY."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgplm import KGStore
from kgplm.exceptions import DataFormatError, MissingFileError

# CUI|LAT|TS|LUI|STT|SUI|ISPREF|AUI|SAUI|SCUI|SDUI|SAB|TTY|CODE|STR|SRL|SUPPRESS|CVF|
MRCONSO = """\
C0011849|ENG|P|L0011849|PF|S0028679|Y|A0041906||||MSH|MH|D003920|Diabetes Mellitus|0|N||
C0011849|ENG|S|L0011850|PF|S0028680|N|A0041907||||MTH|SY|D003920|DM|0|N||
C0011849|CHI|P|L9000001|PF|S9000001|Y|A9000001||||MSHCHI|MH|D003920|糖尿病|0|N||
C0011849|ENG|S|L0011851|PF|S0028681|N|A0041908||||MSH|ET|D003920|obsolete diabetes string|0|O||
C0025598|ENG|P|L0025598|PF|S0060140|Y|A0085020||||MSH|MH|D008687|Metformin|0|N||
C0020538|ENG|P|L0020538|PF|S0051034|Y|A0077200||||MSH|MH|D006973|Hypertension|0|N||
"""
# CUI1|AUI1|STYPE1|REL|CUI2|AUI2|STYPE2|RELA|RUI|SRUI|SAB|SL|RG|DIR|SUPPRESS|CVF|
MRREL = """\
C0011849||CUI|RO|C0025598||CUI|may_be_treated_by|R1||MED-RT|MED-RT|||N||
C0025598||CUI|RO|C0011849||CUI|may_treat|R2||MED-RT|MED-RT|||N||
C0011849||CUI|RB|C0020538||CUI||R3||MSH|MSH|||N||
C0011849||CUI|SY|C0011849||CUI||R4||MSH|MSH|||N||
C0011849||CUI|RO|C9999999||CUI|unknown_target|R5||MSH|MSH|||N||
"""
# CUI|TUI|STN|STY|ATUI|CVF|
MRSTY = """\
C0011849|T047|B2.2.1.2.1|Disease or Syndrome|AT1||
C0025598|T109|A1.4.1.1.1|Organic Chemical|AT2||
C0025598|T121|A1.4.1.1.3|Pharmacologic Substance|AT3||
"""


def write(directory: Path, mrrel: str = MRREL) -> Path:
    directory.mkdir(exist_ok=True)
    (directory / "MRCONSO.RRF").write_text(MRCONSO, encoding="utf-8")
    (directory / "MRREL.RRF").write_text(mrrel, encoding="utf-8")
    (directory / "MRSTY.RRF").write_text(MRSTY, encoding="utf-8")
    return directory


def test_umls_mapping(tmp_path: Path) -> None:
    store = KGStore.from_umls_rrf(write(tmp_path / "umls"), show_progress=False)
    assert store.num_entities == 3
    diabetes = store.entity_id("Diabetes Mellitus")
    assert store.entity_name(diabetes) == "糖尿病"  # zh preferred, both languages kept
    assert ("Diabetes Mellitus", "en", "prefLabel") in store.labels(diabetes)
    assert store.aliases(diabetes) == ["Diabetes Mellitus", "DM"]  # the suppressed string is skipped
    triples = {
        (store.entity_name(h), store.relation_name(r), store.entity_name(t)) for h, r, t in store.triples.tolist()
    }
    # REL/RELA is the relationship of CUI2 to CUI1
    assert triples == {
        ("Metformin", "may_be_treated_by", "糖尿病"),
        ("糖尿病", "may_treat", "Metformin"),
        ("Hypertension", "RB", "糖尿病"),
    }
    metformin = store.entity_id("Metformin")
    assert store.entity_type(diabetes) == "Disease or Syndrome"
    assert set(store.entity_types(metformin)) == {"Organic Chemical", "Pharmacologic Substance"}


def test_language_filter(tmp_path: Path) -> None:
    store = KGStore.from_umls_rrf(write(tmp_path / "umls"), languages=["ENG"], show_progress=False)
    assert store.entity_name(store.entity_id("DM")) == "Diabetes Mellitus"


def test_umls_errors(tmp_path: Path) -> None:
    with pytest.raises(MissingFileError, match="MRCONSO"):
        (tmp_path / "empty").mkdir()
        KGStore.from_umls_rrf(tmp_path / "empty")
    directory = write(tmp_path / "bad", mrrel="C0011849|CUI|RO|C0025598|\n")
    with pytest.raises(DataFormatError) as caught:
        KGStore.from_umls_rrf(directory, show_progress=False)
    assert caught.value.line == 1 and "MRREL" in str(caught.value)
