"""Checkpoints of a fine-tuning run stopped by a signal, so that rerunning the same call resumes it exactly.

:func:`~kgplm.finetuning.loop.finetune_loop` given an ``output_dir`` turns its stop signals
(:mod:`kgplm.training.interrupts`, ``SIGTERM`` and ``SIGUSR1`` by default) into a checkpoint after the
optimiser step it is in: ``output_dir/checkpoints/step-NNNNNNN/`` in the pre-training layout
(:mod:`kgplm.training.checkpoints`: model, optimiser, scheduler, fp16 gradient scaler, torch RNG,
written to a temporary name and renamed, with SHA-256 checksums verified on resume) plus what
fine-tuning adds:

* ``best_model.safetensors``: the weights of the best epoch on dev so far (restored at the end);
* in ``trainer_state.json``: the epoch and the batch within it (the data order is drawn per epoch from
  a generator seeded by ``seed``, so the position is enough to continue it), the losses of the epoch's
  steps so far, the history, the best dev scores and the epochs waited for early stopping, each
  process's torch RNG states (dropout), and the run's *identity* — the arguments that determine its
  result — so that a checkpoint is only resumed by the same call.

The loop removes its checkpoints when it finishes.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from kgplm._io import file_sha256
from kgplm.exceptions import ConfigurationError
from kgplm.training.checkpoints import resume_checkpoint, save_checkpoint

__all__ = [
    "FineTuneProgress",
    "save_fine_tuning_checkpoint",
    "resume_fine_tuning",
    "remove_checkpoints",
    "starting_weights",
]

logger = logging.getLogger(__name__)

#: the best epoch's weights in a fine-tuning checkpoint
BEST_MODEL_FILE = "best_model.safetensors"


#: the files a model directory keeps its weights in (safetensors, or a PyTorch state dict of a hub model)
WEIGHT_FILE_PATTERNS = ("*.safetensors", "*.bin")


def starting_weights(model_dir: str | os.PathLike) -> dict[str, str]:
    """``{file name: SHA-256}`` of the weight files of the model a fine-tuning call starts from. Part of the
    call's identity: the same path may hold another model (retrained, rebuilt) when the call is repeated,
    and a checkpoint continues only the model it was made from."""
    model_dir = Path(model_dir)
    files = sorted({path for pattern in WEIGHT_FILE_PATTERNS for path in model_dir.glob(pattern)})
    return {path.name: file_sha256(path) for path in files}


@dataclass
class FineTuneProgress:
    """Where a fine-tuning loop is: ``batch`` steps of epoch ``epoch`` (0-based) are done."""

    epoch: int = 0
    batch: int = 0
    losses: list[float] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    best: dict[str, float] | None = None
    waited: int = 0
    best_state: dict[str, torch.Tensor] | None = None


def _rng_state(device: torch.device) -> dict[str, str | None]:
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    encode = lambda tensor: base64.b64encode(tensor.numpy().tobytes()).decode("ascii")  # noqa: E731
    return {"cpu": encode(torch.get_rng_state()), "cuda": None if cuda is None else encode(cuda)}


def _set_rng_state(state: dict[str, str | None], device: torch.device) -> None:
    decode = lambda text: torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8)  # noqa: E731
    torch.set_rng_state(decode(state["cpu"]))
    if state.get("cuda") is not None and device.type == "cuda":
        torch.cuda.set_rng_state(decode(state["cuda"]), device)


def save_fine_tuning_checkpoint(
    output_dir: Path,
    model,
    optimizer,
    scheduler,
    scaler,
    progress: FineTuneProgress,
    *,
    step: int,
    settings,
    identity: dict[str, Any],
    context,
) -> Path | None:
    """Every rank's RNG state to rank 0, which writes the checkpoint of ``progress`` after global step ``step``;
    returns its path on rank 0 (None elsewhere)."""
    rng = context.gather(_rng_state(context.device))
    if not context.is_main:
        return None
    state = {
        "step": step,
        "epoch": progress.epoch,
        "batch": progress.batch,
        "losses": progress.losses,
        "history": progress.history,
        "best": progress.best,
        "waited": progress.waited,
        "settings": asdict(settings),
        "identity": identity,
        "world_size": context.world_size,
        "rng": rng,
    }
    extra = {} if progress.best_state is None else {BEST_MODEL_FILE: _untied(progress.best_state)}
    return save_checkpoint(output_dir, model, optimizer, scheduler, state, 1, grad_scaler=scaler, extra_tensors=extra)


def _untied(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A state dict whose tensors share no storage (safetensors refuses shared tensors; loading sets each name)."""
    return {name: tensor.detach().cpu().clone() for name, tensor in state.items()}


def resume_fine_tuning(
    output_dir: Path, model, optimizer, scheduler, scaler, *, identity: dict[str, Any], context
) -> FineTuneProgress | None:
    """Load the newest sound checkpoint of ``output_dir`` into the model, optimiser, scheduler, scaler and this
    rank's RNG; None when there is none. A checkpoint of another call (``identity`` differs) is refused."""
    path, state = resume_checkpoint(output_dir, model, optimizer, scheduler, grad_scaler=scaler)
    if path is None:
        return None
    if state.get("identity") != identity:
        recorded = state.get("identity") or {}
        changed = sorted(k for k in set(recorded) | set(identity) if recorded.get(k) != identity.get(k))
        raise ConfigurationError(
            f"{path} is the checkpoint of a fine-tuning call with other arguments ("
            + ", ".join(f"{k}: {recorded.get(k)!r} there, {identity.get(k)!r} now" for k in changed)
            + f"); rerun that call to resume it, or remove {Path(output_dir) / 'checkpoints'} or choose "
            "another output directory"
        )
    rng = state["rng"]
    if state["world_size"] == context.world_size:
        _set_rng_state(rng[context.rank], context.device)
    else:
        _set_rng_state(rng[0], context.device)
        if context.is_main:
            logger.warning(
                "%s was written by %d processes, this run has %d: dropout draws other masks than the "
                "uninterrupted run would",
                path,
                state["world_size"],
                context.world_size,
            )
    best_state = None
    if (path / BEST_MODEL_FILE).is_file():  # verified with the rest by resume_checkpoint
        best_state = load_file(str(path / BEST_MODEL_FILE))
    if context.is_main:
        logger.info("resuming fine-tuning from %s (epoch %d, step %d)", path, state["epoch"] + 1, state["step"])
    return FineTuneProgress(
        epoch=state["epoch"],
        batch=state["batch"],
        losses=list(state["losses"]),
        history=list(state["history"]),
        best=state["best"],
        waited=state["waited"],
        best_state=best_state,
    )


def remove_checkpoints(output_dir: Path) -> None:
    """Delete ``output_dir/checkpoints`` (a finished loop's: nothing is left to resume)."""
    shutil.rmtree(Path(output_dir) / "checkpoints", ignore_errors=True)
