"""Masking schemes: rates within tolerance, whole units, no bias against long units, at least one target,
per-sequence generators, dynamic re-drawing, special tokens untouched."""

from __future__ import annotations

import numpy as np
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


@pytest.mark.parametrize("scheme", ["bert", "whole_word", "whole_entity", "word_entity", "span"])
def test_rates_and_replacement_split(scheme):
    ids, attention = batch()
    maskable = ~torch.isin(ids, torch.tensor(SPECIAL))
    masked, labels = masker(scheme, seed=1)(
        ids, attention_mask=attention, word_ids=word_ids_for(ids), mention_spans=mention_spans_for(ids)
    )
    chosen = labels != -100
    rate = chosen.sum().item() / maskable.sum().item()
    assert 0.13 <= rate <= 0.17, rate  # every unit is chosen with probability 0.15
    assert not (chosen & ~maskable).any()
    assert torch.equal(labels[chosen], ids[chosen])
    as_mask = (masked == MASK) & chosen
    unchanged = (masked == ids) & chosen
    random = chosen & ~as_mask & ~unchanged
    total = chosen.sum().item()

    def tolerance(share):  # four binomial standard errors over ~1,100 chosen tokens
        return 4 * (share * (1 - share) / total) ** 0.5

    assert as_mask.sum().item() / total == pytest.approx(0.8, abs=tolerance(0.8))
    # a random draw can hit the original id (1/495), so "kept" is 10% plus a hair
    assert unchanged.sum().item() / total == pytest.approx(0.1, abs=tolerance(0.1))
    assert random.sum().item() / total == pytest.approx(0.1, abs=tolerance(0.1))
    assert not torch.isin(masked[random], torch.tensor(SPECIAL)).any()
    assert torch.equal(masked[~chosen], ids[~chosen])


def test_kebiolm_rates_twelve_and_one_and_a_half_percent():
    ids, attention = batch(rows=128)
    maskable = ~torch.isin(ids, torch.tensor(SPECIAL))
    # KeBioLM's scheme: words and mentions whole (word_entity), BERT's 80/10/10 of the 15% chosen
    masked, labels = masker("word_entity", seed=3)(
        ids, attention_mask=attention, word_ids=word_ids_for(ids), mention_spans=mention_spans_for(ids)
    )
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


def test_word_entity_units_are_mentions_and_the_words_outside_them():
    """EP-PLM's biomedical entity masking: a mention is one unit even across words; a word a mention cuts
    keeps its remaining tokens together; other words are whole; with mask_fraction 1 every chosen token is [MASK]."""
    ids, attention = batch()
    word_ids = word_ids_for(ids)  # words of 3 tokens: [3k, 3k + 3)
    spans = mention_spans_for(ids)  # (5, 9) takes the last token of word 1 and all of word 2 …
    masked, labels = masker("word_entity", seed=6, mask_fraction=1.0, random_fraction=0.0)(
        ids, attention_mask=attention, word_ids=word_ids, mention_spans=spans
    )
    chosen = (labels != -100).tolist()
    mentions_chosen = words_chosen = 0
    for row in range(ids.shape[0]):
        in_mention = set()
        for start, end in spans[row]:
            assert len(set(chosen[row][start:end])) == 1
            in_mention.update(range(start, end))
            mentions_chosen += chosen[row][start]
        groups = {}
        for position, word in enumerate(word_ids[row]):
            if word >= 0 and ids[row, position] != PAD and position not in in_mention:
                groups.setdefault(word, set()).add(chosen[row][position])
        assert all(len(states) == 1 for states in groups.values())
        words_chosen += sum(True in states for states in groups.values())
    assert torch.equal(masked[labels != -100], torch.full_like(masked[labels != -100], MASK))
    assert mentions_chosen > 0 and words_chosen > 0
    # the leftover of a cut word is one unit: positions 3–4 (word 1 minus the mention's 5) move together
    assert all(chosen[row][3] == chosen[row][4] for row in range(ids.shape[0]))


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
    with pytest.raises(ConfigurationError, match="word_entity masking needs word_ids"):
        masker("word_entity")(ids, attention_mask=attention)


def test_long_mentions_are_masked_as_often_as_other_tokens():
    """24-token sequences with one 4-token mention: per token, mention and other tokens at the same rate.

    (Budget-and-skip masking never chose such a mention: 4 tokens exceed round(0.15 · 22) = 3.)
    """
    rows = 4000
    ids = torch.randint(5, VOCAB, (rows, 24), generator=torch.Generator().manual_seed(5))
    ids[:, 0], ids[:, -1] = CLS, SEP
    spans = [[(3, 7)] for _ in range(rows)]
    _, labels = masker("whole_entity", seed=5)(ids, attention_mask=torch.ones_like(ids), mention_spans=spans)
    chosen = labels != -100
    in_mention = torch.zeros_like(chosen)
    in_mention[:, 3:7] = True
    maskable = ~torch.isin(ids, torch.tensor(SPECIAL))
    mention_rate = chosen[in_mention].float().mean().item()
    other_rate = chosen[~in_mention & maskable].float().mean().item()
    # 4000 mentions: the standard error of the mention rate is ~0.006
    assert mention_rate == pytest.approx(other_rate, abs=0.02)
    assert 0.14 <= other_rate <= 0.18  # 0.15 plus the at-least-one-target correction in short sequences


@pytest.mark.parametrize("scheme", ["bert", "whole_word", "whole_entity", "word_entity", "span"])
def test_every_sequence_with_a_maskable_token_gets_a_target(scheme):
    ids = torch.tensor(
        [[CLS, 10, SEP, PAD, PAD], [CLS, 11, 12, SEP, PAD], [CLS, 13, 14, 15, SEP], [CLS, SEP, PAD, PAD, PAD]]
    )
    attention = (ids != PAD).long()
    word_ids = [[-1, 0, -1, -1, -1], [-1, 0, 0, -1, -1], [-1, 0, 1, 1, -1], [-1] * 5]
    spans = [[], [(1, 3)], [(2, 4)], []]
    for seed in range(50):
        _, labels = masker(scheme, seed=seed)(ids, attention_mask=attention, word_ids=word_ids, mention_spans=spans)
        assert ((labels != -100).sum(1) >= 1).tolist() == [True, True, True, False]


def test_a_sequence_mask_depends_only_on_its_own_generator():
    ids, attention = batch(rows=4)
    m = masker("whole_entity")
    spans = mention_spans_for(ids)
    alone, alone_labels = m(
        ids[:1], attention_mask=attention[:1], mention_spans=spans[:1], rngs=[np.random.default_rng(11)]
    )
    together, together_labels = m(
        ids,
        attention_mask=attention,
        mention_spans=spans,
        rngs=[np.random.default_rng(11)] + [np.random.default_rng(s) for s in (1, 2, 3)],
    )
    assert torch.equal(alone[0], together[0]) and torch.equal(alone_labels[0], together_labels[0])


def test_corrupt_replaces_exactly_the_chosen_tokens_80_10_10():
    """``corrupt`` (what ``mask_sequence`` does after choosing, and what a method that chooses its own
    targets calls): labels are the original ids at the chosen tokens, the others are untouched."""
    ids, _ = batch(rows=1, length=20000)
    ids = ids[0].numpy()
    chosen = np.zeros(len(ids), dtype=bool)
    chosen[1:-1:2] = True
    masked, labels = masker("bert").corrupt(ids, chosen, np.random.default_rng(0))
    assert (labels[chosen] == ids[chosen]).all() and (labels[~chosen] == -100).all()
    assert (masked[~chosen] == ids[~chosen]).all()
    as_mask = (masked[chosen] == MASK).mean()
    kept = (masked[chosen] == ids[chosen]).mean()
    assert abs(as_mask - 0.8) < 0.02 and abs(kept - 0.1) < 0.02  # random draws may hit the original id (1/495)
