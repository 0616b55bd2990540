"""Every performance benchmark runs end to end in its ``--smoke`` mode (tiny data, a temporary folder), so a
benchmark that stops matching the library fails the test suite instead of its next user. A smoke run writes
nothing into benchmarks/ (its cache and results folders included)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(path for path in BENCHMARKS.glob("*.py") if not path.name.startswith("_"))
#: smoke runs of a benchmark's other modes, beside its plain ``--smoke``
OTHER_MODES: dict[str, list[list[str]]] = {}
#: benchmarks whose own tests run their ``--smoke`` and check its outcome (``test_soak.py``: the same weights
#: after the signals; ``test_busy_machine.py``: every setting timed), so they are not run twice
OWN_TESTS = {"soak", "busy_machine"}
RUNS = [
    (path, options)
    for path in SCRIPTS
    if "--smoke" in path.read_text(encoding="utf-8") and path.stem not in OWN_TESTS
    for options in [[], *OTHER_MODES.get(path.stem, [])]
]
RUN_NAMES = ["-".join([path.stem, *(option.lstrip("-") for option in options)]) for path, options in RUNS]


def files_under(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` but Python's byte-code caches, with its modification time (ns)."""
    return {
        str(path.relative_to(folder)): path.stat().st_mtime_ns
        for path in folder.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def test_every_benchmark_has_a_smoke_mode():
    assert SCRIPTS
    missing = [path.name for path in SCRIPTS if "--smoke" not in path.read_text(encoding="utf-8")]
    assert not missing, f"benchmarks without a --smoke mode: {missing}"


@pytest.mark.parametrize(("script", "options"), RUNS, ids=RUN_NAMES)
def test_the_benchmark_runs_in_its_smoke_mode(script, options, tmp_path):
    environment = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TMPDIR": str(tmp_path),
        "PYTHONPATH": os.pathsep.join([str(BENCHMARKS.parent), os.environ.get("PYTHONPATH", "")]),
    }
    before = files_under(BENCHMARKS)
    completed = subprocess.run(
        [sys.executable, str(script), "--smoke", *options],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "|" in completed.stdout or "---" in completed.stdout, completed.stdout[-2000:]  # it printed a table
    after = files_under(BENCHMARKS)
    written = sorted(name for name in after.keys() | before.keys() if after.get(name) != before.get(name))
    assert not written, f"the smoke run wrote into {BENCHMARKS}: {written}"
