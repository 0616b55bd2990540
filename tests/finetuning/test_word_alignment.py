"""English NER is word-aligned (issue 29.5): tags on each word's first piece, spans decoded per word."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kgplm.evaluation.tasks import get_task, load_task
from kgplm.finetuning.encoding import TaskEncoder, label_names_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ncbi(shared_data):
    """NCBI-disease (BLURB) and a small WordPiece vocabulary trained on it, so that most words split."""
    from kgplm.text.tokenization import build_vocab

    splits = load_task("ncbi-disease", shared_data / "tasks")
    tokenizer = build_vocab((e.text for e in splits["train"][:2000]), 400, min_frequency=2, show_progress=False)
    spec = get_task("ncbi-disease")
    labels = label_names_for(spec, splits["train"], "bio")
    return spec, splits, tokenizer, labels


def _inside_a_word(text: str, start: int, end: int) -> bool:
    """A span boundary between two word characters (letters or digits) is inside a word."""

    def joined(i: int) -> bool:
        return 0 < i < len(text) and bool(re.match(r"\w", text[i - 1])) and bool(re.match(r"\w", text[i]))

    return joined(start) or joined(end)


def test_predicted_spans_never_start_or_end_inside_a_word(ncbi):
    spec, splits, tokenizer, labels = ncbi
    encoder = TaskEncoder(spec, tokenizer, label_names=labels, max_length=64)
    examples = splits["test"][:150]
    features = encoder.encode(examples)
    rng = np.random.default_rng(0)
    # any tag on any piece: what an untrained (or badly trained) tagger outputs
    outputs = [rng.normal(size=(len(f["input_ids"]), len(labels))).astype(np.float32) for f in features]
    predicted = encoder.predicted_spans(examples, features, outputs)
    spans = [(example.text, start, end) for example, found in zip(examples, predicted) for start, end, _ in found]
    assert len(spans) > 300  # the check below is not vacuous
    assert [text[start:end] for text, start, end in spans if _inside_a_word(text, start, end)] == []
    pieces = sum(int((f["word_ids"][1:] == f["word_ids"][:-1]).sum()) for f in features)
    assert pieces > 100  # the vocabulary does split words into pieces


def test_only_the_first_piece_of_a_word_carries_its_tag(ncbi):
    spec, splits, tokenizer, labels = ncbi
    encoder = TaskEncoder(spec, tokenizer, label_names=labels, max_length=64)
    features = encoder.encode(splits["train"][:100])
    continued = trained = 0
    for feature in features:
        words, tags = feature["word_ids"], feature["labels"]
        later_piece = np.concatenate([[False], (words[1:] == words[:-1]) & (words[1:] >= 0)])
        continued += int(later_piece.sum())
        assert (tags[later_piece] == -100).all()
        trained += int((tags[~later_piece & (words >= 0)] != -100).sum())
    assert continued > 0 and trained > 0
    # the gold spans of BLURB are whole words: none counted as inside a word
    assert encoder.statistics["spans_not_on_word_boundaries"] == 0
