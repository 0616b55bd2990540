"""``EmbertConfig``: EMBERT's own fields on top of :class:`~kgplm.models.KgplmConfig`."""

from __future__ import annotations

from kgplm.exceptions import ConfigurationError
from kgplm.models.configuration import KgplmConfig

__all__ = ["EmbertConfig", "CECP_NEGATIVES"]

#: How CECP's inconsistent replacements are drawn: the method's own draws, or the positive control's one surface.
CECP_NEGATIVES = ("shipped", "fixed_surface")


class EmbertConfig(KgplmConfig):
    """EMBERT's fields (paper names in brackets; see :mod:`kgplm.methods.embert.modeling`).

    * ``use_cecp``, ``use_es``, ``use_bem``: the three tasks (ablation switches; a switched-off task
      has no head and no targets).
    * ``cecp_weight`` (λ1 = 2), ``es_weight`` (λ2 = 2), ``bem_weight`` (λ3 = 0.5).
    * ``cecp_rate``: the probability that a mention with a synonym is replaced (at least one per
      sequence that has one); half of the replacements use a synonym, half another entity.
      ``cecp_max_tokens``: the longest replacement, in tokens. ``cecp_max_entity_share``: the
      most that any one entity's corpus frequency may weigh in choosing the replaced mentions and
      the replacing entities (water-filling cap; 1 turns it off).
    * ``cecp_negatives``: how inconsistent replacements are drawn. ``"shipped"`` (default, the method): a
      non-display name of another entity of the mention's type and script, by capped corpus frequency
      (:meth:`~kgplm.methods.embert.batching.EntityLexicon.other_entity`). ``"fixed_surface"``: every
      inconsistent replacement is one and the same name
      (:meth:`~kgplm.methods.embert.batching.EntityLexicon.fixed_inconsistent`), so the surface alone gives
      the label away — a diagnostic *positive control* that CECP's head, positions and labels can learn
      (``experiments/embert_cecp.py``), not the paper's method.
    * ``bem_rate``: the probability that a long mention with an atomic/adjective split is a
      bidirectional-masking target (at least one per sequence that has one).
      ``bem_position_dim`` (200) and ``bem_max_positions``: the relative position embedding p.
    * ``use_sop``: BERT's existing loss L_ex includes a sentence-level objective; here SOP, off by
      default as for the MLM baseline.
    """

    method_fields = (
        "use_cecp",
        "use_es",
        "use_bem",
        "cecp_weight",
        "es_weight",
        "bem_weight",
        "cecp_rate",
        "cecp_max_tokens",
        "cecp_max_entity_share",
        "cecp_negatives",
        "bem_rate",
        "bem_position_dim",
        "bem_max_positions",
        "use_sop",
    )

    def __init__(
        self,
        method: str = "embert",
        use_cecp: bool = True,
        use_es: bool = True,
        use_bem: bool = True,
        cecp_weight: float = 2.0,
        es_weight: float = 2.0,
        bem_weight: float = 0.5,
        cecp_rate: float = 0.15,
        cecp_max_tokens: int = 16,
        cecp_max_entity_share: float = 0.05,
        cecp_negatives: str = "shipped",
        bem_rate: float = 0.15,
        bem_position_dim: int = 200,
        bem_max_positions: int = 64,
        use_sop: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(method=method, **kwargs)
        self.use_cecp = use_cecp
        self.use_es = use_es
        self.use_bem = use_bem
        self.cecp_weight = cecp_weight
        self.es_weight = es_weight
        self.bem_weight = bem_weight
        self.cecp_rate = cecp_rate
        self.cecp_max_tokens = cecp_max_tokens
        self.cecp_max_entity_share = cecp_max_entity_share
        self.cecp_negatives = cecp_negatives
        self.bem_rate = bem_rate
        self.bem_position_dim = bem_position_dim
        self.bem_max_positions = bem_max_positions
        self.use_sop = use_sop

    def validate_tasks(self) -> None:
        """Raise :class:`ConfigurationError` when a field cannot build the model or its batches."""
        for name in ("cecp_rate", "bem_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigurationError(f"{name} must be in [0, 1], got {value}")
        if not 0.0 < self.cecp_max_entity_share <= 1.0:
            raise ConfigurationError(f"cecp_max_entity_share must be in (0, 1], got {self.cecp_max_entity_share}")
        if self.cecp_negatives not in CECP_NEGATIVES:
            raise ConfigurationError(f"cecp_negatives must be one of {CECP_NEGATIVES}, got {self.cecp_negatives!r}")
        for name in ("cecp_max_tokens", "bem_position_dim", "bem_max_positions"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
