"""Benchmark run directories are keyed by every setting and the code version (issue 27.11)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _runs import KEY_FILE, code_version, run_directory  # noqa: E402

from kgplm.exceptions import ConfigurationError  # noqa: E402

SETTINGS = {"steps": 300, "hidden": 128, "training": {"learning_rate": 1e-3, "seed": 0}}


def test_a_changed_setting_or_code_version_gives_another_directory(tmp_path):
    first = run_directory(tmp_path, "probe", SETTINGS, version="aaaa")
    assert run_directory(tmp_path, "probe", dict(SETTINGS), version="aaaa") == first  # same call: resumed
    assert json.loads((first / KEY_FILE).read_text()) == {"settings": SETTINGS, "code_version": "aaaa"}
    others = {
        run_directory(tmp_path, "probe", SETTINGS, version="bbbb"),
        run_directory(tmp_path, "probe", {**SETTINGS, "steps": 301}, version="aaaa"),
        run_directory(tmp_path, "probe", {**SETTINGS, "training": {"learning_rate": 1e-3, "seed": 1}}, version="aaaa"),
    }
    assert first not in others and len(others) == 3


def test_a_directory_holding_another_run_is_refused(tmp_path):
    directory = run_directory(tmp_path, "probe", SETTINGS, version="aaaa")
    (directory / KEY_FILE).write_text(json.dumps({"settings": SETTINGS, "code_version": "older"}))
    with pytest.raises(ConfigurationError, match="other settings or code"):
        run_directory(tmp_path, "probe", SETTINGS, version="aaaa")


def test_code_version_is_the_commit_and_tells_uncommitted_edits_apart(tmp_path, tmp_path_factory):
    def git(*args):
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("commit", "-qm", "one")
    head = git("rev-parse", "--short=12", "HEAD")
    assert code_version(tmp_path) == head
    (tmp_path / "code.py").write_text("x = 2\n")
    first_edit = code_version(tmp_path)
    (tmp_path / "code.py").write_text("x = 3\n")
    second_edit = code_version(tmp_path)
    assert first_edit.startswith(head + "+dirty-") and second_edit.startswith(head + "+dirty-")
    assert first_edit != second_edit
    with pytest.raises(ConfigurationError, match="git checkout"):
        code_version(tmp_path_factory.mktemp("not_a_repository"))
