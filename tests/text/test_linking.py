"""Mention detection and linking: offsets, longest match, Latin boundaries, widths, real gold data."""

from __future__ import annotations

import json

import pytest

from kgplm.exceptions import ConfigurationError
from kgplm.text import EntityLinker, Mention, normalize_for_matching

NAMES = {"糖尿病": [0], "2型糖尿病": [1], "MRI": [2], "维生素B12": [3], "维生素B": [4], "阿司匹林": [5],
         "COVID-19": [6], "diabetes mellitus": [7], "感冒": [8, 9]}


@pytest.fixture()
def linker() -> EntityLinker:
    return EntityLinker(names=NAMES)


def spans(mentions):
    return [(m.start, m.end, m.entity_id) for m in mentions]


def test_offsets_are_exact_and_end_exclusive(linker):
    text = "患者有2型糖尿病，服用阿司匹林。"
    mentions = linker.link(text)
    assert spans(mentions) == [(3, 8, 1), (11, 15, 5)]
    for mention in mentions:
        assert text[mention.start:mention.end] == mention.surface


def test_longest_match_by_default_and_every_match_when_nested(linker):
    text = "2型糖尿病"
    assert spans(linker.link(text)) == [(0, 5, 1)]
    assert spans(linker.link(text, nested=True)) == [(0, 5, 1), (2, 5, 0)]


def test_latin_word_boundaries(linker):
    assert spans(linker.link("MRIs and MRI检查")) == [(9, 12, 2)]
    assert spans(linker.link("xMRI MRI2 MRI")) == [(10, 13, 2)]
    # B12 is whole; 维生素B is not found inside 维生素B12 (it would end inside the Latin word B12)
    assert spans(linker.link("维生素B12缺乏", nested=True)) == [(0, 6, 3)]
    assert spans(linker.link("COVID-19疫苗")) == [(0, 8, 6)]
    assert spans(linker.link("Diabetes Mellitus type 2")) == [(0, 17, 7)]


def test_full_width_and_case_variants_match_with_original_surface(linker):
    text = "做ＭＲＩ和mri检查，ＣＯＶＩＤ－１９"
    mentions = linker.link(text)
    assert [(m.surface, m.entity_id) for m in mentions] == [("ＭＲＩ", 2), ("mri", 2), ("ＣＯＶＩＤ－１９", 6)]
    assert normalize_for_matching("ＡＢｃ　１") == "abc 1"
    assert len(normalize_for_matching("İstanbul")) == len("İstanbul")


def test_ambiguous_surface_keeps_all_candidates(linker):
    (mention,) = linker.link("我感冒了")
    assert mention.candidates == (8, 9) and mention.entity_id == 8
    assert mention == Mention(1, 3, 8, "感冒", (8, 9))


def test_link_many_equals_link_one_by_one(linker):
    texts = ["2型糖尿病", "", "MRI检查\x00阿司匹林", "没有", "感冒和糖尿病"]
    assert linker.link_many(texts) == [linker.link(text) for text in texts]


def test_min_length_and_bad_input():
    linker = EntityLinker(names={"痛": [0], "头痛": [1]})
    assert spans(linker.link("痛头痛")) == [(1, 3, 1)]
    assert spans(EntityLinker(names={"痛": [0]}, min_length=1).link("痛")) == [(0, 1, 0)]
    with pytest.raises(ConfigurationError, match="str"):
        linker.link(["a list"])
    with pytest.raises(ConfigurationError, match="store or a names"):
        EntityLinker()


def test_display_name_owner_wins_over_alias_owner(tmp_path):
    from kgplm import KGStore

    ttl = tmp_path / "g.ttl"
    ttl.write_text("""@prefix ex: <http://example.org/> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
ex:a rdfs:label "甲"@zh ; skos:altLabel "消渴"@zh ; ex:r ex:b, ex:c .
ex:b rdfs:label "消渴"@zh . ex:c rdfs:label "丙"@zh .
""", encoding="utf-8")
    store = KGStore.from_rdf(ttl, show_progress=False)
    (mention,) = EntityLinker(store).link("口干消渴")
    assert store.entity_name(mention.entity_id) == "消渴"
    assert len(mention.candidates) == 2


def test_counts_per_entity(linker):
    counts = linker.count(["糖尿病和感冒", "感冒"], num_entities=10)
    assert counts.tolist() == [1, 0, 0, 0, 0, 0, 0, 0, 2, 0]


def _latin_alnum(char: str) -> bool:
    return char.isascii() and char.isalnum()


def test_cmedqaner_gold_mentions_that_are_kg_names_are_found_at_their_offsets(cmekg_store, cmekg_linker,
                                                                              shared_data):
    names = {normalize_for_matching(name.strip()) for name in cmekg_store.name_index()}
    folder = shared_data / "tasks" / "zh" / "chineseblue" / "cMedQANER"
    expected, found_all, gold_total, misplaced = set(), set(), 0, 0
    for split in ("train", "dev", "test"):
        for line_number, line in enumerate((folder / f"{split}.json").read_text(encoding="utf-8").splitlines()):
            if not line.strip():
                continue
            record = json.loads(line)
            text = record["text"]
            for gold in record["mention_data"]:
                gold_total += 1
                start = int(gold["offset"])
                end = start + len(gold["mention"])
                # a few gold offsets do not point at their surface (annotation errors): not testable
                if normalize_for_matching(text[start:end]) != normalize_for_matching(gold["mention"]):
                    misplaced += 1
                    continue
                if normalize_for_matching(gold["mention"]).strip() not in names:
                    continue
                # a name that starts or ends inside a Latin word is not a mention (documented rule)
                if (_latin_alnum(text[start]) and start > 0 and _latin_alnum(text[start - 1])) or (
                        _latin_alnum(text[end - 1]) and end < len(text) and _latin_alnum(text[end])):
                    continue
                expected.add((split, line_number, start, end))
            for mention in cmekg_linker.link(text, nested=True):
                found_all.add((split, line_number, mention.start, mention.end))
    assert gold_total == 12625 + 1035 + 1350
    assert misplaced < 0.01 * gold_total
    assert len(expected) > 5000  # most gold mentions are KG names
    missing = expected - found_all
    assert not missing, sorted(missing)[:10]
