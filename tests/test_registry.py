"""The method registry below the models and the training loop (:mod:`kgplm.registry`): lookups load the
built-in methods and the ``kgplm.methods`` entry points of installed packages, once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def _run(code: str, tmp_path: Path) -> dict:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)])}
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_a_lookup_loads_the_built_in_methods_without_importing_kgplm_methods_first(tmp_path):
    seen = _run(
        """
        import json, sys
        from kgplm.registry import get
        before = "kgplm.methods" in sys.modules
        spec = get("smedbert")
        print(json.dumps({"before": before, "name": spec.name, "loaded": "kgplm.methods" in sys.modules}))
    """,
        tmp_path,
    )
    assert seen == {"before": False, "name": "smedbert", "loaded": True}


def test_installed_packages_add_methods_through_the_entry_point_group(tmp_path):
    """One entry point names a module that registers its method when imported, another a function that
    returns a MethodSpec; a broken one is skipped with a warning."""
    (tmp_path / "toy_method_plugin.py").write_text(
        textwrap.dedent("""
        import dataclasses
        from kgplm.methods import get, register

        register(dataclasses.replace(get("mlm"), name="toy-registered"))

        def make_spec():
            return dataclasses.replace(get("mlm"), name="toy-returned")
    """),
        encoding="utf-8",
    )
    dist_info = tmp_path / "toy_method_plugin-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: toy-method-plugin\nVersion: 0.1\n", encoding="utf-8"
    )
    (dist_info / "entry_points.txt").write_text(
        "[kgplm.methods]\nregistered = toy_method_plugin\nreturned = toy_method_plugin:make_spec\n"
        "broken = no_such_module_anywhere\n",
        encoding="utf-8",
    )
    seen = _run(
        """
        import json
        from kgplm.registry import available, get
        names = available()
        print(json.dumps({"names": names, "returned": get("toy-returned").name}))
    """,
        tmp_path,
    )
    assert seen["names"][:7] == ["mlm", "smedbert", "kebiolm", "embert", "electra", "ehealth", "epplm"]
    assert {"toy-registered", "toy-returned"} <= set(seen["names"]) and "broken" not in seen["names"]
    assert seen["returned"] == "toy-returned"
    # kgplm.train accepts an installed package's method before anything imported kgplm.methods: the call below
    # gets past the method's name and is refused for its missing corpus
    refused = _run(
        """
        import json
        import kgplm
        from kgplm.exceptions import ConfigurationError, MissingFileError
        try:
            kgplm.train("toy-registered", corpus="no-such-corpus.txt", output_dir="out")
        except (ConfigurationError, MissingFileError) as error:
            print(json.dumps({"error": type(error).__name__, "message": str(error)}))
    """,
        tmp_path,
    )
    assert refused["error"] == "MissingFileError" and "no-such-corpus.txt" in refused["message"]
