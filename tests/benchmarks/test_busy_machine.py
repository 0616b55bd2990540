"""benchmarks/busy_machine.py --smoke: the default setting runs quiet and beside a busy process, a row each."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import busy_machine  # noqa: E402


def test_the_smoke_run_times_each_setting_quiet_and_loaded(tmp_path, capsys):
    assert busy_machine.main(["--smoke", "--work-dir", str(tmp_path)]) == 0
    rows = re.findall(
        r"^\| (default|num_threads=1) \| (\d) \| ([0-9.]+) \| [0-9.]+ \|$", capsys.readouterr().out, re.MULTILINE
    )
    assert [(setting, busy) for setting, busy, _ in rows] == [("default", "0"), ("default", "1")]
    assert all(float(seconds) > 0 for _, _, seconds in rows)
    assert not any(p.name.startswith("run-") for p in tmp_path.iterdir())  # each timed copy removed
