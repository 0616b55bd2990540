"""The control's learning-rate rule: the largest rate whose control keeps the base's dev score."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import control_protocol  # noqa: E402

from kgplm.exceptions import ArtifactError, ConfigurationError  # noqa: E402


def _records(devs):
    return [{"learning_rate": rate, "warmup_steps": 40, "dev": dev} for rate, dev in devs]


def test_the_largest_rate_that_keeps_the_bases_dev_score():
    records = _records([(1e-3, 0.30), (5e-4, 0.41), (2e-4, 0.45), (1e-4, 0.40)])
    # base 0.40: 5e-4, 2e-4 and 1e-4 keep it; the largest of them, not the best-scoring one
    choice = control_protocol.choose_rate(records, 0.40)
    assert (choice["learning_rate"], choice["control_dev"], choice["loses_ground"]) == (5e-4, 0.41, False)
    # no rate keeps it: the smallest, flagged
    lost = control_protocol.choose_rate(records, 0.50)
    assert (lost["learning_rate"], lost["loses_ground"]) == (1e-4, True)
    with pytest.raises(ConfigurationError, match="no control runs"):
        control_protocol.choose_rate([], 0.4)


def test_rates_run_largest_first_and_stop_once_one_keeps_the_base():
    rates = [1e-4, 1e-3, 5e-4, 2e-4]
    assert control_protocol.next_rate(rates, {}, 0.40) == 1e-3
    assert control_protocol.next_rate(rates, {1e-3: 0.30}, 0.40) == 5e-4  # 1e-3 lost ground: the next one down
    assert control_protocol.next_rate(rates, {1e-3: 0.30, 5e-4: 0.41}, 0.40) is None  # 5e-4 is the choice
    assert control_protocol.next_rate(rates, {1e-3: 0.40}, 0.40) is None  # "at least the base's" counts equal
    lost = {1e-3: 0.1, 5e-4: 0.2, 2e-4: 0.3, 1e-4: 0.35}
    assert control_protocol.next_rate(rates, lost, 0.40) is None  # all run, none kept it
    # the rates a stopped run settles on give the rule's choice over every rate
    ran = {1e-3: 0.30, 5e-4: 0.41}
    everything = {**ran, 2e-4: 0.45, 1e-4: 0.40}
    assert (
        control_protocol.choose_rate(_records(ran.items()), 0.40)["learning_rate"]
        == control_protocol.choose_rate(_records(everything.items()), 0.40)["learning_rate"]
        == 5e-4
    )


def _write(directory: Path, name: str, record: dict) -> None:
    (directory / name).write_text(json.dumps(record), encoding="utf-8")


def test_a_run_takes_the_budgets_the_protocol_chose(tmp_path):
    import replicate

    budget = dataclasses.replace(replicate.Budget(), tasks={"cmedqaner": [None, 4], "cehrner": [None, 4]})
    _write(tmp_path, "mlm-cmedqaner-choice.json", {"epochs": 15, "learning_rate": 5e-3})
    _write(tmp_path, "mlm-cehrner-choice.json", {"epochs": 14, "learning_rate": 5e-3})
    for method in ("smedbert", "kebiolm"):
        _write(tmp_path, f"{method}-control-choice.json", {"learning_rate": 2e-4, "warmup_steps": 40})
    chosen = replicate.registered_budget(budget, tmp_path, ["smedbert", "kebiolm"])
    assert chosen.tasks == {"cmedqaner": [None, 15, 5e-3], "cehrner": [None, 14, 5e-3]}
    assert (chosen.learning_rate, chosen.warmup_steps) == (2e-4, 40)
    assert chosen.task_budget("cehrner") == (None, 14, 5e-3)
    assert dataclasses.replace(chosen, tasks=budget.tasks, learning_rate=1e-3, warmup_steps=None) == budget

    # one budget holds one pre-training rate: controls that chose differently run separately
    _write(tmp_path, "kebiolm-control-choice.json", {"learning_rate": 1e-4, "warmup_steps": 40})
    with pytest.raises(ConfigurationError, match="kebiolm: lr 0.0001.*one --methods at a time"):
        replicate.registered_budget(budget, tmp_path, ["smedbert", "kebiolm"])
    assert replicate.registered_budget(budget, tmp_path, ["kebiolm"]).learning_rate == 1e-4
    (tmp_path / "mlm-cehrner-choice.json").unlink()
    with pytest.raises(
        ArtifactError, match="mlm-cehrner-choice.json: no such choice; run experiments/finetune_protocol"
    ):
        replicate.registered_budget(budget, tmp_path, ["kebiolm"])


def test_a_method_given_its_own_fine_tuning_budget_reads_it_before_its_familys(tmp_path):
    import replicate
    from finetune_protocol import choice_path

    budget = dataclasses.replace(replicate.Budget(), tasks={"cmedqaner": [None, 4]})
    _write(tmp_path, "mlm-cmedqaner-choice.json", {"epochs": 15, "learning_rate": 5e-3})
    for method in ("smedbert", "kebiolm"):
        _write(tmp_path, f"{method}-control-choice.json", {"learning_rate": 2e-4, "warmup_steps": 40})
    assert choice_path(tmp_path, "cmedqaner", "kebiolm", "mlm").name == "mlm-cmedqaner-choice.json"
    _write(tmp_path, "kebiolm-cmedqaner-choice.json", {"epochs": 6, "learning_rate": 1e-3})
    assert choice_path(tmp_path, "cmedqaner", "kebiolm", "mlm").name == "kebiolm-cmedqaner-choice.json"
    assert choice_path(tmp_path, "cmedqaner", "smedbert", "mlm").name == "mlm-cmedqaner-choice.json"
    assert replicate.registered_budget(budget, tmp_path, ["kebiolm"]).tasks == {"cmedqaner": [None, 6, 1e-3]}
    assert replicate.registered_budget(budget, tmp_path, ["smedbert"]).tasks == {"cmedqaner": [None, 15, 5e-3]}
    with pytest.raises(ConfigurationError, match="smedbert: 15 epochs at 0.005, kebiolm: 6 epochs at 0.001"):
        replicate.registered_budget(budget, tmp_path, ["smedbert", "kebiolm"])


def test_the_results_files_take_the_name_given(monkeypatch, tmp_path):
    import _table
    import replicate

    seen = {}

    def fake_run_all(work, budget, rows, device, **options):
        seen.update(budget=budget, rows=[row.name for row in rows])
        return {}

    monkeypatch.setenv(replicate.RUN_COMMIT, "test")
    monkeypatch.setattr(replicate, "run_all", fake_run_all)
    monkeypatch.setattr(_table, "aggregate", lambda *args, **options: {"table": 1})
    monkeypatch.setattr(_table, "render_markdown", lambda result, *args: "the table")
    _write(tmp_path, "mlm-cmedqaner-choice.json", {"epochs": 15, "learning_rate": 5e-3})
    _write(tmp_path, "smedbert-control-choice.json", {"learning_rate": 2e-4, "warmup_steps": 40})
    replicate.main(
        [
            "--primary",
            "--methods",
            "smedbert",
            "--tasks",
            "cmedqaner",
            "--choices",
            str(tmp_path),
            "--base-rows",
            "--paired-finetune-seeds",
            "--cut-rows",
            "smedbert: shuffled graph",
            "--work",
            str(tmp_path / "work"),
            "--results",
            str(tmp_path),
            "--results-name",
            "replicate-v5-smedbert",
        ]
    )
    assert json.loads((tmp_path / "replicate-v5-smedbert.json").read_text(encoding="utf-8")) == {"table": 1}
    assert (tmp_path / "replicate-v5-smedbert.md").read_text(encoding="utf-8") == "the table"
    assert seen["budget"].tasks == {"cmedqaner": [None, 15, 5e-3]} and seen["budget"].learning_rate == 2e-4
    assert "smedbert: shuffled graph" not in seen["rows"]
    assert "smedbert family: the mlm base, no continued pre-training" in seen["rows"]


def test_a_run_records_the_commit_it_started_from(monkeypatch):
    import replicate

    answers = iter(["aaaaaaaaaaaa", "", "bbbbbbbbbbbb", ""])

    def fake_git(*args, **options):
        return type("Completed", (), {"stdout": next(answers)})()

    monkeypatch.delenv(replicate.RUN_COMMIT, raising=False)
    forget = getattr(replicate.commit, "cache_clear", lambda: None)
    forget()
    monkeypatch.setattr(replicate.subprocess, "run", fake_git)
    try:
        assert replicate.commit() == "aaaaaaaaaaaa"
        assert replicate.commit() == "aaaaaaaaaaaa"  # a commit made while the run goes on does not change it
    finally:
        forget()


def test_a_method_with_its_own_budget_for_one_task_needs_it_for_every_task(tmp_path):
    import replicate

    budget = dataclasses.replace(replicate.Budget(), tasks={"cmedqaner": [None, 4], "cehrner": [None, 4]})
    _write(tmp_path, "mlm-cmedqaner-choice.json", {"epochs": 15, "learning_rate": 5e-3})
    _write(tmp_path, "mlm-cehrner-choice.json", {"epochs": 14, "learning_rate": 5e-3})
    _write(tmp_path, "kebiolm-control-choice.json", {"learning_rate": 2e-4, "warmup_steps": 40})
    _write(tmp_path, "kebiolm-cmedqaner-choice.json", {"epochs": 6, "learning_rate": 1e-3})
    # not the family's cEHRNER budget at another rate beside its own cMedQANER one
    with pytest.raises(ArtifactError, match=r"kebiolm has its own fine-tuning budget for \['cmedqaner'\] but not for"):
        replicate.registered_budget(budget, tmp_path, ["kebiolm"])
    _write(tmp_path, "kebiolm-cehrner-choice.json", {"epochs": 12, "learning_rate": 1e-3})
    assert replicate.registered_budget(budget, tmp_path, ["kebiolm"]).tasks == {
        "cmedqaner": [None, 6, 1e-3],
        "cehrner": [None, 12, 1e-3],
    }
