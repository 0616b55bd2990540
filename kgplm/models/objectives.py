"""Objectives several methods share: masked language modelling and sentence-order prediction.

Each returns ``None`` when the batch holds no target for it, so a loss is never the NaN of an
empty mean: the model leaves it out of ``output.losses`` and the trainer averages each loss over
the steps that computed it. Accuracies are returned beside the losses for logging.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["Objective", "classification_objective", "masked_lm_objective", "sentence_order_objective"]


@dataclass
class Objective:
    """A mean loss over ``count`` targets and the share of them predicted right."""

    loss: torch.Tensor
    accuracy: torch.Tensor
    count: int


def classification_objective(logits: torch.Tensor, labels: torch.Tensor) -> Objective | None:
    """Cross-entropy over the rows whose label is ≥ 0; ``logits`` (n, classes), ``labels`` (n,)."""
    targets = labels >= 0
    count = int(targets.sum())
    if count == 0:
        return None
    chosen_logits, chosen_labels = logits[targets], labels[targets]  # (count, classes), (count,)
    loss = F.cross_entropy(chosen_logits.float(), chosen_labels)
    accuracy = (chosen_logits.argmax(-1) == chosen_labels).float().mean()
    return Objective(loss, accuracy.detach(), count)


def masked_lm_objective(prediction_logits: torch.Tensor, labels: torch.Tensor) -> Objective | None:
    """BERT's MLM: −mean log p(w_i | masked text) over the positions whose label is ≥ 0.

    ``prediction_logits`` (batch, length, vocab), ``labels`` (batch, length) with −100 elsewhere.
    """
    return classification_objective(prediction_logits.flatten(0, 1), labels.flatten())


def sentence_order_objective(sop_logits: torch.Tensor, sentence_order_label: torch.Tensor | None) -> Objective | None:
    """SOP (Lan et al. 2020): 0 = segments in order, 1 = swapped; labels −100 are not scored."""
    if sentence_order_label is None:
        return None
    return classification_objective(sop_logits, sentence_order_label)
