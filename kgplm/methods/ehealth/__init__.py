"""eHealth (Wang et al. 2021): ELECTRA with multi-token selection and contrastive sequence prediction.

The equations and every deviation are in :mod:`kgplm.methods.ehealth.modeling`; the generator,
discriminator and RTD in :mod:`kgplm.models.electra`; batches (two corruptions per sequence, the
uniforms of the generator's and MTS draws) in :mod:`kgplm.models.electra_batching`.
"""

from __future__ import annotations

from kgplm.methods.ehealth.configuration import EhealthConfig
from kgplm.methods.ehealth.modeling import (
    EhealthForPreTraining,
    contrastive_sequence_objective,
    mts_candidates,
    multi_token_selection_objective,
)
from kgplm.methods.registry import MethodSpec, register
from kgplm.models.electra import ELECTRA_ENCODING
from kgplm.models.electra_batching import build_electra_collator

__all__ = [
    "EhealthConfig",
    "EhealthForPreTraining",
    "mts_candidates",
    "multi_token_selection_objective",
    "contrastive_sequence_objective",
    "SPEC",
]


def build_collator(context):
    """``corruption_views`` corruptions per sequence (2: CSP pairs them when it is on); k MTS uniforms per
    masked token when MTS is on."""
    config = context.config
    return build_electra_collator(
        context,
        views=config.corruption_views,
        contrastive=config.use_csp,
        candidate_draws=config.mts_candidates if config.use_mts else 0,
    )


SPEC = register(
    MethodSpec(
        name="ehealth",
        summary="ELECTRA generator/discriminator; RTD + multi-token selection (k=5) + contrastive sequence prediction "
        "(τ=0.07); whole-word masking",
        paper="Wang et al. (2021), Building Chinese Biomedical Language Models via Multi-Level Text Discrimination "
        "(eHealth), arXiv:2110.07244",
        config_class=EhealthConfig,
        model_class=EhealthForPreTraining,
        encoding=ELECTRA_ENCODING,
        build_collator=build_collator,
        losses=("mlm", "rtd", "mts", "csp"),
        default_masking="whole_word",
    )
)
