"""Seed intervals and the paired bootstrap against hand computations; per-example counts against the metrics."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from kgplm.evaluation.metrics import accuracy, entity_scores, macro_f1
from kgplm.evaluation.statistics import (
    example_counts,
    holm,
    metric_from_counts,
    paired_bootstrap,
    paired_t_test,
    seed_interval,
    sign_flip_test,
)
from kgplm.exceptions import ConfigurationError


def test_seed_interval_by_hand():
    interval = seed_interval([0.5, 0.6, 0.7])
    # t quantile with 2 degrees of freedom in closed form: t_q = (2q − 1) / sqrt(2 q (1 − q)), q = 0.975
    t_quantile = 0.95 / math.sqrt(2 * 0.975 * 0.025)
    assert t_quantile == pytest.approx(4.3027, abs=1e-4)  # the printed table value
    assert interval.mean == pytest.approx(0.6)
    assert interval.half_width == pytest.approx(t_quantile * 0.1 / math.sqrt(3), rel=1e-12)
    assert interval.n == 3
    single = seed_interval([0.4])
    assert single.mean == 0.4 and math.isnan(single.half_width)


def test_exact_paired_bootstrap_by_hand():
    # per-example correctness: method [1, 1, 0], control [0, 1, 0]; δ = 2/3 − 1/3 = 1/3.
    method = example_counts("accuracy", ["a", "b", "c"], ["a", "b", "x"])
    control = example_counts("accuracy", ["a", "b", "c"], ["x", "b", "x"])
    every_draw = np.array(list(itertools.product(range(3), repeat=3)))  # the 27 equally likely resamples
    result = paired_bootstrap(method, control, "accuracy", indices=every_draw)
    # δ* = (draws of example 0) / 3 with Binomial(3, 1/3) counts: 0 (8/27), 1/3 (12/27), 2/3 (6/27), 1 (1/27).
    # |δ* − 1/3| ≥ 1/3 for δ* ∈ {0, 2/3, 1}: 8 + 6 + 1 = 15 draws; p = (1 + 15) / (27 + 1).
    assert result.difference == pytest.approx(1 / 3)
    assert result.p_value == pytest.approx(16 / 28)
    assert result.resamples == 27
    # sorted δ*: 8 zeros, 12 × 1/3, 6 × 2/3, one 1; the 97.5% point sits at position 26 · 0.975 = 25.35
    assert result.low == 0.0
    assert result.high == pytest.approx(2 / 3 + 0.35 / 3)


def test_bootstrap_applies_one_draw_to_every_run():
    # Two runs whose per-document F1 move in opposite directions under resampling: with the same draw
    # for both runs the seed-averaged difference never moves (δ* = δ = 0.5 for all 4 draws), so p = 1/5.
    method = np.array(
        [
            [[1, 1, 1], [0, 1, 1]],  # run 0: documents (TP, predicted, gold)
            [[0, 1, 1], [1, 1, 1]],
        ]
    )  # run 1
    control = np.array([[[0, 0, 1], [0, 0, 1]]] * 2)  # F1 0 whatever the draw
    every_draw = np.array(list(itertools.product(range(2), repeat=2)))
    result = paired_bootstrap(method, control, "entity_f1", indices=every_draw)
    assert result.difference == pytest.approx(0.5)
    assert result.p_value == pytest.approx(1 / 5)
    assert result.low == result.high == pytest.approx(0.5)


def test_monte_carlo_bootstrap_approaches_the_exact_one():
    method = example_counts("accuracy", [1, 1, 1], [1, 1, 0])
    control = example_counts("accuracy", [1, 1, 1], [0, 1, 0])
    result = paired_bootstrap(method, control, "accuracy", resamples=20_000, seed=3)
    assert result.p_value == pytest.approx(15 / 27, abs=0.015)
    same = paired_bootstrap(method, method, "accuracy", resamples=500)
    assert same.difference == 0 and same.p_value == 1.0


def test_counts_reproduce_the_task_metrics():
    rng = random.Random(5)
    gold_spans = [{(s, s + rng.randint(1, 3), rng.choice("ab")) for s in rng.sample(range(30), 4)} for _ in range(40)]
    predicted_spans = [
        {span for span in spans if rng.random() < 0.6} | ({(50, 52, "a")} if rng.random() < 0.3 else set())
        for spans in gold_spans
    ]
    totals = example_counts("entity_f1", gold_spans, predicted_spans).sum(0)
    assert metric_from_counts("entity_f1", totals) == pytest.approx(entity_scores(gold_spans, predicted_spans)["f1"])
    labels = ["x", "y", "z", "w"]
    gold = [rng.choice(labels[:3]) for _ in range(200)]
    predicted = [label if rng.random() < 0.5 else rng.choice(labels[:3]) for label in gold]
    assert metric_from_counts("accuracy", example_counts("accuracy", gold, predicted).sum(0)) == pytest.approx(
        accuracy(gold, predicted)
    )
    # "w" is in the label list but in neither gold nor predictions: it is not averaged in
    totals = example_counts("macro_f1", gold, predicted, labels=labels).sum(0)
    assert metric_from_counts("macro_f1", totals) == pytest.approx(macro_f1(gold, predicted))
    assert example_counts("accuracy", ["a"], [None]).tolist() == [[0.0, 1.0]]  # no prediction is a miss


def test_bad_input_fails_early():
    with pytest.raises(ConfigurationError, match="must match"):
        paired_bootstrap(np.zeros((2, 3, 2)), np.zeros((1, 3, 2)), "accuracy")
    with pytest.raises(ConfigurationError, match="metric"):
        example_counts("bleu", [1], [1])
    with pytest.raises(ConfigurationError, match="not in the label list"):
        example_counts("macro_f1", ["a"], ["b"], labels=["a"])


# -- seed-level tests and Holm ----------------------------------------------------------------------------
def test_paired_t_test_equals_scipy():
    from scipy.stats import ttest_rel

    rng = np.random.default_rng(3)
    for n in (2, 3, 5, 8):
        method, control = rng.normal(0.6, 0.05, n), rng.normal(0.58, 0.05, n)
        ours, reference = paired_t_test(method, control), ttest_rel(method, control)
        assert ours.p_value == pytest.approx(reference.pvalue, rel=1e-12)
        assert ours.statistic == pytest.approx(reference.statistic, rel=1e-12)
        assert ours.difference == pytest.approx(float(np.mean(method - control))) and ours.n == n
    # equal differences: no variance; all zero is no evidence at all
    assert paired_t_test([0.5, 0.6, 0.7], [0.5, 0.6, 0.7]).p_value == 1.0
    assert paired_t_test([0.6, 0.7, 0.8], [0.5, 0.6, 0.7]).p_value == 0.0


def test_sign_flip_p_equals_a_hand_enumeration():
    method, control = [0.70, 0.62, 0.66, 0.58], [0.60, 0.65, 0.61, 0.55]  # d = 0.10, −0.03, 0.05, 0.03
    differences = [m - c for m, c in zip(method, control)]
    observed = abs(sum(differences))
    # the 16 sign patterns written out by hand with itertools, independently of the vectorised bit trick
    extreme = sum(
        abs(sum(s * d for s, d in zip(signs, differences))) >= observed - 1e-12
        for signs in itertools.product((1, -1), repeat=4)
    )
    # |Σ σd| ≥ 0.15 holds for σ = ±(+,+,+,+) (Σ = ±0.15), ±(+,−,+,+) (±0.21) and ±(+,−,+,−) (±0.15, a tie,
    # counted): 6 of 16
    assert extreme == 6
    assert sign_flip_test(method, control).p_value == pytest.approx(6 / 16)


def test_sign_flip_is_exact_its_smallest_p_with_five_seeds_is_two_in_32():
    result = sign_flip_test([0.9, 0.8, 0.85, 0.7, 0.95], [0.5, 0.5, 0.5, 0.5, 0.5])
    assert result.p_value == 2 / 32 and result.n == 5
    assert sign_flip_test([0.9, 0.8, 0.7], [0.5, 0.5, 0.5]).p_value == 2 / 8
    assert sign_flip_test([0.5, 0.5, 0.5], [0.5, 0.5, 0.5]).p_value == 1.0
    with pytest.raises(ConfigurationError, match="paired by seed"):
        sign_flip_test([0.5, 0.6], [0.5, 0.6, 0.7])


def test_holm_equals_a_hand_computation():
    # sorted 0.01, 0.02, 0.03, 0.2 (m = 4): 4·0.01 = 0.04, 3·0.02 = 0.06, 2·0.03 = 0.06, 1·0.2 = 0.2;
    # a running maximum keeps them monotone; back in the input order
    assert holm([0.03, 0.2, 0.01, 0.02]) == pytest.approx([0.06, 0.2, 0.04, 0.06])
    # step-down monotonicity: 3·0.01 = 0.03, 2·0.011 = 0.022 → raised to 0.03; capped at 1
    assert holm([0.011, 0.01, 0.9]) == pytest.approx([0.03, 0.03, 0.9])
    assert holm([0.6, 0.7]) == [1.0, 1.0] and holm([]) == []
    with pytest.raises(ConfigurationError, match="p-values"):
        holm([0.5, 1.5])


def test_minimal_detectable_effect_has_80_percent_power_by_simulation():
    # independent of the non-central t: simulate the paired t-test at the computed effect and count rejections
    from scipy.stats import ttest_1samp

    from kgplm.evaluation.statistics import minimal_detectable_effect

    rng = np.random.default_rng(0)
    for n, sd in ((6, 0.04), (10, 2.5)):
        effect = minimal_detectable_effect(sd, n)
        draws = rng.normal(effect, sd, size=(200_000, n))
        rejected = ttest_1samp(draws, 0.0, axis=1).pvalue < 0.05
        assert abs(rejected.mean() - 0.8) < 0.005, (n, rejected.mean())


def test_minimal_detectable_effect_against_hand_values():
    from scipy.stats import norm

    from kgplm.evaluation.statistics import minimal_detectable_effect

    # G*Power / statsmodels TTestPower, two-sided α 0.05, power 0.8: dz = 0.996 at n = 10, 0.660 at n = 20
    assert minimal_detectable_effect(1.0, 10) == pytest.approx(0.9960, abs=5e-4)
    assert minimal_detectable_effect(1.0, 20) == pytest.approx(0.6604, abs=5e-4)
    # linear in the SD; above the normal approximation (z_{0.975} + z_{0.8}) s / √n, which ignores t's tails
    assert minimal_detectable_effect(3.0, 6) == pytest.approx(3 * minimal_detectable_effect(1.0, 6))
    assert minimal_detectable_effect(1.0, 6) > (norm.ppf(0.975) + norm.ppf(0.8)) / np.sqrt(6)
    assert minimal_detectable_effect(0.0, 6) == 0.0
    with pytest.raises(ConfigurationError, match="n must be"):
        minimal_detectable_effect(1.0, 1)
    with pytest.raises(ConfigurationError, match="sd must be"):
        minimal_detectable_effect(float("nan"), 6)
