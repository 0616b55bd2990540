"""A small model and collator for data-parallel loop tests, in a module light enough for spawned workers."""

from __future__ import annotations

import numpy as np
import torch

from kgplm.models.modules import PretrainingOutput
from kgplm.training.collator import Batch
from kgplm.training.trainer import TrainerSettings

__all__ = ["Fit", "FitRows", "NO_TARGET", "fit_collate", "fit_settings", "fit_worker"]


class Fit(torch.nn.Module):
    """Objective "fit": the mean over the batch's targets of (w · x)²; examples without a target are skipped."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([1.0, -0.5]))

    def forward(self, x, has_target):
        output = PretrainingOutput(losses={}, loss_weights={}, metrics={}, last_hidden_state=x @ self.w)
        if has_target.any():
            output.add("fit", ((x[has_target] @ self.w) ** 2).mean())
        return output


#: (step, position) of the global batch of 4 without a target: at step 1 rank 1 has none, at step 2 its
#: last micro-batch has none, at step 3 no rank has any
NO_TARGET = {(1, 2), (1, 3), (2, 3), (3, 0), (3, 1), (3, 2), (3, 3)}


class FitRows:
    def __len__(self) -> int:
        return 16

    def __getitem__(self, indices):
        return {"row": np.asarray(indices)}


def fit_collate(rows, seeds) -> Batch:
    """Inputs drawn from each example's (seed, step, position); targets absent at :data:`NO_TARGET`."""
    x = np.stack([np.random.default_rng([int(v) for v in key]).normal(size=2) for key in seeds])
    has_target = np.array([(int(step), int(position)) not in NO_TARGET for _, step, position in seeds])
    return Batch(
        {"x": torch.tensor(x, dtype=torch.float32), "has_target": torch.from_numpy(has_target)},
        target_counts={"fit": int(has_target.sum())},
    )


def fit_settings(accumulation: int) -> TrainerSettings:
    return TrainerSettings(
        max_steps=5,
        batch_size=4,
        gradient_accumulation_steps=accumulation,
        learning_rate=0.1,
        log_every=1,
        checkpoint_every=5,
        weight_decay=0.0,
    )


def fit_worker(rank: int, rendezvous: str, output_dir: str) -> None:
    """One of two gloo ranks training :class:`Fit` with 2 micro-batches of 1 example each."""
    import torch.distributed as dist

    from kgplm.training.distributed import current
    from kgplm.training.trainer import train_loop

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=2)
    try:
        train_loop(
            Fit(),
            FitRows(),
            fit_collate,
            output_dir=output_dir,
            settings=fit_settings(2),
            progress=False,
            distributed=current("cpu"),
        )
    finally:
        dist.destroy_process_group()
