"""Models: ``KgplmConfig``, shared knowledge modules and one file per pre-training method."""

from __future__ import annotations

from kgplm.models.configuration import CPU_TEXT_ENCODER, TINY_TEXT_ENCODER, KgplmConfig
from kgplm.models.mlm import KgplmForMaskedLM
from kgplm.models.smedbert import SmedbertForPreTraining

__all__ = ["KgplmConfig", "KgplmForMaskedLM", "SmedbertForPreTraining", "MODEL_CLASSES", "load_pretrained",
           "TINY_TEXT_ENCODER", "CPU_TEXT_ENCODER"]

#: Pre-training method → model class.
MODEL_CLASSES = {"mlm": KgplmForMaskedLM, "smedbert": SmedbertForPreTraining}


def load_pretrained(path, **kwargs):
    """Load a model saved by ``save_pretrained``; the class comes from ``config.method``."""
    from kgplm.exceptions import ConfigurationError

    config = KgplmConfig.from_pretrained(path)
    if config.method not in MODEL_CLASSES:
        raise ConfigurationError(f"{path}: config.method {config.method!r} is not one of {sorted(MODEL_CLASSES)}")
    return MODEL_CLASSES[config.method].from_pretrained(path, config=config, **kwargs)
