"""Numba kernels behind :mod:`kgplm.kg.embeddings.optimizers`: row-wise (lazy) optimiser updates.

A minibatch touches a few thousand rows of tables with hundreds of thousands. These kernels read
and write only those rows, in one pass each, where a chain of torch index ops would make ten
passes over the same memory. The math is the optimisers' own:

* Adam (Kingma & Ba 2015) applied lazily, as ``torch.optim.SparseAdam`` does: rows the batch
  does not touch keep their moments; bias correction uses the global step count.
* Adagrad (Duchi et al. 2011): G ← G + g², θ ← θ − η · g / (√G + ε).
* SGD: θ ← θ − η · g.

with η the learning rate.
"""

from __future__ import annotations

import math

import numba

__all__ = ["gather_constrained", "adam_rows", "adagrad_rows", "sgd_rows"]

CONSTRAINT_NONE = 0
CONSTRAINT_UNIT_SPHERE = 1
CONSTRAINT_UNIT_BALL = 2


@numba.njit(parallel=True, cache=True, nogil=True)
def gather_constrained(table, rows, constraint, out):  # pragma: no cover - compiled
    """``out[i] = table[rows[i]]`` after projecting that row onto the constraint set, in place.

    constraint 0: none; 1: ‖x‖₂ = 1 (TransE entities); 2: ‖x‖₂ ≤ 1 (TransR entities, relations).
    """
    width = table.shape[1]
    for i in numba.prange(rows.shape[0]):
        row = rows[i]
        scale = 1.0
        if constraint != CONSTRAINT_NONE:
            total = 0.0
            for j in range(width):
                total += table[row, j] * table[row, j]
            norm = math.sqrt(total)
            if constraint == CONSTRAINT_UNIT_SPHERE and norm > 0.0:
                scale = 1.0 / norm
            elif constraint == CONSTRAINT_UNIT_BALL and norm > 1.0:
                scale = 1.0 / norm
        for j in range(width):
            value = table[row, j] * scale
            table[row, j] = value
            out[i, j] = value


@numba.njit(parallel=True, cache=True, nogil=True)
def adam_rows(
    table, first_moment, second_moment, rows, gradient, learning_rate, beta1, beta2, eps, step
):  # pragma: no cover
    """Lazy Adam on ``table[rows]`` with the (coalesced) ``gradient`` of those rows."""
    # torch.optim.SparseAdam's form: ε is added to √v, the bias corrections go into the step size
    step_size = learning_rate * math.sqrt(1.0 - beta2**step) / (1.0 - beta1**step)
    for i in numba.prange(rows.shape[0]):
        row = rows[i]
        for j in range(table.shape[1]):
            g = gradient[i, j]
            m = beta1 * first_moment[row, j] + (1.0 - beta1) * g
            v = beta2 * second_moment[row, j] + (1.0 - beta2) * g * g
            first_moment[row, j] = m
            second_moment[row, j] = v
            table[row, j] -= step_size * m / (math.sqrt(v) + eps)


@numba.njit(parallel=True, cache=True, nogil=True)
def adagrad_rows(table, accumulator, rows, gradient, learning_rate, eps):  # pragma: no cover - compiled
    for i in numba.prange(rows.shape[0]):
        row = rows[i]
        for j in range(table.shape[1]):
            g = gradient[i, j]
            accumulator[row, j] += g * g
            table[row, j] -= learning_rate * g / (math.sqrt(accumulator[row, j]) + eps)


@numba.njit(parallel=True, cache=True, nogil=True)
def sgd_rows(table, rows, gradient, learning_rate):  # pragma: no cover - compiled
    for i in numba.prange(rows.shape[0]):
        row = rows[i]
        for j in range(table.shape[1]):
            table[row, j] -= learning_rate * gradient[i, j]
