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
]

#: The batch key of the span indicator: (2, tokens) sequence and position of every token inside a linked mention.
SPAN_INDICATOR_INPUT = "span_indicator_tokens"


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
        if (indicator_tokens is None) != (self.span_indicator is None):
            raise ConfigurationError(
                f"a model {'with' if self.span_indicator is not None else 'without'} the mention "
                f"span indicator needs {'' if self.span_indicator is not None else 'no '}"
                f"{SPAN_INDICATOR_INPUT} input"
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
