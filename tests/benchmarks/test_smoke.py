"""Every performance benchmark runs end to end in its ``--smoke`` mode (tiny data, a temporary folder), so a
benchmark that stops matching the library fails the test suite instead of its next user."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(path for path in BENCHMARKS.glob("*.py") if not path.name.startswith("_"))


def test_every_benchmark_has_a_smoke_mode():
    assert SCRIPTS
    missing = [path.name for path in SCRIPTS if "--smoke" not in path.read_text(encoding="utf-8")]
    assert not missing, f"benchmarks without a --smoke mode: {missing}"


@pytest.mark.parametrize("script", [p for p in SCRIPTS if "--smoke" in p.read_text(encoding="utf-8")],
                         ids=lambda path: path.stem)
def test_the_benchmark_runs_in_its_smoke_mode(script, tmp_path):
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path),
                   "PYTHONPATH": os.pathsep.join([str(BENCHMARKS.parent), os.environ.get("PYTHONPATH", "")])}
    completed = subprocess.run([sys.executable, str(script), "--smoke"], cwd=tmp_path, env=environment,
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "|" in completed.stdout or "---" in completed.stdout, completed.stdout[-2000:]  # it printed a table
