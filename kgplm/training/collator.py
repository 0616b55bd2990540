"""Batches for pre-training: sentence-order pairs, dynamic masking, flat mention and neighbour tensors.

Every random choice of a batch comes from the seed passed with it (the trainer derives one per
step), so a batch can be rebuilt exactly after a restart without saving generator states.

Sentence-order prediction (SOP, Lan et al. 2020) pairs are made inside each chunk of the linked
corpus: the body of ``[CLS] x₁ … xₙ [SEP]`` is split at a uniformly drawn token s ∈ [1, n), giving
``[CLS] A [SEP] B [SEP]`` (label 0) or, with probability 1/2, ``[CLS] B [SEP] A [SEP]`` (label 1),
token types 0 for the first segment and 1 for the second. Mentions cut by the split are dropped
from the example; chunks with fewer than two tokens get label −100.

Negatives for masked neighbour modelling follow SMedBERT's Q(e) = t_e / C_τ(e) (appendix B):
corpus frequency within the entity's type, add-one smoothed (see :mod:`kgplm.models.smedbert`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from kgplm.exceptions import ConfigurationError
from kgplm.text.masking import Masker

__all__ = ["TypeFrequencySampler", "PretrainingCollator"]


class TypeFrequencySampler:
    """Draws entities with probability Q(e) = (t_e + 1) / Σ_{τ(e')=τ} (t_{e'} + 1) within a type.

    ``type_ids``: one type per entity, −1 for untyped (one extra bucket). ``log_q[e]`` is log Q(e).
    Sampling is one ``searchsorted`` on a table whose type τ occupies [τ, τ + 1).
    """

    def __init__(self, frequencies: np.ndarray, type_ids: np.ndarray) -> None:
        frequencies = np.asarray(frequencies, dtype=np.float64)
        type_ids = np.asarray(type_ids, dtype=np.int64)
        if frequencies.shape != type_ids.shape:
            raise ConfigurationError(f"frequencies {frequencies.shape} and type_ids {type_ids.shape} differ in shape")
        buckets = np.where(type_ids < 0, type_ids.max(initial=-1) + 1, type_ids)
        weights = frequencies + 1.0
        totals = np.bincount(buckets, weights=weights)
        self.log_q = np.log(weights / totals[buckets])  # (entities,)
        self.buckets = buckets
        self.order = np.argsort(buckets, kind="stable")  # entities grouped by bucket
        sorted_buckets = buckets[self.order]
        within = np.cumsum(weights[self.order]) - np.concatenate([[0.0], np.cumsum(totals)])[sorted_buckets]
        self.table = sorted_buckets + within / totals[sorted_buckets]  # bucket τ spans (τ, τ + 1]
        self.bucket_last = np.searchsorted(sorted_buckets, np.arange(len(totals)), side="right") - 1

    def sample(self, positives: np.ndarray, num_samples: int, rng: np.random.Generator) -> np.ndarray:
        """(len(positives), num_samples) entities drawn from Q restricted to each positive's type."""
        buckets = self.buckets[np.asarray(positives, dtype=np.int64)]
        draws = buckets[:, None] + rng.random((len(buckets), num_samples))  # (edges, samples)
        positions = np.searchsorted(self.table, draws, side="left")
        # rounding can put a draw just past its bucket's last entry: stay inside the bucket
        return self.order[np.minimum(positions, self.bucket_last[buckets][:, None])]


@dataclass
class _Example:
    input_ids: np.ndarray
    token_type_ids: np.ndarray
    word_ids: np.ndarray | None
    mention_spans: np.ndarray
    mention_rows: np.ndarray  # which of the example's mentions survived
    sentence_order_label: int


class PretrainingCollator:
    """Turn rows of a linked corpus (:func:`kgplm.text.build_corpus`) into model inputs.

    Args:
        masker: draws the MLM masks (``whole_entity`` for SMedBERT: MMeM needs whole mentions masked).
        cls_token_id, sep_token_id, pad_token_id: the tokenizer's.
        sentence_order: make SOP pairs.
        knowledge: emit mention and neighbour tensors (and MNeM negatives when ``sampler`` is set).
        sampler, num_negatives: MNeM negatives (types of the positives are the corpus's ``neighbor_types``).
    """

    def __init__(self, *, masker: Masker, cls_token_id: int, sep_token_id: int, pad_token_id: int,
                 sentence_order: bool = True, knowledge: bool = True, sampler: TypeFrequencySampler | None = None,
                 num_negatives: int = 10) -> None:
        self.masker = masker
        self.cls_token_id = cls_token_id
        self.sep_token_id = sep_token_id
        self.pad_token_id = pad_token_id
        self.sentence_order = sentence_order
        self.knowledge = knowledge
        self.sampler = sampler
        self.num_negatives = num_negatives

    # -- one example --------------------------------------------------------------------------
    def _pair(self, row: dict, index: int, rng: np.random.Generator) -> _Example:
        ids = np.asarray(row["input_ids"][index], dtype=np.int64)
        spans = np.asarray(row["mention_spans"][index], dtype=np.int64).reshape(-1, 2) if "mention_spans" in row \
            else np.zeros((0, 2), np.int64)
        word_ids = np.asarray(row["word_ids"][index], dtype=np.int64) if row.get("word_ids") is not None else None
        body = ids[1:-1] if len(ids) >= 2 and ids[-1] == self.sep_token_id else ids[1:]
        n = len(body)
        if not self.sentence_order or n < 2:
            return _Example(ids, np.zeros_like(ids), word_ids, spans, np.arange(len(spans)), -100)
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
            new_word_ids[mapped] = word_ids[1: n + 1]
        inside_a = spans[:, 1] <= split + 1
        inside_b = spans[:, 0] >= split + 1
        keep = np.flatnonzero(inside_a | inside_b)
        kept = spans[keep]
        starts = mapped[kept[:, 0] - 1] if len(kept) else kept[:, 0]
        new_spans = np.stack([starts, starts + kept[:, 1] - kept[:, 0]], 1) if len(kept) else kept
        return _Example(new_ids, token_types, new_word_ids, new_spans, keep, int(swap))

    # -- a batch ------------------------------------------------------------------------------
    def __call__(self, rows: dict[str, Sequence], seed: int) -> dict[str, torch.Tensor]:
        """``rows``: a column dict of a ``datasets`` slice (``dataset[indices]``); ``seed``: this batch's."""
        rng = np.random.default_rng(seed)
        self.masker.generator.manual_seed(int(seed) % (2 ** 63))
        size = len(rows["input_ids"])
        examples = [self._pair(rows, index, rng) for index in range(size)]
        length = max(len(e.input_ids) for e in examples)
        input_ids = np.full((size, length), self.pad_token_id, dtype=np.int64)
        token_type_ids = np.zeros((size, length), dtype=np.int64)
        attention_mask = np.zeros((size, length), dtype=np.int64)
        word_ids = np.full((size, length), -1, dtype=np.int64)
        for row, example in enumerate(examples):
            n = len(example.input_ids)
            input_ids[row, :n] = example.input_ids
            token_type_ids[row, :n] = example.token_type_ids
            attention_mask[row, :n] = 1
            if example.word_ids is not None:
                word_ids[row, :n] = example.word_ids
        has_words = all(e.word_ids is not None for e in examples)
        original = torch.from_numpy(input_ids)
        masked, labels = self.masker(original, attention_mask=torch.from_numpy(attention_mask),
                                     word_ids=word_ids if has_words else None,
                                     mention_spans=[e.mention_spans for e in examples])
        batch = {"input_ids": masked, "attention_mask": torch.from_numpy(attention_mask),
                 "token_type_ids": torch.from_numpy(token_type_ids), "labels": labels,
                 "original_input_ids": original,
                 "sentence_order_label": torch.tensor([e.sentence_order_label for e in examples], dtype=torch.long)}
        if self.knowledge:
            batch.update(self._knowledge(rows, examples, labels, rng))
        return batch

    def _knowledge(self, rows, examples: list[_Example], labels: torch.Tensor, rng) -> dict[str, torch.Tensor]:
        mention_batch, spans, entity_ids = [], [], []
        edge_mention, edge_entity, edge_relation, edge_direction, edge_type = [], [], [], [], []
        has_neighbors = "neighbor_ids" in rows
        for row, example in enumerate(examples):
            mention_entities = np.asarray(rows["mention_entity_ids"][row], dtype=np.int64)
            for position, kept in enumerate(example.mention_rows.tolist()):
                mention = len(mention_batch)
                mention_batch.append(row)
                spans.append(example.mention_spans[position])
                entity_ids.append(mention_entities[kept])
                if not has_neighbors:
                    continue
                neighbors = np.asarray(rows["neighbor_ids"][row][kept], dtype=np.int64)
                valid = np.flatnonzero(neighbors >= 0)
                edge_mention.append(np.full(len(valid), mention, dtype=np.int64))
                edge_entity.append(neighbors[valid])
                edge_relation.append(np.asarray(rows["neighbor_relations"][row][kept], dtype=np.int64)[valid])
                edge_direction.append(np.asarray(rows["neighbor_directions"][row][kept], dtype=np.int64)[valid])
                edge_type.append(np.asarray(rows["neighbor_types"][row][kept], dtype=np.int64)[valid])
        spans_array = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
        mention_batch_array = np.asarray(mention_batch, dtype=np.int64)
        # a mention is an MMeM target when every one of its tokens was chosen for masking
        chosen = (labels >= 0).numpy()
        masked = np.array([chosen[b, s:e].all() for b, (s, e) in zip(mention_batch_array, spans_array)], dtype=bool)
        out = {"mention_batch": torch.from_numpy(mention_batch_array),
               "mention_spans": torch.from_numpy(spans_array),
               "mention_entity_ids": torch.as_tensor(np.asarray(entity_ids, dtype=np.int64)),
               "mention_masked": torch.from_numpy(masked)}
        if has_neighbors:
            def cat(parts):
                return torch.from_numpy(np.concatenate(parts) if parts else np.zeros(0, np.int64))

            out.update(neighbor_mention=cat(edge_mention), neighbor_entity_ids=cat(edge_entity),
                       neighbor_relation_ids=cat(edge_relation), neighbor_directions=cat(edge_direction),
                       neighbor_type_ids=cat(edge_type))
            if self.sampler is not None:
                positives = out["neighbor_entity_ids"].numpy()
                negatives = self.sampler.sample(positives, self.num_negatives, rng)  # (edges, negatives)
                candidates = np.concatenate([positives[:, None], negatives], 1)
                out["negative_entity_ids"] = torch.from_numpy(negatives)
                out["candidate_log_q"] = torch.from_numpy(self.sampler.log_q[candidates].astype(np.float32))
        return out
