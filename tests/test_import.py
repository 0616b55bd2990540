"""``import kgplm`` and ``kgplm --help`` stay light: torch, transformers and pandas load on first use."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "transformers", "pandas", "torch_geometric")


def _modules_after(code: str) -> dict:
    script = code + "\nimport json, sys\nprint(json.dumps({m: m in sys.modules for m in %r}))" % (HEAVY,)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_kgplm_loads_no_heavy_library() -> None:
    assert _modules_after("import kgplm") == {m: False for m in HEAVY}


def test_the_command_line_help_loads_no_heavy_library() -> None:
    code = (
        "import contextlib, io\nfrom kgplm.cli import build_parser\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        build_parser().parse_args(['--help'])\n    except SystemExit:\n        pass"
    )
    assert _modules_after(code) == {m: False for m in HEAVY}


def test_public_names_resolve_on_first_use() -> None:
    import kgplm
    from kgplm.api import train
    from kgplm.kg.store import KGStore

    assert kgplm.train is train and kgplm.KGStore is KGStore
    assert "mlm" in kgplm.methods.available()
    assert set(kgplm.__all__) <= set(dir(kgplm))
