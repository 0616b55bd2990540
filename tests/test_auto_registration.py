"""``import kgplm`` alone is enough for the Hugging Face Auto classes to open a kgplm checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CHECKPOINT = Path(__file__).resolve().parent / "data" / "legacy_v1" / "smedbert_ner"

OPEN = """
from transformers import AutoConfig, AutoModel, AutoModelForTokenClassification
path = {path!r}
print(json.dumps([type(AutoConfig.from_pretrained(path)).__name__, type(AutoModel.from_pretrained(path)).__name__,
                  type(AutoModelForTokenClassification.from_pretrained(path)).__name__]))
"""


def _run(prelude: str) -> list[str]:
    script = "import json, logging\n" + prelude + OPEN.format(path=str(CHECKPOINT))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "prelude",
    [
        "import kgplm\n",  # transformers imported after kgplm, by the user
        "import transformers\nimport kgplm\n",  # transformers already imported
        "import kgplm\nfrom kgplm.text import build_vocab\n",  # transformers imported by a kgplm module
    ],
    ids=["kgplm-first", "transformers-first", "through-kgplm-text"],
)
def test_import_kgplm_alone_registers_the_auto_classes(prelude: str) -> None:
    assert _run(prelude) == ["SmedbertConfig", "SmedbertModel", "SmedbertForTokenClassification"]


def test_without_kgplm_transformers_does_not_know_the_model_type() -> None:
    """The check above can fail: the same script without ``import kgplm`` does."""
    script = "import json\n" + OPEN.format(path=str(CHECKPOINT))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode != 0 and "kgplm" in done.stderr


def test_the_version_comes_from_the_package_metadata() -> None:
    import importlib.metadata

    import kgplm

    assert kgplm.__version__ == importlib.metadata.version("kgplm")
