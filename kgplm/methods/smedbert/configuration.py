"""``SmedbertConfig``: SMedBERT's own fields on top of :class:`~kgplm.models.KgplmConfig`."""

from __future__ import annotations

from kgplm.exceptions import ConfigurationError
from kgplm.models.configuration import KgplmConfig

__all__ = ["SmedbertConfig"]


class SmedbertConfig(KgplmConfig):
    """SMedBERT's fields (paper names in brackets; see :mod:`kgplm.methods.smedbert.modeling`).

    * ``knowledge_layer``: the hybrid attention runs after this many encoder layers; ``None`` means
      ``num_hidden_layers - 2`` (the paper: after the 10th of 12).
    * ``use_type_attention``, ``use_hybrid_attention``, ``use_knowledge_losses``: ablation switches.
    * ``relational_encoder``: ``None`` or ``"rgcn"`` (refine ent(e) over each mention's neighbour set).
    * ``freeze_kg_embeddings``: keep the TransR tables fixed (the paper) or fine-tune them.
    * ``mnem_weight`` (λ1 = 2), ``mmem_weight`` (λ2 = 4), ``mnem_scale`` (λ = 10),
      ``mnem_num_negatives``, ``mmem_target`` (``"frozen_initial"`` or ``"shared"``), ``use_sop``.
    * ``neighbor_candidates``: how the PEPR table was built (``"one_hop"`` or ``"any"``); with
      ``"any"`` neighbours without a direct link use a learned "related" relation. ``kgplm.train``
      takes it from the table.
    """

    method_fields = (
        "knowledge_layer",
        "use_type_attention",
        "use_hybrid_attention",
        "use_knowledge_losses",
        "relational_encoder",
        "freeze_kg_embeddings",
        "use_sop",
        "mnem_weight",
        "mmem_weight",
        "mnem_scale",
        "mnem_num_negatives",
        "mmem_target",
    )

    def __init__(
        self,
        method: str = "smedbert",
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
        neighbor_candidates: str = "one_hop",
        **kwargs,
    ) -> None:
        super().__init__(method=method, **kwargs)
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
        self.neighbor_candidates = neighbor_candidates

    @classmethod
    def upgrade_legacy(cls, config_dict):
        # version 1 always learned the "related" relation
        return dict(super().upgrade_legacy(config_dict), neighbor_candidates="any")

    @property
    def fusion_layer(self) -> int:
        """The number of encoder layers that run before the knowledge module."""
        if self.knowledge_layer is None:
            return max(self.num_hidden_layers - 2, 0)
        return self.knowledge_layer

    def validate_knowledge(self) -> None:
        """Raise :class:`ConfigurationError` when the knowledge fields cannot build a model."""
        if not 0 <= self.fusion_layer <= self.num_hidden_layers:
            raise ConfigurationError(
                f"knowledge_layer must be in [0, {self.num_hidden_layers}], got {self.knowledge_layer}"
            )
        self.require_graph()
        if self.relational_encoder not in (None, "rgcn"):
            raise ConfigurationError(f"relational_encoder must be None or 'rgcn', got {self.relational_encoder!r}")
        if self.mmem_target not in ("frozen_initial", "shared"):
            raise ConfigurationError(f"mmem_target must be 'frozen_initial' or 'shared', got {self.mmem_target!r}")
        if self.neighbor_candidates not in ("one_hop", "any"):
            raise ConfigurationError(
                f"neighbor_candidates must be 'one_hop' or 'any', got {self.neighbor_candidates!r}"
            )
        if self.mnem_num_negatives < 1:
            raise ConfigurationError(f"mnem_num_negatives must be ≥ 1, got {self.mnem_num_negatives}")
