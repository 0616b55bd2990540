"""Mixed precision for the training loops: ``mixed_precision="bf16" | "fp16" | "no"``.

The forward pass (losses included) runs under :func:`torch.autocast` with the chosen dtype; the
weights, the optimiser state and the backward's accumulated gradients stay in fp32. ``fp16``
needs a :class:`torch.amp.GradScaler` (its range is too small for small gradients): the loss is
multiplied by a dynamic scale before ``backward``, gradients are unscaled before clipping, a step
whose gradients overflowed is skipped and the scale halved. The scaler's state is part of a
checkpoint (``trainer_state.json``), so a resumed fp16 run skips exactly the steps the
uninterrupted run skipped. ``bf16`` has fp32's range and needs no scaler.

Where autocast's own op lists are not enough the models cast themselves: the objectives compute
cross-entropy on fp32 logits (:mod:`kgplm.models.objectives`), and SMedBERT's grouped softmaxes,
normalisations and MNeM/MMeM losses run in fp32 (:mod:`kgplm.methods.smedbert.modeling`).
"""

from __future__ import annotations

import contextlib

import torch

from kgplm.exceptions import ConfigurationError

__all__ = ["MIXED_PRECISION", "check_mixed_precision", "autocast", "grad_scaler"]

#: The accepted values of ``mixed_precision``.
MIXED_PRECISION = ("no", "bf16", "fp16")

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def check_mixed_precision(mode: str) -> str:
    if mode not in MIXED_PRECISION:
        raise ConfigurationError(f"mixed_precision must be one of {MIXED_PRECISION}, got {mode!r}")
    return mode


def autocast(device: torch.device | str, mode: str):
    """The context the forward pass runs in: autocast to bf16/fp16 on ``device``'s type, or nothing."""
    check_mixed_precision(mode)
    if mode == "no":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=_DTYPES[mode])


def grad_scaler(device: torch.device | str, mode: str) -> torch.amp.GradScaler | None:
    """A gradient scaler for ``fp16`` (``None`` otherwise)."""
    check_mixed_precision(mode)
    if mode != "fp16":
        return None
    return torch.amp.GradScaler(torch.device(device).type)
