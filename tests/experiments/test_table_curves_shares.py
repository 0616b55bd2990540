"""The table's learning curves (mean dev score per epoch over runs) and attribution shares (the part of a
method's gain over its control that each row of its family keeps), against hand computations."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import _table  # noqa: E402
from replicate import Pretraining, Row  # noqa: E402

MLM = Pretraining("mlm", "bert")


def _curve(*devs):
    return {"curve": [{"epoch": i + 1, "dev": dev, "train_loss": 1.0} for i, dev in enumerate(devs)]}


def test_a_learning_curve_is_the_mean_per_epoch_over_the_runs_that_reached_it():
    curve = _table.learning_curve([_curve(0.1, 0.3, 0.5), _curve(0.2, 0.4), _curve(0.3, 0.5, 0.6)])
    assert curve["runs"] == [3, 3, 2]
    assert curve["dev"] == pytest.approx([0.2, 0.4, 0.55])


def test_each_row_keeps_its_share_of_the_methods_gain():
    rows = [
        Row("m", "method", MLM, "m", "c"),
        Row("m: gazetteer", "attribution", MLM, "m", "m"),
        Row("m: shuffled", "attribution", MLM, "m", "m"),
        Row("c", "control", MLM, "m", "b"),
        Row("b", "base", MLM, "m"),
        Row("other", "method", MLM, "o", "oc"),  # another family: no control cells, no shares
    ]
    means = {"m": 0.40, "m: gazetteer": 0.31, "m: shuffled": 0.19, "c": 0.10, "b": 0.13, "other": 0.5}
    tables = {
        "fine-tuned": {"cells": {row: {"F1": {"mean": mean}} for row, mean in means.items()}},
        "secondary": {"cells": {"m": {"small": {"mean": 0.2}}, "c": {"small": {"mean": 0.2}}}},
    }
    shares = _table.attribution_shares(rows, tables)
    assert list(shares) == ["m"]
    by_row = {(entry["row"], entry["column"]): entry for entry in shares["m"]}
    assert by_row[("m: gazetteer", "F1")]["share"] == pytest.approx(0.7)  # (0.31 − 0.10) / (0.40 − 0.10)
    assert by_row[("m: shuffled", "F1")]["share"] == pytest.approx(0.3)
    assert ("b", "F1") not in by_row  # the base removes nothing from the method: no share of its gain
    assert by_row[("m: shuffled", "F1")]["gain"] == pytest.approx(0.3)
    assert by_row[("m: gazetteer", "F1")]["row_minus_control"] == pytest.approx(0.21)
    assert ("m: gazetteer", "small") not in by_row  # no cell of that row in that column
    markdown = "\n".join(_table._render_shares(shares, "###"))
    assert "| m: gazetteer | F1 | +30.0 | +21.0 | 0.70 |" in markdown


def test_the_curves_render_one_row_per_run_with_the_count_where_it_drops():
    rows = [{"name": "m"}, {"name": "c"}]
    curves = {"F1": {"m": {"dev": [0.1, 0.25, 0.3], "runs": [7, 7, 5]}, "c": {"dev": [0.1, 0.2], "runs": [7, 7]}}}
    markdown = _table._render_curves(curves, rows, "###")
    assert "| row | 1 | 2 | 3 |" in markdown
    assert "| m | 10.0 | 25.0 | 30.0 (5) |" in markdown
    assert "| c | 10.0 | 20.0 | — |" in markdown
