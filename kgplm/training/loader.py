"""Which examples each step takes, on which process, and collation in ``DataLoader`` workers.

Step ``s`` takes the ``batch_size`` samples ``s·B … (s+1)·B − 1`` of an endless stream that visits
the corpus in a fresh seeded permutation each epoch (:func:`batch_indices`); the example at
position ``i`` of the step's *global* batch draws its SOP split, masks and negatives from a
generator seeded with (seed, s, i) (:func:`example_seeds`). With ``world_size`` processes, rank
``r`` takes the contiguous positions ``r·B/W … (r+1)·B/W − 1`` and splits them into its
micro-batches. An example therefore does not depend on the number of processes, on the
micro-batch size, nor on which worker collated it.

:class:`StepBatches` is a map-style dataset whose item ``s`` is this rank's micro-batches of step
``s``; :func:`step_loader` iterates it through a ``DataLoader`` (``num_workers`` processes collate
ahead of the loop; with a CUDA device the batches are pinned so that the copy to the GPU is
asynchronous). ``num_workers=0`` collates in the main process, step by step, in order.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

__all__ = ["batch_indices", "example_seeds", "StepBatches", "step_loader"]


def example_seeds(seed: int, step: int, positions: np.ndarray) -> np.ndarray:
    """(len(positions), 3) seed material of the examples at ``positions`` of step ``step``'s batch."""
    positions = np.asarray(positions, dtype=np.int64)
    return np.stack([np.full(len(positions), seed), np.full(len(positions), step), positions], 1)


def batch_indices(
    step: int, batch_size: int, num_examples: int, seed: int, cache: dict[int, np.ndarray] | None = None
) -> np.ndarray:
    """Corpus rows of step ``step``'s global batch; ``cache`` keeps the last epochs' permutations."""
    cache = {} if cache is None else cache
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


class StepBatches(Dataset):
    """Item ``step``: the list of this rank's collated micro-batches of that step.

    Args:
        dataset: corpus rows (``dataset[indices]`` gives a column dict).
        collator: ``collator(rows, example_seeds) -> Batch``.
        batch_size: examples per step over all processes; ``micro_batch_size``: per forward pass.
        rank, world_size: this process's share of the global batch.
    """

    def __init__(
        self,
        dataset,
        collator,
        *,
        batch_size: int,
        micro_batch_size: int,
        seed: int,
        max_steps: int,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.dataset, self.collator = dataset, collator
        self.batch_size, self.micro_batch_size, self.seed, self.max_steps = (
            batch_size,
            micro_batch_size,
            seed,
            max_steps,
        )
        self.local_size = batch_size // world_size
        self.positions = np.arange(rank * self.local_size, (rank + 1) * self.local_size)
        self.num_examples = len(dataset)
        self._permutations: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return self.max_steps

    def __getitem__(self, step: int) -> list:
        indices = batch_indices(step, self.batch_size, self.num_examples, self.seed, self._permutations)
        rows = indices[self.positions]
        seeds = example_seeds(self.seed, step, self.positions)
        size = self.micro_batch_size
        return [
            self.collator(self.dataset[rows[start : start + size]], seeds[start : start + size])
            for start in range(0, self.local_size, size)
        ]


def _as_is(item):
    return item  # the item is already collated; the default would rebuild Batch dicts without their counts


def step_loader(
    steps: StepBatches, first_step: int, *, num_workers: int = 0, pin_memory: bool = False, prefetch_factor: int = 2
) -> DataLoader:
    """Iterate the steps ``first_step … max_steps − 1`` of ``steps`` in order."""
    from kgplm.training.threads import limit_worker_threads

    options = dict(prefetch_factor=prefetch_factor, worker_init_fn=limit_worker_threads) if num_workers else {}
    return DataLoader(
        steps,
        batch_size=None,
        sampler=range(first_step, len(steps)),
        num_workers=num_workers,
        collate_fn=_as_is,
        pin_memory=pin_memory and torch.cuda.is_available(),
        **options,
    )
