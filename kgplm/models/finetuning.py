"""``KgplmForFineTuning``: a pre-trained kgplm encoder with one task head.

The encoder is the pre-training model's, parameter names included (``bert``, and for SMedBERT
``kg``, ``relational_encoder``, ``hybrid_attention``, ``infusion``), so ``from_pretrained`` on a
pre-training checkpoint loads it and leaves only the head (and, for the plain MLM baseline, the
pooler) newly initialised. Knowledge-enhanced models keep their knowledge module when fine-tuned:
the batch carries linked mentions and PEPR neighbours built by the same text pipeline as in
pre-training (:class:`kgplm.training.finetuning.TaskEncoder`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.models.bert.modeling_bert import BertModel
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
from kgplm.models.smedbert import SmedbertEncoding

__all__ = ["KgplmForFineTuning", "FineTuningOutput", "TASK_KINDS"]

TASK_KINDS = ("ner", "nested_ner", "classification", "pair", "relation", "qa_ranking", "graded_ranking",
              "relation_triples")
KNOWLEDGE_KEYS = ("mention_batch", "mention_spans", "mention_entity_ids", "neighbor_mention", "neighbor_entity_ids",
                  "neighbor_relation_ids", "neighbor_directions", "neighbor_type_ids")


@dataclass
class FineTuningOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    last_hidden_state: torch.Tensor | None = None
    pair_logits: torch.Tensor | None = None  # relation triples: (pairs, predicates + 1) when pairs are given


class KgplmForFineTuning(SmedbertEncoding, KgplmPreTrainedModel):
    """Encoder (+ SMedBERT knowledge module when ``config.method == "smedbert"``) and the head of
    ``config.task_kind`` with ``len(config.label_names)`` classes (tags for NER)."""

    def __init__(self, config: KgplmConfig) -> None:
        super().__init__(config)
        kind = config.task_kind
        if kind not in TASK_KINDS:
            raise ConfigurationError(f"task_kind must be one of {TASK_KINDS}, got {kind!r}")
        if kind not in ("qa_ranking", "graded_ranking") and not config.label_names:
            raise ConfigurationError(f"a {kind} head needs label_names")
        self.knowledge = config.method == "smedbert"
        self.bert = BertModel(config, add_pooling_layer=True)
        if self.knowledge:
            config.validate_knowledge()
            self.build_knowledge_modules(config)
        dropout = config.hidden_dropout_prob
        num_labels = len(config.label_names or ())
        if kind in ("ner", "nested_ner"):
            self.head = TokenClassificationHead(config.hidden_size, num_labels, dropout,
                                                streams=2 if kind == "nested_ner" else 1)
        elif kind in ("classification", "pair"):
            self.head = SequenceClassificationHead(config.hidden_size, num_labels, dropout)
        elif kind == "relation":
            self.head = RelationClassificationHead(config.hidden_size, num_labels, dropout)
        elif kind == "relation_triples":
            self.head = TripleExtractionHead(config.hidden_size, num_labels, dropout, num_entity_tags(config.tagging))
        elif kind == "graded_ranking":
            self.head = PairwiseRankingHead(config.hidden_size, dropout)
        else:
            self.head = CandidateRankingHead(config.hidden_size, dropout)
        self.post_init()

    def get_output_embeddings(self):
        return None

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                head_spans: torch.Tensor | None = None, tail_spans: torch.Tensor | None = None,
                candidate_group: torch.Tensor | None = None, entity_pairs: torch.Tensor | None = None,
                pair_labels: torch.Tensor | None = None, **knowledge) -> FineTuningOutput:
        """``labels``: (batch,) classes; (batch, length[, 2]) tags for NER and relation triples; (batch,)
        0/1 or grades for ranking. ``entity_pairs`` (pairs, 5) and ``pair_labels`` (pairs,): relation triples."""
        unknown = set(knowledge) - set(KNOWLEDGE_KEYS)
        if unknown:
            raise ConfigurationError(f"unexpected inputs {sorted(unknown)}")
        if not self.knowledge:
            knowledge = {}
        hidden, _ = self.encode(input_ids, attention_mask, token_type_ids, **knowledge)  # (batch, length, d1)
        kind = self.config.task_kind
        if kind in ("ner", "nested_ner"):
            logits, loss = self.head(hidden, labels)
        elif kind == "relation":
            logits, loss = self.head(hidden, head_spans, tail_spans, labels)
        elif kind in ("qa_ranking", "graded_ranking"):
            logits, loss = self.head(self.bert.pooler(hidden), candidate_group, labels)
        elif kind == "relation_triples":
            logits, pair_logits, loss = self.head(hidden, labels, entity_pairs, pair_labels)
            return FineTuningOutput(loss=loss, logits=logits, last_hidden_state=hidden, pair_logits=pair_logits)
        else:
            logits, loss = self.head(self.bert.pooler(hidden), labels)
        return FineTuningOutput(loss=loss, logits=logits, last_hidden_state=hidden)
