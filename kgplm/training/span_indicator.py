"""The linked mention spans of a task text, as the span-indicator input of any encoder at fine-tuning.

SMedBERT's fine-tuning lookup (:class:`kgplm.methods.smedbert.KnowledgeLookup`) gives
its encoder the dictionary linker's mentions; :class:`MentionSpanLookup` gives exactly those spans
(:func:`linked_token_spans`, shared with it) to an encoder without graph knowledge, through
:class:`~kgplm.models.finetuning.MentionSpanIndicator`. ``kgplm.finetune(mention_spans=True)``.
"""

from __future__ import annotations

import numpy as np
import torch

from kgplm.models.finetuning import SPAN_INDICATOR_INPUT
from kgplm.text.alignment import char_spans_to_token_spans

__all__ = ["linked_token_spans", "MentionSpanLookup", "span_lookup"]


def linked_token_spans(linker, text: str, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(spans, entity_ids)``: token ``[start, end)`` spans over ``offsets``' tokens of the linker's
    mentions of ``text`` that map onto tokens, and each one's best entity."""
    starts, ends, entries = linker.find(text)
    entity_ids = np.asarray(linker.best_entities(entries), dtype=np.int64)
    spans = char_spans_to_token_spans(offsets, np.stack([starts, ends], 1) if len(starts) else [])
    kept = np.flatnonzero(spans[:, 0] >= 0)
    return spans[kept].reshape(-1, 2), entity_ids[kept]


class MentionSpanLookup:
    """The :class:`~kgplm.training.finetuning.TaskEncoder` knowledge provider of the span indicator:
    :meth:`features` per text, :meth:`collate` per batch (``span_indicator_tokens``, (2, tokens))."""

    def __init__(self, linker) -> None:
        self.linker = linker

    def features(self, text: str, offsets: np.ndarray) -> dict[str, np.ndarray]:
        return {"mention_spans": linked_token_spans(self.linker, text, offsets)[0]}

    def collate(self, parts: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
        rows, positions = [], []
        for row, part in enumerate(parts):
            spans = np.asarray(part["mention_spans"], dtype=np.int64).reshape(-1, 2)
            lengths = spans[:, 1] - spans[:, 0]
            positions.append(
                np.repeat(spans[:, 0], lengths)
                + np.arange(lengths.sum())
                - np.repeat(np.cumsum(lengths) - lengths, lengths)
            )
            rows.append(np.full(lengths.sum(), row, dtype=np.int64))
        tokens = (
            np.stack([np.concatenate(rows), np.concatenate(positions)]).astype(np.int64)
            if parts
            else np.zeros((2, 0), np.int64)
        )
        return {SPAN_INDICATOR_INPUT: torch.from_numpy(tokens)}


def span_lookup(run, progress: bool = False) -> MentionSpanLookup:
    """The span lookup of a pre-training run: the linker its corpus was linked with, as SMedBERT's lookup builds it."""
    from kgplm.text.linking import recorded_linker

    return MentionSpanLookup(recorded_linker(run.open_store(progress=progress), run.read_run_config()))
