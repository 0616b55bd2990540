"""Fine-tuning: task examples → model inputs, the training loop with early stopping, prediction, scores.

:class:`TaskEncoder` turns :mod:`kgplm.evaluation.tasks` examples into features (token ids, labels
and, for methods whose encoder reads more, the extra inputs of the method's provider
(``MethodSpec.finetuning_inputs``: SMedBERT's linked mentions with their PEPR neighbours)), batches them and turns model outputs back into task predictions:
character spans for NER, labels, candidate scores. :func:`finetune_loop` trains with AdamW and a
linear schedule, scores the dev split after every epoch, keeps the best state and stops after
``patience`` epochs without improvement.

Label handling: NER spans become token tags over every token they cover (WordPiece pieces
included), so a span whose boundary falls inside a token cannot be represented; it is left out of
the training labels (counted and logged) but stays in the gold set when scoring, so scores are
never flattered. Predicted token spans map back to characters through the tokenizer's offsets.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from kgplm.evaluation import metrics
from kgplm.evaluation.tasks import TaskSpec
from kgplm.exceptions import ConfigurationError
from kgplm.text.alignment import char_spans_to_token_spans
from kgplm.training.distributed import DistributedContext, current
from kgplm.training.precision import autocast, check_mixed_precision, grad_scaler
from kgplm.training.trainer import build_optimizer, optimizer_step, wrap_data_parallel, zero_objective

__all__ = ["TaskEncoder", "FineTuneSettings", "finetune_loop", "predict", "score",
           "label_names_for", "loss_items"]

logger = logging.getLogger(__name__)


def _merge_mentions(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


def label_names_for(spec: TaskSpec, train_examples: Sequence, tagging: str = "bio") -> list[str] | None:
    """Class names in index order: the sorted training labels, or the tag set for NER."""
    if spec.kind in ("ner", "nested_ner"):
        types = sorted({span[2] for example in train_examples for span in example.spans})
        prefixes = ("B", "I") if tagging == "bio" else ("B", "I", "E", "S")
        return ["O"] + [f"{prefix}-{kind}" for kind in types for prefix in prefixes]
    if spec.kind == "qa_ranking":
        return None
    return sorted({example.label for example in train_examples})


def _layers(spans: Sequence[tuple[int, int, str]]) -> tuple[list, list, int]:
    """Split nested spans into an outer flat layer and an inner flat layer; count those left over."""
    outer, inner, lost, end = [], [], 0, -1
    ordered = sorted(set(spans), key=lambda s: (s[0], -s[1], s[2]))
    for span in ordered:
        if span[0] >= end:
            outer.append(span)
            end = span[1]
    outer_set = set(outer)
    remaining = [span for span in ordered if span not in outer_set]
    end = -1
    for span in remaining:
        if span[0] >= end:
            inner.append(span)
            end = span[1]
        else:
            lost += 1
    return outer, inner, lost


class TaskEncoder:
    """Features, batches and decoding for one task kind."""

    def __init__(self, spec: TaskSpec, tokenizer, *, label_names: list[str] | None, max_length: int = 128,
                 tagging: str = "bio", knowledge=None) -> None:
        if tagging not in metrics.TAG_SCHEMES:
            raise ConfigurationError(f"tagging must be one of {metrics.TAG_SCHEMES}, got {tagging!r}")
        if spec.kind == "relation_triples":
            raise ConfigurationError(f"task {spec.name}: relation-triple extraction (CMeIE) has no fine-tuning head "
                                     f"yet; its reader and triple_scores metric exist")
        self.spec, self.kind, self.tokenizer = spec, spec.kind, tokenizer
        self.label_names = label_names
        self.label_index = {name: index for index, name in enumerate(label_names or ())}
        self.max_length, self.tagging, self.knowledge = max_length, tagging, knowledge
        self.statistics = {"spans_not_on_token_boundaries": 0, "spans_truncated": 0, "nested_spans_lost": 0}

    # -- features ------------------------------------------------------------------------------------
    def _tokenize(self, text: str, pair: str | None = None) -> dict[str, Any]:
        encoding = self.tokenizer(text, pair, max_length=self.max_length, truncation=True,
                                  return_offsets_mapping=True, return_token_type_ids=True)
        feature = {"input_ids": np.asarray(encoding["input_ids"], np.int64),
                   "token_type_ids": np.asarray(encoding["token_type_ids"], np.int64),
                   "offsets": np.asarray(encoding["offset_mapping"], np.int64).reshape(-1, 2)}
        if self.knowledge is not None:
            sequence = np.asarray(feature["token_type_ids"])
            parts = []
            for index, part_text in enumerate([text] if pair is None else [text, pair]):
                offsets = feature["offsets"].copy()
                offsets[sequence != index] = 0  # tokens of the other text are skipped like special tokens
                parts.append(self.knowledge.features(part_text, offsets))
            feature["knowledge"] = _merge_mentions(parts)
        return feature

    def _label(self, label: str, example_id: str) -> int:
        if label not in self.label_index:
            raise ConfigurationError(f"{example_id}: label {label!r} is not one of the {len(self.label_index)} "
                                     f"training labels")
        return self.label_index[label]

    def _tags(self, feature: dict, spans) -> np.ndarray:
        offsets = feature["offsets"]
        token_spans = char_spans_to_token_spans(offsets, [(s, e) for s, e, _ in spans])
        text_end = offsets[:, 1].max() if len(offsets) else 0
        kept = []
        for (start, end), span in zip(token_spans.tolist(), spans):
            if start >= 0:
                kept.append((start, end, span[2]))
            elif span[1] > text_end:
                self.statistics["spans_truncated"] += 1
            else:
                self.statistics["spans_not_on_token_boundaries"] += 1
        tags = metrics.tags_from_spans(len(offsets), kept, self.tagging)
        ids = np.array([self.label_index.get(tag, -100) for tag in tags], np.int64)
        special = offsets[:, 1] <= offsets[:, 0]
        ids[special] = -100
        return ids

    def encode(self, examples: Sequence) -> list[dict[str, Any]]:
        """One feature per example (per candidate for ``qa_ranking``, with its question's index)."""
        features = []
        for index, example in enumerate(examples):
            if self.kind in ("ner", "nested_ner"):
                feature = self._tokenize(example.text)
                if self.kind == "ner":
                    feature["labels"] = self._tags(feature, example.spans)
                else:
                    outer, inner, lost = _layers(example.spans)
                    self.statistics["nested_spans_lost"] += lost
                    feature["labels"] = np.stack([self._tags(feature, outer), self._tags(feature, inner)], 1)
            elif self.kind == "classification":
                feature = self._tokenize(example.text)
                feature["labels"] = self._label(example.label, example.id)
            elif self.kind == "pair":
                feature = self._tokenize(example.text_a, example.text_b)
                feature["labels"] = self._label(example.label, example.id)
            elif self.kind == "relation":
                feature = self._tokenize(example.text)
                spans = char_spans_to_token_spans(feature["offsets"], [example.head, example.tail])
                if (spans < 0).any():  # truncated away or inside a token: fall back to the covering tokens
                    spans = self._covering(feature["offsets"], [example.head, example.tail])
                feature["head_spans"], feature["tail_spans"] = spans[0], spans[1]
                feature["labels"] = self._label(example.label, example.id)
            else:  # qa_ranking
                for candidate, label in zip(example.candidates, example.labels):
                    feature = self._tokenize(example.query, candidate)
                    feature["labels"], feature["candidate_group"] = label, index
                    features.append(feature)
                continue
            features.append(feature)
        if any(self.statistics.values()):
            logger.info("%s: %s", self.spec.name, self.statistics)
        return features

    @staticmethod
    def _covering(offsets: np.ndarray, spans) -> np.ndarray:
        real = offsets[:, 1] > offsets[:, 0]
        result = []
        for start, end in spans:
            inside = np.flatnonzero(real & (offsets[:, 1] > start) & (offsets[:, 0] < end))
            result.append((inside[0], inside[-1] + 1) if len(inside) else (0, 1))  # [CLS] when truncated away
        return np.asarray(result, np.int64)

    # -- batches -------------------------------------------------------------------------------------
    def collate(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        size, length = len(features), max(len(f["input_ids"]) for f in features)
        input_ids = np.full((size, length), self.tokenizer.pad_token_id, np.int64)
        token_type_ids = np.zeros((size, length), np.int64)
        attention_mask = np.zeros((size, length), np.int64)
        for row, feature in enumerate(features):
            n = len(feature["input_ids"])
            input_ids[row, :n], token_type_ids[row, :n], attention_mask[row, :n] = (
                feature["input_ids"], feature["token_type_ids"], 1)
        batch = {"input_ids": torch.from_numpy(input_ids), "token_type_ids": torch.from_numpy(token_type_ids),
                 "attention_mask": torch.from_numpy(attention_mask)}
        if "labels" in features[0]:
            if self.kind in ("ner", "nested_ner"):
                shape = (size, length) + features[0]["labels"].shape[1:]
                labels = np.full(shape, -100, np.int64)
                for row, feature in enumerate(features):
                    labels[row, : len(feature["labels"])] = feature["labels"]
                batch["labels"] = torch.from_numpy(labels)
            else:
                batch["labels"] = torch.tensor([f["labels"] for f in features], dtype=torch.long)
        if self.kind == "relation":
            batch["head_spans"] = torch.from_numpy(np.stack([f["head_spans"] for f in features]))
            batch["tail_spans"] = torch.from_numpy(np.stack([f["tail_spans"] for f in features]))
        if self.kind == "qa_ranking":
            batch["candidate_group"] = torch.tensor([f["candidate_group"] for f in features], dtype=torch.long)
        if self.knowledge is not None:
            batch.update(self.knowledge.collate([f["knowledge"] for f in features]))
        return batch

    # -- decoding ------------------------------------------------------------------------------------
    def spans_from_logits(self, feature: dict, logits: np.ndarray) -> set[tuple[int, int, str]]:
        """Character spans predicted for one example; ``logits`` (length, [streams,] tags) unpadded."""
        offsets = feature["offsets"]
        real = offsets[:, 1] > offsets[:, 0]
        streams = logits[:, None] if logits.ndim == 2 else logits
        predicted = set()
        for stream in range(streams.shape[1]):
            tags = [self.label_names[i] if is_real else "O"
                    for i, is_real in zip(streams[:, stream].argmax(-1).tolist(), real.tolist())]
            for start, end, kind in metrics.spans_from_tags(tags):
                predicted.add((int(offsets[start, 0]), int(offsets[end - 1, 1]), kind))
        return predicted


# -- prediction and scores -----------------------------------------------------------------------------------
@torch.no_grad()
def predict(model, encoder: TaskEncoder, features: list[dict], *, batch_size: int = 64, device: str = "cpu",
            progress: bool = False) -> list[np.ndarray]:
    """Per-feature logits (unpadded for token tasks; a scalar score for ranking)."""
    model.eval()
    outputs = []
    starts = range(0, len(features), batch_size)
    for start in tqdm(starts, desc="predict", disable=not progress, leave=False):
        chunk = features[start: start + batch_size]
        batch = {k: v.to(device) for k, v in encoder.collate(chunk).items() if k != "labels"}
        logits = model(**batch).logits.float().cpu().numpy()
        for row, feature in enumerate(chunk):
            outputs.append(logits[row, : len(feature["input_ids"])] if encoder.kind in ("ner", "nested_ner")
                           else logits[row])
    return outputs


def score(encoder: TaskEncoder, examples: Sequence, features: list[dict], outputs: list[np.ndarray]
          ) -> dict[str, float]:
    """The task's metrics; ``score["main"]`` is the one early stopping and tables use.

    Relation micro F1 leaves out the negative label (GAD ``negative``, DDI ``DDI-false``), the
    BLURB convention; ChemProt here holds positives only, so its micro F1 equals accuracy.
    """
    kind, spec = encoder.kind, encoder.spec
    if kind in ("ner", "nested_ner"):
        predicted = [encoder.spans_from_logits(f, o) for f, o in zip(features, outputs)]
        result = metrics.entity_scores([e.spans for e in examples], predicted)
        return {**result, "main": result["f1"]}
    if kind == "qa_ranking":
        groups: dict[int, tuple[list, list]] = {}
        for feature, output in zip(features, outputs):
            scores, labels = groups.setdefault(feature["candidate_group"], ([], []))
            scores.append(float(output))
            labels.append(feature["labels"])
        value = metrics.accuracy_at_1([g[0] for g in groups.values()], [g[1] for g in groups.values()])
        return {"acc@1": value, "main": value}
    names = encoder.label_names
    gold = [e.label for e in examples]
    predicted = [names[int(np.argmax(o))] for o in outputs]
    result = {"accuracy": metrics.accuracy(gold, predicted), "macro_f1": metrics.macro_f1(gold, predicted, names)}
    if kind == "relation":
        negative = [n for n in names if n.lower() in ("negative", "false", "ddi-false", "0")]
        result["micro_f1"] = metrics.micro_f1(gold, predicted, negative)
    result["main"] = result[spec.metric]
    return result


# -- the loop ------------------------------------------------------------------------------------------------
@dataclass
class FineTuneSettings:
    """``batch_size``: examples (ranking: candidates) per step over all processes; ``mixed_precision``:
    ``"no"``, ``"bf16"`` or ``"fp16"``."""

    epochs: int = 3
    batch_size: int = 32
    learning_rate: float = 5e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    patience: int = 2
    max_grad_norm: float = 1.0
    seed: int = 0
    mixed_precision: str = "no"

    def validate(self) -> None:
        check_mixed_precision(self.mixed_precision)


def loss_items(batch: dict[str, torch.Tensor], kind: str) -> int:
    """How many items the head's loss averages over in ``batch`` (:mod:`kgplm.models.heads`): labelled
    tokens for NER, questions with a correct candidate for ranking, examples otherwise. Data
    parallelism weights each process's mean by its share of them."""
    labels = batch["labels"]
    if kind in ("ner", "nested_ner"):
        return int((labels != -100).sum())
    if kind == "qa_ranking":
        return len(torch.unique(batch["candidate_group"][labels > 0]))
    return len(labels)


def finetune_loop(model, encoder: TaskEncoder, train_features: list[dict], dev_examples: Sequence,
                  dev_features: list[dict], settings: FineTuneSettings, *, device: str = "cpu",
                  progress: bool = True, distributed: DistributedContext | None = None
                  ) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Train, score dev after each epoch, restore the best epoch's weights. Returns (history, best dev scores).

    Data parallelism (``distributed``, default: the initialised process group): every rank draws the
    same order; each step's units are split into contiguous shares, one per rank, and each rank's
    mean loss is weighted by its share of the step's :func:`loss_items`, so the gradient is the
    mean over the whole batch. Rank 0 scores dev and broadcasts the scores, so every rank takes the
    same early-stopping decision.
    """
    context = distributed if distributed is not None else current(device)
    device = context.device
    generator = torch.Generator().manual_seed(settings.seed)
    torch.manual_seed(settings.seed + context.rank)  # dropout: each rank its own stream
    model.to(device)
    optimizer = build_optimizer(model, settings)
    scaler = grad_scaler(device, settings.mixed_precision)
    network = wrap_data_parallel(model, context)
    trainable = [p for p in model.parameters() if p.requires_grad]
    # ranking batches keep a question's candidates together so the listwise softmax sees them all
    if encoder.kind == "qa_ranking":
        group_ids = np.array([f["candidate_group"] for f in train_features])
        units = [np.flatnonzero(group_ids == g) for g in np.unique(group_ids)]
    else:
        units = [np.array([i]) for i in range(len(train_features))]
    units_per_batch = max(1, settings.batch_size if encoder.kind != "qa_ranking"
                          else settings.batch_size // max(1, round(len(train_features) / max(len(units), 1))))
    steps_per_epoch = math.ceil(len(units) / units_per_batch)
    total = steps_per_epoch * settings.epochs
    warmup = int(settings.warmup_ratio * total)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / max(warmup, 1), max(0.0, (total - step) / max(total - warmup, 1))))
    history, best, best_state, waited = [], None, None, 0
    bar = tqdm(total=total, desc=f"fine-tune {encoder.spec.name}", disable=not progress or not context.is_main)
    for epoch in range(settings.epochs):
        model.train()
        order = torch.randperm(len(units), generator=generator).tolist()
        losses = []
        for start in range(0, len(order), units_per_batch):
            shares = np.array_split(np.asarray(order[start: start + units_per_batch]), context.world_size)
            mine = shares[context.rank]
            # a rank left without units runs the first unit with weight 0, so DDP's all-reduce still meets
            stand_in = len(mine) == 0
            indices = np.concatenate([units[i] for i in (shares[0][:1] if stand_in else mine)])
            cpu_batch = encoder.collate([train_features[i] for i in indices])
            items = 0 if stand_in else loss_items(cpu_batch, encoder.kind)
            all_items = sum(context.gather(items))
            batch = {k: v.to(device, non_blocking=True) for k, v in cpu_batch.items()}
            with autocast(device, settings.mixed_precision):
                output = network(**batch)
            if items:  # each rank's mean weighted by its share; DDP averages over the ranks
                objective = output.loss * (items * context.world_size / all_items)
            else:
                objective = zero_objective(output)
            optimizer.zero_grad(set_to_none=True)
            (scaler.scale(objective) if scaler is not None else objective).backward()
            optimizer_step(optimizer, trainable, settings.max_grad_norm, scaler, len(losses))
            scheduler.step()
            local = float(output.loss.detach()) * items if items else 0.0
            loss = sum(context.gather(local)) / max(all_items, 1)
            losses.append(loss)
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}")
        dev_scores = None
        if context.is_main:
            with autocast(device, settings.mixed_precision):
                outputs = predict(model, encoder, dev_features, batch_size=settings.batch_size * 2, device=device)
            dev_scores = score(encoder, dev_examples, dev_features, outputs)
        dev_scores = context.broadcast(dev_scores)
        history.append({"epoch": epoch + 1, "train_loss": float(np.mean(losses)),
                        **{f"dev_{k}": v for k, v in dev_scores.items()}})
        if context.is_main:
            logger.info("epoch %d: train loss %.4f, dev %s %.4f", epoch + 1, history[-1]["train_loss"],
                        encoder.spec.metric, dev_scores["main"])
        if best is None or dev_scores["main"] > best["main"]:
            best, best_state, waited = dev_scores, copy.deepcopy(model.state_dict()), 0
        else:
            waited += 1
            if waited >= settings.patience:
                if context.is_main:
                    logger.info("early stop after epoch %d (no dev improvement for %d epochs)", epoch + 1, waited)
                break
    bar.close()
    model.load_state_dict(best_state)
    return history, best
