"""``EhealthConfig``: eHealth's fields on top of the ELECTRA core's (:class:`~kgplm.models.electra.ElectraConfig`)."""

from __future__ import annotations

from kgplm.exceptions import ConfigurationError
from kgplm.models.electra import ElectraConfig

__all__ = ["EhealthConfig"]


class EhealthConfig(ElectraConfig):
    """eHealth (Wang et al. 2021), Table 7's defaults.

    ``use_mts``, ``use_csp``: the two discriminator tasks eHealth adds to RTD (the ablations turn
    them off). ``mts_candidates``: k, the non-original candidates of multi-token selection (5).
    ``mts_weight`` λ₂ = 20, ``csp_weight`` λ₃ = 1, ``rtd_weight`` λ₁ = 50, ``mlm_weight`` 1 (Eq. 8).
    ``csp_temperature``: τ = 0.07. Chosen tokens become [MASK] 80%, a random token 10%, stay 10%
    (the paper's footnote 2). ``corruption_views`` 2: every sequence is corrupted twice (CSP's
    positive pair); ``no_csp`` keeps both corruptions (RTD, MTS and MLM on each) and drops CSP only.
    """

    method_fields = ElectraConfig.method_fields + (
        "use_mts",
        "use_csp",
        "mts_candidates",
        "mts_weight",
        "csp_weight",
        "csp_temperature",
    )

    def __init__(
        self,
        method: str = "ehealth",
        use_mts: bool = True,
        use_csp: bool = True,
        mts_candidates: int = 5,
        mts_weight: float = 20.0,
        csp_weight: float = 1.0,
        csp_temperature: float = 0.07,
        mask_fraction: float = 0.8,
        random_fraction: float = 0.1,
        corruption_views: int = 2,
        **kwargs,
    ) -> None:
        super().__init__(
            method=method,
            mask_fraction=mask_fraction,
            random_fraction=random_fraction,
            corruption_views=corruption_views,
            **kwargs,
        )
        if use_csp and corruption_views != 2:
            raise ConfigurationError(
                f"contrastive sequence prediction needs corruption_views=2, got {corruption_views}"
            )
        if not isinstance(mts_candidates, int) or mts_candidates < 1:
            raise ConfigurationError(f"mts_candidates must be a positive integer, got {mts_candidates!r}")
        if not csp_temperature > 0:
            raise ConfigurationError(f"csp_temperature must be positive, got {csp_temperature}")
        self.use_mts = use_mts
        self.use_csp = use_csp
        self.mts_candidates = mts_candidates
        self.mts_weight = mts_weight
        self.csp_weight = csp_weight
        self.csp_temperature = csp_temperature
