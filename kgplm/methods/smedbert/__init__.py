"""SMedBERT (Zhang et al., ACL 2021): mention-neighbour hybrid attention, MNeM and MMeM.

The equations and every deviation from the paper are in :mod:`kgplm.methods.smedbert.modeling`;
batches in :mod:`kgplm.methods.smedbert.batching`.

At fine-tuning the encoder reads the dictionary linker's mentions of the task text and their PEPR
neighbours (:class:`KnowledgeLookup`). Any other encoder can be given the same linked mentions — the
same spans and entity ids — without the neighbours, to measure what the graph adds beyond them:
``kgplm.finetune(mention_spans=True)`` (a learned "inside a mention" vector) or
``kgplm.finetune(mention_spans="typed")`` (a typed gazetteer: begin/inside markers per mention, the
entity's KG type and its own KG vector; :mod:`kgplm.finetuning.mention_inputs`).
"""

from __future__ import annotations

import logging

from kgplm.methods.registry import MethodSpec, register
from kgplm.methods.smedbert.batching import (
    KnowledgeLookup,
    SmedbertCollator,
    TypeFrequencySampler,
    knowledge_inputs,
)
from kgplm.methods.smedbert.configuration import SmedbertConfig
from kgplm.methods.smedbert.modeling import (
    SMEDBERT_ENCODING,
    SmedbertEncoding,
    SmedbertForPreTraining,
)

__all__ = [
    "SmedbertConfig",
    "SmedbertForPreTraining",
    "SmedbertEncoding",
    "SmedbertCollator",
    "KnowledgeLookup",
    "TypeFrequencySampler",
    "SPEC",
]

logger = logging.getLogger(__name__)


def build_collator(context) -> SmedbertCollator:
    from kgplm.text.masking import Masker

    config, tokenizer = context.config, context.tokenizer
    sampler = TypeFrequencySampler(context.entity_frequencies, context.store.primary_type_ids())
    return SmedbertCollator(
        masker=Masker.from_tokenizer(tokenizer, context.masking, seed=context.seed),
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
        sentence_order=config.use_sop,
        sampler=sampler,
        num_negatives=config.mnem_num_negatives,
        knowledge_losses=config.use_knowledge_losses,
        num_entity_types=config.num_entity_types,
        relational=config.relational_encoder == "rgcn",
    )


def derive_config(artefacts) -> dict:
    """The PEPR table decides whether neighbours without a direct link (relation −1) can occur."""
    return {"neighbor_candidates": artefacts["neighbor_table"].config.get("candidates", "one_hop")}


def prepare_model(model: SmedbertForPreTraining, context) -> None:
    """Copy the trained KG tables in, then freeze MMeM's target network (after any text checkpoint loaded)."""
    if context.kg_embeddings is not None:
        model.kg.load_embeddings(context.kg_embeddings)
    if context.text_model_dir is None and model.config.use_knowledge_losses:
        logger.warning(
            "SMedBERT's MMeM target Y_m comes from the initial word embeddings; with a text encoder "
            "trained from scratch they are random, not the pre-trained embeddings of the paper"
        )
    model.snapshot_mmem_target()


SPEC = register(
    MethodSpec(
        name="smedbert",
        summary="mention-neighbour hybrid attention (PEPR neighbours, TransR); MLM + SOP + MNeM + MMeM",
        paper="Zhang et al. (2021), SMedBERT: A Knowledge-Enhanced Pre-trained Language Model with Structured "
        "Semantics for Medical Text Mining, ACL",
        config_class=SmedbertConfig,
        model_class=SmedbertForPreTraining,
        encoding=SMEDBERT_ENCODING,
        build_collator=build_collator,
        losses=("mlm", "sop", "mnem", "mmem"),
        artefacts=frozenset({"entity_frequencies", "neighbor_table", "kg_embeddings"}),
        kg_embedding="transr",
        default_masking="whole_entity",
        finetuning_inputs=knowledge_inputs,
        derive_config=derive_config,
        prepare_model=prepare_model,
    )
)
