"""Training: batches (``PretrainingCollator``), the loop with checkpoints and exact resume, data
parallelism (:mod:`kgplm.training.distributed`) and mixed precision (:mod:`kgplm.training.precision`)."""

from kgplm.training.collator import Batch, PretrainingCollator, PretrainingExample
from kgplm.training.trainer import (
    TrainerSettings,
    latest_checkpoint,
    step_seed,
    train_loop,
)

__all__ = [
    "Batch",
    "PretrainingCollator",
    "PretrainingExample",
    "TrainerSettings",
    "train_loop",
    "latest_checkpoint",
    "step_seed",
]
