"""Models: ``KgplmConfig``, shared knowledge modules and one file per pre-training method."""

from __future__ import annotations

from kgplm.models.configuration import CPU_TEXT_ENCODER, TINY_TEXT_ENCODER, KgplmConfig
from kgplm.models.finetuning import KgplmForFineTuning
from kgplm.models.mlm import KgplmForMaskedLM
from kgplm.models.smedbert import SmedbertForPreTraining

__all__ = ["KgplmConfig", "KgplmForMaskedLM", "KgplmForFineTuning", "SmedbertForPreTraining", "MODEL_CLASSES", "load_pretrained",
           "TINY_TEXT_ENCODER", "CPU_TEXT_ENCODER"]

#: Pre-training method → model class.
MODEL_CLASSES = {"mlm": KgplmForMaskedLM, "smedbert": SmedbertForPreTraining}


def load_pretrained(path, **kwargs):
    """Load a model saved by ``save_pretrained``: a fine-tuned model when the config names a task
    kind, else the pre-training class of ``config.method``."""
    from kgplm.exceptions import ConfigurationError

    config = KgplmConfig.from_pretrained(path)
    if config.task_kind is not None:
        return KgplmForFineTuning.from_pretrained(path, config=config, **kwargs)
    if config.method not in MODEL_CLASSES:
        raise ConfigurationError(f"{path}: config.method {config.method!r} is not one of {sorted(MODEL_CLASSES)}")
    return MODEL_CLASSES[config.method].from_pretrained(path, config=config, **kwargs)
