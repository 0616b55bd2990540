"""Dynamic masking for masked language modelling: BERT, whole-word, whole-entity and span masking.

Every scheme splits a sequence's maskable tokens (not [CLS], [SEP], padding or other special
tokens) into *units* and chooses each unit independently with probability ``rate``, so every
maskable token is chosen with the same probability whatever the size of its unit: a 4-token
mention is masked as often, token for token, as a 1-token word. (Choosing units until a fixed
budget and skipping those that would overshoot it, as BERT's whole-word masking does, masks long
units less often: on real dialogue text mention tokens were chosen at 13.7% against 15.5% for
other tokens, and 4-token mentions in 24-token sequences never.) When no unit was chosen in a
sequence that has one, one unit drawn uniformly is chosen, so every such sequence has at least
one target; a unit is drawn regardless of its size, so the per-token rate stays equal across
units. Each chosen token is then replaced with [MASK] with probability ``mask_fraction``, with a
random ordinary token with probability ``random_fraction``, and kept otherwise (BERT: 80/10/10).
Labels are the original ids at chosen tokens and −100 elsewhere.

Units per scheme:

* ``bert`` — each token (Devlin et al. 2019; per-token Bernoulli as in Hugging Face's collator).
* ``whole_word`` — each word: the tokens that share a ``word_ids`` value (jieba words of the
  KG-aware :class:`~kgplm.text.segmentation.Segmenter`).
* ``whole_entity`` — each linked mention as one unit plus every other token on its own (SMedBERT's
  default and its control's). The KeBioLM code fills one token too many per span; spans here are
  end-exclusive token spans from the exact alignment.
* ``word_entity`` — biomedical entity masking (Liu et al. 2022, EP-PLM §3.1): the text is a
  sequence of span units from word segmentation *and* entity recognition; each linked mention is
  one unit, and every jieba word (``word_ids``) outside the mentions is one unit (the tokens of a
  word that a mention cuts keep their word's unit). EP-PLM replaces a chosen unit with as many
  [MASK] tokens as it has (``mask_fraction=1``, ``random_fraction=0``: its methods set these).
  KeBioLM (Yuan et al. 2021 §3.2: "we mask all tokens within a word or entity span") uses the same
  units with BERT's 80/10/10 (its 12% [MASK] / 1.5% random / 1.5% kept are 15% × 80/10/10).
* ``span`` — contiguous spans with lengths from a geometric distribution (p = 0.2, at most 10
  tokens), SpanBERT (Joshi et al. 2020), starting anywhere, until round(rate · n) tokens (at
  least one) are chosen.

Randomness: each sequence is masked from its own ``numpy.random.Generator`` (``rngs``), so a
sequence's mask depends only on that generator's seed, not on the rest of the batch — the
training loop derives it from (seed, step, example index). Without ``rngs`` the masker draws
one per row from its own seeded generator.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from kgplm.exceptions import ConfigurationError

__all__ = ["Masker", "SCHEMES", "WORD_SCHEMES", "ENTITY_SCHEMES"]

SCHEMES = ("bert", "whole_word", "whole_entity", "word_entity", "span")
#: The schemes whose units are words: the corpus must carry ``word_ids`` (``build_corpus(whole_word=True)``).
WORD_SCHEMES = ("whole_word", "word_entity")
#: the schemes that mask linked entity mentions (they need a knowledge graph)
ENTITY_SCHEMES = ("whole_entity", "word_entity")


class Masker:
    """Draws masks for batches; see the module docstring.

    Args:
        scheme: one of ``SCHEMES``.
        mask_token_id, vocab_size: the tokenizer's.
        special_token_ids: ids never chosen and never drawn as random replacements.
        rate: the probability that a unit is chosen.
        mask_fraction, random_fraction: how chosen tokens are replaced (the rest stay).
        span_p, max_span_length: SpanBERT's geometric span lengths.
        seed: seeds the generator used when a call passes no ``rngs``.
    """

    def __init__(
        self,
        scheme: str = "bert",
        *,
        mask_token_id: int,
        vocab_size: int,
        special_token_ids: Sequence[int] = (),
        rate: float = 0.15,
        mask_fraction: float = 0.8,
        random_fraction: float = 0.1,
        span_p: float = 0.2,
        max_span_length: int = 10,
        seed: int = 0,
    ) -> None:
        if scheme not in SCHEMES:
            raise ConfigurationError(f"masking scheme must be one of {SCHEMES}, got {scheme!r}")
        if not 0.0 < rate < 1.0:
            raise ConfigurationError(f"rate must be in (0, 1), got {rate}")
        if mask_fraction < 0 or random_fraction < 0 or mask_fraction + random_fraction > 1:
            raise ConfigurationError(
                f"mask_fraction ({mask_fraction}) and random_fraction ({random_fraction}) must "
                f"be non-negative and sum to at most 1"
            )
        self.scheme = scheme
        self.mask_token_id = mask_token_id
        self.vocab_size = vocab_size
        self.special_token_ids = sorted(set(special_token_ids) | {mask_token_id})
        self.rate = rate
        self.mask_fraction = mask_fraction
        self.random_fraction = random_fraction
        self.span_p = span_p
        self.max_span_length = max_span_length
        self.generator = np.random.default_rng(seed)
        self.ordinary_ids = np.setdiff1d(np.arange(vocab_size), self.special_token_ids)

    @classmethod
    def from_tokenizer(cls, tokenizer, scheme: str = "bert", **options) -> "Masker":
        return cls(
            scheme,
            mask_token_id=tokenizer.mask_token_id,
            vocab_size=len(tokenizer),
            special_token_ids=tokenizer.all_special_ids,
            **options,
        )

    # -- units --------------------------------------------------------------------------------
    def units(self, maskable: np.ndarray, word_ids=None, mention_spans=None) -> np.ndarray:
        """A (length,) array of unit ids for one sequence, −1 for tokens that cannot be chosen."""
        positions = np.arange(len(maskable))
        if self.scheme in ("bert", "span"):
            return np.where(maskable, positions, -1)
        if self.scheme in WORD_SCHEMES:
            if word_ids is None:
                raise ConfigurationError(
                    f"{self.scheme} masking needs word_ids (build the corpus with whole_word=True)"
                )
            word_ids = np.asarray(word_ids)[: len(maskable)]
            # words keep their ids; tokens outside any word, and mentions, get ids above every word id
            base = max(int(word_ids.max(initial=-1)) + 1, len(maskable))
            unit = np.where(maskable & (word_ids >= 0), word_ids, np.where(maskable, base + positions, -1))
            if self.scheme == "whole_word":
                return unit
            base += len(maskable)
        else:
            base = len(maskable)
            unit = np.where(maskable, positions, -1)
        for start, end in np.asarray(mention_spans if mention_spans is not None else [], dtype=np.int64).reshape(-1, 2):
            unit[start:end] = np.where(maskable[start:end], base + start, -1)  # one id per mention
        return unit

    def choose(self, unit: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Which tokens of one sequence are chosen (bool, (length,))."""
        maskable = unit >= 0
        if not maskable.any():
            return np.zeros(len(unit), dtype=bool)
        if self.scheme == "span":
            return self._choose_spans(maskable, rng)
        unit_ids, unit_of_token = np.unique(unit[maskable], return_inverse=True)
        chosen_units = rng.random(len(unit_ids)) < self.rate  # (units,) independent Bernoulli(rate)
        if not chosen_units.any():
            chosen_units[rng.integers(len(unit_ids))] = True  # at least one target per sequence
        chosen = np.zeros(len(unit), dtype=bool)
        chosen[maskable] = chosen_units[unit_of_token]
        return chosen

    def _choose_spans(self, maskable: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        chosen = np.zeros(len(maskable), dtype=bool)
        candidates = np.flatnonzero(maskable)
        budget = max(1, int(round(self.rate * len(candidates))))
        taken = 0
        for _attempt in range(10 * len(candidates)):
            if taken >= budget:
                break
            # geometric length ≥ 1, clipped, never beyond the budget
            length = min(int(rng.geometric(self.span_p)), self.max_span_length, budget - taken)
            start = int(candidates[rng.integers(len(candidates))])
            span = np.arange(start, min(start + length, len(maskable)))
            span = span[maskable[span] & ~chosen[span]]
            chosen[span] = True
            taken += len(span)
        return chosen

    # -- the call -------------------------------------------------------------------------------
    def mask_sequence(
        self,
        input_ids: np.ndarray,
        maskable: np.ndarray,
        rng: np.random.Generator,
        *,
        word_ids=None,
        mention_spans=None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(masked_ids, labels)`` of one sequence ((length,) arrays)."""
        return self.corrupt(input_ids, self.choose(self.units(maskable, word_ids, mention_spans), rng), rng)

    def corrupt(
        self, input_ids: np.ndarray, chosen: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(masked_ids, labels)`` with the ``chosen`` tokens (bool, (length,)) replaced as the scheme says
        ([MASK] / random / kept) and labelled with their original ids; −100 elsewhere."""
        labels = np.where(chosen, input_ids, -100)
        positions = np.flatnonzero(chosen)
        draw = rng.random(len(positions))
        masked = input_ids.copy()
        masked[positions[draw < self.mask_fraction]] = self.mask_token_id
        to_random = positions[(draw >= self.mask_fraction) & (draw < self.mask_fraction + self.random_fraction)]
        masked[to_random] = self.ordinary_ids[rng.integers(len(self.ordinary_ids), size=len(to_random))]
        return masked, labels

    def maskable(self, input_ids: np.ndarray, attention_mask=None) -> np.ndarray:
        maskable = ~np.isin(input_ids, self.special_token_ids)
        if attention_mask is not None:
            maskable &= np.asarray(attention_mask).astype(bool)
        return maskable

    def __call__(
        self,
        input_ids,
        *,
        attention_mask=None,
        word_ids=None,
        mention_spans=None,
        rngs: Sequence[np.random.Generator] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(masked_input_ids, labels)`` for a (batch, length) tensor of ids.

        ``word_ids``: (batch, length) word index per token (whole_word); ``mention_spans``: per
        sequence a list of token ``[start, end)`` (whole_entity); ``rngs``: one generator per row.
        """
        ids = torch.as_tensor(input_ids, dtype=torch.long).numpy()
        maskable = self.maskable(ids, None if attention_mask is None else torch.as_tensor(attention_mask).numpy())
        if rngs is None:
            rngs = [np.random.default_rng(self.generator.integers(2**63)) for _ in range(len(ids))]
        masked, labels = np.empty_like(ids), np.empty_like(ids)
        for row in range(len(ids)):
            masked[row], labels[row] = self.mask_sequence(
                ids[row],
                maskable[row],
                rngs[row],
                word_ids=None if word_ids is None else word_ids[row],
                mention_spans=None if mention_spans is None else mention_spans[row],
            )
        return torch.from_numpy(masked), torch.from_numpy(labels)
