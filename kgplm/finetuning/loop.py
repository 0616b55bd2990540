"""The fine-tuning loop: AdamW with a linear schedule, the dev score after every epoch, early stopping
on it, checkpoints on a stop signal (:mod:`kgplm.finetuning.checkpoints`); and :func:`predict`, the model's
outputs over encoded features, which :class:`~kgplm.finetuning.encoding.TaskEncoder` decodes and
:mod:`kgplm.finetuning.scoring` scores.

:func:`finetune_loop` keeps the best state and stops after ``patience`` epochs without improvement,
counted once the dev score has risen above 0 (a tagger's first epochs often find no entity at all:
entity F1 0, the score of the constant all-O prediction).
"""

from __future__ import annotations

import copy
import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from kgplm._io import json_safe
from kgplm.exceptions import PreemptedError
from kgplm.training.checkpoints import remove_unfinished
from kgplm.training.distributed import DistributedContext, current
from kgplm.finetuning.checkpoints import (
    FineTuneProgress,
    remove_checkpoints,
    resume_fine_tuning,
    save_fine_tuning_checkpoint,
)
from kgplm.training.interrupts import DEFAULT_STOP_SIGNALS, StopRequest
from kgplm.training.precision import autocast, check_mixed_precision, grad_scaler
from kgplm.finetuning.scoring import score
from kgplm.training.trainer import build_optimizer, optimizer_step, wrap_data_parallel, zero_objective

from kgplm.finetuning.encoding import RANKING_KINDS, TOKEN_KINDS, TaskEncoder

__all__ = ["FineTuneSettings", "finetune_loop", "predict", "loss_items"]

logger = logging.getLogger(__name__)


def _triple_outputs(model, encoder: TaskEncoder, chunk: list[dict], output, device: str) -> list[dict]:
    """Relation triples, second stage: classify every ordered pair of the entities the tags found."""
    tag_logits = output.logits.float().cpu().numpy()
    candidates = [
        encoder.entity_candidates(feature["text"], feature, tag_logits[row, : len(feature["input_ids"])])
        for row, feature in enumerate(chunk)
    ]
    pairs = [[(s, o) for s, _ in found for o, _ in found if s != o] for found in candidates]
    spans = [dict(found) for found in candidates]
    rows = [[row, *spans[row][s], *spans[row][o]] for row in range(len(chunk)) for s, o in pairs[row]]
    pair_logits = np.zeros((0, len(encoder.label_names)), np.float32)
    if rows:
        index = torch.tensor(rows, dtype=torch.long, device=device)  # (pairs, [row, s0, s1, o0, o1])
        pair_logits = model.head.classify_pairs(output.last_hidden_state, index).float().cpu().numpy()
    results, offset = [], 0
    for row in range(len(chunk)):
        count = len(pairs[row])
        results.append(
            {
                "tags": tag_logits[row, : len(chunk[row]["input_ids"])],
                "pairs": pairs[row],
                "pair_logits": pair_logits[offset : offset + count],
            }
        )
        offset += count
    return results


@torch.no_grad()
def predict(
    model,
    encoder: TaskEncoder,
    features: list[dict],
    *,
    batch_size: int = 64,
    device: str = "cpu",
    progress: bool = False,
) -> list:
    """Per-feature outputs: logits unpadded for token tasks, a scalar score for ranking, class logits
    otherwise; for relation triples a dict of tag logits, the entity pairs found and their logits."""
    model.eval()
    outputs = []
    starts = range(0, len(features), batch_size)
    for start in tqdm(starts, desc="predict", disable=not progress, leave=False):
        chunk = features[start : start + batch_size]
        batch = {
            k: v.to(device)
            for k, v in encoder.collate(chunk).items()
            if k not in ("labels", "entity_pairs", "pair_labels")
        }
        output = model(**batch)
        if encoder.kind == "relation_triples":
            outputs.extend(_triple_outputs(model, encoder, chunk, output, device))
            continue
        logits = output.logits.float().cpu().numpy()
        for row, feature in enumerate(chunk):
            outputs.append(logits[row, : len(feature["input_ids"])] if encoder.kind in TOKEN_KINDS else logits[row])
    return outputs


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
    tokens for NER, questions with a correct candidate for ranking, ordered document pairs for graded
    ranking, examples otherwise. Data parallelism weights each process's mean by its share of them.
    Relation triples sum two means (tags and entity pairs); their share is taken from the labelled
    tokens, so under data parallelism the pair term is weighted by the tag share (exact on one process)."""
    labels = batch["labels"]
    if kind in TOKEN_KINDS or kind == "relation_triples":
        return int((labels != -100).sum())
    if kind == "qa_ranking":
        return len(torch.unique(batch["candidate_group"][labels > 0]))
    if kind == "graded_ranking":
        group = batch["candidate_group"]
        return int(((group[:, None] == group[None, :]) & (labels[:, None] > labels[None, :])).sum())
    return len(labels)


def finetune_loop(
    model,
    encoder: TaskEncoder,
    train_features: list[dict],
    dev_examples: Sequence,
    dev_features: list[dict],
    settings: FineTuneSettings,
    *,
    device: str = "cpu",
    progress: bool = True,
    distributed: DistributedContext | None = None,
    report: Callable[[dict[str, Any]], None] | None = None,
    output_dir: str | os.PathLike | None = None,
    stop_signals: Sequence[str] = DEFAULT_STOP_SIGNALS,
    identity: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Train, score dev after each epoch, restore the best epoch's weights. Returns (history, best dev scores).

    Preemption (with an ``output_dir``): on one of ``stop_signals`` (:mod:`kgplm.training.interrupts`) the
    loop finishes the optimiser step it is in, writes a checkpoint to ``output_dir/checkpoints``
    (:mod:`kgplm.finetuning.checkpoints`) and raises :class:`~kgplm.exceptions.PreemptedError`, on
    every rank after the same step; called again with the same arguments and ``identity`` (what
    determines the result: a checkpoint of another identity is refused), the loop resumes from it and
    ends as the uninterrupted loop would, bit for bit. A finished loop removes its checkpoints.

    Each epoch's history record (training loss, the learning rate at the epoch's end, dev scores) goes to
    ``report`` on rank 0 (TensorBoard, :mod:`kgplm.training.reporting`).

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
    skipped = sum(bool(f.get("skip_training")) for f in train_features)
    if skipped:  # an unseen label, a cut relation: nothing to learn from (counted by the encoder)
        logger.info("%s: %d training features without a label are left out", encoder.spec.name, skipped)
        train_features = [f for f in train_features if not f.get("skip_training")]
    scaler = grad_scaler(device, settings.mixed_precision)
    network = wrap_data_parallel(model, context)
    trainable = [p for p in model.parameters() if p.requires_grad]
    # ranking batches keep a question's candidates together so the listwise softmax sees them all
    if encoder.kind in RANKING_KINDS:
        group_ids = np.array([f["candidate_group"] for f in train_features])
        units = [np.flatnonzero(group_ids == g) for g in np.unique(group_ids)]
    else:
        units = [np.array([i]) for i in range(len(train_features))]
    units_per_batch = max(
        1,
        settings.batch_size
        if encoder.kind not in RANKING_KINDS
        else settings.batch_size // max(1, round(len(train_features) / max(len(units), 1))),
    )
    steps_per_epoch = math.ceil(len(units) / units_per_batch)
    total = steps_per_epoch * settings.epochs
    warmup = int(settings.warmup_ratio * total)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / max(warmup, 1), max(0.0, (total - step) / max(total - warmup, 1)))
    )
    checkpoints = None if output_dir is None else Path(output_dir)
    identity = dict(identity or {}, settings=asdict(settings), training_features=len(train_features))
    state = FineTuneProgress()
    if checkpoints is not None:
        if context.is_main:
            for unfinished in remove_unfinished(checkpoints):
                logger.info("removed %s, a checkpoint an earlier run did not finish writing", unfinished)
        context.barrier()
        resumed = resume_fine_tuning(
            checkpoints, model, optimizer, scheduler, scaler, identity=json_safe(identity), context=context
        )
        state = resumed if resumed is not None else state
    history, best, best_state, waited = state.history, state.best, state.best_state, state.waited
    bar = tqdm(
        total=total,
        initial=scheduler.last_epoch,
        desc=f"fine-tune {encoder.spec.name}",
        disable=not progress or not context.is_main,
    )

    def stop_here(stop_request, epoch: int, batch: int, losses: list[float]) -> None:
        """After a step (or an epoch): when any rank got a stop signal, checkpoint and raise PreemptedError."""
        stop = context.gather(stop_request.signal_name) if context.enabled else [stop_request.signal_name]
        received = next((name for name in stop if name is not None), None)
        if received is None:
            return
        done = int(scheduler.last_epoch)
        progress_now = FineTuneProgress(epoch, batch, list(losses), list(history), best, waited, best_state)
        path = save_fine_tuning_checkpoint(
            checkpoints,
            model,
            optimizer,
            scheduler,
            scaler,
            progress_now,
            step=done,
            settings=settings,
            identity=json_safe(identity),
            context=context,
        )
        bar.close()
        context.barrier()  # rank 0 has written the checkpoint
        path = context.broadcast(None if path is None else str(path))
        if context.is_main:
            logger.warning(
                "%s: fine-tuning stopped after step %d of %d; checkpoint %s; run the same call again to resume",
                received,
                done,
                total,
                path,
            )
        raise PreemptedError(received, done, path)

    batch_starts = list(range(0, len(units), units_per_batch))
    for _ in range(state.epoch):  # the data order of the epochs already done
        torch.randperm(len(units), generator=generator)
    with StopRequest(stop_signals if checkpoints is not None else ()) as stop_request:
        for epoch in range(state.epoch, settings.epochs):
            model.train()
            order = torch.randperm(len(units), generator=generator).tolist()
            resuming = epoch == state.epoch
            losses = list(state.losses) if resuming else []
            for batch_number in range(state.batch if resuming else 0, len(batch_starts)):
                start = batch_starts[batch_number]
                losses.append(
                    _fine_tuning_step(
                        network,
                        encoder,
                        train_features,
                        units,
                        order[start : start + units_per_batch],
                        context,
                        settings,
                        optimizer,
                        scheduler,
                        scaler,
                        trainable,
                        device,
                        len(losses),
                    )
                )
                bar.update(1)
                bar.set_postfix(loss=f"{losses[-1]:.4f}")
                stop_here(stop_request, epoch, batch_number + 1, losses)
            dev_scores = None
            if context.is_main:
                with autocast(device, settings.mixed_precision):
                    outputs = predict(model, encoder, dev_features, batch_size=settings.batch_size * 2, device=device)
                dev_scores = score(encoder, dev_examples, dev_features, outputs)
            dev_scores = context.broadcast(dev_scores)
            history.append(
                {
                    "epoch": epoch + 1,
                    "train_loss": float(np.mean(losses)),
                    "learning_rate": float(optimizer.param_groups[0]["lr"]),
                    **{f"dev_{k}": v for k, v in dev_scores.items()},
                }
            )
            if context.is_main and report is not None:
                report(history[-1])
            if context.is_main:
                logger.info(
                    "epoch %d: train loss %.4f, dev %s %.4f",
                    epoch + 1,
                    history[-1]["train_loss"],
                    encoder.spec.metric,
                    dev_scores["main"],
                )
            if best is None or dev_scores["main"] > best["main"]:
                best, best_state, waited = dev_scores, copy.deepcopy(model.state_dict()), 0
            elif best["main"] > 0:  # a model that has scored nothing on dev yet (no entity found) is not waiting
                waited += 1
                if waited >= settings.patience:
                    if context.is_main:
                        logger.info("early stop after epoch %d (no dev improvement for %d epochs)", epoch + 1, waited)
                    break
            if epoch + 1 < settings.epochs:
                stop_here(stop_request, epoch + 1, 0, [])
    bar.close()
    model.load_state_dict(best_state)
    if checkpoints is not None and context.is_main:
        remove_checkpoints(checkpoints)
    return history, best


def _fine_tuning_step(
    network,
    encoder: TaskEncoder,
    train_features: list[dict],
    units: list[np.ndarray],
    batch_units: list[int],
    context: DistributedContext,
    settings: FineTuneSettings,
    optimizer,
    scheduler,
    scaler,
    trainable,
    device,
    step_in_epoch: int,
) -> float:
    """One optimiser step on the units ``batch_units``, split over the ranks; the step's mean loss over all ranks."""
    shares = np.array_split(np.asarray(batch_units), context.world_size)
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
    optimizer_step(optimizer, trainable, settings.max_grad_norm, scaler, step_in_epoch)
    scheduler.step()
    local = float(output.loss.detach()) * items if items else 0.0
    return sum(context.gather(local)) / max(all_items, 1)
