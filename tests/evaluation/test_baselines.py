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
