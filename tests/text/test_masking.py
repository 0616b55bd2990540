"""Masking schemes: rates within tolerance, whole units, dynamic re-drawing, special tokens untouched."""

from __future__ import annotations

import pytest
import torch

from kgplm.exceptions import ConfigurationError
from kgplm.text import Masker

VOCAB, MASK, CLS, SEP, PAD = 500, 4, 2, 3, 0
SPECIAL = [PAD, 1, CLS, SEP, MASK]


def batch(rows=64, length=128, seed=0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (rows, length), generator=generator)
    ids[:, 0], ids[:, -1] = CLS, SEP
    ids[: rows // 4, -10:] = PAD  # some padding
    ids[: rows // 4, -11] = SEP
    attention = (ids != PAD).long()
    return ids, attention


def masker(scheme, **options):
    return Masker(scheme, mask_token_id=MASK, vocab_size=VOCAB, special_token_ids=SPECIAL, **options)


def word_ids_for(ids, word_length=3):
    positions = torch.arange(ids.shape[1]).expand_as(ids)
    return torch.where(torch.isin(ids, torch.tensor(SPECIAL)), -1, positions // word_length).tolist()


def mention_spans_for(ids):
    return [[(5, 9), (20, 22), (40, 47), (90, 93)] for _ in range(ids.shape[0])]


@pytest.mark.parametrize("scheme", ["bert", "whole_word", "whole_entity", "span"])
def test_rates_and_replacement_split(scheme):
    ids, attention = batch()
    maskable = ~torch.isin(ids, torch.tensor(SPECIAL))
    masked, labels = masker(scheme, seed=1)(ids, attention_mask=attention, word_ids=word_ids_for(ids),
                                          mention_spans=mention_spans_for(ids))
    chosen = labels != -100
    rate = chosen.sum().item() / maskable.sum().item()
    assert 0.135 <= rate <= 0.15, rate  # the budget is never exceeded; whole units may leave a little unused
    assert not (chosen & ~maskable).any()
    assert torch.equal(labels[chosen], ids[chosen])
    as_mask = (masked == MASK) & chosen
    unchanged = (masked == ids) & chosen
    random = chosen & ~as_mask & ~unchanged
    total = chosen.sum().item()
    assert as_mask.sum().item() / total == pytest.approx(0.8, abs=0.03)
    # a random draw can hit the original id (1/495), so "kept" is 10% plus a hair
    assert unchanged.sum().item() / total == pytest.approx(0.1, abs=0.025)
    assert random.sum().item() / total == pytest.approx(0.1, abs=0.025)
    assert not torch.isin(masked[random], torch.tensor(SPECIAL)).any()
    assert torch.equal(masked[~chosen], ids[~chosen])


def test_kebiolm_rates_twelve_and_one_and_a_half_percent():
    ids, attention = batch(rows=128)
    maskable = ~torch.isin(ids, torch.tensor(SPECIAL))
    masked, labels = masker("whole_entity", seed=3)(ids, attention_mask=attention, mention_spans=mention_spans_for(ids))
    tokens = maskable.sum().item()
    assert ((masked == MASK) & maskable).sum().item() / tokens == pytest.approx(0.12, abs=0.006)
    random = (labels != -100) & (masked != MASK) & (masked != ids)
    assert random.sum().item() / tokens == pytest.approx(0.015, abs=0.004)


@pytest.mark.parametrize("scheme,units", [("whole_word", "words"), ("whole_entity", "mentions")])
def test_whole_units_are_chosen_together(scheme, units):
    ids, attention = batch()
    word_ids = word_ids_for(ids)
    spans = mention_spans_for(ids)
    _, labels = masker(scheme, seed=2)(ids, attention_mask=attention, word_ids=word_ids, mention_spans=spans)
    chosen = (labels != -100).tolist()
    for row in range(ids.shape[0]):
        if units == "words":
            groups = {}
            for position, word in enumerate(word_ids[row]):
                if word >= 0 and ids[row, position] != PAD:
                    groups.setdefault(word, set()).add(chosen[row][position])
            assert all(len(states) == 1 for states in groups.values())
        else:
            for start, end in spans[row]:
                assert len(set(chosen[row][start:end])) == 1


def test_span_masking_chooses_contiguous_runs():
    ids, attention = batch(rows=32)
    _, labels = masker("span", seed=4)(ids, attention_mask=attention)
    chosen = (labels != -100).int()
    runs = (chosen[:, 1:] > chosen[:, :-1]).sum().item()  # number of run starts
    assert chosen.sum().item() / max(runs, 1) > 2.5  # mean run length; geometric(0.2) clipped at 10 ≈ 3.8


def test_masks_are_dynamic_and_reproducible():
    ids, attention = batch(rows=8)
    first = masker("bert", seed=7)
    a, _ = first(ids, attention_mask=attention)
    b, _ = first(ids, attention_mask=attention)
    assert not torch.equal(a, b)  # a new mask every epoch
    again, _ = masker("bert", seed=7)(ids, attention_mask=attention)
    assert torch.equal(a, again)


def test_bad_configuration():
    with pytest.raises(ConfigurationError, match="scheme"):
        masker("random")
    with pytest.raises(ConfigurationError, match="sum to at most 1"):
        masker("bert", mask_fraction=0.9, random_fraction=0.2)
    ids, attention = batch(rows=2)
    with pytest.raises(ConfigurationError, match="word_ids"):
        masker("whole_word")(ids, attention_mask=attention)
