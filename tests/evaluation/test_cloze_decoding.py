"""Confidence-ordered beam decoding against exhaustive search over every fill and every order."""

from __future__ import annotations

import itertools

import pytest
import torch

from kgplm.evaluation.cloze_decoding import fill_masks, piece_surface


class TinyTokenizer:
    """ids 0-4 special ([PAD] [UNK] [CLS] [SEP] [MASK]), 5.. ordinary."""

    pad_token_id, unk_token_id, cls_token_id, sep_token_id, mask_token_id = 0, 1, 2, 3, 4
    all_special_ids = [0, 1, 2, 3, 4]

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab


class NeighbourModel(torch.nn.Module):
    """logits[i] = A[x_{i−1}] + B[x_{i+1}] + C[i]: each position's distribution depends on what its
    neighbours hold, so the order in which masks are filled changes the scores."""

    def __init__(self, vocab: int, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.left = torch.randn(vocab, vocab, generator=generator)
        self.right = torch.randn(vocab, vocab, generator=generator)
        self.position = torch.randn(16, vocab, generator=generator)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        left = torch.nn.functional.pad(input_ids, (1, 0))[:, :-1]
        right = torch.nn.functional.pad(input_ids, (0, 1))[:, 1:]
        logits = self.left[left] + self.right[right] + self.position[: input_ids.shape[1]]
        return type("Output", (), {"prediction_logits": logits})()


def _exhaustive(model, tokenizer, prefix, suffix, num_masks):
    """max over decoding orders of the accumulated log-probability, for every fill of ordinary tokens."""
    ordinary = range(5, tokenizer.vocab)
    start = 1 + len(prefix)
    special = torch.tensor(tokenizer.all_special_ids)

    def log_probs(fill):
        ids = torch.tensor([[2, *prefix, *fill, *suffix, 3]])
        logits = model(ids).prediction_logits[0, start : start + num_masks]
        logits[:, special] = float("-inf")
        return torch.log_softmax(logits, -1)

    best = {}
    for fill in itertools.product(ordinary, repeat=num_masks):
        for order in itertools.permutations(range(num_masks)):
            state, score = [4] * num_masks, 0.0
            for position in order:
                score += float(log_probs(state)[position, fill[position]])
                state[position] = fill[position]
            best[fill] = max(best.get(fill, float("-inf")), score)
    return sorted(best.items(), key=lambda item: -item[1])


@pytest.mark.parametrize("num_masks", [1, 2, 3])
def test_a_wide_beam_is_exhaustive_over_fills_and_orders(num_masks):
    tokenizer, model = TinyTokenizer(9), NeighbourModel(9)
    contexts = [([5, 6], [7]), ([8], [])]
    width = 4**num_masks * 8  # more than every partial fill: nothing is pruned
    beams = fill_masks(model, tokenizer, contexts, num_masks, beam_size=width, batch_size=3)
    for (prefix, suffix), found in zip(contexts, beams):
        expected = _exhaustive(model, tokenizer, prefix, suffix, num_masks)
        assert [fill for fill, _ in found] == [fill for fill, _ in expected]
        assert [score for _, score in found] == pytest.approx([score for _, score in expected], abs=1e-5)


def test_beam_of_five_keeps_five_distinct_fills_of_ordinary_tokens():
    tokenizer, model = TinyTokenizer(12), NeighbourModel(12, seed=1)
    beams = fill_masks(model, tokenizer, [([5], [6])], 3, beam_size=5)
    fills = [fill for fill, _ in beams[0]]
    assert len(fills) == len(set(fills)) == 5
    assert all(token >= 5 for fill in fills for token in fill)
    scores = [score for _, score in beams[0]]
    assert scores == sorted(scores, reverse=True)


def test_piece_surface():
    assert piece_surface(["糖", "尿", "病"]) == "糖尿病"
    assert piece_surface(["met", "##form", "##in"]) == "metformin"


def test_a_model_without_a_vocabulary_head_is_refused_clearly():
    """An ELECTRA discriminator's prediction_logits are (batch, length) replaced-token scores; before,
    the decoder indexed them as a vocabulary and failed with an IndexError."""
    from kgplm.exceptions import ConfigurationError

    class TokenScores(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None, token_type_ids=None):
            return type("Output", (), {"prediction_logits": torch.zeros(input_ids.shape)})()

    with pytest.raises(ConfigurationError, match="masked-LM head"):
        fill_masks(TokenScores(), TinyTokenizer(8), [((5,), (6,))], 1)
