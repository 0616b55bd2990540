"""Hugging Face Auto classes for kgplm models: ``AutoConfig`` / ``AutoModel`` / task Auto classes open kgplm directories.

After ``import kgplm`` (or ``import kgplm.models``):

* ``AutoConfig.from_pretrained(dir)`` returns the method's config class (model type ``"kgplm"``,
  dispatched on the config's ``method``);
* ``AutoModel.from_pretrained(dir)`` returns the encoder alone (:class:`KgplmModel`: the method's
  encoding and BERT's pooler, no head) — of a pre-trained or a fine-tuned kgplm model;
* ``AutoModelForTokenClassification`` and ``AutoModelForSequenceClassification`` return
  :class:`~kgplm.models.KgplmForFineTuning` with an NER or a classification head (a fine-tuned
  model keeps its own head and label names; a pre-trained one gets a new head sized by
  ``num_labels`` / ``id2label``), so ``transformers.Trainer`` can fine-tune a kgplm model.

Transformers maps a config *class* to a model class and checks that the model class declares that
config class, so every registered method gets small subclasses (``SmedbertModel``,
``SmedbertForTokenClassification`` …) that differ from the generic classes only in
``config_class``; :func:`register_auto_classes` makes them when a method is registered.
"""

from __future__ import annotations

import torch
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)
from transformers.modeling_outputs import BaseModelOutputWithPooling

from kgplm.models.configuration import KgplmConfig
from kgplm.models.finetuning import KgplmForFineTuning
from kgplm.models.modules import KgplmPreTrainedModel

__all__ = ["KgplmModel", "KgplmForTokenClassification", "KgplmForSequenceClassification", "register_auto_classes"]


class KgplmModel(KgplmPreTrainedModel):
    """The encoder of ``config.method`` and BERT's pooler, without a head (what ``AutoModel`` returns)."""

    def __init__(self, config: KgplmConfig) -> None:
        from kgplm.registry import get

        super().__init__(config)
        self.encoding = get(config.method).encoding  # a parameter-free strategy, not a module
        self.encoding.build(self, config, pooler=True)
        self.post_init()

    def get_output_embeddings(self):
        return None

    def get_input_embeddings(self):
        return self.encoding.word_embeddings(self)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        **encoder_inputs,
    ) -> BaseModelOutputWithPooling:
        hidden = self.encoding.encode(
            self, input_ids, attention_mask, token_type_ids, **encoder_inputs
        ).last_hidden_state  # (batch, length, d1)
        return BaseModelOutputWithPooling(last_hidden_state=hidden, pooler_output=self.encoding.pool(self, hidden))


def _with_default_task(config: KgplmConfig, kind: str) -> KgplmConfig:
    """A pre-trained config opened by a task Auto class: give it the task kind and HF's label names."""
    if config.task_kind is None:
        labels = [config.id2label[index] for index in range(config.num_labels)]
        config.set_task(kind, None, labels, config.tagging)
    return config


class KgplmForTokenClassification(KgplmForFineTuning):
    """``KgplmForFineTuning`` that defaults to an NER head (``AutoModelForTokenClassification``)."""

    def __init__(self, config: KgplmConfig) -> None:
        super().__init__(_with_default_task(config, "ner"))


class KgplmForSequenceClassification(KgplmForFineTuning):
    """``KgplmForFineTuning`` that defaults to a classification head (``AutoModelForSequenceClassification``)."""

    def __init__(self, config: KgplmConfig) -> None:
        super().__init__(_with_default_task(config, "classification"))


_AUTO_CLASSES = (
    (AutoModel, KgplmModel, "Model"),
    (AutoModelForTokenClassification, KgplmForTokenClassification, "ForTokenClassification"),
    (AutoModelForSequenceClassification, KgplmForSequenceClassification, "ForSequenceClassification"),
)


def register_auto_classes(config_class: type[KgplmConfig]) -> None:
    """Open models of ``config_class`` through the Auto classes (called when a method registers)."""
    prefix = config_class.__name__.removesuffix("Config") or "Kgplm"
    for auto_class, base, suffix in _AUTO_CLASSES:
        model_class = (
            base
            if config_class is KgplmConfig
            else type(
                f"{prefix}{suffix}",
                (base,),
                {
                    "config_class": config_class,
                    "__module__": __name__,
                    "__doc__": f"{base.__name__} for {config_class.__name__}.",
                },
            )
        )
        auto_class.register(config_class, model_class, exist_ok=True)


AutoConfig.register(KgplmConfig.model_type, KgplmConfig, exist_ok=True)
