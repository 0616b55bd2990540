"""Puts ``benchmarks/`` on the import path: the study reads the same real-data helpers (``_data``: the
compiled CMeKG store, the dialogue corpus) and keyed run directories (``_runs``) as the performance
benchmarks. Import it before ``_data`` or ``_runs``. Also :func:`write_json`, the study scripts' record writer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.append(str(BENCHMARKS))


def write_json(path: Path, value) -> None:
    """Write ``value`` as indented JSON to ``path`` through a temporary file, so a stop leaves the old
    record or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(value, indent=1), encoding="utf-8")
    temporary.replace(path)
