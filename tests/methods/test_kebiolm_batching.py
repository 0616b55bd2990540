"""KeBioLM's batches: gold B/I/O tags and linking targets from the linked corpus, by hand."""

from __future__ import annotations

import numpy as np
import torch

from kgplm.methods.kebiolm import KebiolmCollator
from kgplm.text.masking import Masker

CLS, SEP, PAD, MASK = 2, 3, 0, 4


def _rows():
    """Three chunks (ids 10.. between [CLS] and [SEP]) with mentions as token [start, end)."""
    bodies = [list(range(10, 20)), list(range(40, 44)), [50]]
    return {
        "input_ids": [[CLS, *body, SEP] for body in bodies],
        "mention_spans": [[[1, 3], [4, 5], [8, 11]], [[1, 5]], []],  # [8, 11) ends right before [SEP]
        "mention_entity_ids": [[7, 1, 5], [2], []],
    }


def _collator(max_mentions=50):
    masker = Masker("whole_entity", mask_token_id=MASK, vocab_size=60, special_token_ids=[PAD, 1, CLS, SEP])
    return KebiolmCollator(
        masker=masker, cls_token_id=CLS, sep_token_id=SEP, pad_token_id=PAD, max_mentions=max_mentions
    )


def _seeds(step, size=3):
    return np.stack([np.zeros(size, np.int64), np.full(size, step), np.arange(size)], 1)


def test_gold_tags_spans_entities_and_counts():
    batch = _collator()(_rows(), _seeds(0))
    x = -100
    assert batch["detection_labels"].tolist() == [
        [x, 1, 2, 0, 1, 0, 0, 0, 1, 2, 2, x],
        [x, 1, 2, 2, 2, x, x, x, x, x, x, x],
        [x, 0, x, x, x, x, x, x, x, x, x, x],
    ]
    assert batch["mention_batch"].tolist() == [0, 0, 0, 1]
    assert batch["mention_spans"].tolist() == [[1, 3], [4, 5], [8, 11], [1, 5]]
    assert batch["mention_entity_ids"].tolist() == [7, 1, 5, 2]
    assert batch.target_counts == {"mlm": int((batch["labels"] >= 0).sum()), "ed": 10 + 4 + 1, "el": 4}
    assert "sentence_order_label" not in batch  # KeBioLM has no sentence task


def test_tags_do_not_depend_on_masking():
    """Masked mention tokens keep their B/I tags (the detector must find masked entities too)."""
    for step in range(8):
        batch = _collator()(_rows(), _seeds(step))
        assert torch.equal(batch["detection_labels"], _collator()(_rows(), _seeds(0))["detection_labels"])
        assert (batch["labels"] >= 0).any()


def test_only_the_first_mentions_are_linked_but_all_are_tagged():
    batch = _collator(max_mentions=2)(_rows(), _seeds(0))
    assert batch["mention_spans"].tolist() == [[1, 3], [4, 5], [1, 5]]
    assert batch["mention_entity_ids"].tolist() == [7, 1, 2]
    assert batch["detection_labels"][0, 8:11].tolist() == [1, 2, 2]
    assert batch.target_counts["el"] == 3
