"""Mention detection and linking: offsets, longest match, Latin boundaries, widths, real gold data."""

from __future__ import annotations

import json

import pytest

from kgplm.exceptions import ConfigurationError
from kgplm.text import EntityLinker, Mention, normalize_for_matching

NAMES = {
    "糖尿病": [0],
    "2型糖尿病": [1],
    "MRI": [2],
    "维生素B12": [3],
    "维生素B": [4],
    "阿司匹林": [5],
    "COVID-19": [6],
    "diabetes mellitus": [7],
    "感冒": [8, 9],
}


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
        assert text[mention.start : mention.end] == mention.surface


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
    text = "做ＭＲＩ和MRI检查，ＣＯＶＩＤ－１９，covid-19"
    mentions = linker.link(text)
    assert [(m.surface, m.entity_id) for m in mentions] == [
        ("ＭＲＩ", 2),
        ("MRI", 2),
        ("ＣＯＶＩＤ－１９", 6),
        ("covid-19", 6),
    ]
    assert normalize_for_matching("ＡＢｃ　１") == "abc 1"
    assert normalize_for_matching("İstanbul Ⅱ㎎") == "İstanbul iimg"  # İ lower-cases to two characters: kept


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


def test_a_name_without_entities_links_nothing():
    """An explicit name with an empty entity list is no dictionary entry: it was one with no candidates, so
    ``link`` failed on it and ``count``/``best_entities`` credited the next entry's entity."""
    linker = EntityLinker(names={"abc": [], "abd": [1]}, word_boundaries=None)
    assert list(linker.patterns) == ["abd"]
    assert linker.link("abc abd") == [Mention(4, 7, 1, "abd", (1,))]
    assert linker.count(["abc abd"], num_entities=3).tolist() == [0, 1, 0]


def test_display_name_owner_wins_over_alias_owner(tmp_path):
    from kgplm import KGStore

    ttl = tmp_path / "g.ttl"
    ttl.write_text(
        """@prefix ex: <http://example.org/> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
ex:a rdfs:label "甲"@zh ; skos:altLabel "消渴"@zh ; ex:r ex:b, ex:c .
ex:b rdfs:label "消渴"@zh . ex:c rdfs:label "丙"@zh .
""",
        encoding="utf-8",
    )
    store = KGStore.from_rdf(ttl, show_progress=False)
    (mention,) = EntityLinker(store).link("口干消渴")
    assert store.entity_name(mention.entity_id) == "消渴"
    assert len(mention.candidates) == 2


def test_counts_per_entity(linker):
    counts = linker.count(["糖尿病和感冒", "感冒"], num_entities=10)
    assert counts.tolist() == [1, 0, 0, 0, 0, 0, 0, 0, 2, 0]


def _latin_alnum(char: str) -> bool:
    return char.isascii() and char.isalnum()


def test_cmedqaner_gold_mentions_that_are_kg_names_are_found_at_their_offsets(cmekg_store, cmekg_linker, shared_data):
    import re
    import unicodedata

    def abbreviation(name: str) -> bool:
        return re.fullmatch("[A-Z]{2,4}", unicodedata.normalize("NFKC", name.strip())) is not None

    names = {normalize_for_matching(name.strip()) for name in cmekg_store.name_index()}
    # a 2-4 capital-letter abbreviation matches only capitals (documented rule); the released texts are lower-cased
    any_case = {normalize_for_matching(name.strip()) for name in cmekg_store.name_index() if not abbreviation(name)}
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
                if normalize_for_matching(gold["mention"]).strip() not in any_case and not abbreviation(
                    text[start:end]
                ):
                    continue
                # a name that starts or ends inside a Latin word is not a mention (documented rule)
                if (_latin_alnum(text[start]) and start > 0 and _latin_alnum(text[start - 1])) or (
                    _latin_alnum(text[end - 1]) and end < len(text) and _latin_alnum(text[end])
                ):
                    continue
                expected.add((split, line_number, start, end))
            for mention in cmekg_linker.link(text, nested=True):
                found_all.add((split, line_number, mention.start, mention.end))
    assert gold_total == 12625 + 1035 + 1350
    assert misplaced < 0.01 * gold_total
    assert len(expected) > 5000  # most gold mentions are KG names
    missing = expected - found_all
    assert not missing, sorted(missing)[:10]


# -- issue 19 ------------------------------------------------------------------------------------------------
def test_short_all_capital_abbreviations_match_only_in_capitals():
    linker = EntityLinker(names={"AS": [0], "CT": [1], "MRI检查": [2], "Aspirin": [3], "HBV": [4]})
    assert spans(linker.link("such as AS, as well as CT")) == [(8, 10, 0), (23, 25, 1)]
    assert spans(linker.link("As a rule, ｃｔ and ＣＴ")) == [(18, 20, 1)]  # full-width capitals are capitals
    assert spans(linker.link("mri检查 aspirin hbv HBV")) == [(0, 5, 2), (6, 13, 3), (18, 21, 4)]
    assert spans(EntityLinker(names={"AS": [0]}, case_sensitive_abbreviations=False).link("as")) == [(0, 2, 0)]


def test_compatibility_variants_match_with_exact_offsets():
    linker = EntityLinker(names={"II型糖尿病": [0], "Ⅲ度烧伤": [1], "5mg": [2], "维生素B12": [3]})
    text = "患Ⅱ型糖尿病，III度烧伤，每次5㎎，维生素Ｂ１２"
    mentions = linker.link(text)
    assert [(m.surface, m.entity_id) for m in mentions] == [
        ("Ⅱ型糖尿病", 0),
        ("III度烧伤", 1),
        ("5㎎", 2),
        ("维生素Ｂ１２", 3),
    ]
    for mention in mentions:
        assert text[mention.start : mention.end] == mention.surface
    # a name never matches part of one character's expansion: Ⅱ is II, not I
    assert EntityLinker(names={"I型": [0]}).link("Ⅱ型") == []
    assert linker.link_many([text, "Ⅱ型糖尿病"]) == [linker.link(text), linker.link("Ⅱ型糖尿病")]


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("一周恢复视力", "视力"),
        ("降低头部白癜风", "头部"),
        ("防止痛风的急性发作", "痛风"),
        ("维生素b1和安定来调理", "安定"),
    ],
)
def test_names_that_cut_words_lose_to_names_on_word_boundaries(cmekg_store, text, surface):
    linker = EntityLinker(cmekg_store)
    assert surface in [m.surface for m in linker.link(text)]


def test_names_inside_a_word_that_is_no_name_are_found_within_it():
    linker = EntityLinker(names={"肿瘤": [0], "手术": [1], "复视": [2], "视力": [3]})
    assert [m.surface for m in linker.link("上海肿瘤医院做手术")] == ["肿瘤", "手术"]  # 肿瘤医院 is a jieba word
    assert [m.surface for m in linker.link("恢复视力")] == ["视力"]
    assert [
        m.surface for m in EntityLinker(names={"复视": [2], "视力": [3]}, word_boundaries=None).link("恢复视力")
    ] == ["复视"]  # leftmost-longest, on request


def test_selected_names_are_the_kg_words_of_jiebas_route(cmekg_store, shared_data):
    """Against jieba itself (Segmenter: jieba's dictionary plus the KG names, no HMM) on the Chinese runs of
    the cMedQANER test texts: every KG name jieba cuts out is linked, and every other linked name lies
    inside one of jieba's words."""
    import re

    from kgplm.text.segmentation import Segmenter

    linker = EntityLinker(cmekg_store)
    segmenter = Segmenter(cmekg_store, hmm=False)
    names = set(cmekg_store.name_index())
    path = shared_data / "tasks" / "zh" / "chineseblue" / "cMedQANER" / "test.json"
    runs = [
        run
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
        for run in re.findall("[\u4e00-\u9fff]+", json.loads(line)["text"])
    ]
    assert len(runs) > 1500
    for run in runs:
        words = segmenter.segment(run)
        kg_words = {(start, end) for start, end in words if end - start >= 2 and run[start:end] in names}
        linked = {(m.start, m.end) for m in linker.link(run)}
        assert kg_words <= linked, run
        assert all(any(a <= start and end <= b for a, b in words) for start, end in linked - kg_words), run


def test_best_entities_of_find_entries_are_the_mentions_entities(linker):
    text = "我感冒了，2型糖尿病"
    _, _, entries = linker.find(text)
    assert linker.best_entities(entries).tolist() == [m.entity_id for m in linker.link(text)] == [8, 1]
    assert linker.best_entities(entries[:0]).tolist() == []
