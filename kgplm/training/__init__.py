"""Training: batches (``PretrainingCollator``), the loop with checkpoints and exact resume, data
parallelism (:mod:`kgplm.training.distributed`) and mixed precision (:mod:`kgplm.training.precision`)."""

import importlib

# the names below load on first use (PEP 562), so that importing one of the package's light modules
# (kgplm.training.launch, .interrupts, .threads) does not load torch
_EXPORTS = {
    "Batch": "kgplm.training.collator",
    "PretrainingCollator": "kgplm.training.collator",
    "PretrainingExample": "kgplm.training.collator",
    "TrainerSettings": "kgplm.training.trainer",
    "latest_checkpoint": "kgplm.training.trainer",
    "step_seed": "kgplm.training.trainer",
    "train_loop": "kgplm.training.trainer",
}

__all__ = [
    "Batch",
    "PretrainingCollator",
    "PretrainingExample",
    "TrainerSettings",
    "train_loop",
    "latest_checkpoint",
    "step_seed",
]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'kgplm.training' has no attribute {name!r}")
