"""The base row (a family's base fine-tuned without continued pre-training): opt-in, keyed by the base and
the fine-tuning seed alone, never pre-trained, compared with the control in the table and kept out of the
primary endpoints and the attribution shares; one fine-tuning shared by two rows runs once."""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import replicate  # noqa: E402
from _table import aggregate  # noqa: E402
from tests.experiments.test_replicate import _cells, _measured  # noqa: E402

from kgplm.evaluation.tasks import PairExample  # noqa: E402
from kgplm.exceptions import ConfigurationError  # noqa: E402

BASE = "kebiolm family: the mlm base, no continued pre-training"
CONTROL = "kebiolm control: mlm (word_entity masking)"


def test_base_rows_are_asked_for_and_need_paired_fine_tuning_seeds(monkeypatch):
    monkeypatch.setenv(replicate.RUN_COMMIT, "test")
    assert not any(row.role == "base" for row in replicate.plan_rows(["kebiolm"], primary=True))
    with pytest.raises(ConfigurationError, match="--base-rows: the base rows need the continued protocol and"):
        replicate.main(["--primary", "--methods", "kebiolm", "--base-rows"])
    with pytest.raises(ConfigurationError, match="--base-rows"):
        replicate.main(
            ["--primary", "--methods", "kebiolm", "--base-rows", "--paired-finetune-seeds", "--protocol", "scratch"]
        )


def test_a_base_row_never_shares_its_runs_with_a_row_that_continues_with_the_bases_recipe():
    rows = {row.name: row for row in replicate.plan_rows(["kebiolm"], primary=True, base_rows=True)}
    recipe = replicate.base_pretraining("mlm")
    assert rows[BASE].pretraining != recipe
    assert (rows[BASE].pretraining.method, rows[BASE].pretraining.masking) == (recipe.method, recipe.masking)
    assert rows[BASE].pretraining.key()["train_options"] == {"continued_pretraining": False}


def test_a_base_cell_depends_on_its_fine_tuning_seed_not_on_the_pre_training_seed():
    rows = {row.name: row for row in replicate.plan_rows(["kebiolm"], primary=True, base_rows=True)}
    budget, digests = replicate.Budget(), {"task": "fixed"}

    def key(row, seed, finetune_seed):
        return replicate.cell_job(budget, rows[row], seed, "cmedqaner", finetune_seed, "shared-x", data=digests).key

    assert key(BASE, 3, 0) == key(BASE, 0, 0)  # the same base fine-tuned the same way
    assert key(BASE, 0, 1) != key(BASE, 0, 0)
    assert key(CONTROL, 3, 0) != key(CONTROL, 0, 0)  # a continued run differs by its pre-training seed


def test_the_table_compares_the_control_with_the_base_outside_the_primary_endpoints_and_shares():
    seeds = (0, 1, 2, 3, 4, 5)
    budget = dataclasses.replace(
        replicate.Budget(), seeds=seeds, paired_finetune_seeds=True, tasks={"cmedqq": [None, 1]}, bootstrap_resamples=20
    )
    pretraining = replicate.Pretraining("mlm", "bert")
    rows = [
        replicate.Row("m", "method", replicate.Pretraining("smedbert", "whole_entity"), "smedbert", "c"),
        replicate.Row("c", "control", pretraining, "smedbert", "b"),
        replicate.Row("b", "base", replicate.base_itself("mlm"), "smedbert"),
    ]
    scores = {"m": [[1, 1, 1, 0]] * 6, "c": [[1, 0, 0, 0]] * 6, "b": [[1, 1, 0, 0]] * 6}
    cells = []
    for name, correct in scores.items():
        row_cells = _cells(name, "cmedqq", correct, seeds, (0,))
        for cell in row_cells:
            cell["finetune_seed"] = cell["seed"]
        cells += row_cells
    test = [PairExample(f"t{i}", "a", "b", label) for i, label in enumerate(["1", "0", "1", "1"])]
    result = aggregate(rows, budget, _measured(cells, test, test), commit="abc", device="cpu", seconds=0.0)
    family = result["families"]["smedbert"]
    assert [(e["row"], e["against"]) for e in family["primary"]] == [("m", "c")]
    [control_vs_base] = [e for e in family["secondary"] if e["row"] == "c"]
    assert control_vs_base["against"] == "b" and control_vs_base["difference"] == pytest.approx(-0.25)
    assert "b" not in {entry["row"] for entry in result["shares"].get("m", [])}


def test_two_rows_asking_for_one_fine_tuning_at_once_compute_it_once(monkeypatch, tmp_path):
    import _outcomes

    import kgplm

    computed = []

    def slow_finetune(*, output_dir, **arguments):
        computed.append(output_dir)
        time.sleep(0.5)
        Path(output_dir).mkdir(parents=True)  # as kgplm.finetune writes its run there
        return SimpleNamespace(test={"main": 0.25})

    monkeypatch.setattr(kgplm, "finetune", slow_finetune)
    monkeypatch.setattr(_outcomes, "scored_outcomes", lambda directory, *args, **options: {"score": 0.25})
    monkeypatch.setenv(replicate.RUN_COMMIT, "test")
    results = []

    def ask():
        results.append(replicate.finetune(tmp_path, replicate.Budget(), tmp_path / "base", "cmedqaner", 0, True, "cpu"))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(computed) == 1
    assert [outcomes for outcomes, _ in results] == [{"score": 0.25}] * 2
    assert results[0][1] == results[1][1] == computed[0]
