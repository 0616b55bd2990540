"""``KebiolmConfig``: KeBioLM's own fields on top of :class:`~kgplm.models.KgplmConfig`."""

from __future__ import annotations

from kgplm.exceptions import ConfigurationError
from kgplm.models.configuration import KgplmConfig

__all__ = ["KebiolmConfig", "ENTITY_INITS", "LINKING_SOFTMAXES"]

ENTITY_INITS = ("transe", "random")
LINKING_SOFTMAXES = ("full", "sampled", "in_batch")


class KebiolmConfig(KgplmConfig):
    """KeBioLM's fields (paper names in brackets; see :mod:`kgplm.methods.kebiolm.modeling`).

    * ``text_only_layers`` (l0) and ``fusion_layers`` (l1): the encoder's ``num_hidden_layers`` split
      into the text-only group and the text-entity fusion group (the paper: 8 + 4 of 12). Give
      either or both (they must add up to ``num_hidden_layers``); with neither, l0 = round(2/3 · n).
      ``fusion_layers=0`` is the paper's "l0 = 12, l1 = 0" ablation.
    * ``num_retrieved`` (k = 100): entities retrieved per mention for the entity representation e'_m.
    * ``retrieval_chunk_size``: entities scored at a time by the top-k search and the full linking
      softmax, so memory grows with mentions × chunk, not mentions × all entities.
    * ``entity_init``: ``"transe"`` (the paper) or ``"random"`` (the "+rand" ablation).
    * ``freeze_entity_embeddings``: keep the entity table fixed (the "+frz" ablation).
    * ``linking_softmax``: ``"full"`` (Eq. 10 over every entity, chunked, exact; the default),
      ``"sampled"`` (an approximation: each mention's ``num_retrieved`` retrieved entities and the
      batch's golds exactly, the rest estimated from ``linking_negatives`` uniform draws with the
      log-Q correction; see :mod:`kgplm.methods.kebiolm.retrieval`) or ``"in_batch"`` (the golds of
      the batch only) for very large tables. Both approximations give the table a sparse gradient,
      updated row-wise by the pre-training optimiser.
    * ``max_mentions`` (50): linked mentions per sequence kept at pre-training, the first by position.
    * ``ed_weight``, ``el_weight``: weights of L_ED and L_EL (the paper sums them: 1 and 1).
    * ``entity_linking`` (default ``True``): ``False`` keeps mention detection (L_ED, the silver NER
      of the linker's mentions) and drops everything after it: no mention projection, no entity
      table, no retrieval, no L_EL, no fusion. The model is then an MLM encoder with a detection
      head after its l0 text-only layers ("control + silver NER").
    * ``entity_fusion`` (default ``True``): ``False`` keeps detection and linking (L_ED and L_EL
      train the mention projection and the entity table) but adds nothing to the token states: the
      fusion layer W_e is not built and the l1 layers read the text-only states, so the text
      representation does not depend on the entity table ("linking without fusion"). Needs
      ``entity_linking``: the silver-NER model is ``entity_linking=False, entity_fusion=False``.
    """

    method_fields = (
        "text_only_layers",
        "fusion_layers",
        "num_retrieved",
        "retrieval_chunk_size",
        "entity_init",
        "freeze_entity_embeddings",
        "linking_softmax",
        "linking_negatives",
        "max_mentions",
        "ed_weight",
        "el_weight",
        "entity_linking",
        "entity_fusion",
    )

    def __init__(
        self,
        method: str = "kebiolm",
        text_only_layers: int | None = None,
        fusion_layers: int | None = None,
        num_retrieved: int = 100,
        retrieval_chunk_size: int = 16384,
        entity_init: str = "transe",
        freeze_entity_embeddings: bool = False,
        linking_softmax: str = "full",
        linking_negatives: int = 4096,
        max_mentions: int = 50,
        ed_weight: float = 1.0,
        el_weight: float = 1.0,
        entity_linking: bool = True,
        entity_fusion: bool = True,
        **kwargs,
    ) -> None:
        super().__init__(method=method, **kwargs)
        self.text_only_layers = text_only_layers
        self.fusion_layers = fusion_layers
        self.num_retrieved = num_retrieved
        self.retrieval_chunk_size = retrieval_chunk_size
        self.entity_init = entity_init
        self.freeze_entity_embeddings = freeze_entity_embeddings
        self.linking_softmax = linking_softmax
        self.linking_negatives = linking_negatives
        self.max_mentions = max_mentions
        self.ed_weight = ed_weight
        self.el_weight = el_weight
        self.entity_linking = entity_linking
        self.entity_fusion = entity_fusion

    @property
    def layer_split(self) -> tuple[int, int]:
        """(l0, l1): text-only layers, then fusion layers; they add up to ``num_hidden_layers``."""
        total = self.num_hidden_layers
        if self.text_only_layers is None and self.fusion_layers is None:
            text_only = round(2 * total / 3)
        elif self.text_only_layers is None:
            text_only = total - self.fusion_layers
        else:
            text_only = self.text_only_layers
        return text_only, total - text_only

    def validate_knowledge(self) -> None:
        """Raise :class:`ConfigurationError` when the fields cannot build a model."""
        text_only, fusion = self.layer_split
        if not 0 <= text_only <= self.num_hidden_layers or fusion < 0:
            raise ConfigurationError(
                f"text_only_layers ({self.text_only_layers}) and fusion_layers "
                f"({self.fusion_layers}) must split the {self.num_hidden_layers} encoder layers"
            )
        if self.fusion_layers is not None and text_only + self.fusion_layers != self.num_hidden_layers:
            raise ConfigurationError(
                f"text_only_layers {text_only} + fusion_layers {self.fusion_layers} must equal "
                f"num_hidden_layers {self.num_hidden_layers}"
            )
        if self.num_entities < 1:
            raise ConfigurationError(
                f"method {self.method!r} needs an entity table: num_entities must be ≥ 1, got {self.num_entities}"
            )
        if self.entity_init not in ENTITY_INITS:
            raise ConfigurationError(f"entity_init must be one of {ENTITY_INITS}, got {self.entity_init!r}")
        if self.linking_softmax not in LINKING_SOFTMAXES:
            raise ConfigurationError(
                f"linking_softmax must be one of {LINKING_SOFTMAXES}, got {self.linking_softmax!r}"
            )
        for name in ("entity_linking", "entity_fusion"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.entity_fusion and not self.entity_linking:
            raise ConfigurationError(
                "entity_fusion=True needs entity_linking=True: the fusion adds the linked entities' vectors"
            )
        for name in ("num_retrieved", "retrieval_chunk_size", "linking_negatives", "max_mentions"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
