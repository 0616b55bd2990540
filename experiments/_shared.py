"""Puts ``benchmarks/`` on the import path: the study reads the same real-data helpers (``_data``: the
compiled CMeKG store, the dialogue corpus) and keyed run directories (``_runs``) as the performance
benchmarks. Import it before ``_data`` or ``_runs``."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.append(str(BENCHMARKS))
