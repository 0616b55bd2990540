"""Fine-tuning heads: each maps encoder states to one task family's logits (and loss).

======================================  =========================================================
head                                    task kinds (:mod:`kgplm.evaluation.tasks`)
======================================  =========================================================
:class:`TokenClassificationHead`        ``ner`` (one stream), ``nested_ner`` (two streams)
:class:`SequenceClassificationHead`     ``classification``, ``pair``
:class:`RelationClassificationHead`     ``relation``
:class:`CandidateRankingHead`           ``qa_ranking`` and multiple choice
:class:`PairwiseRankingHead`            ``graded_ranking`` (graded relevance, cMedIR)
:class:`TripleExtractionHead`           ``relation_triples`` (entity tags + pair predicates, CMeIE)
======================================  =========================================================

The nested-NER head follows eHealth's two-stream treatment of CMeEE: stream 0 tags the outermost
entities, stream 1 the entities nested inside them, each stream a flat BIO/BIOES sequence over
the same tokens; predictions are the union of both streams' spans. Deeper nesting (an entity
inside a nested one) cannot be represented and is counted as lost by the task encoder.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.utils import scatter, softmax

__all__ = [
    "TokenClassificationHead",
    "SequenceClassificationHead",
    "RelationClassificationHead",
    "CandidateRankingHead",
    "PairwiseRankingHead",
    "TripleExtractionHead",
    "span_mean",
    "num_entity_tags",
]


class TokenClassificationHead(nn.Module):
    """logits_{i,s} = W_s dropout(h_i) + b_s for each token i and stream s."""

    def __init__(self, hidden_size: int, num_tags: int, dropout: float, streams: int = 1) -> None:
        super().__init__()
        self.num_tags, self.streams = num_tags, streams
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden_size, num_tags * streams)

    def reset_parameters(self) -> None:
        self.classifier.reset_parameters()

    def forward(self, hidden: torch.Tensor, labels: torch.Tensor | None = None):
        """``hidden`` (batch, length, d1); ``labels`` (batch, length[, streams]) with −100 ignored."""
        logits = self.classifier(self.dropout(hidden))  # (batch, length, streams·tags)
        logits = logits.view(*hidden.shape[:2], self.streams, self.num_tags)  # (batch, length, streams, tags)
        if self.streams == 1:
            logits = logits.squeeze(2)  # (batch, length, tags)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, self.num_tags), labels.reshape(-1), ignore_index=-100)
        return logits, loss


class SequenceClassificationHead(nn.Module):
    """logits = W dropout(pooler(h_[CLS])) + b; cross-entropy."""

    def __init__(self, hidden_size: int, num_labels: int, dropout: float) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden_size, num_labels)

    def reset_parameters(self) -> None:
        self.classifier.reset_parameters()

    def forward(self, pooled: torch.Tensor, labels: torch.Tensor | None = None):
        logits = self.classifier(self.dropout(pooled))  # (batch, labels)
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return logits, loss


def span_mean(hidden: torch.Tensor, spans: torch.Tensor) -> torch.Tensor:
    """Mean of ``hidden[b, start:end]`` per row b; ``spans`` (batch, 2) token ``[start, end)``."""
    positions = torch.arange(hidden.shape[1], device=hidden.device)  # (length,)
    inside = (positions >= spans[:, :1]) & (positions < spans[:, 1:])  # (batch, length)
    weights = inside.to(hidden.dtype) / inside.sum(1, keepdim=True).clamp(min=1)
    return torch.einsum("bl,bld->bd", weights, hidden)  # (batch, d1)


class RelationClassificationHead(nn.Module):
    """logits = W dropout([h_[CLS] ; mean(h_head) ; mean(h_tail)]) + b (entity-start pooling, marker-free)."""

    def __init__(self, hidden_size: int, num_labels: int, dropout: float) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(3 * hidden_size, num_labels)

    def reset_parameters(self) -> None:
        self.classifier.reset_parameters()

    def forward(
        self,
        hidden: torch.Tensor,
        head_spans: torch.Tensor,
        tail_spans: torch.Tensor,
        labels: torch.Tensor | None = None,
    ):
        features = torch.cat([hidden[:, 0], span_mean(hidden, head_spans), span_mean(hidden, tail_spans)], -1)
        logits = self.classifier(self.dropout(features))  # (batch, labels)
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return logits, loss


class CandidateRankingHead(nn.Module):
    """Listwise ranking: s_c = w · dropout(pooler(h_[CLS] of (question, candidate c))).

    Loss per question q with at least one correct candidate:
    −(1/|P_q|) Σ_{c ∈ P_q} log softmax_{c' ∈ q}(s_{c'})_c, averaged over such questions; the
    grouped softmax is PyG's over ``candidate_group``, so questions keep their own candidate counts
    (multiple choice is the case of exactly one correct candidate).
    """

    def __init__(self, hidden_size: int, dropout: float) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.scorer = nn.Linear(hidden_size, 1)

    def reset_parameters(self) -> None:
        self.scorer.reset_parameters()

    def forward(
        self, pooled: torch.Tensor, candidate_group: torch.Tensor, candidate_labels: torch.Tensor | None = None
    ):
        scores = self.scorer(self.dropout(pooled)).squeeze(-1)  # (candidates,)
        loss = None
        if candidate_labels is not None:
            _, group = torch.unique(candidate_group, return_inverse=True)
            num_groups = int(group.max()) + 1 if len(group) else 0
            log_probability = torch.log(softmax(scores, group, num_nodes=num_groups).clamp(min=1e-12))
            positive = candidate_labels.to(scores.dtype)
            per_group = scatter(-log_probability * positive, group, dim_size=num_groups, reduce="sum")
            positives = scatter(positive, group, dim_size=num_groups, reduce="sum")
            answered = positives > 0
            loss = (per_group[answered] / positives[answered]).mean() if answered.any() else scores.sum() * 0
        return scores, loss


class PairwiseRankingHead(CandidateRankingHead):
    """Graded relevance (RankNet, Burges et al. 2005): s_c = w · dropout(pooler(h_[CLS] of (query, document c))).

    Loss: for every pair (i, j) of one query's documents with grade_i > grade_j,
    softplus(s_j − s_i) = −log σ(s_i − s_j), averaged over all such pairs of the batch. The
    pairs are those of a (candidates × candidates) mask of one group and a higher grade, so
    groups keep their own document counts. It optimises what pairwise accuracy measures.
    """

    def forward(self, pooled: torch.Tensor, candidate_group: torch.Tensor, grades: torch.Tensor | None = None):
        scores = self.scorer(self.dropout(pooled)).squeeze(-1)  # (candidates,)
        loss = None
        if grades is not None:
            ordered = (candidate_group[:, None] == candidate_group[None, :]) & (grades[:, None] > grades[None, :])
            differences = scores[:, None] - scores[None, :]  # (candidates, candidates): s_i − s_j
            loss = F.softplus(-differences[ordered]).mean() if ordered.any() else scores.sum() * 0
        return scores, loss


def num_entity_tags(tagging: str) -> int:
    """Tags of one entity type: O, B, I (bio) or O, B, I, E, S (bioes)."""
    return 3 if tagging == "bio" else 5


class TripleExtractionHead(nn.Module):
    """Relation triples in one pass: entity tags per token, then a predicate for each entity pair.

    tag_logits_i = W_t dropout(h_i) + b_t over one entity type's BIO/BIOES tags;
    pair_logits(s, o) = W_p dropout([mean(h_s) ; mean(h_o) ; mean(h_s) ⊙ mean(h_o)]) + b_p over
    the predicates and "no relation" (class 0), s and o token spans of the subject's and object's
    first occurrences. Loss: tag cross-entropy + pair cross-entropy (each over its own items).
    Training pairs are every ordered pair of gold entities; at prediction, of predicted entities.
    """

    def __init__(self, hidden_size: int, num_predicates: int, dropout: float, num_tags: int) -> None:
        super().__init__()
        self.num_tags = num_tags
        self.dropout = nn.Dropout(dropout)
        self.tagger = nn.Linear(hidden_size, num_tags)
        self.pair_classifier = nn.Linear(3 * hidden_size, num_predicates)

    def reset_parameters(self) -> None:
        self.tagger.reset_parameters()
        self.pair_classifier.reset_parameters()

    def classify_pairs(self, hidden: torch.Tensor, entity_pairs: torch.Tensor) -> torch.Tensor:
        """``entity_pairs`` (pairs, 5): batch row, subject [start, end), object [start, end) token spans."""
        rows = hidden[entity_pairs[:, 0]]  # (pairs, length, d1)
        subject = span_mean(rows, entity_pairs[:, 1:3])  # (pairs, d1)
        obj = span_mean(rows, entity_pairs[:, 3:5])
        return self.pair_classifier(self.dropout(torch.cat([subject, obj, subject * obj], -1)))  # (pairs, predicates)

    def forward(
        self,
        hidden: torch.Tensor,
        labels: torch.Tensor | None = None,
        entity_pairs: torch.Tensor | None = None,
        pair_labels: torch.Tensor | None = None,
    ):
        tag_logits = self.tagger(self.dropout(hidden))  # (batch, length, tags)
        pair_logits = self.classify_pairs(hidden, entity_pairs) if entity_pairs is not None else None
        loss = None
        if labels is not None:
            loss = F.cross_entropy(tag_logits.reshape(-1, self.num_tags), labels.reshape(-1), ignore_index=-100)
            if pair_logits is not None and len(pair_logits):
                loss = loss + F.cross_entropy(pair_logits, pair_labels)
        return tag_logits, pair_logits, loss
