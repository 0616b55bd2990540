"""kgplm: knowledge-enhanced pre-trained language models for medicine.

The public names are imported on first use (PEP 562 ``__getattr__``), so ``import kgplm`` and
``kgplm --help`` do not load torch, transformers or pandas. The Hugging Face Auto classes for kgplm
checkpoints are registered when :mod:`kgplm.methods` (or :mod:`kgplm.models`) is imported, which
every kgplm call that builds or loads a model does; code that opens a kgplm checkpoint through
``transformers.AutoModel`` alone should ``import kgplm.methods`` first.
"""

from __future__ import annotations

import importlib

from kgplm.exceptions import KgplmError

__version__ = "0.1.0"

#: public name -> the module that defines it
_LAZY = {
    "train": "kgplm.api", "train_from_config": "kgplm.api", "TrainingResult": "kgplm.api",
    "finetune": "kgplm.api", "evaluate": "kgplm.api", "predict": "kgplm.api", "FineTuningResult": "kgplm.api",
    "KGStore": "kgplm.kg.store",
}
_SUBMODULES = ("methods", "kg", "text", "models", "training", "evaluation", "api", "cli")

__all__ = ["KGStore", "KgplmError", "train", "train_from_config", "TrainingResult", "finetune", "evaluate",
           "predict", "FineTuningResult", "methods", "__version__"]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"kgplm.{name}")
    else:
        raise AttributeError(f"module 'kgplm' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
