"""Training checkpoints: model, optimiser, scheduler, RNG and loop state, written atomically.

``checkpoints/step-NNNNNNN/`` holds ``model.safetensors``, ``optimizer.safetensors`` (the AdamW
moments and the torch RNG state) and ``trainer_state.json`` (step, logging window, settings,
parameter groups, scheduler, and the fp16 gradient scaler's scale and growth tracker). Under data
parallelism only rank 0 writes; every rank reads the same checkpoint (the optimiser state is the
same on all ranks). A directory is written under a temporary name and renamed, so a run
killed while writing leaves the previous checkpoint intact; only the last ``keep`` are kept.

A caller may add files of its own (``extra_tensors``: fine-tuning keeps its best epoch's weights beside
the model); they are written in the same temporary directory and covered by the same checksums.

``checksums.json`` holds the SHA-256 of each of those files. :func:`resume_checkpoint` verifies
them and, when the newest checkpoint is damaged (a bit flipped on disk, a file truncated by a
full disk or copied halfway), falls back to the one before it and logs why. Checkpoints written
before checksums were added have no ``checksums.json``; they are read as they are.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model, save_file

from kgplm._io import atomic_directory, file_sha256, unfinished_directories
from kgplm.exceptions import ArtifactError, DiskFullError

__all__ = [
    "latest_checkpoint",
    "save_checkpoint",
    "load_checkpoint",
    "remove_unfinished",
    "verify_checkpoint",
    "resume_checkpoint",
    "CHECKPOINT_FILES",
]

logger = logging.getLogger(__name__)

#: The files of a checkpoint that ``checksums.json`` covers.
CHECKPOINT_FILES = ("model.safetensors", "optimizer.safetensors", "trainer_state.json")


def remove_unfinished(output_dir: str | os.PathLike) -> list[Path]:
    """Delete the temporary directories of checkpoints a killed run was writing (``.step-N.tmp-*``, never
    renamed, so never read); each is as large as a checkpoint, and every kill would leave one more.
    Returns what was removed."""
    unfinished = unfinished_directories(Path(output_dir) / "checkpoints", "step-")
    for path in unfinished:
        shutil.rmtree(path, ignore_errors=True)
    return unfinished


def _complete_checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    directory = Path(output_dir) / "checkpoints"
    if not directory.is_dir():
        return []
    return sorted(
        p
        for p in directory.iterdir()
        if p.is_dir() and p.name.startswith("step-") and (p / "trainer_state.json").is_file()
    )


def latest_checkpoint(output_dir: str | os.PathLike) -> Path | None:
    done = _complete_checkpoints(output_dir)
    return done[-1] if done else None


def verify_checkpoint(path: str | os.PathLike) -> None:
    """Raise :class:`ArtifactError` naming the file when a checkpoint file is missing or differs from its
    recorded SHA-256 (a checkpoint without ``checksums.json`` is only checked for its files)."""
    path = Path(path)
    recorded_path = path / "checksums.json"
    recorded = json.loads(recorded_path.read_text(encoding="utf-8")) if recorded_path.is_file() else None
    for name in dict.fromkeys([*CHECKPOINT_FILES, *(recorded or {})]):
        if not (path / name).is_file():
            raise ArtifactError(f"{path / name}: missing from the checkpoint")
        if recorded is not None and file_sha256(path / name) != recorded.get(name):
            raise ArtifactError(
                f"{path / name}: its SHA-256 differs from the one in {recorded_path} (the file "
                f"was changed or cut short after it was written)"
            )


def resume_checkpoint(
    output_dir: str | os.PathLike, model, optimizer, scheduler, grad_scaler=None
) -> tuple[Path, dict[str, Any]] | tuple[None, None]:
    """Load the newest checkpoint of ``output_dir`` that verifies and loads; log each damaged one skipped.

    Returns (its path, its trainer state), or (None, None) when the run has no checkpoint. Raises
    :class:`ArtifactError` when every checkpoint is damaged."""
    candidates = _complete_checkpoints(output_dir)
    problems = []
    for path in reversed(candidates):
        try:
            verify_checkpoint(path)
            return path, load_checkpoint(path, model, optimizer, scheduler, grad_scaler=grad_scaler)
        except (ArtifactError, SafetensorError, OSError, ValueError, KeyError, RuntimeError) as error:
            problems.append(f"{path.name}: {error}")
            logger.warning("checkpoint %s is damaged (%s); falling back to the one before it", path, error)
    if problems:
        raise ArtifactError(
            f"every checkpoint in {Path(output_dir) / 'checkpoints'} is damaged: "
            + "; ".join(problems)
            + "; delete the directory to start the run over"
        )
    return None, None


def _model_tensors(model) -> dict[str, torch.Tensor]:
    """The model's state with each tied tensor once, under the first of its names in sorted order (the
    name ``safetensors.torch.save_model`` keeps; ``load_model`` re-ties the others).

    Not ``save_model`` itself: it records every dropped name as a key of the file's metadata, which
    safetensors writes in hash-map order, so the same model saved twice could differ byte-wise."""
    tensors: dict[str, torch.Tensor] = {}
    seen: set[tuple] = set()
    state = model.state_dict()
    for name in sorted(state):
        tensor = state[name]
        identity = (
            tensor.device,
            tensor.untyped_storage().data_ptr(),
            tensor.storage_offset(),
            tuple(tensor.shape),
            tuple(tensor.stride()),
            tensor.dtype,
        )
        if identity not in seen:
            seen.add(identity)
            tensors[name] = tensor.contiguous()
    return tensors


def save_checkpoint(
    output_dir: Path,
    model,
    optimizer,
    scheduler,
    state: dict[str, Any],
    keep: int,
    grad_scaler=None,
    extra_tensors: dict[str, dict[str, torch.Tensor]] | None = None,
) -> Path:
    """Write ``output_dir/checkpoints/step-NNNNNNN`` (``state["step"]``) atomically and keep the last ``keep``.
    ``extra_tensors``: more safetensors files (file name → tensors), written and checksummed with the rest."""
    directory = output_dir / "checkpoints"
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"step-{state['step']:07d}"
    previous = latest_checkpoint(output_dir)
    try:
        _write_checkpoint(target, model, optimizer, scheduler, state, grad_scaler, extra_tensors or {})
    except DiskFullError as error:  # a checkpoint needs about as much as the one before it
        needed = max(error.needed, sum(p.stat().st_size for p in previous.iterdir()) if previous else 0)
        raise DiskFullError(error.path, needed, error.written, error.free) from error.__cause__
    for old in sorted(p for p in directory.iterdir() if p.name.startswith("step-"))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def _write_checkpoint(
    target: Path, model, optimizer, scheduler, state: dict[str, Any], grad_scaler, extra_tensors: dict
) -> None:
    with atomic_directory(target) as temporary:
        save_file(_model_tensors(model), str(temporary / "model.safetensors"), metadata={"format": "pt"})
        optimizer_state = optimizer.state_dict()
        tensors = {
            f"state.{index}.{key}": value.contiguous()
            for index, slots in optimizer_state["state"].items()
            for key, value in slots.items()
        }
        tensors["torch_rng_state"] = torch.get_rng_state()
        save_file(tensors, str(temporary / "optimizer.safetensors"))
        state = dict(state, param_groups=optimizer_state["param_groups"], scheduler=scheduler.state_dict())
        if grad_scaler is not None:
            state["grad_scaler"] = grad_scaler.state_dict()
        (temporary / "trainer_state.json").write_text(json.dumps(state, indent=1), encoding="utf-8")
        for name, extra in extra_tensors.items():
            if name in CHECKPOINT_FILES or name == "checksums.json":
                raise ValueError(f"extra checkpoint file {name!r} would replace one of the checkpoint's own")
            save_file({key: value.contiguous() for key, value in extra.items()}, str(temporary / name))
        checksums = {name: file_sha256(temporary / name) for name in [*CHECKPOINT_FILES, *extra_tensors]}
        (temporary / "checksums.json").write_text(json.dumps(checksums, indent=1), encoding="utf-8")


def load_checkpoint(path: Path, model, optimizer, scheduler, grad_scaler=None) -> dict[str, Any]:
    state = json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
    if grad_scaler is not None:
        if "grad_scaler" not in state:
            raise ArtifactError(
                f"{path}: the checkpoint has no fp16 gradient scaler state (it was written by a run "
                f"without mixed_precision='fp16')"
            )
        grad_scaler.load_state_dict(state.pop("grad_scaler"))
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
