"""KeBioLM (Yuan et al., BioNLP 2021): text-only layers, mention detection, linking to a TransE entity
table, text–entity fusion, fusion layers; MLM + entity detection + entity linking.

The equations and every deviation from the paper are in :mod:`kgplm.methods.kebiolm.modeling`;
batches in :mod:`kgplm.methods.kebiolm.batching`; the chunked entity search in
:mod:`kgplm.methods.kebiolm.retrieval`; B/I/O tags and span decoding in
:mod:`kgplm.methods.kebiolm.detection`.
"""

from __future__ import annotations

from kgplm.methods.kebiolm.batching import KebiolmCollator
from kgplm.methods.kebiolm.configuration import KebiolmConfig
from kgplm.methods.kebiolm.modeling import KEBIOLM_ENCODING, KebiolmEncoding, KebiolmForPreTraining
from kgplm.methods.registry import MethodSpec, register

__all__ = ["KebiolmConfig", "KebiolmForPreTraining", "KebiolmEncoding", "KebiolmCollator", "SPEC"]


def build_collator(context) -> KebiolmCollator:
    from kgplm.text.masking import Masker

    config, tokenizer = context.config, context.tokenizer
    return KebiolmCollator(
        masker=Masker.from_tokenizer(tokenizer, context.masking, seed=context.seed),
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
        max_mentions=config.max_mentions,
    )


def prepare_model(model: KebiolmForPreTraining, context) -> None:
    """Initialise the entity table from TransE (unless the random-init ablation is asked for, or the model has
    no entity table: ``entity_linking=False``)."""
    config = model.config
    if config.entity_linking and config.entity_init == "transe" and context.kg_embeddings is not None:
        model.entity_memory.load_embeddings(context.kg_embeddings)


SPEC = register(
    MethodSpec(
        name="kebiolm",
        summary="text-only layers → BIO mention detection → top-k entities of a TransE table → fusion → fusion "
        "layers; MLM + ED + EL",
        paper="Yuan et al. (2021), Improving Biomedical Pretrained Language Models with Knowledge, BioNLP",
        config_class=KebiolmConfig,
        model_class=KebiolmForPreTraining,
        encoding=KEBIOLM_ENCODING,
        build_collator=build_collator,
        losses=("mlm", "ed", "el"),
        artefacts=frozenset({"kg_embeddings"}),
        kg_embedding="transe",
        # §3.2 "we mask all tokens within a word or entity span": mentions whole, other words whole
        default_masking="word_entity",
        prepare_model=prepare_model,
    )
)
