"""Batches for pre-training: sentence-order pairs, dynamic masking, and what each method adds.

Every random choice for an example comes from that example's own generator, seeded by the
training loop from (seed, step, position of the example in the step's global batch): an
example's SOP split, masks and negatives do not depend on which other examples share its
micro-batch, so gradient accumulation and data parallelism see the same examples whatever the
micro-batch size or number of processes, and a batch can be rebuilt exactly after a restart.

Sentence-order prediction (SOP, Lan et al. 2020) pairs are made inside each chunk of the linked
corpus: the body of ``[CLS] x₁ … xₙ [SEP]`` is split at a uniformly drawn token s ∈ [1, n), giving
``[CLS] A [SEP] B [SEP]`` (label 0) or, with probability 1/2, ``[CLS] B [SEP] A [SEP]`` (label 1),
token types 0 for the first segment and 1 for the second. Mentions cut by the split are dropped
from the example; chunks with fewer than two tokens get label −100.

A method adds its own inputs by subclassing :class:`PretrainingCollator` and overriding
:meth:`~PretrainingCollator.method_inputs` (SMedBERT: mentions, neighbours, negatives); it may
also change an example before padding (:meth:`~PretrainingCollator.make_example`, e.g. replace
mentions by other entities) and choose masks itself (:meth:`~PretrainingCollator.mask_example`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from kgplm.text.masking import Masker

__all__ = ["Batch", "PretrainingCollator", "PretrainingExample"]


class Batch(dict):
    """Model inputs (name → tensor) and ``target_counts``: objective → number of targets it holds.

    The counts let the training loop weight micro-batches (and processes) so that a step's loss
    is the mean over the whole global batch, exactly as one big batch would compute it.
    """

    def __init__(self, *args, target_counts: dict[str, int] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.target_counts: dict[str, int] = dict(target_counts or {})

    def to(self, device, non_blocking: bool = False) -> "Batch":
        """The batch on ``device`` (``non_blocking`` copies from pinned memory asynchronously)."""
        return Batch(
            {name: value.to(device, non_blocking=non_blocking) for name, value in self.items()},
            target_counts=self.target_counts,
        )

    def pin_memory(self) -> "Batch":
        """The batch in page-locked memory (``DataLoader(pin_memory=True)`` calls this), counts kept."""
        return Batch({name: value.pin_memory() for name, value in self.items()}, target_counts=self.target_counts)


@dataclass
class PretrainingExample:
    """One example after SOP pairing, before padding (token positions are the new sequence's)."""

    input_ids: np.ndarray
    token_type_ids: np.ndarray
    word_ids: np.ndarray | None
    mention_spans: np.ndarray  # (mentions, 2) token [start, end)
    mention_rows: np.ndarray  # which of the corpus row's mentions survived the split
    sentence_order_label: int


class PretrainingCollator:
    """Turn rows of a linked corpus (:func:`kgplm.text.build_corpus`) into model inputs.

    Args:
        masker: draws the MLM masks.
        cls_token_id, sep_token_id, pad_token_id: the tokenizer's.
        sentence_order: make SOP pairs (else examples keep their chunk and get label −100).
    """

    def __init__(
        self, *, masker: Masker, cls_token_id: int, sep_token_id: int, pad_token_id: int, sentence_order: bool = False
    ) -> None:
        self.masker = masker
        self.cls_token_id = cls_token_id
        self.sep_token_id = sep_token_id
        self.pad_token_id = pad_token_id
        self.sentence_order = sentence_order

    # -- one example --------------------------------------------------------------------------
    def make_example(self, rows: dict, index: int, rng: np.random.Generator) -> PretrainingExample:
        ids = np.asarray(rows["input_ids"][index], dtype=np.int64)
        spans = (
            np.asarray(rows["mention_spans"][index], dtype=np.int64).reshape(-1, 2)
            if "mention_spans" in rows
            else np.zeros((0, 2), np.int64)
        )
        word_ids = np.asarray(rows["word_ids"][index], dtype=np.int64) if rows.get("word_ids") is not None else None
        body = ids[1:-1] if len(ids) >= 2 and ids[-1] == self.sep_token_id else ids[1:]
        n = len(body)
        if not self.sentence_order or n < 2:
            return PretrainingExample(ids, np.zeros_like(ids), word_ids, spans, np.arange(len(spans)), -100)
        split = int(rng.integers(1, n))  # A = body[:split], B = body[split:]
        swap = bool(rng.random() < 0.5)
        first, second = (body[split:], body[:split]) if swap else (body[:split], body[split:])
        new_ids = np.concatenate([[self.cls_token_id], first, [self.sep_token_id], second, [self.sep_token_id]])
        token_types = np.concatenate([np.zeros(len(first) + 2, np.int64), np.ones(len(second) + 1, np.int64)])
        # old position p (1..n in the body) → new position
        old = np.arange(1, n + 1)
        in_a = old <= split
        if swap:
            mapped = np.where(in_a, 1 + (n - split) + 1 + (old - 1), 1 + (old - 1 - split))
        else:
            mapped = np.where(in_a, old, old + 1)
        new_word_ids = None
        if word_ids is not None:
            new_word_ids = np.full(len(new_ids), -1, dtype=np.int64)
            new_word_ids[mapped] = word_ids[1 : n + 1]
        inside_a = spans[:, 1] <= split + 1
        inside_b = spans[:, 0] >= split + 1
        keep = np.flatnonzero(inside_a | inside_b)
        kept = spans[keep]
        starts = mapped[kept[:, 0] - 1] if len(kept) else kept[:, 0]
        new_spans = np.stack([starts, starts + kept[:, 1] - kept[:, 0]], 1) if len(kept) else kept
        return PretrainingExample(new_ids, token_types, new_word_ids, new_spans, keep, int(swap))

    # -- a batch ------------------------------------------------------------------------------
    def __call__(self, rows: dict[str, Sequence], example_seeds: np.ndarray) -> Batch:
        """``rows``: a column dict of a ``datasets`` slice; ``example_seeds``: (batch, …) integer seed
        material per example (the loop's (seed, step, position))."""
        rngs = [np.random.default_rng([int(v) for v in np.atleast_1d(key)]) for key in example_seeds]
        examples = [self.make_example(rows, index, rng) for index, rng in enumerate(rngs)]
        size, length = len(examples), max(len(e.input_ids) for e in examples)
        input_ids = np.full((size, length), self.pad_token_id, dtype=np.int64)
        token_type_ids = np.zeros((size, length), dtype=np.int64)
        attention_mask = np.zeros((size, length), dtype=np.int64)
        for row, example in enumerate(examples):
            n = len(example.input_ids)
            input_ids[row, :n], token_type_ids[row, :n], attention_mask[row, :n] = (
                example.input_ids,
                example.token_type_ids,
                1,
            )
        masked = np.empty_like(input_ids)
        labels = np.empty_like(input_ids)
        maskable = self.masker.maskable(input_ids, attention_mask)
        for row, (example, rng) in enumerate(zip(examples, rngs)):
            word_ids = None
            if example.word_ids is not None:
                word_ids = np.full(length, -1, np.int64)
                word_ids[: len(example.word_ids)] = example.word_ids
            masked[row], labels[row] = self.mask_example(example, input_ids[row], maskable[row], rng, word_ids)
        sentence_order = np.array([e.sentence_order_label for e in examples], dtype=np.int64)
        batch = Batch(
            {
                "input_ids": torch.from_numpy(masked),
                "attention_mask": torch.from_numpy(attention_mask),
                "token_type_ids": torch.from_numpy(token_type_ids),
                "labels": torch.from_numpy(labels),
            },
            target_counts={"mlm": int((labels >= 0).sum())},
        )
        if self.sentence_order:
            batch["sentence_order_label"] = torch.from_numpy(sentence_order)
            batch.target_counts["sop"] = int((sentence_order >= 0).sum())
        self.method_inputs(batch, rows, examples, input_ids, labels, rngs)
        return batch

    def mask_example(
        self,
        example: PretrainingExample,
        input_ids: np.ndarray,
        maskable: np.ndarray,
        rng: np.random.Generator,
        word_ids: np.ndarray | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(masked_ids, labels)`` of one padded example (the masker's scheme); a method that chooses some
        targets itself (or keeps some tokens visible) overrides this."""
        return self.masker.mask_sequence(
            input_ids, maskable, rng, word_ids=word_ids, mention_spans=example.mention_spans
        )

    def method_inputs(
        self,
        batch: Batch,
        rows: dict,
        examples: list[PretrainingExample],
        original_ids: np.ndarray,
        labels: np.ndarray,
        rngs: list[np.random.Generator],
    ) -> None:
        """Add a method's own inputs (and their ``target_counts``) to ``batch``; the base adds none."""
