"""kgplm: knowledge-enhanced pre-trained language models for medicine."""

from kgplm import methods  # registers the methods and the Hugging Face Auto classes
from kgplm.api import FineTuningResult, TrainingResult, evaluate, finetune, predict, train, train_from_config
from kgplm.exceptions import KgplmError
from kgplm.kg.store import KGStore

__version__ = "0.1.0"
__all__ = ["KGStore", "KgplmError", "train", "train_from_config", "TrainingResult", "finetune", "evaluate",
           "predict", "FineTuningResult", "methods", "__version__"]
