"""Dynamic masking for masked language modelling: BERT, whole-word, whole-entity and span masking.

All schemes choose *units* of tokens until ``rate`` of the maskable tokens (not [CLS], [SEP],
padding) of each sequence is chosen, never exceeding that budget (a unit that would overshoot is
skipped, as in BERT's whole-word masking), then replace each chosen token with [MASK] with
probability ``mask_fraction``, with a random ordinary token with probability
``random_fraction``, and keep it otherwise (BERT: 80/10/10). Labels are the original ids at
chosen tokens and -100 elsewhere. Masks are re-drawn on every call from the masker's generator,
so every epoch sees new masks (dynamic masking, RoBERTa), reproducibly for a seed.

Units per scheme:

* ``bert`` — each token (Devlin et al. 2019).
* ``whole_word`` — each word: the tokens that share a ``word_ids`` value (jieba words of the
  KG-aware :class:`~kgplm.text.segmentation.Segmenter`).
* ``whole_entity`` — each linked mention as one unit plus every other token on its own (KeBioLM,
  Yuan et al. 2021: whole entities masked at once; its 12% [MASK] / 1.5% random / 1.5% kept are
  the defaults' 15% × 80/10/10). The KeBioLM code fills one token too many per span; spans here are
  end-exclusive token spans from the exact alignment.
* ``span`` — contiguous spans with lengths from a geometric distribution (p = 0.2, at most 10
  tokens), SpanBERT (Joshi et al. 2020), starting anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from kgplm.exceptions import ConfigurationError

__all__ = ["Masker", "SCHEMES"]

SCHEMES = ("bert", "whole_word", "whole_entity", "span")


class Masker:
    """Draws masks for batches; see the module docstring.

    Args:
        scheme: one of ``SCHEMES``.
        mask_token_id, vocab_size: the tokenizer's.
        special_token_ids: ids never chosen and never drawn as random replacements.
        rate: share of maskable tokens chosen per sequence.
        mask_fraction, random_fraction: how chosen tokens are replaced (the rest stay).
        seed: seeds the generator; each call advances it.
    """

    def __init__(self, scheme: str = "bert", *, mask_token_id: int, vocab_size: int,
                 special_token_ids: Sequence[int] = (), rate: float = 0.15, mask_fraction: float = 0.8,
                 random_fraction: float = 0.1, span_p: float = 0.2, max_span_length: int = 10, seed: int = 0) -> None:
        if scheme not in SCHEMES:
            raise ConfigurationError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
        if not 0.0 < rate < 1.0:
            raise ConfigurationError(f"rate must be in (0, 1), got {rate}")
        if mask_fraction < 0 or random_fraction < 0 or mask_fraction + random_fraction > 1:
            raise ConfigurationError(f"mask_fraction ({mask_fraction}) and random_fraction ({random_fraction}) must "
                                     f"be non-negative and sum to at most 1")
        self.scheme = scheme
        self.mask_token_id = mask_token_id
        self.vocab_size = vocab_size
        self.special_token_ids = sorted(set(special_token_ids) | {mask_token_id})
        self.rate = rate
        self.mask_fraction = mask_fraction
        self.random_fraction = random_fraction
        self.span_p = span_p
        self.max_span_length = max_span_length
        self.generator = torch.Generator().manual_seed(seed)
        ordinary = np.setdiff1d(np.arange(vocab_size), self.special_token_ids)
        self._ordinary_ids = torch.as_tensor(ordinary, dtype=torch.long)

    @classmethod
    def from_tokenizer(cls, tokenizer, scheme: str = "bert", **options) -> "Masker":
        return cls(scheme, mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer),
                   special_token_ids=tokenizer.all_special_ids, **options)

    # -- units --------------------------------------------------------------------------------
    def _units(self, input_ids: torch.Tensor, maskable: torch.Tensor, word_ids, mention_spans) -> list[np.ndarray]:
        """Per sequence, a (length,) array of unit ids, -1 for tokens that cannot be chosen."""
        units = []
        for row in range(input_ids.shape[0]):
            can = maskable[row].numpy()
            if self.scheme in ("bert", "span"):
                unit = np.where(can, np.arange(len(can)), -1)
            elif self.scheme == "whole_word":
                if word_ids is None:
                    raise ConfigurationError("whole_word masking needs word_ids (build the corpus with whole_word=True)")
                unit = np.where(can, np.asarray(word_ids[row])[: len(can)], -1)
            else:
                unit = np.where(can, np.arange(len(can)), -1)
                spans = [] if mention_spans is None else mention_spans[row]
                for start, end in np.asarray(spans, dtype=np.int64).reshape(-1, 2):
                    unit[start:end] = np.where(can[start:end], len(can) + start, -1)  # one id per mention
            units.append(unit)
        return units

    def _choose_units(self, unit: np.ndarray) -> np.ndarray:
        chosen = np.zeros(len(unit), dtype=bool)
        maskable = np.flatnonzero(unit >= 0)
        budget = int(round(self.rate * len(maskable)))
        if budget == 0:
            return chosen
        if self.scheme == "span":
            return self._choose_spans(unit, budget)
        unit_ids, first_positions = np.unique(unit[maskable], return_index=True)
        order = torch.randperm(len(unit_ids), generator=self.generator).numpy()
        taken = 0
        for index in order:
            members = unit == unit_ids[index]
            size = int(members.sum())
            if taken + size > budget:
                continue
            chosen |= members
            taken += size
            if taken == budget:
                break
        return chosen

    def _choose_spans(self, unit: np.ndarray, budget: int) -> np.ndarray:
        chosen = np.zeros(len(unit), dtype=bool)
        maskable = np.flatnonzero(unit >= 0)
        taken = 0
        for _attempt in range(10 * len(maskable)):
            if taken >= budget:
                break
            # geometric length ≥ 1, clipped, never beyond the budget
            uniform = float(torch.rand((), generator=self.generator))
            length = min(int(np.floor(np.log1p(-uniform) / np.log1p(-self.span_p))) + 1, self.max_span_length,
                         budget - taken)
            start = int(maskable[int(torch.randint(len(maskable), (), generator=self.generator))])
            span = np.arange(start, min(start + length, len(unit)))
            span = span[(unit[span] >= 0) & ~chosen[span]]
            chosen[span] = True
            taken += len(span)
        return chosen

    # -- the call -------------------------------------------------------------------------------
    def __call__(self, input_ids: torch.Tensor, *, attention_mask: torch.Tensor | None = None, word_ids=None,
                 mention_spans=None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(masked_input_ids, labels)`` for a (batch, length) tensor of ids.

        ``word_ids``: (batch, length) word index per token (whole_word); ``mention_spans``: per
        sequence a list of token ``[start, end)`` (whole_entity).
        """
        input_ids = torch.as_tensor(input_ids, dtype=torch.long)
        maskable = ~torch.isin(input_ids, torch.as_tensor(self.special_token_ids, dtype=torch.long))
        if attention_mask is not None:
            maskable &= torch.as_tensor(attention_mask).bool()
        chosen = torch.zeros_like(input_ids, dtype=torch.bool)
        for row, unit in enumerate(self._units(input_ids, maskable, word_ids, mention_spans)):
            chosen[row] = torch.from_numpy(self._choose_units(unit))
        labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
        draw = torch.rand(input_ids.shape, generator=self.generator)
        to_mask = chosen & (draw < self.mask_fraction)
        to_random = chosen & (draw >= self.mask_fraction) & (draw < self.mask_fraction + self.random_fraction)
        masked = input_ids.clone()
        masked[to_mask] = self.mask_token_id
        random_ids = self._ordinary_ids[torch.randint(len(self._ordinary_ids), (int(to_random.sum()),),
                                                      generator=self.generator)]
        masked[to_random] = random_ids
        return masked, labels
