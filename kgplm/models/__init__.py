"""Building blocks several methods share: the config base, encodings, knowledge modules, objectives, heads.

Each method's own config, model and batches live in :mod:`kgplm.methods`; :func:`load_pretrained`
picks the class through the method registry.
"""

from __future__ import annotations

from kgplm.models.auto import KgplmForSequenceClassification, KgplmForTokenClassification, KgplmModel
from kgplm.models.configuration import CPU_TEXT_ENCODER, TINY_TEXT_ENCODER, KgplmConfig
from kgplm.models.encoding import EncoderOutput, Encoding
from kgplm.models.finetuning import KgplmForFineTuning

__all__ = [
    "KgplmConfig",
    "KgplmModel",
    "KgplmForFineTuning",
    "KgplmForTokenClassification",
    "KgplmForSequenceClassification",
    "Encoding",
    "EncoderOutput",
    "load_pretrained",
    "TINY_TEXT_ENCODER",
    "CPU_TEXT_ENCODER",
]


def load_pretrained(path, **kwargs):
    """Load a model saved by ``save_pretrained``: a fine-tuned model when the config names a task
    kind, else the pre-training class that ``config.method`` registered."""
    from kgplm.registry import get

    config = KgplmConfig.from_pretrained(path)
    if config.task_kind is not None:
        return KgplmForFineTuning.from_pretrained(path, config=config, **kwargs)
    return get(config.method).model_class.from_pretrained(path, config=config, **kwargs)
