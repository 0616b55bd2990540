"""The pre-training loop: AdamW with linear warm-up and decay, gradient accumulation, data parallelism,
mixed precision, logging, exact resume.

Batches (:mod:`kgplm.training.loader`): step ``s`` takes ``batch_size`` examples of a seeded
stream; the example at position ``i`` of the step's global batch draws its SOP split, masks and
negatives from a generator seeded with (seed, s, i). With ``world_size = W`` processes
(``torchrun``, :mod:`kgplm.training.distributed`) each rank takes B/W of them; with
``gradient_accumulation_steps = A`` a rank's share is split into A micro-batches of B/(W·A)
examples that are collated (in ``num_workers`` DataLoader workers, or in the main process), run
and back-propagated one after the other, so the paper's batch of 512 sequences fits on any number
of devices.

Exact accumulation and data parallelism: each objective k (``mlm``, ``sop`` …) is a mean over its
targets. The collator counts the targets of every micro-batch (``Batch.target_counts``); the
ranks exchange their counts, so every rank knows the step's totals C_k over the *global* batch,
and weights micro-batch m's mean L_k,m by c_k,m / C_k: Σ_(r,m) c_k,r,m L_k,r,m / C_k is the mean
over the whole global batch — what one process with one batch of B examples computes, up to float
summation order. ``DistributedDataParallel`` averages gradients over the W ranks, so each rank's
objective is multiplied by W. Logged values are summed over ranks the same way. An objective a
method does not count is averaged over all micro-batches of all ranks. An objective without
targets in a micro-batch is absent from its losses (never the NaN of an empty mean); a step in
which no objective had a target on any rank changes no weight (its schedule step still runs).

Dropout: the global torch generator is re-seeded from (seed, s, r·A + m) before each micro-batch.
A checkpoint therefore only needs the model, optimiser, scheduler, gradient scaler (fp16), the
logging window and the step: a run killed at any point and restarted from its last checkpoint
reproduces the uninterrupted run's losses (with the same number of processes bit for bit; with
another, up to float summation order when dropout is off — dropout masks depend on how the batch
is split into micro-batches).

Mixed precision (:mod:`kgplm.training.precision`): the forward pass runs under autocast
(``bf16``/``fp16``); ``fp16`` scales the loss with a ``GradScaler`` and skips steps whose gradients
overflowed.

Only rank 0 writes: ``metrics.jsonl`` and checkpoints. Logging (every ``log_every`` steps):
``loss`` and each objective's loss averaged over the steps of the window *that computed it* (a loss
absent from some steps is not averaged as 0), metrics such as ``mlm_accuracy`` and
``sop_accuracy`` likewise, and ``learning_rate``: the rate the last step of the window used.

Host synchronisation: one per step (the logged values, which also guard against a non-finite
loss before the optimiser step), plus the exchange of target counts under data parallelism; none
per micro-batch.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from kgplm._io import AppendFile, atomic_file
from kgplm.exceptions import ArtifactError, ConfigurationError, PreemptedError
from kgplm.training.checkpoints import (
    latest_checkpoint,
    remove_unfinished,
    resume_checkpoint,
    save_checkpoint,
)
from kgplm.training.distributed import DistributedContext, current
from kgplm.training.interrupts import DEFAULT_STOP_SIGNALS, StopRequest
from kgplm.training.loader import StepBatches, example_seeds, step_loader
from kgplm.training.optimizer import RowwiseAdamW, clip_grad_norm
from kgplm.training.precision import autocast, check_mixed_precision, grad_scaler

__all__ = [
    "TrainerSettings",
    "train_loop",
    "latest_checkpoint",
    "step_seed",
    "example_seeds",
    "build_optimizer",
    "combine_micro_batches",
    "wrap_data_parallel",
    "zero_objective",
    "optimizer_step",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainerSettings:
    """``batch_size`` is the number of examples per optimiser step over all processes (split into
    ``gradient_accumulation_steps`` micro-batches on each); ``mixed_precision`` is ``"no"``,
    ``"bf16"`` or ``"fp16"``; ``num_workers`` DataLoader processes collate ahead of the loop."""

    max_steps: int = 1000
    batch_size: int = 16
    gradient_accumulation_steps: int = 1
    learning_rate: float = 5e-4
    warmup_steps: int = 0
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    checkpoint_every: int = 200
    keep_checkpoints: int = 2
    log_every: int = 10
    seed: int = 0
    mixed_precision: str = "no"
    num_workers: int = 0

    def validate(self, world_size: int = 1) -> None:
        for name in (
            "max_steps",
            "batch_size",
            "gradient_accumulation_steps",
            "checkpoint_every",
            "log_every",
            "keep_checkpoints",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
        if self.batch_size % (self.gradient_accumulation_steps * world_size):
            processes = f" × {world_size} processes" if world_size > 1 else ""
            raise ConfigurationError(
                f"batch_size ({self.batch_size}) must be a multiple of "
                f"gradient_accumulation_steps ({self.gradient_accumulation_steps}){processes}"
            )
        if not self.learning_rate > 0:
            raise ConfigurationError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.warmup_steps < 0:
            raise ConfigurationError(f"warmup_steps must be ≥ 0, got {self.warmup_steps}")
        check_mixed_precision(self.mixed_precision)
        if not isinstance(self.num_workers, int) or isinstance(self.num_workers, bool) or self.num_workers < 0:
            raise ConfigurationError(f"num_workers must be an integer ≥ 0, got {self.num_workers!r}")

    def micro_batch_size(self, world_size: int = 1) -> int:
        """Examples per forward pass."""
        return self.batch_size // (self.gradient_accumulation_steps * world_size)


def step_seed(seed: int, step: int, micro_batch: int = 0) -> int:
    """The dropout seed of micro-batch ``micro_batch`` (rank·A + m under data parallelism) of step ``step``."""
    return int(np.random.SeedSequence([seed, step, micro_batch]).generate_state(1, dtype=np.uint64)[0] % (2**63))


def _linear_schedule(warmup_steps: int, max_steps: int):
    def factor(step: int) -> float:
        if warmup_steps and step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (max_steps - step) / max(1, max_steps - warmup_steps))

    return factor


def build_optimizer(model: torch.nn.Module, settings) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters; ``settings`` has ``learning_rate`` and ``weight_decay``.

    :class:`~kgplm.training.optimizer.RowwiseAdamW` is ``torch.optim.AdamW`` for dense gradients; a
    parameter whose gradient is sparse (KeBioLM's entity table under the sampled linking softmax)
    gets AdamW's update on the rows its gradient names only (lazy rows, see that module)."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        # biases and LayerNorm weights are not decayed (BERT)
        (no_decay if parameter.ndim < 2 or "norm" in name.lower() else decay).append(parameter)
    return RowwiseAdamW(
        [{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=settings.learning_rate,
    )


def wrap_data_parallel(model: torch.nn.Module, context: DistributedContext) -> torch.nn.Module:
    """``model`` in ``DistributedDataParallel`` when there are several processes, else itself.

    ``find_unused_parameters``: knowledge modules skip parameters in batches without mentions
    (and SOP heads in batches without pairs), which DDP must know to finish its reduction.
    """
    if not context.enabled:
        return model
    device_ids = [context.device.index] if context.device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids, find_unused_parameters=True)


def zero_objective(output) -> torch.Tensor:
    """A zero that depends on the forward pass's outputs: its backward joins DDP's gradient all-reduce
    on a rank whose micro-batch had no target, adding nothing."""
    tensors = []
    values = list(output.values()) if isinstance(output, dict) else [output]
    while values:
        value = values.pop()
        if isinstance(value, dict):
            values.extend(value.values())
        elif isinstance(value, torch.Tensor) and value.requires_grad and value.is_floating_point():
            tensors.append(value)
    if not tensors:
        raise ConfigurationError(
            "the model's output holds no tensor that requires a gradient; data parallelism needs one on every rank"
        )
    return sum((tensor.reshape(-1)[:1].float() * 0.0).sum() for tensor in tensors)


def combine_micro_batches(counts: list[dict[str, int]]) -> tuple[dict[str, int], int]:
    """The step's total target count per objective, and the number of micro-batches."""
    totals: dict[str, int] = {}
    for micro in counts:
        for name, value in micro.items():
            totals[name] = totals.get(name, 0) + int(value)
    return totals, len(counts)


def _share(name: str, micro_counts: dict[str, int], totals: dict[str, int], num_micro: int) -> float:
    """The weight of one micro-batch's mean of ``name`` in the step's mean (see the module docstring)."""
    if name in totals:
        return micro_counts.get(name, 0) / totals[name] if totals[name] else 0.0
    return 1.0 / num_micro


def _truncate_metrics(path: Path, last_step: int) -> None:
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line) if line.strip() else None
        except ValueError:  # the cut-short tail of a write the disk or a kill interrupted
            record = None
        if record is not None and record["step"] <= last_step:
            kept.append(line)
    with atomic_file(path, "w", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in kept))


class _Window:
    """Running sums of logged values, each with the number of steps that computed it."""

    def __init__(self, state: dict | None = None) -> None:
        state = state or {}
        self.sums: dict[str, float] = dict(state.get("sums", {}))
        legacy_steps = state.get("steps", 0)  # checkpoints written before per-value counts
        self.counts: dict[str, int] = dict(state.get("counts", {name: legacy_steps for name in self.sums}))

    def add(self, values: dict[str, float]) -> None:
        for name, value in values.items():
            self.sums[name] = self.sums.get(name, 0.0) + value
            self.counts[name] = self.counts.get(name, 0) + 1

    def means(self) -> dict[str, float]:
        return {name: total / self.counts[name] for name, total in self.sums.items()}

    def state(self) -> dict:
        return {"sums": self.sums, "counts": self.counts}


def _add(sums: dict[str, torch.Tensor], name: str, value) -> None:
    value = value.detach().float() if isinstance(value, torch.Tensor) else torch.tensor(float(value))
    sums[name] = sums[name] + value if name in sums else value


def _run_step(
    model, micro_batches, context: DistributedContext, settings: TrainerSettings, step: int, scaler
) -> dict[str, float] | None:
    """Forward and backward this rank's micro-batches of one step; the step's logged values summed
    over all ranks (None: no rank had a target)."""
    local_totals, _ = combine_micro_batches([batch.target_counts for batch in micro_batches])
    totals, _ = combine_micro_batches(context.gather(local_totals))
    num_micro = len(micro_batches) * context.world_size
    device = context.device
    sums: dict[str, torch.Tensor] = {}
    any_loss = False
    last = len(micro_batches) - 1
    for micro, batch in enumerate(micro_batches):
        torch.manual_seed(step_seed(settings.seed, step, context.rank * len(micro_batches) + micro))  # dropout
        syncing = micro == last  # DDP all-reduces the accumulated gradients in this backward
        no_sync = model.no_sync() if context.enabled and not syncing else contextlib.nullcontext()
        with no_sync:
            with autocast(device, settings.mixed_precision):
                output = model(**batch.to(device, non_blocking=True))
            objective = None
            for name, loss in (output.losses or {}).items():
                if totals.get(name, 1) == 0:
                    continue  # counted and no target anywhere in the step
                share = _share(name, batch.target_counts, totals, num_micro)
                term = output.loss_weights[name] * share * loss
                objective = term if objective is None else objective + term
                _add(sums, name, share * loss)
            for name, value in (output.metrics or {}).items():
                owner = name.split("_", 1)[0]  # "mlm_accuracy" is weighted like "mlm"
                if totals.get(owner, 1):
                    _add(sums, name, _share(owner, batch.target_counts, totals, num_micro) * value)
            if objective is None:
                if not (context.enabled and syncing):
                    continue
                objective = zero_objective(output)
            else:
                any_loss = True
                _add(sums, "loss", objective)
            if context.enabled:
                objective = objective * context.world_size  # DDP averages the ranks' gradients
            (scaler.scale(objective) if scaler is not None else objective).backward()
    names = sorted(sums)
    local = dict(zip(names, torch.stack([sums[n].to(device) for n in names]).tolist())) if names else {}  # a sync
    values: dict[str, float] = {}
    had_loss = False
    for part, part_had_loss in context.gather((local, any_loss)):
        had_loss = had_loss or part_had_loss
        for name, value in part.items():
            values[name] = values.get(name, 0.0) + value
    if not had_loss:
        return None
    return {"loss": values.pop("loss"), **values}


def optimizer_step(optimizer, trainable, max_grad_norm: float, scaler, step: int) -> None:
    """Clip the gradients (unscaled first under fp16) and step; a scaler skips a step that overflowed."""
    if scaler is not None:
        scaler.unscale_(optimizer)
    if max_grad_norm:
        clip_grad_norm(trainable, max_grad_norm)  # torch's clip_grad_norm_, sparse gradients accepted
    if scaler is None:
        optimizer.step()
        return
    scale = scaler.get_scale()
    scaler.step(optimizer)  # skipped when a gradient overflowed
    scaler.update()
    if scaler.get_scale() < scale:
        logger.info("step %d: fp16 gradients overflowed; step skipped, loss scale now %g", step + 1, scaler.get_scale())


def train_loop(
    model,
    dataset,
    collator,
    *,
    output_dir: str | os.PathLike,
    settings: TrainerSettings,
    device: str | torch.device = "cpu",
    progress: bool = True,
    distributed: DistributedContext | None = None,
    report: Callable[[dict[str, Any]], None] | None = None,
    stop_signals: Sequence[str] = DEFAULT_STOP_SIGNALS,
) -> list[dict[str, Any]]:
    """Train ``model`` on ``dataset`` (rows for ``collator``) until ``settings.max_steps``, resuming.

    ``stop_signals`` (:mod:`kgplm.training.interrupts`): on one of them the loop finishes its step,
    writes a checkpoint (rank 0) and raises :class:`~kgplm.exceptions.PreemptedError` on every rank,
    after the same step on all of them; rerunning resumes from that checkpoint.

    ``report``: called on rank 0 with each record written to ``metrics.jsonl`` (TensorBoard,
    :mod:`kgplm.training.reporting`).

    ``collator(rows, example_seeds)`` returns a :class:`~kgplm.training.collator.Batch`. With
    ``num_workers > 0`` it runs in DataLoader worker processes, so it must be picklable and its
    result a function of its arguments. ``distributed``: the process group's context (default:
    the initialised ``torch.distributed`` group, if any, with ``device`` as this rank's device).
    Returns the metrics logged during the whole run (read back from ``metrics.jsonl``).
    """
    context = distributed if distributed is not None else current(device)
    settings.validate(context.world_size)
    output_dir = Path(output_dir)
    device = context.device
    if context.is_main:
        output_dir.mkdir(parents=True, exist_ok=True)
    model.to(device)
    model.train()
    optimizer = build_optimizer(model, settings)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, _linear_schedule(settings.warmup_steps, settings.max_steps)
    )
    scaler = grad_scaler(device, settings.mixed_precision)
    metrics_path = output_dir / "metrics.jsonl"
    start_step, window = 0, _Window()
    if context.is_main:
        for unfinished in remove_unfinished(output_dir):
            logger.info("removed %s, a checkpoint an earlier run did not finish writing", unfinished)
    checkpoint, state = resume_checkpoint(output_dir, model, optimizer, scheduler, grad_scaler=scaler)
    if checkpoint is not None:
        start_step, window = state["step"], _Window(state["window"])
        # the next step's rate under this call's schedule: what the checkpoint holds when max_steps is the
        # run's, the recomputed schedule's when a run is extended (kgplm.train(resume_with_new_schedule=True))
        for group, base_rate, factor in zip(optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas):
            group["lr"] = base_rate * factor(scheduler.last_epoch)
        if context.is_main:
            logger.info("resuming from %s (step %d)", checkpoint, start_step)
            _truncate_metrics(metrics_path, start_step)
    elif context.is_main and metrics_path.exists():
        metrics_path.unlink()
    context.barrier()  # every rank has read the checkpoint before rank 0 may write a newer one
    if len(dataset) == 0:
        raise ConfigurationError("the training corpus holds no examples")
    network = wrap_data_parallel(model, context)
    trainable = [p for p in model.parameters() if p.requires_grad]
    steps = StepBatches(
        dataset,
        collator,
        batch_size=settings.batch_size,
        micro_batch_size=settings.micro_batch_size(context.world_size),
        seed=settings.seed,
        max_steps=settings.max_steps,
        rank=context.rank,
        world_size=context.world_size,
    )
    loader = step_loader(steps, start_step, num_workers=settings.num_workers, pin_memory=device.type == "cuda")
    skipped = 0
    bar = tqdm(
        total=settings.max_steps,
        initial=start_step,
        desc="pre-training",
        unit="step",
        disable=not progress or not context.is_main,
    )
    # each record lands whole or not at all: a full disk leaves the file as it was and names it (DiskFullError)
    metrics_file = AppendFile(metrics_path) if context.is_main else contextlib.nullcontext()
    with StopRequest(stop_signals) as stop_request, metrics_file:
        for step, micro_batches in zip(range(start_step, settings.max_steps), loader):
            optimizer.zero_grad(set_to_none=True)
            values = _run_step(network, micro_batches, context, settings, step, scaler)
            learning_rate = optimizer.param_groups[0]["lr"]  # the rate this step uses
            if values is None:
                skipped += 1
                if context.is_main:
                    logger.warning("step %d: no objective had a target; no weight changed", step + 1)
            else:
                if not math.isfinite(values["loss"]):
                    raise ArtifactError(
                        f"step {step + 1}: the loss is {values['loss']} "
                        f"({ {k: v for k, v in values.items() if k != 'loss'} }); "
                        f"lower the learning rate"
                    )
                optimizer_step(optimizer, trainable, settings.max_grad_norm, scaler, step)
                window.add(values)
            scheduler.step()
            done = step + 1
            if context.is_main and (done % settings.log_every == 0 or done == settings.max_steps):
                record = {"step": done, **window.means(), "learning_rate": learning_rate}
                metrics_file.append(json.dumps(record) + "\n")
                if report is not None:
                    report(record)
                if "loss" in record and math.isfinite(record["loss"]):
                    bar.set_postfix(loss=f"{record['loss']:.4f}")
            if done % settings.log_every == 0 or done == settings.max_steps:
                window = _Window()
            bar.update(1)
            if context.is_main and (done % settings.checkpoint_every == 0 or done == settings.max_steps):
                save_checkpoint(
                    output_dir,
                    model,
                    optimizer,
                    scheduler,
                    {"step": done, "window": window.state(), "settings": asdict(settings)},
                    settings.keep_checkpoints,
                    grad_scaler=scaler,
                )
            # a stop signal: every rank learns whether any rank got one, so all stop after the same step
            stop = context.gather(stop_request.signal_name) if context.enabled else [stop_request.signal_name]
            received = next((name for name in stop if name is not None), None)
            if received is not None and done < settings.max_steps:
                if context.is_main and done % settings.checkpoint_every:
                    save_checkpoint(
                        output_dir,
                        model,
                        optimizer,
                        scheduler,
                        {"step": done, "window": window.state(), "settings": asdict(settings)},
                        settings.keep_checkpoints,
                        grad_scaler=scaler,
                    )
                bar.close()
                context.barrier()  # rank 0 has written the checkpoint
                checkpoint = latest_checkpoint(output_dir)
                if context.is_main:
                    logger.warning(
                        "%s: stopped after step %d of %d; checkpoint %s; run the same call again to resume",
                        received,
                        done,
                        settings.max_steps,
                        checkpoint,
                    )
                raise PreemptedError(received, done, checkpoint)
    bar.close()
    context.barrier()  # rank 0 has written the last metrics and checkpoint
    if skipped and context.is_main:
        logger.warning("%d of %d steps had no target and were skipped", skipped, settings.max_steps - start_step)
    return [json.loads(line) for line in metrics_path.read_text(encoding="utf-8").splitlines() if line.strip()]
