"""The replication runner's cells: written as they finish, resumed after a kill, refused when versions differ."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

from _cells import CellJob, check_versions, load_cells, read_cell, run_cells  # noqa: E402

from kgplm.exceptions import ArtifactError  # noqa: E402


def _jobs(versions=None) -> list[CellJob]:
    versions = versions or {"toy": 1, "mlm": 1}
    return [
        CellJob(
            "toy − ablation",
            seed,
            task,
            0,
            {"row": "toy − ablation", "seed": seed, "task": task, "versions": versions},
            versions,
        )
        for seed in (0, 1, 2)
        for task in ("cmedqq", "cmedqaner")
    ]


def _score(job: CellJob) -> dict:
    """A picklable stand-in for fine-tuning (module level, so worker processes can run it)."""
    return {"score": job.seed + (0.5 if job.task == "cmedqq" else 0.25)}


class _Killed(Exception):
    pass


def test_a_run_killed_part_way_resumes_without_recomputing_finished_cells(tmp_path):
    jobs, computed = _jobs(), []

    def dies_after_two(job):
        if len(computed) == 2:
            raise _Killed("the machine went away")
        computed.append((job.seed, job.task))
        return _score(job)

    with pytest.raises(_Killed):
        run_cells(jobs, dies_after_two, tmp_path, commit="c1")
    assert len(load_cells(tmp_path)) == 2  # each cell written the moment it finished
    assert not list(tmp_path.rglob(".*tmp*"))  # no half-written file left behind

    resumed = []

    def counts(job):
        resumed.append((job.seed, job.task))
        return _score(job)

    records = run_cells(jobs, counts, tmp_path, commit="c2")
    assert resumed == [(job.seed, job.task) for job in jobs[2:]]  # the two finished cells were not recomputed
    assert [r["score"] for r in records] == [_score(job)["score"] for job in jobs]
    assert [r["commit"] for r in records] == ["c1", "c1"] + ["c2"] * 4  # each cell keeps the commit that made it
    again = run_cells(jobs, counts, tmp_path, commit="c3")
    assert len(resumed) == 4 and [r["path"] for r in again] == [r["path"] for r in records]


def test_a_cell_budget_stops_the_run_and_the_next_run_finishes_it(tmp_path):
    with pytest.raises(RuntimeError, match="4 remain"):
        run_cells(_jobs(), _score, tmp_path, commit="c", max_new=2)
    assert len(load_cells(tmp_path)) == 2
    assert len(run_cells(_jobs(), _score, tmp_path, commit="c")) == 6


@pytest.mark.slow  # each spawned worker imports kgplm (torch): ~10 s of CPU
def test_worker_processes_write_the_same_cells(tmp_path):
    serial = run_cells(_jobs(), _score, tmp_path / "serial", commit="c")
    parallel = run_cells(_jobs(), _score, tmp_path / "parallel", commit="c", workers=2)
    assert [r["score"] for r in parallel] == [r["score"] for r in serial]
    assert sorted(p.relative_to(tmp_path / "parallel") for p in (tmp_path / "parallel").rglob("*.json")) == sorted(
        p.relative_to(tmp_path / "serial") for p in (tmp_path / "serial").rglob("*.json")
    )


def test_a_bumped_results_version_names_a_new_cell(tmp_path):
    old, new = _jobs({"toy": 1, "mlm": 1})[0], _jobs({"toy": 2, "mlm": 1})[0]
    assert old.path(tmp_path) != new.path(tmp_path)


def test_a_table_refuses_cells_of_different_results_versions(tmp_path):
    run_cells(_jobs({"toy": 1, "mlm": 1})[:3], _score, tmp_path, commit="c")
    run_cells(_jobs({"toy": 2, "mlm": 1})[3:], _score, tmp_path, commit="c")
    cells = load_cells(tmp_path)
    with pytest.raises(ArtifactError, match="toy") as error:
        check_versions(cells)
    message = str(error.value)
    assert "version 1: 3 cells" in message and "version 2: 3 cells" in message and ".json" in message
    assert "mlm" not in message.split("cannot make one table:")[1]  # mlm's cells agree
    same = [cell for cell in cells if cell["results_versions"]["toy"] == 2]
    check_versions(same)  # one version: accepted
    with pytest.raises(ArtifactError, match=r"toy \(study: 3\)"):
        check_versions(same, {"toy": 3, "mlm": 1})  # stale against the study


def test_a_corrupt_cell_is_named(tmp_path):
    path = _jobs()[0].path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": 1, "row": "x"}), encoding="utf-8")
    with pytest.raises(ArtifactError, match="missing"):
        read_cell(path)
