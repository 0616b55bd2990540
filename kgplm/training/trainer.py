"""The pre-training loop: AdamW with linear warm-up and decay, logging, checkpoints and exact resume.

Determinism: batch ``s`` holds samples ``s·B … (s+1)·B − 1`` of an endless stream that visits the
corpus in a fresh seeded permutation each epoch; the batch's masking, SOP and negatives come from
a seed derived from (seed, s), and the global torch generator (dropout) is re-seeded from it before
each step. A checkpoint therefore only needs the model, optimiser, scheduler, the logging window
and the step: a run killed at any point and restarted from its last checkpoint reproduces the
uninterrupted run's losses.

Files in ``output_dir``: ``metrics.jsonl`` (one JSON object per logged step: ``step``, ``loss``,
each objective's mean loss since the previous log under its short name, ``learning_rate``) and
``checkpoints/step-NNNNNNN/`` (``model.safetensors``, ``optimizer.safetensors``,
``trainer_state.json``). Checkpoints are written to a temporary name and renamed.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, load_model, save_file, save_model
from tqdm.auto import tqdm

from kgplm._io import atomic_directory, atomic_file
from kgplm.exceptions import ArtifactError, ConfigurationError

__all__ = ["TrainerSettings", "train_loop", "latest_checkpoint", "step_seed"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainerSettings:
    max_steps: int = 1000
    batch_size: int = 16
    learning_rate: float = 5e-4
    warmup_steps: int = 0
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    checkpoint_every: int = 200
    keep_checkpoints: int = 2
    log_every: int = 10
    seed: int = 0

    def validate(self) -> None:
        for name in ("max_steps", "batch_size", "checkpoint_every", "log_every", "keep_checkpoints"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
        if not self.learning_rate > 0:
            raise ConfigurationError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.warmup_steps < 0:
            raise ConfigurationError(f"warmup_steps must be ≥ 0, got {self.warmup_steps}")


def step_seed(seed: int, step: int) -> int:
    """The seed of batch ``step`` (masks, SOP, negatives, dropout)."""
    return int(np.random.SeedSequence([seed, step]).generate_state(1, dtype=np.uint64)[0] % (2 ** 63))


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


# -- checkpoints ------------------------------------------------------------------------------------
def latest_checkpoint(output_dir: str | os.PathLike) -> Path | None:
    directory = Path(output_dir) / "checkpoints"
    if not directory.is_dir():
        return None
    done = sorted(p for p in directory.iterdir() if p.is_dir() and p.name.startswith("step-")
                  and (p / "trainer_state.json").is_file())
    return done[-1] if done else None


def _save_checkpoint(output_dir: Path, model, optimizer, scheduler, state: dict[str, Any], keep: int) -> Path:
    directory = output_dir / "checkpoints"
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"step-{state['step']:07d}"
    with atomic_directory(target) as temporary:
        save_model(model, str(temporary / "model.safetensors"))
        optimizer_state = optimizer.state_dict()
        tensors = {f"state.{index}.{key}": value.contiguous() for index, slots in optimizer_state["state"].items()
                   for key, value in slots.items()}
        tensors["torch_rng_state"] = torch.get_rng_state()
        save_file(tensors, str(temporary / "optimizer.safetensors"))
        state = dict(state, param_groups=optimizer_state["param_groups"], scheduler=scheduler.state_dict())
        (temporary / "trainer_state.json").write_text(json.dumps(state, indent=1), encoding="utf-8")
    for old in sorted(p for p in directory.iterdir() if p.name.startswith("step-"))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def _load_checkpoint(path: Path, model, optimizer, scheduler) -> dict[str, Any]:
    state = json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
    missing, unexpected = load_model(model, str(path / "model.safetensors"), strict=False)
    if unexpected or [name for name in missing if "decoder" not in name]:
        raise ArtifactError(f"{path}: checkpoint does not fit the model (missing {missing}, unexpected {unexpected})")
    tensors = load_file(str(path / "optimizer.safetensors"))
    slots: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith("state."):
            _, index, name = key.split(".", 2)
            slots.setdefault(int(index), {})[name] = value
    optimizer.load_state_dict({"state": slots, "param_groups": state.pop("param_groups")})
    scheduler.load_state_dict(state.pop("scheduler"))
    torch.set_rng_state(tensors["torch_rng_state"])
    return state


def _truncate_metrics(path: Path, last_step: int) -> None:
    if not path.is_file():
        return
    kept = [line for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line)["step"] <= last_step]
    with atomic_file(path, "w", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in kept))


# -- the loop ------------------------------------------------------------------------------------------
def train_loop(model, dataset, collator, *, output_dir: str | os.PathLike, settings: TrainerSettings,
               device: str | torch.device = "cpu", progress: bool = True) -> list[dict[str, Any]]:
    """Train ``model`` on ``dataset`` (rows for ``collator``) until ``settings.max_steps``, resuming.

    Returns the metrics logged during the whole run (read back from ``metrics.jsonl``).
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
    start_step, window = 0, {"steps": 0, "sums": {}}
    checkpoint = latest_checkpoint(output_dir)
    if checkpoint is not None:
        state = _load_checkpoint(checkpoint, model, optimizer, scheduler)
        start_step, window = state["step"], state["window"]
        logger.info("resuming from %s (step %d)", checkpoint, start_step)
        _truncate_metrics(metrics_path, start_step)
    elif metrics_path.exists():
        metrics_path.unlink()
    num_examples = len(dataset)
    if num_examples == 0:
        raise ConfigurationError("the training corpus holds no examples")
    permutations: dict[int, np.ndarray] = {}
    bar = tqdm(total=settings.max_steps, initial=start_step, desc="pre-training", unit="step", disable=not progress)
    with open(metrics_path, "a", encoding="utf-8") as metrics_file:
        for step in range(start_step, settings.max_steps):
            seed = step_seed(settings.seed, step)
            rows = dataset[_batch_indices(step, settings.batch_size, num_examples, settings.seed, permutations)]
            batch = {name: value.to(device) for name, value in collator(rows, seed).items()}
            torch.manual_seed(seed)  # dropout
            output = model(**batch)
            if not torch.isfinite(output.loss):
                raise ArtifactError(f"step {step + 1}: the loss is {float(output.loss)}; lower the learning rate")
            optimizer.zero_grad(set_to_none=True)
            output.loss.backward()
            if settings.max_grad_norm:
                torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad],
                                               settings.max_grad_norm)
            optimizer.step()
            scheduler.step()
            window["steps"] += 1
            for name, value in {"loss": output.loss, **output.losses}.items():
                window["sums"][name] = window["sums"].get(name, 0.0) + float(value.detach())
            done = step + 1
            if done % settings.log_every == 0 or done == settings.max_steps:
                record = {"step": done, **{name: total / window["steps"] for name, total in window["sums"].items()},
                          "learning_rate": optimizer.param_groups[0]["lr"]}
                metrics_file.write(json.dumps(record) + "\n")
                metrics_file.flush()
                bar.set_postfix(loss=f"{record['loss']:.4f}")
                window = {"steps": 0, "sums": {}}
            bar.update(1)
            if done % settings.checkpoint_every == 0 or done == settings.max_steps:
                metrics_file.flush()
                _save_checkpoint(output_dir, model, optimizer, scheduler,
                                 {"step": done, "window": window, "settings": asdict(settings)},
                                 settings.keep_checkpoints)
    bar.close()
    return [json.loads(line) for line in metrics_path.read_text(encoding="utf-8").splitlines() if line.strip()]
