"""jieba segmentation with the KG's names as a user dictionary."""

from __future__ import annotations

import pytest

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


def test_every_cmekg_name_stays_whole(cmekg_store):
    """Each name and alias of CMeKG, segmented alone, is one word — also names with Greek letters,
    Roman numerals, brackets, full-width punctuation or inner spaces, which jieba's Han regex splits."""
    segmenter = Segmenter(cmekg_store)
    names = sorted({name.strip() for name in cmekg_store.name_index() if len(name.strip()) >= 2})
    assert len(names) > 130_000
    broken = [name for name in names if segmenter.words(name) != [name]]
    assert broken == [], f"{len(broken)} of {len(names)} KG names split, e.g. {broken[:10]}"


@pytest.mark.parametrize("hmm", [True, False])
def test_elsewhere_the_segmentation_is_jieba_s(shared_data, hmm):
    """With names that widen the block regex in the dictionary, real consultations that hold none of those
    names are segmented exactly as jieba's own ``Tokenizer.tokenize`` segments them."""
    import csv

    import jieba

    special = ["α-干扰素", "钾（K）", "恶心、呕吐", "维生素Ⅷ", "diabetes mellitus", "β—受体阻断剂"]
    ordinary = ["糖尿病肾病", "二甲双胍", "高血压"]
    segmenter = Segmenter(extra_words=special + ordinary, hmm=hmm)
    assert set("α（）、Ⅷ —") <= set(segmenter.extra_characters)
    reference = jieba.Tokenizer()
    reference.initialize()
    for word in special + ordinary:
        reference.add_word(word, freq=20000)
    with open(shared_data / "corpus" / "medical_dialogue" / "sample_IM_5000-6000.utf8.csv", encoding="utf-8") as handle:
        texts = [row["ask"] + "\r\n" + row["answer"] for row in list(csv.DictReader(handle))[:300]]
    texts.append("患者 MRI检查：T2WI（+），α波、β波正常…  复查\t血压 140/90mmHg。")
    checked = 0
    for text in texts:
        if any(word in text for word in special):
            continue
        expected = [(start, end) for _, start, end in reference.tokenize(text, HMM=hmm)]
        assert segmenter.segment(text) == expected, text
        checked += 1
    assert checked > 250
    # where such a name occurs it is one word, and the spans still tile the text
    text = "注射α-干扰素后恶心、呕吐，补钾（K）。"
    words = segmenter.words(text)
    assert "".join(words) == text and {"α-干扰素", "恶心、呕吐", "钾（K）"} <= set(words)
