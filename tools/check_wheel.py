"""Install the built wheel (and sdist) into a fresh virtual environment and run a smoke test.

    python tools/check_wheel.py [--constraints constraints/ci.txt] dist

The environment gets torch first (the version in the constraints file), then the wheel: the check
fails when installing the wheel would download, replace or upgrade torch, when an install
requirement in the wheel's metadata is not a range (a lower and an upper bound), or when the smoke
test fails: ``import kgplm`` (version from the metadata), ``kgplm --version``, ``kgplm methods`` and
a 2-step ``kgplm.train`` on a tiny graph and corpus that the check writes. The sdist is then
installed over the wheel (built in isolation) and imported.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path

SMOKE = r'''
import json, subprocess, sys
from importlib.metadata import version
from pathlib import Path

import kgplm

assert kgplm.__version__ == version("kgplm") == sys.argv[1], (kgplm.__version__, sys.argv[1])
assert "site-packages" in kgplm.__file__, kgplm.__file__
kgplm_command = str(Path(sys.executable).with_name("kgplm"))
shown = subprocess.run([kgplm_command, "--version"], capture_output=True, text=True, check=True).stdout.strip()
assert shown == f"kgplm {kgplm.__version__}", shown
methods = subprocess.run([kgplm_command, "methods"], capture_output=True, text=True, check=True).stdout
assert all(name in methods for name in ("mlm", "smedbert", "kebiolm", "embert", "ehealth", "epplm")), methods

graph = Path("tiny.ttl")
graph.write_text("""@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:diabetes a ex:Disease ; rdfs:label "糖尿病"@zh ; ex:hasSymptom ex:polyuria, ex:thirst .
ex:polyuria a ex:Symptom ; rdfs:label "多尿"@zh .
ex:thirst a ex:Symptom ; rdfs:label "口渴"@zh .
ex:metformin a ex:Drug ; rdfs:label "二甲双胍"@zh ; ex:treats ex:diabetes .
""", encoding="utf-8")
names = ["糖尿病", "多尿", "口渴", "二甲双胍"]
corpus = Path("notes.txt")
corpus.write_text("\n".join(f"患者主诉{names[i % 4]}三天，伴有{names[(i + 1) % 4]}，建议服用{names[(i + 3) % 4]}。"
                            for i in range(40)), encoding="utf-8")
from kgplm.models import TINY_TEXT_ENCODER
result = kgplm.train("smedbert", graph=str(graph), corpus=str(corpus), output_dir="run", text_model=dict(TINY_TEXT_ENCODER),
                     vocab_size=200, entity_dim=8, kg_epochs=2, max_steps=2, batch_size=4, log_every=1,
                     checkpoint_every=2, max_length=48, progress=False)
assert [record["step"] for record in result.metrics] == [1, 2], result.metrics
assert (result.output_dir / "model" / "model.safetensors").is_file()
print("smoke test passed:", json.dumps({"version": kgplm.__version__, "steps": len(result.metrics)}))
'''


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    print("+", " ".join(command), flush=True)
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def _requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(name).decode("utf-8"))
    return [r for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dist", type=Path, help="the folder `python -m build` wrote")
    parser.add_argument("--constraints", type=Path, default=Path("constraints/ci.txt"))
    args = parser.parse_args(argv)
    (wheel,) = sorted(args.dist.glob("kgplm-*.whl"))
    (sdist,) = sorted(args.dist.glob("kgplm-*.tar.gz"))
    version = wheel.name.split("-")[1]
    constraints = args.constraints.resolve()

    not_ranges = [r for r in _requirements(wheel) if not (re.search(r">=?\s*\d", r) and re.search(r"<\s*\d", r))]
    if not_ranges:
        sys.exit(f"{wheel.name}: these install requirements are not ranges (lower and upper bound): {not_ranges}")

    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    with tempfile.TemporaryDirectory(prefix="kgplm-wheel-") as scratch:
        scratch = Path(scratch)
        _run([sys.executable, "-m", "venv", str(scratch / "venv")], env=environment)
        python = str(scratch / "venv" / "bin" / "python")
        pip = [python, "-m", "pip", "install", "--disable-pip-version-check", "-c", str(constraints)]
        _run([*pip, "torch"], env=environment)
        torch_before = _run([python, "-c", "import torch; print(torch.__version__)"], env=environment).stdout
        installed = _run([*pip, str(wheel.resolve())], env=environment).stdout
        touched = [
            line
            for line in installed.splitlines()
            if re.match(r"\s*(Collecting|Downloading|Attempting uninstall:)\s+torch(?![-\w])", line)
        ]
        if touched or "Requirement already satisfied: torch" not in installed:
            sys.exit("installing the wheel touched torch:\n" + "\n".join(touched or installed.splitlines()[-20:]))
        torch_after = _run([python, "-c", "import torch; print(torch.__version__)"], env=environment).stdout
        if torch_after != torch_before:
            sys.exit(f"torch changed from {torch_before.strip()} to {torch_after.strip()}")
        (scratch / "smoke.py").write_text(SMOKE, encoding="utf-8")
        work = scratch / "work"
        work.mkdir()
        print(_run([python, str(scratch / "smoke.py"), version], cwd=work, env=environment).stdout.strip())
        _run([*pip, "--force-reinstall", "--no-deps", str(sdist.resolve())], env=environment)
        shown = _run([python, "-c", "import kgplm; print(kgplm.__version__)"], cwd=work, env=environment).stdout
        if shown.strip() != version:
            sys.exit(f"the sdist installs version {shown.strip()}, expected {version}")
    print(f"{wheel.name} and {sdist.name}: torch {torch_before.strip()} kept; smoke test passed")


if __name__ == "__main__":
    main()
