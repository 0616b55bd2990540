"""SMedBERT's batches: disjoint knowledge mentions and MNeM targets, Q(e) sampling, counts, fine-tuning inputs."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from kgplm.methods.smedbert import (
    SmedbertCollator,
    SmedbertForPreTraining,
    TypeFrequencySampler,
)
from kgplm.text.masking import Masker
from tests.methods.conftest import tiny_config

CLS, SEP, PAD, MASK = 2, 3, 0, 4


def _rows():
    """Three chunks: ids 10.. with mentions given as token [start, end) and their PEPR rows."""
    bodies = [list(range(10, 30)), list(range(40, 47)), [50]]
    spans = [[[1, 4], [6, 7], [15, 20]], [[2, 5]], []]
    return {
        "input_ids": [[CLS, *body, SEP] for body in bodies],
        "mention_spans": spans,
        "mention_entity_ids": [[0, 1, 2], [3], []],
        "neighbor_ids": [[[5, 6, -1], [7, -1, -1], [8, 9, 10]], [[8, 9, 5]], []],
        "neighbor_relations": [[[0, 1, -1], [2, -1, -1], [0, 2, 1]], [[0, 0, 1]], []],
        "neighbor_directions": [[[0, 1, -1], [0, -1, -1], [1, 1, 0]], [[1, 0, 0]], []],
        "neighbor_types": [[[0, 1, -1], [1, -1, -1], [0, 0, 1]], [[0, 0, 1]], []],
    }


def _collator(rate=0.5, **options):
    masker = Masker("whole_entity", mask_token_id=MASK, vocab_size=60, special_token_ids=[PAD, 1, CLS, SEP],
                    rate=rate)
    sampler = TypeFrequencySampler(np.arange(24), np.array([0, 1] * 12))
    options = {"sentence_order": True, **options}
    return SmedbertCollator(masker=masker, cls_token_id=CLS, sep_token_id=SEP, pad_token_id=PAD, sampler=sampler,
                            num_negatives=4, **options)


def _seeds(step, size=3):
    return np.stack([np.zeros(size, np.int64), np.full(size, step), np.arange(size)], 1)


@pytest.mark.parametrize("step", range(12))
def test_knowledge_mentions_are_the_masked_ones_and_mnem_targets_the_rest(step):
    batch = _collator()(_rows(), _seeds(step))
    chosen = batch["labels"] >= 0
    knowledge = list(zip(batch["mention_batch"].tolist(), map(tuple, batch["mention_spans"].tolist())))
    targets = list(zip(batch["mnem_mention_batch"].tolist(), map(tuple, batch["mnem_mention_spans"].tolist())))
    assert not set(knowledge) & set(targets)  # disjoint
    for row, (start, end) in knowledge:
        assert chosen[row, start:end].all()
    for row, (start, end) in targets:
        assert not chosen[row, start:end].all()
    # edges belong to the right set and skip padding (-1)
    assert batch["neighbor_mention"].numpy().max(initial=-1) < len(knowledge)
    assert batch["mnem_edge_mention"].numpy().max(initial=-1) < len(targets)
    assert (batch["neighbor_entity_ids"] >= 0).all() and (batch["mnem_entity_ids"] >= 0).all()
    assert batch["mnem_negative_ids"].shape == (len(batch["mnem_entity_ids"]), 4)
    assert batch["mnem_log_q"].shape == (len(batch["mnem_entity_ids"]), 5)
    assert batch.target_counts == {"mlm": int(chosen.sum()), "sop": 2, "mmem": len(knowledge),
                                   "mnem": len(batch["mnem_entity_ids"])}


def test_changing_the_neighbours_of_mnem_targets_changes_no_hidden_state():
    """The label leak of the reviewed code: MNeM targets' neighbours must not be injected."""
    collator = _collator()
    rows = _rows()
    seeds = _seeds(3)
    batch = collator(rows, seeds)
    assert len(batch["mnem_entity_ids"]) and len(batch["neighbor_entity_ids"])  # both sets present
    altered = copy.deepcopy(rows)
    for row in range(3):
        for index in range(len(rows["mention_spans"][row])):
            altered["neighbor_ids"][row][index] = [(e + 11) % 24 if e >= 0 else e
                                                   for e in rows["neighbor_ids"][row][index]]
    changed = collator(altered, seeds)  # the same seeds: the same masks, so the same mention sets
    for name in ("mnem_mention_batch", "mnem_mention_spans", "mention_batch", "mention_spans", "input_ids"):
        assert torch.equal(batch[name], changed[name])
    torch.manual_seed(0)
    model = SmedbertForPreTraining(tiny_config(neighbor_candidates="one_hop")).eval()
    knowledge_edges = {k: batch[k] for k in ("neighbor_mention", "neighbor_entity_ids", "neighbor_relation_ids",
                                             "neighbor_directions", "neighbor_type_ids")}
    with torch.no_grad():
        # the altered corpus changed every mention's neighbours; restore the knowledge mentions' ones
        mixed = dict(changed, **knowledge_edges)
        before, after = model(**batch), model(**mixed)
    assert not torch.equal(batch["mnem_entity_ids"], mixed["mnem_entity_ids"])
    assert torch.equal(before.last_hidden_state, after.last_hidden_state)


def test_an_example_does_not_depend_on_its_batch_partners():
    rows = _rows()
    together = _collator()(rows, _seeds(5))
    alone = _collator()({k: v[:1] for k, v in rows.items()}, _seeds(5)[:1])
    length = int(alone["attention_mask"][0].sum())
    for name in ("input_ids", "labels", "token_type_ids"):
        assert torch.equal(alone[name][0, :length], together[name][0, :length])
    assert alone["sentence_order_label"][0] == together["sentence_order_label"][0]
    first_rows = together["mnem_mention_batch"] == 0
    first_edges = first_rows[together["mnem_edge_mention"]]
    assert torch.equal(alone["mnem_negative_ids"], together["mnem_negative_ids"][first_edges])


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
