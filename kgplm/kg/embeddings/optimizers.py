"""Row-wise optimisers for KG embedding tables: a batch updates only the rows it uses.

All parameters of TransE and TransR are embedding tables (TransR's projection matrices are one row
of k·d values per relation), so an optimiser step touches only the rows a batch uses: lazy Adam
(``sparse_adam``, the default, as ``torch.optim.SparseAdam``), ``adagrad`` or ``sgd``. This is what
makes 4M-triple graphs train in seconds per epoch. A :class:`RowTable` also holds the constraint of
its rows (unit sphere, unit ball or none), applied when a batch gathers them.

The updates run as numba kernels on CPU tables (:mod:`kgplm.kg.embeddings.kernels`, with the
optimisers' equations) or as torch index operations on any device; both give the same result up to
float rounding.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from kgplm.exceptions import ConfigurationError
from kgplm.kg.embeddings import kernels
from kgplm.kg.embeddings.models import clamp_to_unit_ball

__all__ = ["OPTIMIZERS", "RowTable"]

OPTIMIZERS = ("sparse_adam", "adagrad", "sgd")


class RowTable:
    """One embedding table trained by row-wise updates: a batch gathers its rows, projected onto
    the constraint set and written back (the paper's "normalise before each minibatch"), as a
    leaf tensor; after ``backward`` the optimiser updates those rows only.

    With ``use_kernels`` (the numba backend, CPU only) the gather and the updates are numba
    kernels (:mod:`kgplm.kg.embeddings.kernels`); otherwise the same math runs as torch index
    operations on the table's device (the torch backend, CUDA's path). The batch's ids stay on
    the CPU, where they are made: the distinct rows and the inverse index are computed there and
    copied to the device, so a step never waits on the device for ``torch.unique``'s size.
    """

    def __init__(
        self,
        weight: torch.Tensor,
        *,
        optimizer: str,
        learning_rate: float,
        constraint: int,
        use_kernels: bool | None = None,
    ) -> None:
        if optimizer not in OPTIMIZERS:
            raise ConfigurationError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        self.weight = weight.detach().contiguous().float()
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.constraint = constraint
        self.use_kernels = self.weight.device.type == "cpu" if use_kernels is None else use_kernels
        if self.use_kernels and self.weight.device.type != "cpu":
            raise ConfigurationError(f"the numba row kernels run on CPU tables; this one is on {self.weight.device}")
        self.state = [
            torch.zeros_like(self.weight) for _ in range({"sparse_adam": 2, "adagrad": 1, "sgd": 0}[optimizer])
        ]
        self.step_count = 0
        self._rows: torch.Tensor | None = None
        self._leaf: torch.Tensor | None = None

    def gather(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(leaf_rows, inverse)`` with ``leaf_rows[inverse] == table[ids]`` after the constraint.

        ``ids`` may live on the CPU whatever the table's device; ``inverse`` is on the table's device.
        """
        rows, inverse = torch.unique(ids, return_inverse=True)
        if self.use_kernels:
            gathered = np.empty((len(rows), self.weight.shape[1]), dtype=np.float32)
            kernels.gather_constrained(self.weight.numpy(), rows.numpy(), self.constraint, gathered)
            leaf = torch.from_numpy(gathered)
        else:
            device = self.weight.device
            rows = rows.to(device, non_blocking=True)
            inverse = inverse.to(device, non_blocking=True)
            leaf = self.weight.index_select(0, rows)
            if self.constraint == kernels.CONSTRAINT_UNIT_SPHERE:
                leaf = F.normalize(leaf, dim=1, eps=0.0).nan_to_num_(0.0)
            elif self.constraint == kernels.CONSTRAINT_UNIT_BALL:
                leaf = clamp_to_unit_ball(leaf)
            self.weight.index_copy_(0, rows, leaf)
        self._rows, self._leaf = rows, leaf.requires_grad_()
        return self._leaf, inverse

    @torch.no_grad()
    def step(self) -> None:
        """Apply the optimiser to the rows of the last :meth:`gather`, with their gradient."""
        rows, gradient = self._rows, self._leaf.grad
        self._rows = self._leaf = None
        if gradient is None:
            return
        self.step_count += 1
        if self.use_kernels:
            arguments = (self.weight.numpy(), *(state.numpy() for state in self.state), rows.numpy(), gradient.numpy())
            if self.optimizer == "sparse_adam":
                kernels.adam_rows(*arguments, self.learning_rate, 0.9, 0.999, 1e-8, self.step_count)
            elif self.optimizer == "adagrad":
                kernels.adagrad_rows(*arguments, self.learning_rate, 1e-10)
            else:
                kernels.sgd_rows(*arguments, self.learning_rate)
            return
        if self.optimizer == "sparse_adam":
            first, second = self.state
            m = first.index_select(0, rows).mul_(0.9).add_(gradient, alpha=0.1)
            v = second.index_select(0, rows).mul_(0.999).addcmul_(gradient, gradient, value=0.001)
            first.index_copy_(0, rows, m)
            second.index_copy_(0, rows, v)
            step_scale = math.sqrt(1 - 0.999**self.step_count) / (1 - 0.9**self.step_count)
            update = step_scale * m / (v.sqrt() + 1e-8)
        elif self.optimizer == "adagrad":
            (accumulator,) = self.state
            accumulated = accumulator.index_select(0, rows).addcmul_(gradient, gradient)
            accumulator.index_copy_(0, rows, accumulated)
            update = gradient / (accumulated.sqrt() + 1e-10)
        else:
            update = gradient
        self.weight.index_add_(0, rows, update, alpha=-self.learning_rate)

    def release_optimizer_state(self) -> None:
        """Drop the optimiser's moments (two table copies for Adam) once training is over."""
        self.state = []

    @torch.no_grad()
    def apply_constraint_everywhere(self, rows_per_chunk: int = 65536) -> None:
        """Project every row onto the constraint set, in place, a chunk of rows at a time (no
        temporary copy of the table)."""
        for start in range(0, self.weight.shape[0], rows_per_chunk):
            chunk = self.weight[start : start + rows_per_chunk]
            if self.constraint == kernels.CONSTRAINT_UNIT_SPHERE:
                chunk.copy_(F.normalize(chunk, dim=1, eps=0.0).nan_to_num_(0.0))
            elif self.constraint == kernels.CONSTRAINT_UNIT_BALL:
                chunk.copy_(clamp_to_unit_ball(chunk))
