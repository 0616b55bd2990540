"""Seed intervals and the paired bootstrap against hand computations; per-example counts against the metrics."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from kgplm.evaluation.metrics import accuracy, entity_scores, macro_f1
from kgplm.evaluation.statistics import example_counts, metric_from_counts, paired_bootstrap, seed_interval
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
    method = np.array([[[1, 1, 1], [0, 1, 1]],      # run 0: documents (TP, predicted, gold)
                       [[0, 1, 1], [1, 1, 1]]])     # run 1
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
    predicted_spans = [{span for span in spans if rng.random() < 0.6} | ({(50, 52, "a")} if rng.random() < 0.3 else set())
                       for spans in gold_spans]
    totals = example_counts("entity_f1", gold_spans, predicted_spans).sum(0)
    assert metric_from_counts("entity_f1", totals) == pytest.approx(entity_scores(gold_spans, predicted_spans)["f1"])
    labels = ["x", "y", "z", "w"]
    gold = [rng.choice(labels[:3]) for _ in range(200)]
    predicted = [label if rng.random() < 0.5 else rng.choice(labels[:3]) for label in gold]
    assert metric_from_counts("accuracy", example_counts("accuracy", gold, predicted).sum(0)) == pytest.approx(
        accuracy(gold, predicted))
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
