"""Mention detection tags (B/I/O) from spans, and spans back from tags, both without a loop per token.

Tags: ``O = 0``, ``B = 1``, ``I = 2`` (Eq. 2's l_i). Spans are half-open token ranges ``[start, end)``.
Decoding follows the CoNLL convention (as seqeval's default mode): a span starts at every ``B`` and
at every ``I`` whose predecessor is ``O`` or not a candidate position, and runs over the following
``I`` tags.

Candidate positions: a sequence laid out as BERT's ``[CLS] … [SEP]`` or ``[CLS] A [SEP] B [SEP]``
has its special tokens at position 0 and at the last position of each segment (where the token
type changes or the padding begins); those and padding never belong to a mention, so a mention can
never write into ``[CLS]`` (the reference code lets its zero-padded mention slots do so).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["OUTSIDE", "BEGIN", "INSIDE", "TAG_NAMES", "tags_from_spans", "candidate_positions", "decode_spans"]

OUTSIDE, BEGIN, INSIDE = 0, 1, 2
TAG_NAMES = ("O", "B", "I")


def tags_from_spans(length: int, spans: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(length,) tags of one sequence: B at each span's start, I over the rest, O elsewhere, −100
    where ``valid`` is false (special tokens and padding are not scored)."""
    tags = np.zeros(length, dtype=np.int64)
    spans = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    lengths = spans[:, 1] - spans[:, 0]
    inside = np.repeat(spans[:, 0], lengths) + (
        np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    )
    tags[inside] = INSIDE
    tags[spans[lengths > 0, 0]] = BEGIN
    return np.where(valid, tags, -100)


def candidate_positions(attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
    """(batch, length) bool: the positions that can belong to a mention (see the module docstring)."""
    real = attention_mask.bool()
    types = token_type_ids if token_type_ids is not None else torch.zeros_like(attention_mask)
    next_real = torch.zeros_like(real)
    next_real[:, :-1] = real[:, 1:]
    same_segment_next = torch.zeros_like(real)
    same_segment_next[:, :-1] = types[:, 1:] == types[:, :-1]
    segment_end = real & ~(next_real & same_segment_next)  # the [SEP] closing each segment
    candidates = real & ~segment_end
    candidates[:, 0] = False  # [CLS]
    return candidates


def decode_spans(tags: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mentions of a (batch, length) tag tensor: ``(mention_batch (m,), mention_spans (m, 2))``,
    sorted by sequence and start."""
    batch, length = tags.shape
    inside = candidates & (tags != OUTSIDE)
    previous_inside = torch.zeros_like(inside)
    previous_inside[:, 1:] = inside[:, :-1]
    starts = inside & ((tags == BEGIN) | ~previous_inside)
    flat_inside, flat_starts = inside.flatten(), starts.flatten()
    span_of_token = torch.cumsum(flat_starts.long(), 0) - 1  # for a token inside a span: that span's index
    positions = torch.arange(batch * length, device=tags.device)
    start_positions = positions[flat_starts]  # (m,) flat
    ends = torch.zeros_like(start_positions).scatter_reduce(
        0, span_of_token[flat_inside], positions[flat_inside] + 1, reduce="amax", include_self=False
    )
    mention_batch = start_positions // length
    spans = torch.stack([start_positions - mention_batch * length, ends - mention_batch * length], 1)
    return mention_batch, spans
