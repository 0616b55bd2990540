"""The linker-as-NER baseline against a hand-computed map and F1."""

from __future__ import annotations

import pytest

from kgplm.evaluation.baselines import fit_type_label_map, linked_spans, linker_as_ner
from kgplm.evaluation.readers import SpanExample

TRAIN = [
    SpanExample("t0", "糖尿病患者口渴多尿", ((0, 3, "疾病"), (5, 7, "症状"), (7, 9, "症状"))),
    SpanExample("t1", "二甲双胍乏力", ((0, 4, "药物"),)),
]
TRAIN_LINKED = {
    "糖尿病患者口渴多尿": [(0, 3, "Disease"), (3, 5, "Person"), (5, 7, "Symptom"), (7, 9, "Symptom")],
    "二甲双胍乏力": [(0, 4, "Drug"), (4, 6, "Symptom")],
}
EVAL = [SpanExample("e0", "x" * 16, ((0, 3, "疾病"), (4, 6, "症状"), (8, 10, "药物"), (12, 14, "症状")))]
EVAL_LINKED = {"x" * 16: [(0, 3, "Disease"), (4, 6, "Symptom"), (6, 8, "Person"), (10, 12, "Drug"), (14, 16, "Unseen")]}


def _link(text):
    return {**TRAIN_LINKED, **EVAL_LINKED}[text]


def test_the_type_map_is_each_types_majority_label_on_train():
    label_of = fit_type_label_map(TRAIN, [TRAIN_LINKED[e.text] for e in TRAIN])
    # Symptom: 症状 twice, not an entity once; Person: never an entity
    assert label_of == {"Disease": "疾病", "Person": None, "Symptom": "症状", "Drug": "药物"}


def test_linker_as_ner_by_hand():
    result = linker_as_ner(TRAIN, EVAL, _link)
    # predicted: (0,3,疾病) ✓, (4,6,症状) ✓, (10,12,药物) ✗; Person and the unseen type predict nothing
    # gold 4, predicted 3, correct 2: P = 2/3, R = 1/2, F1 = 2PR/(P+R) = 4/7
    assert result["precision"] == pytest.approx(2 / 3)
    assert result["recall"] == pytest.approx(1 / 2)
    assert result["f1"] == pytest.approx(4 / 7)


def test_linked_spans_are_the_linkers_mentions_typed_by_the_kg(toy_turtle):
    from kgplm import KGStore
    from kgplm.text.linking import EntityLinker

    store = KGStore.from_rdf(toy_turtle)
    link = linked_spans(EntityLinker(store), store)
    text = "糖尿病患者口渴"
    spans = link(text)
    assert [(text[s:e], t) for s, e, t in spans] == [
        ("糖尿病", store.entity_type(store.entity_id("糖尿病"))),
        ("口渴", store.entity_type(store.entity_id("口渴"))),
    ]
    assert all(t is not None for _, _, t in spans)


# -- memorisation -------------------------------------------------------------------------------------------
MEMO_TRAIN = [
    SpanExample("m0", "糖尿病多尿", ((0, 3, "疾病"), (3, 5, "症状"))),
    SpanExample("m1", "糖尿病肾病", ((0, 5, "疾病"),)),
    SpanExample("m2", "多尿", ((0, 2, "疾病"),)),
    SpanExample("m3", "夜间多尿", ((2, 4, "症状"),)),
]
MEMO_EVAL = [
    SpanExample("e0", "糖尿病肾病多尿", ((0, 5, "疾病"), (5, 7, "症状"))),
    SpanExample("e1", "患糖尿病", ((1, 4, "疾病"),)),
    SpanExample("e2", "多尿多", ((0, 2, "疾病"),)),
    SpanExample("e3", "肾病", ((0, 2, "疾病"),)),
]


def test_memorised_mentions_take_each_strings_majority_type():
    from kgplm.evaluation.baselines import memorised_mentions

    # 多尿: 症状 twice (m0, m3), 疾病 once (m2)
    assert memorised_mentions(MEMO_TRAIN) == {"糖尿病": "疾病", "多尿": "症状", "糖尿病肾病": "疾病"}
    tie = [SpanExample("a", "xy", ((0, 2, "乙"),)), SpanExample("b", "xy", ((0, 2, "甲"),))]
    assert memorised_mentions(tie) == {"xy": min("甲", "乙")}


def test_longest_matches_are_leftmost_longest_and_do_not_overlap():
    from kgplm.evaluation.baselines import longest_matches

    assert longest_matches("abcd", {"ab": "X", "bcd": "Y"}) == [(0, 2, "X")]  # leftmost wins over longer later
    assert longest_matches("abcd", {"a": "X", "abc": "Y", "cd": "Z"}) == [(0, 3, "Y")]
    assert longest_matches("xaxa", {"a": "X"}) == [(1, 2, "X"), (3, 4, "X")]
    assert longest_matches("abc", {}) == []


def test_memorisation_ner_by_hand():
    from kgplm.evaluation.baselines import memorisation_ner

    result = memorisation_ner(MEMO_TRAIN, MEMO_EVAL)
    # e0: (0,5,疾病) ✓ (the longer 糖尿病肾病, not 糖尿病), (5,7,症状) ✓; e1: (1,4,疾病) ✓;
    # e2: (0,2,症状) ✗ (gold 疾病); e3: nothing. Gold 5, predicted 4, correct 3.
    assert result["predicted"] == [[(0, 5, "疾病"), (5, 7, "症状")], [(1, 4, "疾病")], [(0, 2, "症状")], []]
    assert result["precision"] == pytest.approx(3 / 4)
    assert result["recall"] == pytest.approx(3 / 5)
    assert result["f1"] == pytest.approx(2 / 3)


def test_nearest_pair_by_hand_and_by_brute_force():
    import numpy as np

    from kgplm.evaluation.baselines import nearest_pair_labels, pair_overlap
    from kgplm.evaluation.readers import PairExample

    train = [PairExample("p0", "头痛怎么办", "头疼怎么办", "1"), PairExample("p1", "感冒吃什么药", "发烧吃什么药", "0")]
    evaluation = [
        PairExample("q0", "头痛怎么治", "头疼怎么办", None),
        PairExample("q1", "感冒吃啥药", "发烧吃什么药", None),
        PairExample("q2", "甲", "乙", None),  # overlaps nothing: the first training pair's label
    ]
    # q0 vs p0: first texts share 头痛 痛怎 怎么 of 5 bigrams (0.6), second texts are equal (1): 0.8
    assert pair_overlap(("头痛怎么治", "头疼怎么办"), ("头痛怎么办", "头疼怎么办")) == pytest.approx(0.8)
    # q1 vs p1: 感冒 冒吃 shared of 7 bigrams, second texts equal: (2/7 + 1) / 2
    assert pair_overlap(("感冒吃啥药", "发烧吃什么药"), ("感冒吃什么药", "发烧吃什么药")) == pytest.approx(9 / 14)
    assert nearest_pair_labels(train, evaluation) == ["1", "0", "1"]
    rng = np.random.default_rng(0)
    alphabet = list("头痛疼怎么办感冒吃什药")
    make = lambda n: "".join(rng.choice(alphabet, size=n))  # noqa: E731
    train = [PairExample(f"t{i}", make(4), make(5), str(i % 3)) for i in range(40)]
    evaluation = [PairExample(f"e{i}", make(3), make(6), None) for i in range(15)]
    brute = []
    for example in evaluation:
        overlaps = [pair_overlap((example.text_a, example.text_b), (t.text_a, t.text_b)) for t in train]
        brute.append(train[int(np.argmax(overlaps))].label)
    assert nearest_pair_labels(train, evaluation) == brute
