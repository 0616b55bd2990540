"""Pre-training batches: SOP pairs keep the text and the mentions, Q(e) sampling, MMeM targets."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kgplm.text.masking import Masker
from kgplm.training.collator import PretrainingCollator, TypeFrequencySampler

CLS, SEP, PAD, MASK = 2, 3, 0, 4


def _rows():
    """Three chunks: ids 10.. with mentions given as token [start, end)."""
    bodies = [list(range(10, 30)), list(range(40, 47)), [50]]
    spans = [[[1, 4], [6, 7], [15, 20]], [[2, 5]], []]
    return {
        "input_ids": [[CLS, *body, SEP] for body in bodies],
        "mention_spans": spans,
        "mention_entity_ids": [[0, 1, 2], [3], []],
        "neighbor_ids": [[[5, 6, -1], [7, -1, -1], [-1, -1, -1]], [[8, 9, 5]], []],
        "neighbor_relations": [[[0, 1, -1], [2, -1, -1], [-1, -1, -1]], [[0, 0, 1]], []],
        "neighbor_directions": [[[0, 1, -1], [0, -1, -1], [-1, -1, -1]], [[1, 0, 0]], []],
        "neighbor_types": [[[0, 1, -1], [1, -1, -1], [-1, -1, -1]], [[0, 0, 1]], []],
    }


def _collator(**options):
    masker = Masker("whole_entity", mask_token_id=MASK, vocab_size=100, special_token_ids=[PAD, 1, CLS, SEP])
    sampler = TypeFrequencySampler(np.arange(10), np.array([0, 0, 0, 1, 1, 1, 0, 1, -1, -1]))
    return PretrainingCollator(masker=masker, cls_token_id=CLS, sep_token_id=SEP, pad_token_id=PAD, sampler=sampler,
                               num_negatives=3, **options)


@pytest.mark.parametrize("seed", range(8))
def test_sop_pairs_keep_the_text_and_the_mentions(seed):
    rows = _rows()
    batch = _collator()(rows, seed)
    original = batch["original_input_ids"]
    for row, label in enumerate(batch["sentence_order_label"].tolist()):
        body = rows["input_ids"][row][1:-1]
        ids = original[row][batch["attention_mask"][row].bool()].tolist()
        if len(body) < 2:
            assert label == -100 and ids == [CLS, *body, SEP]
            continue
        assert ids[0] == CLS and ids[-1] == SEP and ids.count(SEP) == 2
        middle = ids.index(SEP)
        first, second = ids[1:middle], ids[middle + 1:-1]
        assert (second + first if label == 1 else first + second) == body
        types = batch["token_type_ids"][row][: len(ids)].tolist()
        assert types == [0] * (len(first) + 2) + [1] * (len(second) + 1)
    # every kept mention still covers the tokens of its entity's original span
    entity_ids = batch["mention_entity_ids"].tolist()
    for mention, (row, (start, end)) in enumerate(zip(batch["mention_batch"].tolist(),
                                                      batch["mention_spans"].tolist())):
        source = rows["mention_entity_ids"][row].index(entity_ids[mention])
        old_start, old_end = rows["mention_spans"][row][source]
        assert original[row, start:end].tolist() == rows["input_ids"][row][old_start:old_end]


def test_the_same_seed_gives_the_same_batch_and_another_seed_another():
    first, again, other = _collator()(_rows(), 5), _collator()(_rows(), 5), _collator()(_rows(), 6)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not all(first[k].shape == other[k].shape and torch.equal(first[k], other[k]) for k in first)


def test_neighbour_edges_and_mmem_targets():
    batch = _collator(sentence_order=False)(_rows(), 0)
    assert batch["mention_batch"].tolist() == [0, 0, 0, 1]
    assert batch["neighbor_mention"].tolist() == [0, 0, 1, 3, 3, 3]  # padding (-1) dropped, mention 2 has none
    assert batch["neighbor_entity_ids"].tolist() == [5, 6, 7, 8, 9, 5]
    assert batch["neighbor_relation_ids"].tolist() == [0, 1, 2, 0, 0, 1]
    assert batch["negative_entity_ids"].shape == (6, 3)
    assert batch["candidate_log_q"].shape == (6, 4)
    chosen = batch["labels"] >= 0
    for mention, (row, (start, end)) in enumerate(zip(batch["mention_batch"].tolist(),
                                                      batch["mention_spans"].tolist())):
        assert bool(batch["mention_masked"][mention]) == bool(chosen[row, start:end].all())


def test_type_frequency_sampler_follows_q_within_the_type():
    frequencies = np.array([0, 3, 6, 0, 10, 1, 9])
    types = np.array([0, 0, 0, 1, 1, -1, -1])
    sampler = TypeFrequencySampler(frequencies, types)
    # Q by hand, add-one smoothed within each type (untyped is its own bucket)
    expected = {0: [1 / 12, 4 / 12, 7 / 12], 1: [1 / 12, 11 / 12], 2: [2 / 12, 10 / 12]}
    assert np.allclose(np.exp(sampler.log_q), [1 / 12, 4 / 12, 7 / 12, 1 / 12, 11 / 12, 2 / 12, 10 / 12])
    rng = np.random.default_rng(0)
    for positive, members in ((0, [0, 1, 2]), (4, [3, 4]), (5, [5, 6])):
        draws = sampler.sample(np.full(20000, positive), 5, rng).ravel()
        assert set(np.unique(draws)) <= set(members)  # never another type
        observed = np.array([(draws == m).mean() for m in members])
        bucket = {0: 0, 4: 1, 5: 2}[positive]
        assert np.allclose(observed, expected[bucket], atol=0.01)
