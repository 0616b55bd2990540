"""``KgplmConfig``: one Hugging Face configuration for the text encoder and its knowledge modules.

It extends :class:`transformers.BertConfig`, so a BERT checkpoint's ``config.json`` is a valid
starting point, with the fields the knowledge-enhanced methods read. A config records
``method`` (``"mlm"``, ``"smedbert"`` …) so that :func:`kgplm.models.load_pretrained` picks the
right class.
"""

from __future__ import annotations

from transformers import BertConfig

from kgplm.exceptions import ConfigurationError

__all__ = ["KgplmConfig", "TINY_TEXT_ENCODER", "CPU_TEXT_ENCODER"]

#: What tests use (hidden 32, 2 layers).
TINY_TEXT_ENCODER = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
                     "max_position_embeddings": 160}
#: The default text encoder when ``kgplm.train`` is given no ``text_model``: small enough for a CPU.
CPU_TEXT_ENCODER = {"hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 512,
                    "max_position_embeddings": 512}


class KgplmConfig(BertConfig):
    """BERT's fields plus the knowledge modules'.

    Knowledge fields (SMedBERT names in brackets; see :mod:`kgplm.models.smedbert`):

    * ``num_entities``, ``num_relations``, ``num_entity_types``: the graph's sizes (types count one
      extra "untyped" bucket at index ``num_entity_types``).
    * ``entity_dim`` (d2), ``relation_dim``: KG embedding sizes (TransR's k and d).
    * ``knowledge_layer``: the hybrid attention runs after this many encoder layers; ``None`` means
      ``num_hidden_layers - 2`` (the paper: after the 10th of 12).
    * ``use_type_attention``, ``use_hybrid_attention``, ``use_knowledge_losses``: ablation switches.
    * ``relational_encoder``: ``None`` or ``"rgcn"`` (refine ent(e) over the batch's PEPR subgraph).
    * ``freeze_kg_embeddings``: keep the TransR tables fixed (the paper) or fine-tune them.
    * ``mnem_weight`` (λ1 = 2), ``mmem_weight`` (λ2 = 4), ``mnem_scale`` (λ = 10),
      ``mnem_num_negatives``, ``mmem_target`` (``"frozen_initial"`` or ``"shared"``), ``use_sop``.

    Fine-tuning fields (:class:`kgplm.models.KgplmForFineTuning`): ``task_kind`` (a
    :mod:`kgplm.evaluation.tasks` kind), ``task_name``, ``label_names`` (labels, or tags for NER, in
    class-index order) and ``tagging`` (``"bio"`` or ``"bioes"``).
    """

    model_type = "kgplm"

    def __init__(
        self,
        method: str = "mlm",
        num_entities: int = 0,
        num_relations: int = 0,
        num_entity_types: int = 0,
        entity_dim: int = 100,
        relation_dim: int | None = None,
        knowledge_layer: int | None = None,
        use_type_attention: bool = True,
        use_hybrid_attention: bool = True,
        use_knowledge_losses: bool = True,
        relational_encoder: str | None = None,
        freeze_kg_embeddings: bool = True,
        use_sop: bool = True,
        mnem_weight: float = 2.0,
        mmem_weight: float = 4.0,
        mnem_scale: float = 10.0,
        mnem_num_negatives: int = 10,
        mmem_target: str = "frozen_initial",
        task_kind: str | None = None,
        task_name: str | None = None,
        label_names: list[str] | None = None,
        tagging: str = "bio",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.method = method
        self.num_entities = num_entities
        self.num_relations = num_relations
        self.num_entity_types = num_entity_types
        self.entity_dim = entity_dim
        self.relation_dim = entity_dim if relation_dim is None else relation_dim
        self.knowledge_layer = knowledge_layer
        self.use_type_attention = use_type_attention
        self.use_hybrid_attention = use_hybrid_attention
        self.use_knowledge_losses = use_knowledge_losses
        self.relational_encoder = relational_encoder
        self.freeze_kg_embeddings = freeze_kg_embeddings
        self.use_sop = use_sop
        self.mnem_weight = mnem_weight
        self.mmem_weight = mmem_weight
        self.mnem_scale = mnem_scale
        self.mnem_num_negatives = mnem_num_negatives
        self.mmem_target = mmem_target
        self.task_kind = task_kind
        self.task_name = task_name
        self.label_names = list(label_names) if label_names is not None else None
        self.tagging = tagging

    @property
    def fusion_layer(self) -> int:
        """The number of encoder layers that run before the knowledge module."""
        if self.knowledge_layer is None:
            return max(self.num_hidden_layers - 2, 0)
        return self.knowledge_layer

    def validate_knowledge(self) -> None:
        """Raise :class:`ConfigurationError` when the knowledge fields cannot build a model."""
        if not 0 <= self.fusion_layer <= self.num_hidden_layers:
            raise ConfigurationError(f"knowledge_layer must be in [0, {self.num_hidden_layers}], "
                                     f"got {self.knowledge_layer}")
        if self.num_entities < 1 or self.num_relations < 1:
            raise ConfigurationError(f"a knowledge-enhanced model needs num_entities and num_relations ≥ 1, got "
                                     f"{self.num_entities} and {self.num_relations}")
        if self.relational_encoder not in (None, "rgcn"):
            raise ConfigurationError(f"relational_encoder must be None or 'rgcn', got {self.relational_encoder!r}")
        if self.mmem_target not in ("frozen_initial", "shared"):
            raise ConfigurationError(f"mmem_target must be 'frozen_initial' or 'shared', got {self.mmem_target!r}")
        if self.mnem_num_negatives < 1:
            raise ConfigurationError(f"mnem_num_negatives must be ≥ 1, got {self.mnem_num_negatives}")
