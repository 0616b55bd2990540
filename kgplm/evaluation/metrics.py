"""Task metrics: entity-level micro F1 (conlleval semantics), accuracy, macro F1, Acc@1, graded ranking,
triple F1.

Entity decoding follows conlleval (CoNLL-2000), the rule seqeval's default mode implements, for
BIO and BIOES tags alike: a chunk ends before a token when the previous tag is E or S, when the
previous tag is B or I and the current is B, S or O, or when the type changes; a chunk starts at
B or S, at E or I after O, E or S, or when the type changes. An I-X after O therefore opens an
entity, so predictions that are not well formed are scored the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from kgplm.exceptions import ConfigurationError

__all__ = [
    "TAG_SCHEMES",
    "tag_names",
    "tags_from_spans",
    "spans_from_tags",
    "entity_scores",
    "accuracy",
    "macro_f1",
    "micro_f1",
    "accuracy_at_1",
    "ranking_baselines",
    "graded_ranking_scores",
    "graded_ranking_baselines",
    "triple_scores",
]

TAG_SCHEMES = ("bio", "bioes")


def _split(tag: str) -> tuple[str, str]:
    if tag == "O" or not tag:
        return "O", ""
    prefix, _, kind = tag.partition("-")
    return prefix, kind


def tag_names(types: Iterable[str], scheme: str = "bio") -> list[str]:
    """The tag set of ``types`` in class-index order: ``O``, then each type's B, I (, E, S) tags."""
    if scheme not in TAG_SCHEMES:
        raise ConfigurationError(f"tagging scheme must be one of {TAG_SCHEMES}, got {scheme!r}")
    prefixes = ("B", "I") if scheme == "bio" else ("B", "I", "E", "S")
    return ["O"] + [f"{prefix}-{kind}" for kind in types for prefix in prefixes]


def tags_from_spans(length: int, spans: Iterable[tuple[int, int, str]], scheme: str = "bio") -> list[str]:
    """Tags for ``length`` tokens; ``spans`` are ``(start, end, type)`` token spans, end exclusive, flat."""
    if scheme not in TAG_SCHEMES:
        raise ConfigurationError(f"tagging scheme must be one of {TAG_SCHEMES}, got {scheme!r}")
    tags = ["O"] * length
    for start, end, kind in spans:
        if not 0 <= start < end <= length:
            raise ConfigurationError(f"span ({start}, {end}) outside {length} tokens")
        if any(tag != "O" for tag in tags[start:end]):
            raise ConfigurationError(
                f"span ({start}, {end}, {kind}) overlaps another; flat tagging needs disjoint spans"
            )
        if scheme == "bioes" and end - start == 1:
            tags[start] = f"S-{kind}"
            continue
        tags[start] = f"B-{kind}"
        for position in range(start + 1, end):
            tags[position] = f"I-{kind}"
        if scheme == "bioes":
            tags[end - 1] = f"E-{kind}"
    return tags


def spans_from_tags(tags: Sequence[str]) -> list[tuple[int, int, str]]:
    """The ``(start, end, type)`` chunks of a BIO or BIOES tag sequence (conlleval rules)."""
    spans = []
    start, previous_prefix, previous_kind = None, "O", ""
    for position, tag in enumerate(list(tags) + ["O"]):
        prefix, kind = _split(tag)
        ends = (
            previous_prefix in ("E", "S")
            or (previous_prefix in ("B", "I") and prefix in ("B", "S", "O"))
            or (previous_prefix != "O" and previous_kind != kind)
        )
        if ends and start is not None:
            spans.append((start, position, previous_kind))
            start = None
        begins = (
            prefix in ("B", "S")
            or (prefix in ("E", "I") and previous_prefix in ("E", "S", "O"))
            or (prefix != "O" and previous_kind != kind)
        )
        if begins:
            start = position
        previous_prefix, previous_kind = prefix, kind
    return spans


def _prf(true_positive: int, predicted: int, gold: int) -> dict[str, float]:
    precision = true_positive / predicted if predicted else 0.0
    recall = true_positive / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def entity_scores(gold: Sequence[Iterable[tuple]], predicted: Sequence[Iterable[tuple]]) -> dict[str, float]:
    """Micro precision/recall/F1 over exact ``(start, end, type)`` matches, example by example."""
    if len(gold) != len(predicted):
        raise ConfigurationError(f"{len(gold)} gold examples but {len(predicted)} predicted")
    true_positive = predicted_count = gold_count = 0
    for gold_spans, predicted_spans in zip(gold, predicted):
        gold_set, predicted_set = set(map(tuple, gold_spans)), set(map(tuple, predicted_spans))
        true_positive += len(gold_set & predicted_set)
        predicted_count += len(predicted_set)
        gold_count += len(gold_set)
    return _prf(true_positive, predicted_count, gold_count)


def accuracy(gold: Sequence, predicted: Sequence) -> float:
    """Share of equal labels; a ``None`` prediction (no prediction was possible) is a miss."""
    if len(gold) != len(predicted) or not len(gold):
        raise ConfigurationError(f"accuracy needs equal, non-empty label lists ({len(gold)} vs {len(predicted)})")
    return float(np.mean([p is not None and g == p for g, p in zip(gold, predicted)]))


def macro_f1(gold: Sequence, predicted: Sequence, labels: Sequence | None = None) -> float:
    """Unweighted mean of per-label F1 over ``labels`` (default: every label present in gold or predictions,
    what sklearn's ``f1_score(average="macro")`` and the CBLUE/CHIP scripts average over).

    A label absent from both gold and predictions has no F1 to speak of; averaging it in as 0 caps
    the score below 1 for a perfect model. ``None`` predictions are misses and no label.
    """
    labels = sorted(({*gold} | {*predicted}) - {None}) if labels is None else list(labels)
    scores = []
    for label in labels:
        true_positive = sum(g == label and p == label for g, p in zip(gold, predicted))
        scores.append(_prf(true_positive, sum(p == label for p in predicted), sum(g == label for g in gold))["f1"])
    return float(np.mean(scores)) if scores else 0.0


def micro_f1(gold: Sequence, predicted: Sequence, negative_labels: Iterable = ()) -> float:
    """Micro F1 over the positive labels (relation extraction convention: negatives are not scored).

    A ``None`` prediction asserts no relation: it is a false negative for a positive gold label and
    nothing for a negative one.
    """
    negative = set(negative_labels) | {None}
    true_positive = sum(g == p and g not in negative for g, p in zip(gold, predicted))
    return _prf(true_positive, sum(p not in negative for p in predicted), sum(g not in negative for g in gold))["f1"]


def accuracy_at_1(scores: Sequence[Sequence[float]], labels: Sequence[Sequence[int]]) -> float:
    """Share of questions whose best-scored candidate is correct, over questions with a correct candidate.

    A tie for the best score is a miss: a model that scores every candidate alike has chosen none
    (``argmax`` would credit it with whichever candidate comes first).
    """
    hits, counted = 0, 0
    for question_scores, question_labels in zip(scores, labels):
        if not any(question_labels):
            continue
        counted += 1
        question_scores = np.asarray(question_scores, dtype=np.float64)
        best = np.flatnonzero(question_scores == question_scores.max())
        hits += int(len(best) == 1 and question_labels[int(best[0])] == 1)
    if not counted:
        raise ConfigurationError("no question has a correct candidate; Acc@1 is undefined")
    return hits / counted


def ranking_baselines(labels: Sequence[Sequence[int]]) -> dict[str, float]:
    """What Acc@1 means on these questions: how many have a correct candidate, and the Acc@1 of
    choosing a candidate uniformly at random (the mean share of correct candidates) and of choosing
    the first candidate, both over the answerable questions."""
    answerable = [list(question) for question in labels if any(question)]
    if not answerable:
        raise ConfigurationError("no question has a correct candidate; Acc@1 is undefined")
    return {
        "questions": len(labels),
        "answerable": len(answerable),
        "answerable_share": len(answerable) / len(labels),
        "random_acc@1": float(np.mean([sum(q) / len(q) for q in answerable])),
        "first_candidate_acc@1": float(np.mean([q[0] == 1 for q in answerable])),
    }


def _dcg(gains: np.ndarray) -> float:
    return float(np.sum(gains / np.log2(np.arange(2, len(gains) + 2))))


def graded_ranking_scores(scores: Sequence[Sequence[float]], grades: Sequence[Sequence[int]]) -> dict[str, float]:
    """Pairwise accuracy and NDCG of per-query document scores against graded relevance.

    * ``pairwise_accuracy``: over every pair of documents of one query with different grades, the
      share the scores order like the grades; a tie is a miss. Pairs are pooled over queries.
    * ``ndcg``: mean over queries with a positive grade of DCG / ideal DCG, gain ``2^grade − 1``,
      discount ``log2(rank + 1)``, all of a query's documents; documents with tied scores are
      ranked worst grade first (a tie earns nothing).
    """
    correct = pairs = 0
    ndcgs = []
    for query_scores, query_grades in zip(scores, grades):
        s = np.asarray(query_scores, dtype=np.float64)
        g = np.asarray(query_grades, dtype=np.int64)
        better = g[:, None] > g[None, :]  # (documents, documents): i is graded above j
        pairs += int(better.sum())
        correct += int((better & (s[:, None] > s[None, :])).sum())
        gains = 2.0**g - 1
        ideal = _dcg(np.sort(gains)[::-1])
        if ideal > 0:
            order = np.lexsort((g, -s))  # by score descending, ties: lowest grade first
            ndcgs.append(_dcg(gains[order]) / ideal)
    if not pairs:
        raise ConfigurationError("no query has two documents of different grades; pairwise accuracy is undefined")
    return {"pairwise_accuracy": correct / pairs, "ndcg": float(np.mean(ndcgs)), "pairs": pairs, "queries": len(grades)}


def graded_ranking_baselines(grades: Sequence[Sequence[int]]) -> dict[str, float]:
    """The expected :func:`graded_ranking_scores` of a uniformly random order: pairwise accuracy 1/2 and,
    each document being equally likely at each rank, E[NDCG] = Σ_i gain_i · mean_r(1/log2(r+1)) / IDCG."""
    ndcgs = []
    for query_grades in grades:
        gains = 2.0 ** np.asarray(query_grades, dtype=np.int64) - 1
        ideal = _dcg(np.sort(gains)[::-1])
        if ideal > 0:
            mean_discount = float(np.mean(1 / np.log2(np.arange(2, len(gains) + 2))))
            ndcgs.append(float(gains.sum()) * mean_discount / ideal)
    return {"random_pairwise_accuracy": 0.5, "random_ndcg": float(np.mean(ndcgs)) if ndcgs else 0.0}


def triple_scores(gold: Sequence[Iterable[tuple]], predicted: Sequence[Iterable[tuple]]) -> dict[str, float]:
    """Micro P/R/F1 over exact ``(subject, predicate, object)`` triples per example (CMeIE)."""
    return entity_scores(gold, predicted)
