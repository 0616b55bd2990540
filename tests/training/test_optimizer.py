"""RowwiseAdamW (lazy AdamW on sparse rows) and sparse-aware clipping against torch's AdamW and
clip_grad_norm_ on dense copies of the same gradients (issue 30.5)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from kgplm.training.optimizer import RowwiseAdamW, clip_grad_norm


def _sparse_step(table: torch.nn.Parameter, rows: torch.Tensor, upstream: torch.Tensor) -> None:
    """Backward of Σ upstream · table[rows] through a sparse-gradient embedding lookup."""
    (F.embedding(rows, table, sparse=True) * upstream).sum().backward()


def test_sparse_update_equals_dense_adamw_on_rows_touched_every_step():
    generator = torch.Generator().manual_seed(0)
    initial = torch.randn(12, 5, generator=generator)
    touched = torch.tensor([1, 4, 4, 9])  # row 4 twice: its gradients add up
    lazy = torch.nn.Parameter(initial.clone())
    dense = torch.nn.Parameter(initial.clone())
    lazy_optimizer = RowwiseAdamW([lazy], lr=0.05, weight_decay=0.1)
    dense_optimizer = torch.optim.AdamW([dense], lr=0.05, weight_decay=0.1)
    for _ in range(4):
        upstream = torch.randn(len(touched), 5, generator=generator)
        _sparse_step(lazy, touched, upstream)
        assert lazy.grad.is_sparse
        (dense[touched] * upstream).sum().backward()
        lazy_optimizer.step()
        dense_optimizer.step()
        lazy.grad = dense.grad = None
    rows = torch.tensor([1, 4, 9])
    torch.testing.assert_close(lazy.detach()[rows], dense.detach()[rows], rtol=1e-6, atol=1e-7)
    others = torch.tensor([i for i in range(12) if i not in (1, 4, 9)])
    # lazy: untouched rows keep their value (no weight decay); dense AdamW decays them 4 times
    assert torch.equal(lazy.detach()[others], initial[others])
    torch.testing.assert_close(dense.detach()[others], initial[others] * (1 - 0.05 * 0.1) ** 4)
    # the state has AdamW's names and shapes (checkpoints), moments untouched outside the rows
    state = lazy_optimizer.state[lazy]
    assert set(state) == {"step", "exp_avg", "exp_avg_sq"} and float(state["step"]) == 4
    assert not state["exp_avg"][others].any() and not state["exp_avg_sq"][others].any()
    torch.testing.assert_close(state["exp_avg"][rows], dense_optimizer.state[dense]["exp_avg"][rows])


def test_a_row_skipped_in_between_keeps_its_moments_and_uses_the_global_step():
    """Row 0 touched at steps 1 and 3, row 1 at step 2: the lazy formulas by hand."""
    lr, decay, (beta1, beta2), eps = 0.1, 0.01, (0.9, 0.999), 1e-8
    table = torch.nn.Parameter(torch.ones(2, 1))
    optimizer = RowwiseAdamW([table], lr=lr, weight_decay=decay)
    gradients = {1: (0, 2.0), 2: (1, -1.0), 3: (0, 0.5)}
    expected = {0: [1.0, 0.0, 0.0], 1: [1.0, 0.0, 0.0]}  # θ, m, v per row
    for step, (row, gradient) in gradients.items():
        _sparse_step(table, torch.tensor([row]), torch.tensor([[gradient]]))
        optimizer.step()
        table.grad = None
        theta, m, v = expected[row]
        theta *= 1 - lr * decay
        m = beta1 * m + (1 - beta1) * gradient
        v = beta2 * v + (1 - beta2) * gradient**2
        theta -= lr / (1 - beta1**step) * m / (math.sqrt(v) / math.sqrt(1 - beta2**step) + eps)
        expected[row] = [theta, m, v]
    state = optimizer.state[table]
    for row in (0, 1):
        assert table[row, 0].item() == pytest.approx(expected[row][0], rel=1e-6)
        assert state["exp_avg"][row, 0].item() == pytest.approx(expected[row][1], rel=1e-6)
        assert state["exp_avg_sq"][row, 0].item() == pytest.approx(expected[row][2], rel=1e-6)


def test_dense_parameters_are_stepped_exactly_as_adamw():
    generator = torch.Generator().manual_seed(1)
    start = torch.randn(7, 3, generator=generator)
    ours, theirs = torch.nn.Parameter(start.clone()), torch.nn.Parameter(start.clone())
    optimizers = (
        RowwiseAdamW([ours], lr=0.01, weight_decay=0.01),
        torch.optim.AdamW([theirs], lr=0.01, weight_decay=0.01),
    )
    for _ in range(3):
        gradient = torch.randn(7, 3, generator=generator)
        ours.grad, theirs.grad = gradient.clone(), gradient.clone()
        for optimizer in optimizers:
            optimizer.step()
    assert torch.equal(ours.detach(), theirs.detach())


def test_state_dict_round_trip_resumes_identically():
    generator = torch.Generator().manual_seed(2)
    table = torch.nn.Parameter(torch.randn(6, 2, generator=generator))
    optimizer = RowwiseAdamW([table], lr=0.02)
    _sparse_step(table, torch.tensor([0, 3]), torch.randn(2, 2, generator=generator))
    optimizer.step()
    table.grad = None
    twin = torch.nn.Parameter(table.detach().clone())
    resumed = RowwiseAdamW([twin], lr=0.02)
    resumed.load_state_dict(copy.deepcopy(optimizer.state_dict()))  # as read back from a checkpoint
    upstream = torch.randn(2, 2, generator=generator)
    for parameter, step_of in ((table, optimizer), (twin, resumed)):
        _sparse_step(parameter, torch.tensor([3, 5]), upstream)
        step_of.step()
    assert torch.equal(table.detach(), twin.detach())


def test_clipping_sparse_gradients_equals_clipping_their_dense_copies():
    generator = torch.Generator().manual_seed(3)
    table = torch.nn.Parameter(torch.randn(9, 4, generator=generator))
    bias = torch.nn.Parameter(torch.randn(4, generator=generator))
    rows, upstream = torch.tensor([2, 2, 7]), torch.randn(3, 4, generator=generator)
    ((F.embedding(rows, table, sparse=True) * upstream).sum() + (bias**2).sum()).backward()
    dense_table = torch.nn.Parameter(table.detach().clone())
    dense_bias = torch.nn.Parameter(bias.detach().clone())
    ((dense_table[rows] * upstream).sum() + (dense_bias**2).sum()).backward()
    expected = torch.nn.utils.clip_grad_norm_([dense_table, dense_bias], 0.5)
    total = clip_grad_norm([table, bias], 0.5)
    torch.testing.assert_close(total, expected)
    torch.testing.assert_close(table.grad.to_dense(), dense_table.grad)
    torch.testing.assert_close(bias.grad, dense_bias.grad)
