"""Training: batches (``PretrainingCollator``), the loop with checkpoints and exact resume."""

from kgplm.training.collator import PretrainingCollator, TypeFrequencySampler
from kgplm.training.trainer import (
           TrainerSettings,
           latest_checkpoint,
           step_seed,
           train_loop,
)

__all__ = ["PretrainingCollator", "TypeFrequencySampler", "TrainerSettings", "train_loop", "latest_checkpoint",
           "step_seed"]
