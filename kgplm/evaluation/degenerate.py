"""A fine-tune that learned nothing says so: predictions that do not depend on the input.

A tagger that predicts ``O`` everywhere scores F1 0; a classifier that predicts one class scores the
majority share. Both are what a model that learned nothing does, typically because the learning rate
is too low (or too high) or there were too few epochs. :func:`constant_prediction` finds them in the
records of :func:`kgplm.evaluation.predictions.example_predictions`.

:func:`degenerate_reasons` is the rule a study applies to a run's dev scores: a run is *degenerate*
when it does not beat the best constant predictor on dev, or does not beat chance on dev (the
expected score of labels drawn at random; NER has none), or — for classification — when its dev
Cohen's κ (:func:`cohen_kappa`) is ≤ 0: it agrees with the gold labels no more than its own label
frequencies would by chance. For macro-F1 the constant bar alone is low (one class of two scores
about 1/3 where random labelling scores about 1/2), and a run can beat both by a hair on a noisy
dev set while its κ is still ≤ 0; the κ rule catches that.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kgplm.exceptions import ConfigurationError

__all__ = ["cohen_kappa", "constant_prediction", "degenerate_reasons", "learned_nothing_message"]

_EMPTY_OUTPUT_KINDS = ("ner", "nested_ner", "relation_triples")


def constant_prediction(records: Sequence[dict[str, Any]], kind: str) -> str | None:
    """A description of the constant prediction (``"no entity on any of the 40 examples (all O)"``,
    ``"the label '1' for all 40 examples"``), or ``None`` when the predictions vary (or there are
    fewer than 2 examples)."""
    if len(records) < 2:
        return None
    if kind in _EMPTY_OUTPUT_KINDS:
        if any(record["predicted"] for record in records):
            return None
        what = "no entity" if kind != "relation_triples" else "no triple"
        return f"{what} on any of the {len(records)} examples" + (" (all O)" if kind != "relation_triples" else "")
    values = {json.dumps(record["predicted"], sort_keys=True) for record in records}
    if len(values) > 1:
        return None
    value = records[0]["predicted"]
    if kind in ("qa_ranking", "graded_ranking"):
        return f"candidate {value} as the best for all {len(records)} queries"
    return f"the label {value!r} for all {len(records)} examples"


def learned_nothing_message(description: str, *, split: str, learning_rate: float, epochs: int) -> str:
    """The warning ``kgplm.finetune`` logs and returns when the predictions are constant."""
    return (
        f"the fine-tuned model predicts {description} of {split}: it learned nothing from the input. "
        f"Try another learning rate (this run: {learning_rate:g}; a small encoder often needs 1e-3 to 5e-3, "
        f"BERT-base 2e-5 to 5e-5) or more epochs (this run: {epochs}), and check that the training labels "
        f"are not all one class"
    )


def cohen_kappa(gold: Sequence, predicted: Sequence) -> float:
    """Cohen's κ of ``predicted`` against ``gold`` (one label per example; ``None``, no prediction, is a
    label of its own): κ = (p_o − p_e) / (1 − p_e), p_o the share of agreements, p_e = Σ_k g_k · q_k with
    g_k, q_k the shares of label k in gold and in the predictions (Cohen 1960; equal to sklearn's
    ``cohen_kappa_score``). When p_e = 1 (gold and predictions are one and the same label) κ is 0: no
    agreement beyond chance can be measured."""
    if len(gold) != len(predicted):
        raise ConfigurationError(
            f"cohen_kappa: {len(gold)} gold labels against {len(predicted)} predictions; expected one per example"
        )
    if not gold:
        raise ConfigurationError("cohen_kappa: no examples")
    n = len(gold)
    observed = sum(g == p for g, p in zip(gold, predicted)) / n
    gold_counts, predicted_counts = Counter(gold), Counter(predicted)
    expected = sum(gold_counts[label] * predicted_counts.get(label, 0) for label in gold_counts) / (n * n)
    if expected >= 1.0:
        return 0.0
    return (observed - expected) / (1.0 - expected)


def degenerate_reasons(
    score: float,
    *,
    constant: float,
    chance: float | None = None,
    kappa: float | None = None,
    tolerance: float = 1e-9,
) -> list[str]:
    """Why a run is degenerate on dev (module docstring), empty when it is not: ``score`` not above the
    best constant predictor's ``constant``, not above ``chance`` (``None``: the task has no chance
    predictor, e.g. NER), or ``kappa`` ≤ 0 (``None``: not a classification task). A score within
    ``tolerance`` of a bar does not beat it."""
    reasons = []
    if score <= constant + tolerance:
        reasons.append(f"dev {score:.4f} does not beat the best constant predictor's {constant:.4f}")
    if chance is not None and score <= chance + tolerance:
        reasons.append(f"dev {score:.4f} does not beat chance {chance:.4f}")
    if kappa is not None and kappa <= tolerance:
        reasons.append(f"dev Cohen's kappa {kappa:.4f} <= 0")
    return reasons
