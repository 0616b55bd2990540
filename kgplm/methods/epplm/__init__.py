"""The medicinal-product PLM (EP-PLM, Liu et al. 2022): ELECTRA RTD with biomedical entity masking + PAP.

The equations and every deviation are in :mod:`kgplm.methods.epplm.modeling`; the product
attribute triples and their stage in :mod:`kgplm.methods.epplm.attributes`; batches and the PAP
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
from kgplm.methods.epplm.modeling import (
    EpplmForPreTraining,
    attribute_distances,
    product_attribute_objective,
)
from kgplm.methods import endpoints
from kgplm.methods.registry import Control, MethodSpec, register
from kgplm.models.electra import ELECTRA_ENCODING
from kgplm.models.electra_batching import build_electra_collator

__all__ = ["EpplmConfig", "EpplmForPreTraining", "EpplmCollator", "ProductAttributes", "AttributeGroup",
           "read_attribute_table", "is_pap_step", "attribute_distances", "product_attribute_objective",
           "DEFAULT_GRAPH_ATTRIBUTES", "METHOD_DATA_KEYS", "SPEC"]


def build_collator(context) -> EpplmCollator:
    config = context.config
    return build_electra_collator(context, cls=EpplmCollator, attributes=context.artefacts["product_attributes"],
                                  tokenizer=context.tokenizer, probability=config.pap_probability,
                                  schedule=config.pap_schedule, max_values=config.pap_max_values,
                                  negative_ratio=config.pap_negative_ratio, query_length=config.pap_query_length,
                                  value_length=config.pap_value_length)


SPEC = register(MethodSpec(
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
    primary_endpoints=endpoints.EPPLM,
    control=Control("electra", masking="word_entity", model_options={"mask_fraction": 1.0, "random_fraction": 0.0}),
))
