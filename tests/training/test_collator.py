"""The pre-training collator: SOP pairs keep the text and the mentions; every example has its own generator."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kgplm.text.masking import Masker
from kgplm.training.collator import PretrainingCollator

CLS, SEP, PAD, MASK = 2, 3, 0, 4


def _rows():
    bodies = [list(range(10, 30)), list(range(40, 47)), [50]]
    return {
        "input_ids": [[CLS, *body, SEP] for body in bodies],
        "mention_spans": [[[1, 4], [6, 7], [15, 20]], [[2, 5]], []],
    }


def _collator(sentence_order=True):
    masker = Masker("whole_entity", mask_token_id=MASK, vocab_size=100, special_token_ids=[PAD, 1, CLS, SEP])
    return PretrainingCollator(
        masker=masker, cls_token_id=CLS, sep_token_id=SEP, pad_token_id=PAD, sentence_order=sentence_order
    )


def _seeds(step):
    return np.stack([np.zeros(3, np.int64), np.full(3, step), np.arange(3)], 1)


@pytest.mark.parametrize("step", range(8))
def test_sop_pairs_keep_the_text_and_the_masks_cover_whole_mentions(step):
    rows = _rows()
    batch = _collator()(rows, _seeds(step))
    original = torch.where(batch["labels"] >= 0, batch["labels"], batch["input_ids"])
    for row, label in enumerate(batch["sentence_order_label"].tolist()):
        body = rows["input_ids"][row][1:-1]
        ids = original[row][batch["attention_mask"][row].bool()].tolist()
        if len(body) < 2:
            assert label == -100 and ids == [CLS, *body, SEP]
            continue
        assert ids[0] == CLS and ids[-1] == SEP and ids.count(SEP) == 2
        middle = ids.index(SEP)
        first, second = ids[1:middle], ids[middle + 1 : -1]
        assert (second + first if label == 1 else first + second) == body
        types = batch["token_type_ids"][row][: len(ids)].tolist()
        assert types == [0] * (len(first) + 2) + [1] * (len(second) + 1)
    assert batch.target_counts == {
        "mlm": int((batch["labels"] >= 0).sum()),
        "sop": int((batch["sentence_order_label"] >= 0).sum()),
    }


def test_the_same_seeds_give_the_same_batch_and_other_seeds_another():
    first, again, other = (
        _collator()(_rows(), _seeds(5)),
        _collator()(_rows(), _seeds(5)),
        _collator()(_rows(), _seeds(6)),
    )
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not all(first[k].shape == other[k].shape and torch.equal(first[k], other[k]) for k in first)


def test_without_sentence_order_the_chunks_stay_whole():
    batch = _collator(sentence_order=False)(_rows(), _seeds(0))
    assert "sentence_order_label" not in batch and set(batch.target_counts) == {"mlm"}
    original = torch.where(batch["labels"] >= 0, batch["labels"], batch["input_ids"])
    assert original[1, :9].tolist() == _rows()["input_ids"][1]
