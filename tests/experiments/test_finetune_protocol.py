"""The fine-tuning protocol's rule: the rate whose curve peaks highest, the first epoch within tolerance of the peak."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import finetune_protocol  # noqa: E402
from _cells import file_sha256  # noqa: E402

from kgplm.exceptions import ConfigurationError  # noqa: E402


def _run(rate, devs):
    return {"learning_rate": rate, "curve": [{"epoch": i + 1, "dev": d} for i, d in enumerate(devs)]}


def test_the_rule_by_hand():
    runs = [
        _run(5e-4, [0.10, 0.30, 0.40, 0.45, 0.46]),
        _run(1e-3, [0.20, 0.50, 0.600, 0.612, 0.614, 0.615]),  # the highest peak
        _run(2e-3, [0.0, 0.0, 0.0, 0.0, 0.0]),
    ]
    choice = finetune_protocol.choose(runs)
    # peak 0.615; within 0.005 of it: 0.612 at epoch 4 is the first (0.600 at epoch 3 is 0.015 short)
    assert (choice["learning_rate"], choice["epochs"]) == (1e-3, 4)
    assert choice["best_dev"] == 0.615 and choice["dev_at_budget"] == 0.612
    # a tie on the peak goes to the smaller rate; a wider tolerance stops earlier
    tie = finetune_protocol.choose([_run(2e-3, [0.5, 0.6]), _run(1e-3, [0.6, 0.6])])
    assert (tie["learning_rate"], tie["epochs"]) == (1e-3, 1)
    assert finetune_protocol.choose(runs, tolerance=0.02)["epochs"] == 3
    with pytest.raises(ConfigurationError, match="no grid runs"):
        finetune_protocol.choose([])


def test_runs_are_appended_and_read_back(tmp_path):
    path = tmp_path / "grid.jsonl"
    finetune_protocol.append_record(path, {"a": 1})
    finetune_protocol.append_record(path, {"a": 2})
    assert finetune_protocol.read_records(path) == [{"a": 1}, {"a": 2}]
    assert not list(tmp_path.glob("*.tmp"))
    assert finetune_protocol.read_records(tmp_path / "absent.jsonl") == []


def test_the_first_rate_that_learns_in_the_order_given():
    def run(rate, devs, constant=0.0):
        return {**_run(rate, devs), "dev_constant": constant}

    runs = [run(2e-3, [0.0, 0.0, 0.0]), run(1e-3, [0.0, 0.18, 0.22]), run(5e-4, [0.04, 0.2, 0.21])]
    assert finetune_protocol.first_that_learns([2e-3, 1e-3, 5e-4], runs) == 1e-3  # 2e-3 stays the all-O tagger
    assert finetune_protocol.first_that_learns([5e-4, 1e-3], runs) == 5e-4  # the order given decides
    assert finetune_protocol.first_that_learns([2e-3], runs) is None
    assert finetune_protocol.first_that_learns([2e-3, 1e-4], runs) is None  # 1e-4 has not run yet
    # a pair task's constant predictor scores above 0: matching it is not learning
    assert finetune_protocol.first_that_learns([1e-3], [run(1e-3, [0.5, 0.5], constant=0.5)]) is None


def test_the_first_rate_at_which_every_seed_learns():
    def run(rate, seed, devs):
        return {**_run(rate, devs), "finetune_seed": seed, "dev_constant": 0.0}

    runs = [
        run(5e-3, 0, [0.1, 0.3]),
        run(5e-3, 1, [0.0, 0.0]),  # one seed stays the all-O tagger: 5e-3 is passed over
        run(2e-3, 0, [0.1, 0.2]),
        run(2e-3, 1, [0.0, 0.15]),
    ]
    assert finetune_protocol.first_where_every_seed_learns([5e-3, 2e-3], [0, 1], runs) == 2e-3
    assert finetune_protocol.first_where_every_seed_learns([5e-3, 2e-3], [0], runs) == 5e-3
    # seed 2 has not run at 2e-3: not settled yet
    assert finetune_protocol.first_where_every_seed_learns([5e-3, 2e-3], [0, 1, 2], runs) is None
    assert finetune_protocol.first_where_every_seed_learns([5e-3], [0, 1], runs) is None


def test_every_seed_learns_runs_seeds_until_a_degenerate_one_then_the_next_rate(tmp_path, monkeypatch):
    """The grid runs rate by rate, seed by seed; a degenerate run ends its rate, and the runs stop once the
    rule is settled (the runs a rule cannot use are not paid for)."""
    base = tmp_path / "base"
    (base / "model").mkdir(parents=True)
    (base / "model" / "model.safetensors").write_bytes(b"weights")
    collapses = {(5e-3, 1)}  # (rate, seed) whose run stays the all-O tagger
    calls = []

    def fake_run(work, model, task, learning_rate, epochs, device, seed=0):
        calls.append((learning_rate, seed))
        devs = [0.0, 0.0] if (learning_rate, seed) in collapses else [0.1, 0.2]
        return {
            **_run(learning_rate, devs),
            "model_sha256": file_sha256(model / "model" / "model.safetensors"),
            "task": task,
            "epochs": epochs,
            "finetune_seed": seed,
            "dev_constant": 0.0,
            "best_epoch": 2,
            "wall_s": 0.0,
        }

    monkeypatch.setattr(finetune_protocol, "grid_run", fake_run)
    finetune_protocol.main(
        ["--model", str(base), "--name", "toy", "--out", str(tmp_path), "--learning-rates", "5e-3", "2e-3", "1e-3"]
        + ["--epochs", "2", "--finetune-seeds", "0", "1", "2", "--every-seed-learns"]
    )
    assert calls == [(5e-3, 0), (5e-3, 1), (2e-3, 0), (2e-3, 1), (2e-3, 2)]  # 5e-3 ends at seed 1; 1e-3 never runs
    choice = json.loads((tmp_path / "toy-cmedqaner-choice.json").read_text(encoding="utf-8"))
    assert choice["learning_rate"] == 2e-3 and choice["finetune_seeds"] == [0, 1, 2]
    # run again: every run is on record, so nothing is computed; a longer schedule's runs are other records
    finetune_protocol.main(
        ["--model", str(base), "--name", "toy", "--out", str(tmp_path), "--learning-rates", "5e-3", "2e-3", "1e-3"]
        + ["--epochs", "2", "--finetune-seeds", "0", "1", "2", "--every-seed-learns"]
    )
    assert len(calls) == 5
    finetune_protocol.main(
        ["--model", str(base), "--name", "toy", "--out", str(tmp_path), "--learning-rates", "5e-3"]
        + ["--epochs", "3", "--finetune-seeds", "0", "--every-seed-learns"]
    )
    assert calls[5:] == [(5e-3, 0)]
    # a rate part-way done (a stopped grid, or more seeds asked for): only its missing seeds run
    finetune_protocol.main(
        ["--model", str(base), "--name", "toy", "--out", str(tmp_path), "--learning-rates", "2e-3"]
        + ["--epochs", "2", "--finetune-seeds", "0", "1", "2", "3", "--every-seed-learns"]
    )
    assert calls[6:] == [(2e-3, 3)]
    # when no rate qualifies the choice says so and the script fails rather than exit as if it had chosen
    collapses.update({(2e-3, 1), (1e-3, 0)})
    with pytest.raises(ConfigurationError, match="no rate of .* satisfies the rule"):
        finetune_protocol.main(
            ["--model", str(base), "--name", "none", "--out", str(tmp_path), "--learning-rates", "2e-3", "1e-3"]
            + ["--epochs", "2", "--finetune-seeds", "0", "1", "--every-seed-learns"]
        )
    assert json.loads((tmp_path / "none-cmedqaner-choice.json").read_text(encoding="utf-8"))["learning_rate"] is None
