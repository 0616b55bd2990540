"""What a pre-training model returns: the weighted losses, their weights and the logged metrics."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.modeling_outputs import ModelOutput

__all__ = ["PretrainingOutput"]


@dataclass
class PretrainingOutput(ModelOutput):
    """What a pre-training model returns.

    ``loss``: the weighted total Σ_k weight_k · losses[k] (``None`` when no objective had a target);
    ``losses``: each objective's mean loss by short name (``mlm``, ``sop`` …), present only when the
    batch held a target for it; ``loss_weights``: the weight of each; ``metrics``: values logged
    beside the losses (``mlm_accuracy``, ``sop_accuracy`` …).
    """

    loss: torch.Tensor | None = None
    losses: dict[str, torch.Tensor] | None = None
    loss_weights: dict[str, float] | None = None
    metrics: dict[str, torch.Tensor] | None = None
    prediction_logits: torch.Tensor | None = None
    sop_logits: torch.Tensor | None = None
    last_hidden_state: torch.Tensor | None = None
    mention_vectors: torch.Tensor | None = None

    def add(self, name: str, objective, weight: float = 1.0) -> None:
        """Record an :class:`~kgplm.models.objectives.Objective` (or a bare loss tensor); ``None`` is skipped."""
        if objective is None:
            return
        if self.losses is None:
            self.losses, self.loss_weights, self.metrics = {}, {}, {}
        loss = objective if isinstance(objective, torch.Tensor) else objective.loss
        self.losses[name] = loss
        self.loss_weights[name] = float(weight)
        if not isinstance(objective, torch.Tensor):
            self.metrics[f"{name}_accuracy"] = objective.accuracy
        self.loss = weight * loss if self.loss is None else self.loss + weight * loss
