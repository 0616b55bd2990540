"""The ``product_attributes`` stage of ``kgplm.train``: EP-PLM's attribute triples from the graph and the user's
tables, with the PAP evaluation's held-out pairs withheld (the ``method_data`` keys are in
:mod:`kgplm.methods.epplm.attributes`)."""

from __future__ import annotations

import logging

from kgplm.exceptions import ConfigurationError
from kgplm.methods.epplm.attributes import DEFAULT_GRAPH_ATTRIBUTES, METHOD_DATA_KEYS, ProductAttributes
from kgplm.methods.epplm.evaluation import held_out_triples, pap_held_out_pairs
from kgplm.training.stages import Stage, register_stage

__all__ = ["product_attributes_stage"]

logger = logging.getLogger(__name__)


def product_attributes_stage(run, inputs) -> ProductAttributes:
    """The ``product_attributes`` artefact: graph groups + the user table − the excluded triples − the held-out
    evaluation pairs (:mod:`kgplm.methods.epplm.attributes`)."""
    path = run.kg_dir / "product_attributes.json"
    if path.is_file():
        return ProductAttributes.load(path)
    data = dict(inputs.arguments.get("method_data") or {})
    unknown = sorted(set(data) - set(METHOD_DATA_KEYS))
    if unknown:
        raise ConfigurationError(
            f"unknown method_data keys {unknown} for product attribute prediction; it reads {list(METHOD_DATA_KEYS)}"
        )
    names = data.get("graph_attributes", DEFAULT_GRAPH_ATTRIBUTES)
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):
        raise ConfigurationError(f"method_data['graph_attributes'] must be a list of predicate names, got {names!r}")
    attributes = ProductAttributes.from_store(inputs.store, names)
    from_graph = len(attributes)
    if data.get("product_attributes"):
        attributes = attributes.merge(ProductAttributes.from_table(data["product_attributes"]))
    if data.get("exclude_attributes"):
        attributes = attributes.without(ProductAttributes.from_table(data["exclude_attributes"]).triples())
    held_out = data.get("pap_held_out")
    if held_out:
        if not isinstance(held_out, int) or isinstance(held_out, bool) or held_out < 0:
            raise ConfigurationError(
                f"method_data['pap_held_out'] must be a number of drugs (an integer ≥ 0), got {held_out!r}"
            )
        pairs = pap_held_out_pairs(attributes, held_out)
        attributes = attributes.holding_out(pairs, held_out_triples(attributes, pairs))
        logger.info(
            "product attribute prediction: %d (drug, 适应症) pairs held out for evaluation, with every other "
            "attribute triple of their drugs",
            len(pairs),
        )
    if not len(attributes):
        logger.warning(
            "no product attribute triples: the graph has none of %s and no table was given; product "
            "attribute prediction will not run",
            list(names),
        )
    else:
        logger.info(
            "product attribute prediction: %d (title, attribute) groups (%d from the graph), %d triples",
            len(attributes),
            from_graph,
            attributes.num_triples,
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    attributes.save(path)
    return attributes


register_stage(Stage("product_attributes", product_attributes_stage))
