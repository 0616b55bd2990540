"""Plain ELECTRA (``method="electra"``): a generator trained by MLM, a discriminator by replaced-token detection.

Clark et al. (2020), "ELECTRA: Pre-training Text Encoders as Discriminators Rather Than
Generators", ICLR. The equations, the generator's size and how G and D share embeddings are in
:mod:`kgplm.models.electra` (the core eHealth and the medicinal-product PLM extend).

It is the fair control of the ELECTRA-family methods, run with the same data, budget, vocabulary
and masking: for the medicinal-product PLM (EP-PLM's "ELECTRA+EM") ``masking="word_entity"`` with
every chosen token replaced by [MASK] (``mask_fraction=1``, ``random_fraction=0``); for eHealth
(its ablation "w/o CSP & MTS") ``masking="whole_word"`` with 80/10/10 replacement and
``corruption_views=2``: every sequence corrupted twice, as eHealth corrupts it for CSP, so that the
control trains on the same RTD/MLM targets per step. Defaults: token masking, ELECTRA's
85% [MASK] / 15% kept, one corruption per sequence.
"""

from __future__ import annotations

from kgplm.methods.registry import MethodSpec, register
from kgplm.models.electra import ELECTRA_ENCODING, ElectraConfig, KgplmForReplacedTokenDetection
from kgplm.models.electra_batching import build_electra_collator

__all__ = ["SPEC"]

SPEC = register(
    MethodSpec(
        name="electra",
        summary="plain ELECTRA: generator MLM + discriminator replaced-token detection (the ELECTRA-family control)",
        paper="Clark et al. (2020), ELECTRA: Pre-training Text Encoders as Discriminators Rather Than Generators, ICLR",
        config_class=ElectraConfig,
        model_class=KgplmForReplacedTokenDetection,
        encoding=ELECTRA_ENCODING,
        build_collator=build_electra_collator,
        losses=("mlm", "rtd"),
        default_masking="bert",
    )
)
