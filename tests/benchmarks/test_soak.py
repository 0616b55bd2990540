"""benchmarks/soak.py --smoke: a SIGTERM and a SIGKILL survived, the final weights equal the uninterrupted run's."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import soak  # noqa: E402


def test_the_smoke_soak_survives_both_signals_with_the_same_weights(tmp_path, capsys):
    assert soak.main(["--smoke", "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| 1 | SIGTERM | 75 |" in out and "| 2 | SIGKILL | -9 |" in out
    assert "survived 1 SIGTERM and 1 SIGKILL over 3 launches" in out
    assert "final weights equal the uninterrupted run's: yes; metrics.jsonl equal: yes" in out
