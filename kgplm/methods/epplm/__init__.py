"""The medicinal-product PLM (EP-PLM, Liu et al. 2022): ELECTRA RTD with biomedical entity masking + PAP.

The equations and every deviation are in :mod:`kgplm.methods.epplm.modeling`; the product
attribute triples in :mod:`kgplm.methods.epplm.attributes`, their stage in :mod:`kgplm.methods.epplm.stage`; batches and the PAP
step schedule in :mod:`kgplm.methods.epplm.batching`. ``kgplm.train(method_data=...)`` keys:
:data:`~kgplm.methods.epplm.attributes.METHOD_DATA_KEYS`.
"""

from __future__ import annotations

from kgplm.methods.epplm.attributes import (
    DEFAULT_GRAPH_ATTRIBUTES,
    METHOD_DATA_KEYS,
    AttributeGroup,
    ProductAttributes,
    read_attribute_table,
)
from kgplm.methods.epplm.batching import EpplmCollator, is_pap_step
from kgplm.methods.epplm.configuration import EpplmConfig
from kgplm.methods.epplm.stage import product_attributes_stage  # registers the product_attributes stage
from kgplm.methods.epplm.modeling import (
    EpplmForPreTraining,
    attribute_distances,
    product_attribute_objective,
)
from kgplm.methods.epplm.evaluation import (
    drop_leaking_text,
    held_out_triples,
    pap_auc,
    pap_auc_shuffled,
    pap_held_out_pairs,
)
from kgplm.methods.registry import MethodEvaluation, MethodSpec, register
from kgplm.models.electra import ELECTRA_ENCODING
from kgplm.models.electra_batching import build_electra_collator

__all__ = [
    "EpplmConfig",
    "EpplmForPreTraining",
    "EpplmCollator",
    "ProductAttributes",
    "AttributeGroup",
    "read_attribute_table",
    "is_pap_step",
    "attribute_distances",
    "product_attribute_objective",
    "DEFAULT_GRAPH_ATTRIBUTES",
    "METHOD_DATA_KEYS",
    "product_attributes_stage",
    "SPEC",
]


#: Drugs whose (drug, 适应症) pairs the registered ``PAP AUC`` evaluation holds out.
PAP_HELD_OUT_DRUGS = 300


def filter_held_out_text(store, lines: list[str]) -> list[str]:
    """The pre-training text without the lines that name a held-out drug with one of its values (the split of
    ``method_data={"pap_held_out": PAP_HELD_OUT_DRUGS}`` on ``store``'s default attributes)."""
    attributes = ProductAttributes.from_store(store)
    pairs = pap_held_out_pairs(attributes, PAP_HELD_OUT_DRUGS)
    return drop_leaking_text(lines, attributes.holding_out(pairs, held_out_triples(attributes, pairs)))


def build_collator(context) -> EpplmCollator:
    config = context.config
    return build_electra_collator(
        context,
        cls=EpplmCollator,
        attributes=context.artefacts["product_attributes"],
        tokenizer=context.tokenizer,
        probability=config.pap_probability,
        schedule=config.pap_schedule,
        max_values=config.pap_max_values,
        negative_ratio=config.pap_negative_ratio,
        negatives=config.pap_negatives,
        query_length=config.pap_query_length,
        value_length=config.pap_value_length,
    )


SPEC = register(
    MethodSpec(
        name="epplm",
        summary="ELECTRA RTD with biomedical entity masking (words + KG mentions) + product attribute prediction "
        "(γ=4, ρ=5%)",
        paper="Liu et al. (2022), A Domain Knowledge Enhanced Pre-Trained Language Model for Vertical Search: Case Study "
        "on Medicinal Products, COLING",
        config_class=EpplmConfig,
        model_class=EpplmForPreTraining,
        encoding=ELECTRA_ENCODING,
        build_collator=build_collator,
        losses=("mlm", "rtd", "pap"),
        artefacts=frozenset({"product_attributes"}),
        default_masking="word_entity",
        evaluations={
            "PAP AUC": MethodEvaluation(
                run=pap_auc,
                chance=0.5,
                method_data={"pap_held_out": PAP_HELD_OUT_DRUGS},
                filter_text=filter_held_out_text,
                description=f"held-out (drug, 适应症) pairs of {PAP_HELD_OUT_DRUGS} drugs against popularity- and "
                "length-matched negatives; a PAP probe on frozen D (kgplm.methods.epplm.evaluation)",
            ),
            "PAP AUC, drug-shuffled": MethodEvaluation(
                run=pap_auc_shuffled,
                chance=0.5,
                method_data={"pap_held_out": PAP_HELD_OUT_DRUGS},
                filter_text=filter_held_out_text,
                description="the same pairs scored against another held-out drug: must sit at chance",
            ),
        },
    )
)
