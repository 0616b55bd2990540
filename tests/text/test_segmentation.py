"""jieba segmentation with the KG's names as a user dictionary."""

from __future__ import annotations

from kgplm import KGStore
from kgplm.text import Segmenter

TEXT = "二甲双胍治疗消渴伴多尿"


def test_kg_names_stay_whole_and_spans_tile_the_text(toy_turtle):
    store = KGStore.from_rdf(toy_turtle, show_progress=False)
    segmenter = Segmenter(store)
    spans = segmenter.segment(TEXT)
    assert spans[0][0] == 0 and spans[-1][1] == len(TEXT)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    words = segmenter.words(TEXT)
    assert {"二甲双胍", "消渴", "多尿"} <= set(words)
    assert segmenter.num_added_words >= 8


def test_segmentation_is_deterministic_and_private(toy_turtle):
    plain = Segmenter(extra_words=["伴多尿"])
    assert plain.words(TEXT) == Segmenter(extra_words=["伴多尿"]).words(TEXT)
    assert "伴多尿" in plain.words(TEXT)
    # another segmenter's dictionary does not leak into this one
    assert "伴多尿" not in Segmenter().words(TEXT)
