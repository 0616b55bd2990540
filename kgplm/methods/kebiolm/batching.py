"""KeBioLM's pre-training batches: the linker's mentions as gold detection tags and linking targets.

After masking (whole mentions and whole words by default, ``word_entity``), each example's linked mentions become

* ``detection_labels`` (batch, length): B at a mention's first token, I over its other tokens, O on
  every other real token, −100 on [CLS], [SEP] and padding (never scored, never decoded);
* ``mention_batch``, ``mention_spans``, ``mention_entity_ids``: the first ``max_mentions`` mentions of
  each sequence by position (the paper's 50), retrieved for, fused and linked (L_EL's targets).

Every linked mention is tagged for L_ED, also those beyond ``max_mentions``: tagging them O would
teach the detector that they are not mentions.
"""

from __future__ import annotations

import numpy as np
import torch

from kgplm.methods.kebiolm.detection import tags_from_spans
from kgplm.training.collator import Batch, PretrainingCollator, PretrainingExample

__all__ = ["KebiolmCollator"]


class KebiolmCollator(PretrainingCollator):
    """:class:`~kgplm.training.collator.PretrainingCollator` plus KeBioLM's mention tensors (see the module docstring)."""

    def __init__(self, *, max_mentions: int = 50, **options) -> None:
        super().__init__(**options)
        self.max_mentions = max_mentions

    def method_inputs(
        self,
        batch: Batch,
        rows: dict,
        examples: list[PretrainingExample],
        original_ids: np.ndarray,
        labels: np.ndarray,
        rngs: list[np.random.Generator],
    ) -> None:
        size, length = original_ids.shape
        special = np.isin(original_ids, [self.cls_token_id, self.sep_token_id, self.pad_token_id])
        valid = batch["attention_mask"].numpy().astype(bool) & ~special
        detection = np.empty((size, length), dtype=np.int64)
        mention_batch, mention_spans, entity_ids = [], [], []
        for row, example in enumerate(examples):
            spans = example.mention_spans.reshape(-1, 2)
            detection[row] = tags_from_spans(length, spans, valid[row])
            corpus_entities = np.asarray(rows["mention_entity_ids"][row], dtype=np.int64)[example.mention_rows]
            order = np.argsort(spans[:, 0], kind="stable")[: self.max_mentions]
            mention_batch.append(np.full(len(order), row, dtype=np.int64))
            mention_spans.append(spans[order])
            entity_ids.append(corpus_entities[order])
        batch["detection_labels"] = torch.from_numpy(detection)
        batch["mention_batch"] = torch.from_numpy(np.concatenate(mention_batch))
        batch["mention_spans"] = torch.from_numpy(np.concatenate(mention_spans).reshape(-1, 2).astype(np.int64))
        batch["mention_entity_ids"] = torch.from_numpy(np.concatenate(entity_ids))
        batch.target_counts["ed"] = int((detection >= 0).sum())
        batch.target_counts["el"] = len(batch["mention_entity_ids"])
