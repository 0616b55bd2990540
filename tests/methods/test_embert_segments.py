"""EMBERT's rule-based entity segmentation: the rules on small dictionaries, hand-checked CMeKG entities,
the cut points derived from CMeKG's names, atomic/adjective splits, save → load."""

from __future__ import annotations

import pytest

from kgplm import KGStore
from kgplm.exceptions import ArtifactError, MissingFileError
from kgplm.methods.embert import EntitySegmenter, EntitySegments, build_entity_segments, derive_cut_points
from kgplm.methods.embert.segments import kg_names
from kgplm.text import EntityLinker, Segmenter


class CharacterSegmenter:
    """jieba stand-in for the tests of the rules: every character a word."""

    @staticmethod
    def words(text):
        return list(text)


class WholeSegmenter:
    """jieba stand-in: the whole text one word."""

    @staticmethod
    def words(text):
        return [text]


def splitter(names, cut_points="", segmenter=None):
    linker = EntityLinker(names={name: [index] for index, name in enumerate(names)})
    return EntitySegmenter(linker, segmenter or Segmenter(), cut_points)


def texts(name, pieces):
    return [name[start:end] for start, end, _ in pieces]


def test_largest_cover_prefers_long_sub_entities_and_leaves_ties_uncovered():
    # 病毒性心肌炎 with the CMeKG names 病毒 (0, 2), 毒性 (1, 3), 性心 (2, 4), 心肌炎 (3, 6), 肌炎 (4, 6):
    # Σ length²: 病毒+性心+肌炎 = 12 < 病毒+心肌炎 = 毒性+心肌炎 = 13; the tie leaves 性 (not 病) uncovered
    matches = [(0, 2), (1, 3), (2, 4), (3, 6), (4, 6)]
    assert EntitySegmenter._largest_cover(matches, 6) == [(0, 2), (3, 6)]
    assert EntitySegmenter._largest_cover([], 4) == []
    assert EntitySegmenter._largest_cover([(0, 2), (2, 4), (0, 4)], 5) == [(0, 4)]  # 16 > 4 + 4


def test_rules_attach_cut_points_punctuation_and_brackets():
    anemia = splitter(["贫血", "再生障碍"], cut_points="性")
    pieces = anemia.pieces("再生障碍性贫血")
    assert texts("再生障碍性贫血", pieces) == ["再生障碍性", "贫血"]
    assert anemia.atomic_start(pieces) == 5
    # text no KG name covers is cut after each cut point before the segmenter sees it
    name = "缺铁性小细胞贫血"
    assert texts(name, splitter(["贫血"], "性", WholeSegmenter()).pieces(name)) == ["缺铁性", "小细胞", "贫血"]
    assert texts(name, splitter(["贫血"], "", WholeSegmenter()).pieces(name)) == ["缺铁性小细胞", "贫血"]
    herb = splitter(["白术"])
    assert texts("白术（炒）", herb.pieces("白术（炒）")) == ["白术", "（炒）"]
    assert herb.atomic_start(herb.pieces("白术（炒）")) == -1  # the last piece is no KG name
    assert texts("头痛、发热", splitter(["头痛", "发热"]).pieces("头痛、发热")) == ["头痛、", "发热"]
    assert texts("aplastic anemia", splitter(["anemia"]).pieces("aplastic anemia")) == ["aplastic ", "anemia"]


def test_too_many_single_characters_are_joined_and_short_names_stay_whole():
    rules = splitter(["肺炎"], segmenter=CharacterSegmenter())
    assert texts("甲乙丙肺炎", rules.pieces("甲乙丙肺炎")) == ["甲乙丙", "肺炎"]  # 3 of 4 pieces were single
    assert texts("甲乙肺炎", rules.pieces("甲乙肺炎")) == ["甲乙", "肺炎"]  # 2 of 3
    assert texts("甲肺炎炎", rules.pieces("甲肺炎炎")) == ["甲", "肺炎", "炎"]  # 2 of 3 single, not adjacent
    assert rules.pieces("肺炎甲") == [(0, 3, False)]  # three characters: short
    assert rules.atomic_start(rules.pieces("甲肺炎炎")) == -1


@pytest.fixture(scope="module")
def cmekg_rules(cmekg_store):
    linker = EntityLinker(cmekg_store)
    names = kg_names(cmekg_store)
    cut_points = derive_cut_points(names, linker)
    return EntitySegmenter(linker, Segmenter(extra_words=[name for name in names if len(name) <= 3]), cut_points)


def test_cut_points_derived_from_cmekg_names(cmekg_rules):
    cut_points = cmekg_rules.cut_points
    assert len(cut_points) == 100
    assert cut_points.startswith("性酸于素部儿")
    assert {"型", "度", "：", "炎"} <= set(cut_points)
    # frequent at segment ends, but as often at word starts (血管, 病毒): the rate keeps them out
    assert not {"血", "病", " ", "a"} & set(cut_points)


HAND_CHECKED = {  # name: (sub-entities, atomic term or None)
    "再生障碍性贫血": (["再生障碍性", "贫血"], "贫血"),
    "新型冠状病毒肺炎": (["新型", "冠状病毒", "肺炎"], "肺炎"),  # the paper's example (not itself a CMeKG name)
    "慢性肾小球肾炎": (["慢性", "肾小球肾炎"], "肾小球肾炎"),
    "糖尿病酮症酸中毒": (["糖尿病", "酮症酸中毒"], "酮症酸中毒"),
    "病毒性心肌炎": (["病毒性", "心肌炎"], "心肌炎"),
    "缺铁性贫血": (["缺铁性", "贫血"], "贫血"),
    "小儿支气管肺炎": (["小儿", "支气管肺炎"], "支气管肺炎"),
    "妊娠期糖尿病": (["妊娠期", "糖尿病"], "糖尿病"),
    "2型糖尿病": (["2型", "糖尿病"], "糖尿病"),
    "α-干扰素": (["α-", "干扰素"], "干扰素"),
    "aplastic anemia": (["aplastic ", "anemia"], "anemia"),
    "盐酸二甲双胍片": (["盐酸二甲双胍", "片"], None),  # 片 is no KG entity: no atomic term
    "白术（炒）": (["白术", "（炒）"], "（炒）"),  # CMeKG lists 炒） as a name
    "神经内科": (["神经", "内科"], "内科"),
    "糖尿病": (["糖尿病"], None),
}


@pytest.mark.parametrize("name", list(HAND_CHECKED))
def test_hand_checked_cmekg_entities(cmekg_rules, name):
    expected_pieces, expected_atomic = HAND_CHECKED[name]
    pieces = cmekg_rules.pieces(name)
    assert texts(name, pieces) == expected_pieces
    start = cmekg_rules.atomic_start(pieces)
    assert (name[start:] if start >= 0 else None) == expected_atomic


def test_table_of_every_name_saves_and_loads(toy_turtle, tmp_path):
    store = KGStore.from_rdf(toy_turtle, show_progress=False)
    segments = build_entity_segments(store)
    assert segments.names == kg_names(store)
    assert segments.pieces("diabetes mellitus") == ["diabetes ", "mellitus"]
    assert segments.pieces("糖尿病") == ["糖尿病"] and segments.split("糖尿病") is None
    assert segments.pieces("不在图里") == ["不在图里"] and segments.index("不在图里") == -1
    assert segments.config["cut_points"] == ""  # too few names for any character to reach min_cut_count
    segments.save(tmp_path / "segments")
    loaded = EntitySegments.load(tmp_path / "segments")
    assert loaded.names == segments.names and loaded.config == segments.config
    assert all(loaded.ends(row) == segments.ends(row) for row in range(len(segments.names)))
    assert (loaded.atomic_start == segments.atomic_start).all()
    with pytest.raises(MissingFileError, match="entity-segment table"):
        EntitySegments.load(tmp_path)
    (tmp_path / "segments.json").write_text('{"format": "x"}', encoding="utf-8")
    with pytest.raises(ArtifactError, match="not a kgplm entity-segment table"):
        EntitySegments.load(tmp_path)
