"""The test suite leaves nothing in the system temp folder when its tests pass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import tempfile
from pathlib import Path


def test_writes_where_tests_write(tmp_path, tmp_path_factory):
    (tmp_path / "own.bin").write_bytes(b"x" * 4096)
    (tmp_path_factory.mktemp("shared") / "shared.bin").write_bytes(b"x" * 4096)
    (Path(tempfile.mkdtemp()) / "library.bin").write_bytes(b"x" * 4096)
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "two workers"])
def test_a_passing_run_leaves_no_file_in_the_temp_folder(tmp_path, workers):
    """A test run with this suite's configuration and conftest, in a private temp folder, in one process
    and in two pytest-xdist workers (as ``make test`` runs it): its tmp_path, session folders and what code
    writes through ``tempfile`` are gone when the run passes."""
    temp = tmp_path / "temp"
    temp.mkdir()
    probe = tmp_path / "probe" / "test_probe.py"
    probe.parent.mkdir()
    probe.write_text(_PROBE, encoding="utf-8")
    environment = {key: value for key, value in os.environ.items() if key != "PYTEST_DEBUG_TEMPROOT"}
    environment.update(TMPDIR=str(temp), PYTHONPATH=str(REPO_ROOT))
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            str(REPO_ROOT / "pyproject.toml"),
            "--rootdir",
            str(REPO_ROOT),
            "-p",
            "tests.conftest",
            *workers,
            str(probe),
        ],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    left = sorted(str(path.relative_to(temp)) for path in temp.rglob("*") if path.is_file())
    assert left == []
