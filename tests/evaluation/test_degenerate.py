"""The degeneracy rule: a constant run and a label-shuffled run are flagged, a good run passes; κ against
sklearn (or a hand computation where sklearn is absent)."""

from __future__ import annotations

import numpy as np
import pytest

from kgplm.evaluation.degenerate import cohen_kappa, degenerate_reasons
from kgplm.evaluation.metrics import macro_f1
from kgplm.exceptions import ConfigurationError


def _reference_kappa(gold, predicted) -> float:
    try:
        from sklearn.metrics import cohen_kappa_score
    except ImportError:  # a hand computation from the confusion matrix
        labels = sorted(set(gold) | set(predicted))
        index = {label: i for i, label in enumerate(labels)}
        confusion = np.zeros((len(labels), len(labels)))
        for g, p in zip(gold, predicted):
            confusion[index[g], index[p]] += 1
        confusion /= confusion.sum()
        expected = confusion.sum(1) @ confusion.sum(0)
        return float((np.trace(confusion) - expected) / (1 - expected))
    return float(cohen_kappa_score(gold, predicted))


def test_kappa_by_hand_and_against_sklearn():
    gold = ["a", "a", "a", "b", "b", "c"]
    predicted = ["a", "a", "b", "b", "c", "c"]
    # p_o = 4/6; gold shares (3, 2, 1)/6, predicted (2, 2, 2)/6: p_e = (6 + 4 + 2)/36 = 1/3; κ = (2/3 − 1/3)/(2/3)
    assert cohen_kappa(gold, predicted) == pytest.approx(0.5)
    rng = np.random.default_rng(3)
    for _ in range(20):
        gold = rng.choice(["0", "1", "2"], size=50, p=[0.5, 0.3, 0.2]).tolist()
        predicted = rng.choice(["0", "1", "2"], size=50).tolist()
        assert cohen_kappa(gold, predicted) == pytest.approx(_reference_kappa(gold, predicted), abs=1e-12)
    assert cohen_kappa(["1", "1"], ["1", "1"]) == 0.0  # p_e = 1: nothing beyond chance to measure
    with pytest.raises(ConfigurationError, match="one per example"):
        cohen_kappa(["1"], ["1", "0"])


def test_rule_flags_a_constant_and_a_label_shuffled_run_and_passes_a_good_one():
    rng = np.random.default_rng(0)
    gold = rng.choice(["0", "1"], size=400, p=[0.6, 0.4]).tolist()
    labels = ["0", "1"]
    # the bars on this dev set: the best constant (always "0": 0.6) and chance (a uniform random label: 0.5)
    constant = max(np.mean([g == label for g in gold]) for label in labels)
    chance = 0.5

    def check(predicted):
        score = float(np.mean([g == p for g, p in zip(gold, predicted)]))
        return degenerate_reasons(score, constant=constant, chance=chance, kappa=cohen_kappa(gold, predicted))

    constant_run = ["0"] * len(gold)
    reasons = check(constant_run)
    assert any("best constant" in reason for reason in reasons) and any("kappa" in reason for reason in reasons)

    shuffled = list(np.asarray(gold)[rng.permutation(len(gold))])  # the gold labels, attached to other examples
    assert _reference_kappa(gold, shuffled) < 0.1
    assert check(shuffled)  # its accuracy ≈ 0.6² + 0.4² = 0.52 < the constant's 0.6

    good = [g if rng.random() < 0.85 else ("1" if g == "0" else "0") for g in gold]
    assert check(good) == []


def test_kappa_catches_a_macro_f1_run_above_both_bars():
    # balanced binary dev set: constant macro-F1 = 1/3, chance ≈ 1/2. A run that predicts "1" where gold is "0"
    # slightly more often than not can still clear 1/2 by noise; κ ≤ 0 flags it.
    gold = ["0"] * 50 + ["1"] * 50
    predicted = ["1"] * 26 + ["0"] * 24 + ["0"] * 27 + ["1"] * 23  # 24 + 23 = 47 correct
    score = macro_f1(gold, predicted)
    assert score < 0.5
    kappa = cohen_kappa(gold, predicted)
    assert kappa == pytest.approx(_reference_kappa(gold, predicted)) and kappa < 0
    assert degenerate_reasons(0.51, constant=1 / 3, chance=0.5, kappa=kappa) == ["dev Cohen's kappa -0.0600 <= 0"]
    assert degenerate_reasons(0.51, constant=1 / 3, chance=0.5, kappa=0.02) == []
    assert degenerate_reasons(0.0, constant=0.0) == ["dev 0.0000 does not beat the best constant predictor's 0.0000"]
