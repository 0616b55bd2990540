"""``KgplmConfig``: the fields every kgplm model shares; each method's own fields live in its subclass.

It extends :class:`transformers.BertConfig`, so a BERT checkpoint's ``config.json`` is a valid
starting point. A config records ``method`` (a name from :func:`kgplm.methods.available`); loading a saved config
through the base class (``KgplmConfig.from_pretrained`` / ``from_dict``, which the Auto classes
and :func:`kgplm.models.load_pretrained` use) returns the config class the method registered
(:mod:`kgplm.methods`), so one ``model_type`` (``"kgplm"``) covers every method.

Shared fields:

* ``method``: the pre-training method (a name from :func:`kgplm.methods.available`).
* ``num_entities``, ``num_relations``, ``num_entity_types``: the graph's sizes (types count one
  extra "untyped" bucket at index ``num_entity_types``); 0 for methods that use no graph tables.
* ``entity_dim``, ``relation_dim``: KG embedding sizes (TransE/TransR's k and d).
* Fine-tuning fields (:class:`kgplm.models.KgplmForFineTuning`): ``task_kind`` (a
  :mod:`kgplm.evaluation.tasks` kind), ``task_name``, ``label_names`` (labels, or tags for NER, in
  class-index order), ``tagging`` (``"bio"`` or ``"bioes"``), and the attribution inputs
  ``mention_span_indicator`` and ``mention_gazetteer`` (``kgplm.finetune(mention_spans=...)``).
* ``config_version``: 2 since the method registry. Configs written before it (version 1) held
  every method's fields in one flat class; they load unchanged, with one conversion: a version-1
  ``mlm`` model had no SOP head whatever its ``use_sop`` said, so ``use_sop`` becomes False.
"""

from __future__ import annotations

from typing import Any

from transformers import BertConfig

from kgplm.exceptions import ConfigurationError

__all__ = ["KgplmConfig", "TINY_TEXT_ENCODER", "CPU_TEXT_ENCODER", "CONFIG_VERSION"]

#: What tests use (hidden 32, 2 layers).
TINY_TEXT_ENCODER = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 160,
}
#: The default text encoder when ``kgplm.train`` is given no ``text_model``: small enough for a CPU.
CPU_TEXT_ENCODER = {
    "hidden_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "intermediate_size": 512,
    "max_position_embeddings": 512,
}
CONFIG_VERSION = 2


class KgplmConfig(BertConfig):
    """BERT's fields plus the fields every kgplm method shares (see the module docstring)."""

    model_type = "kgplm"
    #: The fields a method subclass adds (its ``model_options``); the base has none.
    method_fields: tuple[str, ...] = ()

    def __init__(
        self,
        method: str = "mlm",
        num_entities: int = 0,
        num_relations: int = 0,
        num_entity_types: int = 0,
        entity_dim: int = 100,
        relation_dim: int | None = None,
        task_kind: str | None = None,
        task_name: str | None = None,
        label_names: list[str] | None = None,
        tagging: str = "bio",
        mention_span_indicator: bool = False,
        mention_gazetteer: dict | None = None,
        config_version: int = CONFIG_VERSION,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.method = method
        self.num_entities = num_entities
        self.num_relations = num_relations
        self.num_entity_types = num_entity_types
        self.entity_dim = entity_dim
        self.relation_dim = entity_dim if relation_dim is None else relation_dim
        self.task_kind = task_kind
        self.task_name = task_name
        self.label_names = list(label_names) if label_names is not None else None
        self.tagging = tagging
        #: fine-tuning: a learned "inside a linked mention" embedding added to the token embeddings
        #: (``kgplm.finetune(mention_spans=True)``; :class:`~kgplm.models.finetuning.MentionSpanIndicator`)
        self.mention_span_indicator = mention_span_indicator
        #: fine-tuning: the typed gazetteer's table sizes, ``{"num_entities", "num_types", "kg_dim"}``, or ``None``
        #: (``kgplm.finetune(mention_spans="typed")``; :class:`~kgplm.models.finetuning.TypedMentionGazetteer`)
        self.mention_gazetteer = dict(mention_gazetteer) if mention_gazetteer else None
        self.config_version = config_version
        if self.label_names:
            self.id2label = dict(enumerate(self.label_names))
            self.label2id = {name: index for index, name in enumerate(self.label_names)}

    def set_task(self, kind: str, name: str | None, label_names: list[str] | None, tagging: str = "bio") -> None:
        """Make this a fine-tuning config: the task kind, its name and its labels in class-index order
        (tags for NER; ``id2label``/``label2id`` hold the same names, as Hugging Face tools expect)."""
        self.task_kind, self.task_name, self.tagging = kind, name, tagging
        self.label_names = list(label_names) if label_names is not None else None
        self.num_labels = max(len(self.label_names or ()), 1)
        if self.label_names:
            self.id2label = dict(enumerate(self.label_names))
            self.label2id = {label: index for index, label in enumerate(self.label_names)}

    # -- dispatch to the method's config class ----------------------------------------------------
    @classmethod
    def from_dict(cls, config_dict: dict[str, Any], **kwargs):
        """The method's config class when called on the base (``config_dict["method"]`` decides)."""
        if cls is KgplmConfig and "method" in config_dict:
            from kgplm.registry import get

            target = get(config_dict["method"]).config_class
            if target is not KgplmConfig:
                return target.from_dict(config_dict, **kwargs)
        config_dict = dict(config_dict)
        if config_dict.get("config_version", 1) < CONFIG_VERSION:
            config_dict = cls.upgrade_legacy(config_dict)
        return super().from_dict(config_dict, **kwargs)

    @classmethod
    def upgrade_legacy(cls, config_dict: dict[str, Any]) -> dict[str, Any]:
        """Convert a version-1 (flat, pre-registry) config dict; subclasses add their own rules."""
        return dict(config_dict, config_version=CONFIG_VERSION)

    @classmethod
    def option_names(cls) -> list[str]:
        """The fields ``kgplm.train(model_options=...)`` may set for this method."""
        return list(cls.method_fields)

    def require_graph(self) -> None:
        """Raise :class:`ConfigurationError` when the graph sizes cannot build entity tables."""
        if self.num_entities < 1 or self.num_relations < 1:
            raise ConfigurationError(
                f"method {self.method!r} needs num_entities and num_relations ≥ 1, got "
                f"{self.num_entities} and {self.num_relations}"
            )
