"""EMBERT (Cai et al. 2021): context-entity consistency prediction, entity segmentation, bidirectional entity masking.

The equations and every deviation from the paper are in :mod:`kgplm.methods.embert.modeling`; the
thesaurus in :mod:`~kgplm.methods.embert.thesaurus`, the rule-based entity segmentation in
:mod:`~kgplm.methods.embert.segments`, batches in :mod:`~kgplm.methods.embert.batching`.

Artefacts (stages registered here, cached in the run's ``kg/`` directory): ``thesaurus`` — the
synonyms of every entity; ``entity_segments`` — the sub-entities and atomic/adjective split of
every KG name. ``kgplm.train(..., method_data={"equivalence_relations": [...]})`` replaces the
relations (IRIs or names) whose links join synonyms
(:func:`~kgplm.methods.embert.thesaurus.default_equivalence_relations`).
"""

from __future__ import annotations

from kgplm.exceptions import ConfigurationError
from kgplm.methods.embert.batching import EmbertCollator, EmbertExample, EntityLexicon
from kgplm.methods.embert.configuration import EmbertConfig
from kgplm.methods.embert.modeling import (
    BidirectionalMaskingHead,
    ConsistencyHead,
    EmbertForPreTraining,
    SegmentationHead,
)
from kgplm.methods.embert.segments import EntitySegmenter, EntitySegments, build_entity_segments, derive_cut_points
from kgplm.methods.embert.thesaurus import Thesaurus, build_thesaurus, default_equivalence_relations
from kgplm.methods.mlm import BERT_ENCODING
from kgplm.methods.registry import MethodSpec, register
from kgplm.training.stages import Stage, register_stage

__all__ = [
    "EmbertConfig",
    "EmbertForPreTraining",
    "ConsistencyHead",
    "SegmentationHead",
    "BidirectionalMaskingHead",
    "EmbertCollator",
    "EmbertExample",
    "EntityLexicon",
    "Thesaurus",
    "build_thesaurus",
    "default_equivalence_relations",
    "EntitySegments",
    "EntitySegmenter",
    "build_entity_segments",
    "derive_cut_points",
    "SPEC",
]


def _method_data(inputs) -> dict:
    data = dict(inputs.arguments.get("method_data") or {})
    relations = data.get("equivalence_relations")
    if relations is not None and (
        not isinstance(relations, (list, tuple)) or not all(isinstance(r, str) for r in relations)
    ):
        raise ConfigurationError(
            f"method_data['equivalence_relations'] must be a list of relation IRIs or names, got {relations!r}"
        )
    return data


def _thesaurus_stage(run, inputs) -> Thesaurus:
    path = run.kg_dir / "thesaurus"
    if (path / "thesaurus.json").is_file():
        return Thesaurus.load(path)
    thesaurus = build_thesaurus(
        inputs.store, equivalence_relations=_method_data(inputs).get("equivalence_relations"), progress=inputs.progress
    )
    thesaurus.save(path)
    return thesaurus


def _entity_segments_stage(run, inputs) -> EntitySegments:
    path = run.kg_dir / "entity_segments"
    if (path / "segments.json").is_file():
        return EntitySegments.load(path)
    segments = build_entity_segments(inputs.store, linker=inputs.linker, progress=inputs.progress)
    segments.save(path)
    return segments


register_stage(Stage("thesaurus", _thesaurus_stage))
register_stage(Stage("entity_segments", _entity_segments_stage))


def build_collator(context) -> EmbertCollator:
    from kgplm.text.masking import Masker

    config, tokenizer = context.config, context.tokenizer
    lexicon = EntityLexicon(
        context.artefacts["thesaurus"],
        context.artefacts["entity_segments"],
        tokenizer,
        context.store.primary_type_ids(),
        context.entity_frequencies,
        max_replacement_tokens=config.cecp_max_tokens,
        neighbors=context.store.adjacency(symmetric=True),
        max_entity_share=config.cecp_max_entity_share,
    )
    return EmbertCollator(
        lexicon=lexicon,
        use_cecp=config.use_cecp,
        use_es=config.use_es,
        use_bem=config.use_bem,
        cecp_rate=config.cecp_rate,
        cecp_negatives=config.cecp_negatives,
        bem_rate=config.bem_rate,
        bem_max_positions=config.bem_max_positions,
        max_sequence_length=config.max_position_embeddings,
        masker=Masker.from_tokenizer(tokenizer, context.masking, seed=context.seed),
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
        sentence_order=config.use_sop,
    )


SPEC = register(
    MethodSpec(
        name="embert",
        summary="context-entity consistency (synonym vs random replacement), entity segmentation, bidirectional "
        "entity masking (adjective ↔ atomic terms); MLM + CECP + ES + BEM",
        paper="Cai et al. (2021), EMBERT: A Pre-trained Language Model for Chinese Medical Text Mining, APWeb-WAIM",
        config_class=EmbertConfig,
        model_class=EmbertForPreTraining,
        encoding=BERT_ENCODING,
        build_collator=build_collator,
        losses=("mlm", "sop", "cecp", "es", "bem"),
        artefacts=frozenset({"thesaurus", "entity_segments", "entity_frequencies"}),
        default_masking="bert",
    )
)
