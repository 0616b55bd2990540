"""``EpplmConfig``: the medicinal-product PLM's fields on top of the ELECTRA core's."""

from __future__ import annotations

from kgplm.exceptions import ConfigurationError
from kgplm.models.electra import ElectraConfig

__all__ = ["EpplmConfig", "PAP_SCHEDULES", "PAP_NEGATIVES"]

#: ``with_rtd``: a PAP step adds its PAP batch to the step's RTD batch (kgplm's default, a deviation);
#: ``alternate``: the paper's Algorithm 1, a PAP step trains PAP only.
PAP_SCHEDULES = ("with_rtd", "alternate")
#: How PAP negatives are drawn: ``frequency`` (kgplm's default, a deviation) or ``uniform`` (the paper's and code's).
PAP_NEGATIVES = ("frequency", "uniform")


class EpplmConfig(ElectraConfig):
    """EP-PLM (Liu et al. 2022): RTD with biomedical entity masking + product attribute prediction.

    ``rtd_weight``: λ of Eq. 1 (50). Chosen units are replaced by as many [MASK] tokens
    (``mask_fraction=1``, ``random_fraction=0``: the paper's text, §3.1; the authors' code, as
    ELECTRA's, puts [MASK] on 85% of them and leaves 15% unchanged — kgplm follows the paper).
    ``pap_probability``: ρ, the share of steps that are PAP steps (5%; exactly ⌊nρ⌋ or ⌈nρ⌉ of any
    first n steps). ``pap_schedule``: how a PAP step trains (:data:`PAP_SCHEDULES`):
    ``"alternate"`` is the paper's Algorithm 1 (a PAP step trains L_PAP alone, so PAP is the whole
    of that step's update); ``"with_rtd"`` (the default, a deviation) adds L_PAP to that step's RTD
    loss, where it is about half of the step's gradient direction (‖∇L_PAP‖ / ‖∇L_RTD‖ ≈ 0.9–1.0,
    measured in a review); see :mod:`kgplm.methods.epplm.modeling`.
    ``pap_negatives``: how negatives are drawn (:data:`PAP_NEGATIVES`, see
    :mod:`kgplm.methods.epplm.batching`): ``"frequency"`` (the default, a deviation) matches the
    positives' popularity so that a title-agnostic scorer cannot win; ``"uniform"`` is the paper's
    and the authors' code's.
    ``pap_margin``: γ (4). ``pap_weight``: the weight of L_PAP (1, Eq. 4). ``pap_negative_ratio``:
    negatives per positive value (2: k = 2 × positives). ``pap_max_values``: positives used per
    (title, attribute) at a step, a random subset when it has more (20, the authors' code).
    ``pap_query_length``, ``pap_value_length``: token limits of t ⊕ n and of a value.
    """

    method_fields = ElectraConfig.method_fields + (
        "pap_probability",
        "pap_schedule",
        "pap_margin",
        "pap_weight",
        "pap_negative_ratio",
        "pap_max_values",
        "pap_query_length",
        "pap_value_length",
        "pap_negatives",
    )

    def __init__(
        self,
        method: str = "epplm",
        pap_probability: float = 0.05,
        pap_schedule: str = "with_rtd",
        pap_margin: float = 4.0,
        pap_weight: float = 1.0,
        pap_negative_ratio: int = 2,
        pap_max_values: int = 20,
        pap_query_length: int = 64,
        pap_value_length: int = 20,
        pap_negatives: str = "frequency",
        mask_fraction: float = 1.0,
        random_fraction: float = 0.0,
        **kwargs,
    ) -> None:
        super().__init__(method=method, mask_fraction=mask_fraction, random_fraction=random_fraction, **kwargs)
        if not 0.0 <= pap_probability <= 1.0:
            raise ConfigurationError(f"pap_probability must be in [0, 1], got {pap_probability}")
        if pap_schedule not in PAP_SCHEDULES:
            raise ConfigurationError(f"pap_schedule must be one of {PAP_SCHEDULES}, got {pap_schedule!r}")
        if pap_negatives not in PAP_NEGATIVES:
            raise ConfigurationError(f"pap_negatives must be one of {PAP_NEGATIVES}, got {pap_negatives!r}")
        for name, value in (
            ("pap_negative_ratio", pap_negative_ratio),
            ("pap_max_values", pap_max_values),
            ("pap_query_length", pap_query_length),
            ("pap_value_length", pap_value_length),
        ):
            if not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
        self.pap_probability = pap_probability
        self.pap_schedule = pap_schedule
        self.pap_margin = pap_margin
        self.pap_weight = pap_weight
        self.pap_negative_ratio = pap_negative_ratio
        self.pap_max_values = pap_max_values
        self.pap_query_length = pap_query_length
        self.pap_value_length = pap_value_length
        self.pap_negatives = pap_negatives
