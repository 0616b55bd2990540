"""``KgplmForFineTuning``: a pre-trained kgplm encoder of any registered method with one task head.

The encoder is built by the method's :class:`~kgplm.models.encoding.Encoding` (from
:func:`kgplm.methods.get`), with the pre-training model's parameter names (``bert``, and for
SMedBERT ``kg``, ``relational_encoder``, ``hybrid_attention``, ``infusion``), so
``from_pretrained`` on a pre-training checkpoint loads it and leaves only the head (and, for
encoders pre-trained without one, the pooler) newly initialised. Methods whose encoder reads
extra inputs keep them at fine-tuning (SMedBERT: linked mentions and PEPR neighbours built by the
same text pipeline as in pre-training; see ``MethodSpec.finetuning_inputs``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.utils import ModelOutput

from kgplm.exceptions import ConfigurationError
from kgplm.models.configuration import KgplmConfig
from kgplm.models.heads import (
    CandidateRankingHead,
    PairwiseRankingHead,
    RelationClassificationHead,
    SequenceClassificationHead,
    TokenClassificationHead,
    TripleExtractionHead,
    num_entity_tags,
)
from kgplm.models.modules import KgplmPreTrainedModel

__all__ = [
    "KgplmForFineTuning",
    "FineTuningOutput",
    "TASK_KINDS",
    "build_head",
    "MentionSpanIndicator",
    "SPAN_INDICATOR_INPUT",
    "TypedMentionGazetteer",
    "GAZETTEER_TOKENS",
    "GAZETTEER_ENTITIES",
]

#: The batch key of the span indicator: (2, tokens) sequence and position of every token inside a linked mention.
SPAN_INDICATOR_INPUT = "span_indicator_tokens"
#: The batch keys of the typed gazetteer: (4, tokens) sequence, position, marker (0: the mention's first token,
#: 1: a later one) and mention index of every token inside a linked mention; (mentions,) each mention's entity id.
GAZETTEER_TOKENS = "gazetteer_tokens"
GAZETTEER_ENTITIES = "gazetteer_entity_ids"


TASK_KINDS = (
    "ner",
    "nested_ner",
    "classification",
    "pair",
    "relation",
    "qa_ranking",
    "graded_ranking",
    "relation_triples",
)
RANKING_KINDS = ("qa_ranking", "graded_ranking")


@dataclass
class FineTuningOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    last_hidden_state: torch.Tensor | None = None
    pair_logits: torch.Tensor | None = None  # relation triples: (pairs, predicates + 1) when pairs are given


def build_head(config: KgplmConfig) -> torch.nn.Module:
    """The head of ``config.task_kind`` with ``len(config.label_names)`` classes (tags for NER)."""
    kind = config.task_kind
    if kind not in TASK_KINDS:
        raise ConfigurationError(f"task_kind must be one of {TASK_KINDS}, got {kind!r}")
    if kind not in RANKING_KINDS and not config.label_names:
        raise ConfigurationError(f"a {kind} head needs label_names")
    dropout = config.hidden_dropout_prob
    num_labels = len(config.label_names or ())
    if kind in ("ner", "nested_ner"):
        return TokenClassificationHead(
            config.hidden_size, num_labels, dropout, streams=2 if kind == "nested_ner" else 1
        )
    if kind in ("classification", "pair"):
        return SequenceClassificationHead(config.hidden_size, num_labels, dropout)
    if kind == "relation":
        return RelationClassificationHead(config.hidden_size, num_labels, dropout)
    if kind == "relation_triples":
        return TripleExtractionHead(config.hidden_size, num_labels, dropout, num_entity_tags(config.tagging))
    if kind == "graded_ranking":
        return PairwiseRankingHead(config.hidden_size, dropout)
    return CandidateRankingHead(config.hidden_size, dropout)


class MentionSpanIndicator(torch.nn.Module):
    """A learned vector added to the token embedding of every token inside a linked mention.

    The attribution control: SMedBERT sees the dictionary linker's mention boundaries at
    fine-tuning; an encoder with this indicator (``kgplm.finetune(mention_spans=True)``) sees the same
    boundaries without any graph knowledge. Row 0 (outside) stays zero, so the indicator only marks
    mention tokens; row 1 starts at zero too (the pre-trained encoder's function is unchanged at the
    first step) and is learned.
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.inside = torch.nn.Parameter(torch.zeros(hidden_size))

    def forward(self, embeddings: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """``embeddings`` (batch, length, d) plus ``inside`` at the (batch, position) rows of ``tokens`` (2, n)."""
        inside = torch.zeros(embeddings.shape[:2], dtype=embeddings.dtype, device=embeddings.device)
        inside = inside.index_put((tokens[0], tokens[1]), torch.ones_like(tokens[0], dtype=embeddings.dtype))
        return embeddings + inside.clamp(max=1).unsqueeze(-1) * self.inside.to(embeddings.dtype)


class TypedMentionGazetteer(torch.nn.Module):
    """What a typed gazetteer tells an encoder about each linked mention, added to its token embeddings.

    The attribution control that gives a text encoder the information SMedBERT's fine-tuning inputs
    fix for a mention, without the graph's neighbours: for every linked mention (the dictionary
    linker's spans and entity ids, exactly SMedBERT's), each of its tokens gets

        e_i + marker[B if i is the mention's first token else I] + type[τ(entity)] + W v_entity + b

    where τ is the entity's primary KG type (the last row of ``type``: untyped) and v the entity's
    vector in a KG embedding table (TransE or TransR) of the same graph. Each mention starts with
    its own B marker, so two adjacent mentions stay two; a token inside two mentions (the linker
    does not produce them) receives both. ``kg_vectors`` and ``entity_types`` are fixed tables
    (buffers, saved with the model: :meth:`load_tables` fills them); ``marker``, ``type`` and the
    projection (W, b) are learned and start at zero, so the pre-trained encoder's function is
    unchanged at the first step and every term receives a gradient from it.
    """

    def __init__(self, hidden_size: int, num_entities: int, num_types: int, kg_dim: int) -> None:
        super().__init__()
        self.markers = torch.nn.Parameter(torch.zeros(2, hidden_size))  # B, I
        self.types = torch.nn.Parameter(torch.zeros(num_types + 1, hidden_size))  # the last row: untyped
        self.projection = torch.nn.Linear(kg_dim, hidden_size)
        self.register_buffer("kg_vectors", torch.zeros(num_entities, kg_dim))
        self.register_buffer("entity_types", torch.full((num_entities,), num_types, dtype=torch.long))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        for tensor in (self.markers, self.types, self.projection.weight, self.projection.bias):
            tensor.zero_()

    @torch.no_grad()
    def load_tables(self, kg_vectors, type_ids) -> None:
        """Copy an entity table (num_entities, kg_dim) and each entity's primary type id (−1: untyped)."""
        vectors = torch.as_tensor(kg_vectors, dtype=torch.float32)
        types = torch.as_tensor(type_ids, dtype=torch.long)
        if tuple(vectors.shape) != tuple(self.kg_vectors.shape) or tuple(types.shape) != tuple(self.entity_types.shape):
            raise ConfigurationError(
                f"the typed gazetteer expects a KG table {tuple(self.kg_vectors.shape)} and "
                f"{self.entity_types.shape[0]} type ids; got {tuple(vectors.shape)} and {tuple(types.shape)}"
            )
        untyped = self.types.shape[0] - 1
        if bool(((types < -1) | (types >= untyped)).any()):
            raise ConfigurationError(f"type ids must lie in [-1, {untyped}), got {types.min()}…{types.max()}")
        self.kg_vectors.copy_(vectors)
        self.entity_types.copy_(torch.where(types < 0, untyped, types))

    def mention_vectors(self, entity_ids: torch.Tensor) -> torch.Tensor:
        """type[τ(e)] + W v_e + b for each mention's entity, (mentions, d)."""
        return self.types[self.entity_types[entity_ids]] + self.projection(self.kg_vectors[entity_ids])

    def forward(self, embeddings: torch.Tensor, tokens: torch.Tensor, entity_ids: torch.Tensor) -> torch.Tensor:
        """``embeddings`` (batch, length, d) plus, at each (row, position) of ``tokens`` (4, n), its marker and
        its mention's vector (``entity_ids`` (mentions,))."""
        delta = self.markers[tokens[2]] + self.mention_vectors(entity_ids)[tokens[3]]  # (n, d)
        return embeddings.index_put((tokens[0], tokens[1]), delta.to(embeddings.dtype), accumulate=True)


class KgplmForFineTuning(KgplmPreTrainedModel):
    """The encoder of ``config.method`` and the head of ``config.task_kind``."""

    #: transformers.Trainer must not pass ``num_items_in_batch``: the heads average their own losses
    accepts_loss_kwargs = False

    def __init__(self, config: KgplmConfig) -> None:
        from kgplm.registry import get

        super().__init__(config)
        self.encoding = get(config.method).encoding  # a parameter-free strategy, not a module
        self.encoding.build(self, config, pooler=True)
        self.span_indicator = (
            MentionSpanIndicator(config.hidden_size) if getattr(config, "mention_span_indicator", False) else None
        )
        gazetteer = getattr(config, "mention_gazetteer", None)
        self.gazetteer = (
            TypedMentionGazetteer(
                config.hidden_size, gazetteer["num_entities"], gazetteer["num_types"], gazetteer["kg_dim"]
            )
            if gazetteer
            else None
        )
        self.head = build_head(config)
        self.post_init()

    def get_output_embeddings(self):
        return None

    @torch.no_grad()
    def _init_weights(self, module: torch.nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, MentionSpanIndicator):  # absent from pre-trained checkpoints: starts at zero
            from transformers import initialization as init

            init.zeros_(module.inside)
        if isinstance(module, TypedMentionGazetteer):  # absent from pre-trained checkpoints: starts at zero
            from transformers import initialization as init

            for tensor in (module.markers, module.types, module.projection.weight, module.projection.bias):
                init.zeros_(tensor)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        head_spans: torch.Tensor | None = None,
        tail_spans: torch.Tensor | None = None,
        candidate_group: torch.Tensor | None = None,
        entity_pairs: torch.Tensor | None = None,
        pair_labels: torch.Tensor | None = None,
        **encoder_inputs,
    ) -> FineTuningOutput:
        """``labels``: (batch,) classes; (batch, length[, 2]) tags for NER and relation triples; (batch,)
        0/1 or grades for ranking. ``entity_pairs`` (pairs, 5) and ``pair_labels`` (pairs,): relation triples.

        ``encoder_inputs``: the method's extra encoder inputs (``encoding.input_names``).
        """
        indicator_tokens = encoder_inputs.pop(SPAN_INDICATOR_INPUT, None)
        gazetteer_tokens = encoder_inputs.pop(GAZETTEER_TOKENS, None)
        gazetteer_entities = encoder_inputs.pop(GAZETTEER_ENTITIES, None)
        for given, module, what, names in (
            (indicator_tokens, self.span_indicator, "mention span indicator", SPAN_INDICATOR_INPUT),
            (gazetteer_tokens, self.gazetteer, "typed gazetteer", GAZETTEER_TOKENS),
            (gazetteer_entities, self.gazetteer, "typed gazetteer", GAZETTEER_ENTITIES),
        ):
            if (given is None) != (module is None):
                raise ConfigurationError(
                    f"a model {'with' if module is not None else 'without'} the {what} needs "
                    f"{'' if module is not None else 'no '}{names} input"
                )
        unknown = set(encoder_inputs) - set(self.encoding.input_names)
        if unknown:
            raise ConfigurationError(
                f"unexpected inputs {sorted(unknown)} for a {self.config.method!r} encoder "
                f"(it reads {list(self.encoding.input_names)})"
            )
        hook = None
        if indicator_tokens is not None:  # added to the word embeddings, whatever the encoding does with them
            hook = self.encoding.word_embeddings(self).register_forward_hook(
                lambda module, inputs, output: self.span_indicator(output, indicator_tokens)
            )
        elif gazetteer_tokens is not None:
            hook = self.encoding.word_embeddings(self).register_forward_hook(
                lambda module, inputs, output: self.gazetteer(output, gazetteer_tokens, gazetteer_entities)
            )
        try:
            hidden = self.encoding.encode(
                self, input_ids, attention_mask, token_type_ids, **encoder_inputs
            ).last_hidden_state  # (batch, length, d1)
        finally:
            if hook is not None:
                hook.remove()
        kind = self.config.task_kind
        if kind in ("ner", "nested_ner"):
            logits, loss = self.head(hidden, labels)
        elif kind == "relation":
            logits, loss = self.head(hidden, head_spans, tail_spans, labels)
        elif kind in RANKING_KINDS:
            logits, loss = self.head(self.encoding.pool(self, hidden), candidate_group, labels)
        elif kind == "relation_triples":
            logits, pair_logits, loss = self.head(hidden, labels, entity_pairs, pair_labels)
            return FineTuningOutput(loss=loss, logits=logits, last_hidden_state=hidden, pair_logits=pair_logits)
        else:
            logits, loss = self.head(self.encoding.pool(self, hidden), labels)
        return FineTuningOutput(loss=loss, logits=logits, last_hidden_state=hidden)
