"""The pre-training loop: AdamW with linear warm-up and decay, gradient accumulation, logging, exact resume.

Batches: step ``s`` takes the ``batch_size`` samples ``s·B … (s+1)·B − 1`` of an endless stream
that visits the corpus in a fresh seeded permutation each epoch; the example at position ``i`` of
the step draws its SOP split, masks and negatives from a generator seeded with (seed, s, i)
(:mod:`kgplm.training.collator`). With ``gradient_accumulation_steps = A`` the step's batch is
split into A micro-batches of B/A examples that are collated, run and back-propagated one after
the other, so the paper's batch of 512 sequences fits on one device.

Exact accumulation: each objective k (``mlm``, ``sop`` …) is a mean over its targets. The collator
counts the targets of every micro-batch (``Batch.target_counts``); the loop weights micro-batch
m's mean L_k,m by c_k,m / C_k (C_k the step's total), so Σ_m w_k L_k,m c_k,m / C_k is the mean
over the whole batch — what one batch of B examples computes, up to float summation order. An
objective a method does not count is averaged over the micro-batches that computed it. An
objective without targets in a micro-batch is absent from its losses (never the NaN of an empty
mean); a step in which no objective had a target changes no weight (its schedule step still runs).

Dropout: the global torch generator is re-seeded from (seed, s, m) before each micro-batch. A
checkpoint therefore only needs the model, optimiser, scheduler, the logging window and the step:
a run killed at any point and restarted from its last checkpoint reproduces the uninterrupted
run's losses.

Logging (``metrics.jsonl``, every ``log_every`` steps): ``loss`` and each objective's loss averaged
over the steps of the window *that computed it* (a loss absent from some steps is not averaged as
0), metrics such as ``mlm_accuracy`` and ``sop_accuracy`` likewise, and ``learning_rate``: the
rate the last step of the window used.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from kgplm._io import atomic_file
from kgplm.exceptions import ArtifactError, ConfigurationError
from kgplm.training.checkpoints import (
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)

__all__ = ["TrainerSettings", "train_loop", "latest_checkpoint", "step_seed", "example_seeds", "build_optimizer",
           "combine_micro_batches"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainerSettings:
    """``batch_size`` is the number of examples per optimiser step (split into
    ``gradient_accumulation_steps`` micro-batches)."""

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

    def validate(self) -> None:
        for name in ("max_steps", "batch_size", "gradient_accumulation_steps", "checkpoint_every", "log_every",
                     "keep_checkpoints"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
        if self.batch_size % self.gradient_accumulation_steps:
            raise ConfigurationError(f"batch_size ({self.batch_size}) must be a multiple of "
                                     f"gradient_accumulation_steps ({self.gradient_accumulation_steps})")
        if not self.learning_rate > 0:
            raise ConfigurationError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.warmup_steps < 0:
            raise ConfigurationError(f"warmup_steps must be ≥ 0, got {self.warmup_steps}")

    @property
    def micro_batch_size(self) -> int:
        return self.batch_size // self.gradient_accumulation_steps


def step_seed(seed: int, step: int, micro_batch: int = 0) -> int:
    """The dropout seed of micro-batch ``micro_batch`` of step ``step``."""
    return int(np.random.SeedSequence([seed, step, micro_batch]).generate_state(1, dtype=np.uint64)[0] % (2 ** 63))


def example_seeds(seed: int, step: int, positions: np.ndarray) -> np.ndarray:
    """(len(positions), 3) seed material of the examples at ``positions`` of step ``step``'s batch."""
    positions = np.asarray(positions, dtype=np.int64)
    return np.stack([np.full(len(positions), seed), np.full(len(positions), step), positions], 1)


def _batch_indices(step: int, batch_size: int, num_examples: int, seed: int, cache: dict[int, np.ndarray]) -> np.ndarray:
    positions = np.arange(step * batch_size, (step + 1) * batch_size)
    epochs = positions // num_examples
    indices = np.empty(len(positions), dtype=np.int64)
    for epoch in np.unique(epochs):
        if epoch not in cache:
            cache.clear()  # keep one or two epochs' permutations
            cache[int(epoch)] = np.random.default_rng([seed, int(epoch)]).permutation(num_examples)
        chosen = epochs == epoch
        indices[chosen] = cache[int(epoch)][positions[chosen] % num_examples]
    return indices


def _linear_schedule(warmup_steps: int, max_steps: int):
    def factor(step: int) -> float:
        if warmup_steps and step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (max_steps - step) / max(1, max_steps - warmup_steps))
    return factor


def build_optimizer(model: torch.nn.Module, settings) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters; ``settings`` has ``learning_rate`` and ``weight_decay``."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        # biases and LayerNorm weights are not decayed (BERT)
        (no_decay if parameter.ndim < 2 or "norm" in name.lower() else decay).append(parameter)
    return torch.optim.AdamW([{"params": decay, "weight_decay": settings.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=settings.learning_rate)


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
    kept = [line for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line)["step"] <= last_step]
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


def _run_step(model, micro_batches, device, settings: TrainerSettings, step: int) -> dict[str, float] | None:
    """Forward and backward every micro-batch of one step; the step's logged values (None: no target)."""
    totals, num_micro = combine_micro_batches([batch.target_counts for batch in micro_batches])
    step_losses: dict[str, float] = {}
    step_metrics: dict[str, float] = {}
    total_objective = 0.0
    any_loss = False
    for micro, batch in enumerate(micro_batches):
        torch.manual_seed(step_seed(settings.seed, step, micro))  # dropout
        output = model(**batch.to(device))
        if not output.losses:
            continue
        objective = 0.0
        for name, loss in output.losses.items():
            share = _share(name, batch.target_counts, totals, num_micro)
            objective = objective + output.loss_weights[name] * share * loss
            step_losses[name] = step_losses.get(name, 0.0) + share * float(loss.detach())
        for name, value in (output.metrics or {}).items():
            owner = name.split("_", 1)[0]  # "mlm_accuracy" is weighted like "mlm"
            step_metrics[name] = step_metrics.get(name, 0.0) + _share(owner, batch.target_counts, totals,
                                                                      num_micro) * float(value)
        if not torch.isfinite(objective):
            raise ArtifactError(f"step {step + 1}: the loss is {float(objective)} ({ {k: float(v) for k, v in output.losses.items()} }); "
                                f"lower the learning rate")
        objective.backward()
        total_objective += float(objective.detach())
        any_loss = True
    if not any_loss:
        return None
    return {"loss": total_objective, **step_losses, **step_metrics}


def train_loop(model, dataset, collator, *, output_dir: str | os.PathLike, settings: TrainerSettings,
               device: str | torch.device = "cpu", progress: bool = True) -> list[dict[str, Any]]:
    """Train ``model`` on ``dataset`` (rows for ``collator``) until ``settings.max_steps``, resuming.

    ``collator(rows, example_seeds)`` returns a :class:`~kgplm.training.collator.Batch`. Returns the
    metrics logged during the whole run (read back from ``metrics.jsonl``).
    """
    settings.validate()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    device = torch.device(device)
    model.to(device)
    model.train()
    optimizer = build_optimizer(model, settings)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _linear_schedule(settings.warmup_steps,
                                                                              settings.max_steps))
    metrics_path = output_dir / "metrics.jsonl"
    start_step, window = 0, _Window()
    checkpoint = latest_checkpoint(output_dir)
    if checkpoint is not None:
        state = load_checkpoint(checkpoint, model, optimizer, scheduler)
        start_step, window = state["step"], _Window(state["window"])
        logger.info("resuming from %s (step %d)", checkpoint, start_step)
        _truncate_metrics(metrics_path, start_step)
    elif metrics_path.exists():
        metrics_path.unlink()
    num_examples = len(dataset)
    if num_examples == 0:
        raise ConfigurationError("the training corpus holds no examples")
    permutations: dict[int, np.ndarray] = {}
    micro = settings.micro_batch_size
    trainable = [p for p in model.parameters() if p.requires_grad]
    skipped = 0
    bar = tqdm(total=settings.max_steps, initial=start_step, desc="pre-training", unit="step", disable=not progress)
    with open(metrics_path, "a", encoding="utf-8") as metrics_file:
        for step in range(start_step, settings.max_steps):
            indices = _batch_indices(step, settings.batch_size, num_examples, settings.seed, permutations)
            seeds = example_seeds(settings.seed, step, np.arange(settings.batch_size))
            micro_batches = [collator(dataset[indices[start: start + micro]], seeds[start: start + micro])
                             for start in range(0, settings.batch_size, micro)]
            optimizer.zero_grad(set_to_none=True)
            values = _run_step(model, micro_batches, device, settings, step)
            learning_rate = optimizer.param_groups[0]["lr"]  # the rate this step uses
            if values is None:
                skipped += 1
                logger.warning("step %d: no objective had a target; no weight changed", step + 1)
            else:
                if settings.max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(trainable, settings.max_grad_norm)
                optimizer.step()
                window.add(values)
            scheduler.step()
            done = step + 1
            if done % settings.log_every == 0 or done == settings.max_steps:
                record = {"step": done, **window.means(), "learning_rate": learning_rate}
                metrics_file.write(json.dumps(record) + "\n")
                metrics_file.flush()
                if "loss" in record and math.isfinite(record["loss"]):
                    bar.set_postfix(loss=f"{record['loss']:.4f}")
                window = _Window()
            bar.update(1)
            if done % settings.checkpoint_every == 0 or done == settings.max_steps:
                metrics_file.flush()
                save_checkpoint(output_dir, model, optimizer, scheduler,
                                {"step": done, "window": window.state(), "settings": asdict(settings)},
                                settings.keep_checkpoints)
    bar.close()
    if skipped:
        logger.warning("%d of %d steps had no target and were skipped", skipped, settings.max_steps - start_step)
    return [json.loads(line) for line in metrics_path.read_text(encoding="utf-8").splitlines() if line.strip()]
