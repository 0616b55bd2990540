"""kgplm: knowledge-enhanced pre-trained language models for medicine."""

from kgplm.api import FineTuningResult, TrainingResult, evaluate, finetune, train, train_from_config
from kgplm.exceptions import KgplmError
from kgplm.kg.store import KGStore

__version__ = "0.1.0"
__all__ = ["KGStore", "KgplmError", "train", "train_from_config", "TrainingResult", "finetune", "evaluate",
           "FineTuningResult", "methods", "__version__"]


def __getattr__(name: str):
    # kgplm.methods imports torch and transformers: load it on first use, not on `import kgplm`
    if name == "methods":
        import importlib

        return importlib.import_module("kgplm.methods")
    raise AttributeError(f"module 'kgplm' has no attribute {name!r}")
