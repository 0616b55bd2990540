"""AdamW whose sparse-gradient parameters are updated row by row (lazily), and gradient clipping that
accepts sparse gradients.

Why: KeBioLM's entity table has a row per KG entity (4M × 64 fp32 = 1 GB at UMLS size). With the
sampled linking softmax (``linking_softmax="sampled"``) a step reads a few thousand rows, and the
table's gradient comes back as a sparse COO tensor over those rows. ``torch.optim.AdamW`` refuses
sparse gradients; a dense gradient would be one more table copy per step and AdamW would then
rewrite every row (weight decay and momentum) on every step.

:class:`RowwiseAdamW` is ``torch.optim.AdamW`` (same arguments, same state names ``step``,
``exp_avg``, ``exp_avg_sq``, so checkpoints are read and written as before). Parameters whose
gradient is dense are stepped by AdamW itself, unchanged. A parameter whose gradient is sparse is
updated on the rows the gradient names (after summing duplicate rows), with AdamW's own formulas
(Loshchilov & Hutter 2019, Algorithm 2, in ``torch.optim.AdamW``'s form) on those rows:

    θ ← θ · (1 − lr·λ)                                   decoupled weight decay
    m ← β₁ m + (1 − β₁) g,   v ← β₂ v + (1 − β₂) g²
    θ ← θ − (lr / (1 − β₁ᵗ)) · m / (√v / √(1 − β₂ᵗ) + ε)

"Lazy" means, precisely: a row the step's gradient does not name is not touched at all — its
value, m and v stay as they are (no weight decay, no decay of m and v, no momentum step), where a
dense AdamW with a zero gradient on that row would shrink θ by lr·λ, decay m and v, and move θ
along the remaining momentum. t is the parameter's step count (the steps in which it had a
gradient), shared by all its rows, as in ``torch.optim.SparseAdam``: a row touched at steps 1 and
3 only gets, at step 3, m = β₁ m₁ + (1 − β₁) g₃ with bias correction 1 − β₁³. So the update
equals dense AdamW's on the rows that every step touches, and differs for rows skipped in between
(for those, lazy Adam is the usual approximation, SparseAdam's). Unlike ``torch.optim.SparseAdam``
it applies AdamW's decoupled weight decay to the rows it updates. ``amsgrad`` and ``maximize`` are
not supported for sparse gradients.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from kgplm.exceptions import ConfigurationError

__all__ = ["RowwiseAdamW", "clip_grad_norm"]


class RowwiseAdamW(torch.optim.AdamW):
    """``torch.optim.AdamW`` with lazy row-wise updates for sparse gradients (see the module docstring)."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        sparse = [
            (group, parameter)
            for group in self.param_groups
            for parameter in group["params"]
            if parameter.grad is not None and parameter.grad.is_sparse
        ]
        gradients = [parameter.grad for _, parameter in sparse]
        for _, parameter in sparse:
            parameter.grad = None  # AdamW steps the dense ones only
        try:
            super().step()
        finally:
            for (_, parameter), gradient in zip(sparse, gradients):
                parameter.grad = gradient
        for (group, parameter), gradient in zip(sparse, gradients):
            self._rowwise_step(group, parameter, gradient)
        return loss

    def _rowwise_step(self, group: dict, parameter: torch.Tensor, gradient: torch.Tensor) -> None:
        if group["amsgrad"] or group["maximize"]:
            raise ConfigurationError(
                "RowwiseAdamW updates sparse gradients without amsgrad and maximize; got "
                f"amsgrad={group['amsgrad']}, maximize={group['maximize']}"
            )
        state = self.state[parameter]
        if not state:  # AdamW's own state layout, so that state_dict and load_state_dict work unchanged
            state["step"] = torch.tensor(0.0, dtype=torch.float32)
            state["exp_avg"] = torch.zeros_like(parameter, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(parameter, memory_format=torch.preserve_format)
        gradient = gradient.coalesce()  # duplicate rows summed
        rows, values = gradient.indices()[0], gradient.values()
        state["step"] += 1
        step = float(state["step"])
        lr, weight_decay, eps = group["lr"], group["weight_decay"], group["eps"]
        beta1, beta2 = group["betas"]
        values = values.to(parameter.dtype)
        weights = parameter.index_select(0, rows)
        first = state["exp_avg"].index_select(0, rows)
        second = state["exp_avg_sq"].index_select(0, rows)
        weights.mul_(1 - lr * weight_decay)
        first.lerp_(values, 1 - beta1)
        second.mul_(beta2).addcmul_(values, values, value=1 - beta2)
        step_size = lr / (1 - beta1**step)
        denominator = (second.sqrt() / math.sqrt(1 - beta2**step)).add_(eps)
        weights.addcdiv_(first, denominator, value=-step_size)
        parameter.index_copy_(0, rows, weights)
        state["exp_avg"].index_copy_(0, rows, first)
        state["exp_avg_sq"].index_copy_(0, rows, second)


def clip_grad_norm(parameters: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` (L2) when every gradient is dense (that very function);
    with sparse gradients, which it refuses, the same clipping: sparse gradients are coalesced (their
    norm is then the norm of their values), the total norm is the L2 norm of all gradients, and
    every gradient is scaled by min(1, max_norm / (total + 10⁻⁶))."""
    parameters = [p for p in parameters if p.grad is not None]
    if not any(p.grad.is_sparse for p in parameters):
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm)
    norms = []
    for parameter in parameters:
        if parameter.grad.is_sparse:
            parameter.grad = parameter.grad.coalesce()
            norms.append(torch.linalg.vector_norm(parameter.grad.values()))
        else:
            norms.append(torch.linalg.vector_norm(parameter.grad))
    total = torch.linalg.vector_norm(torch.stack(norms))
    coefficient = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for parameter in parameters:
        parameter.grad.mul_(coefficient)
    return total
