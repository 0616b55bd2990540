"""Task scores from model outputs: what :func:`kgplm.finetuning.loop.predict` returns, decoded by the
task's :class:`~kgplm.finetuning.encoding.TaskEncoder` and scored with :mod:`kgplm.evaluation.metrics`.

=====================  ===========================================================================
kind                   scores (``main`` is the task's metric: early stopping and tables use it)
=====================  ===========================================================================
``ner``, nested        entity micro precision/recall/F1 over the whole documents (windows merged)
``classification``,    accuracy, macro-F1 over the labels present in gold ∪ predictions
``pair``,              (sklearn's and the CBLUE/CHIP scripts' convention), relation micro-F1
``relation``           without the negative label (BLURB); ``unseen_labels``: gold labels the
                       training split lacks (always errors); a cut relation example is no prediction
``qa_ranking``         Acc@1 (ties are misses) with the answerable share and the random and
                       first-candidate baselines on the answerable questions
``graded_ranking``     pairwise accuracy, NDCG, and their random-order expectations
``relation_triples``   micro P/R/F1 over exact (subject, predicate, object) triples
=====================  ===========================================================================
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from kgplm.evaluation import metrics
from kgplm.exceptions import ConfigurationError

__all__ = ["score", "predicted_labels", "predicted_triples", "NEGATIVE_RELATION_LABELS"]

logger = logging.getLogger(__name__)

#: Labels that assert no relation (GAD ``negative``/``0``, DDI ``DDI-false``): relation micro-F1 leaves them out.
NEGATIVE_RELATION_LABELS = ("negative", "false", "ddi-false", "0")


def _gold(example):
    for attribute in ("label", "spans", "triples"):
        if hasattr(example, attribute):
            return getattr(example, attribute)
    return example.labels


def _ranking_groups(features: list[dict], outputs: list) -> tuple[list[list[float]], list[list[int]]]:
    groups: dict[int, tuple[list, list]] = {}
    for feature, output in zip(features, outputs):
        scores, labels = groups.setdefault(feature["candidate_group"], ([], []))
        scores.append(float(output))
        labels.append(int(feature["labels"]))
    return [g[0] for g in groups.values()], [g[1] for g in groups.values()]


def predicted_labels(encoder, features: list[dict], outputs: list) -> list[str | None]:
    """The class of each feature (classification, pair, relation); ``None`` for a cut relation example."""
    names = encoder.label_names
    return [None if feature.get("cut") else names[int(np.argmax(output))] for feature, output in zip(features, outputs)]


def predicted_triples(encoder, outputs: list) -> list[set[tuple[str, str, str]]]:
    """Relation triples per example: every entity pair whose predicate class is not ``<no relation>`` (0)."""
    names = encoder.label_names
    predicted = []
    for output in outputs:
        logits = np.asarray(output["pair_logits"]).reshape(len(output["pairs"]), len(names))  # (pairs, classes)
        classes = logits.argmax(-1).tolist()
        predicted.append({(subject, names[c], obj) for (subject, obj), c in zip(output["pairs"], classes) if c})
    return predicted


def score(encoder, examples: Sequence, features: list[dict], outputs: list) -> dict[str, float]:
    """The task's metrics (module docstring); ``score["main"]`` is the task's own metric."""
    kind, spec = encoder.kind, encoder.spec
    if any(_gold(example) is None for example in examples):
        raise ConfigurationError(
            f"{spec.name}: these examples carry no labels (a benchmark test file whose labels "
            f"are hidden); they can be predicted but not scored"
        )
    if kind in ("ner", "nested_ner"):
        result = metrics.entity_scores(
            [e.spans for e in examples], encoder.predicted_spans(examples, features, outputs)
        )
        return {**result, "main": result["f1"]}
    if kind == "qa_ranking":
        scores, labels = _ranking_groups(features, outputs)
        value = metrics.accuracy_at_1(scores, labels)
        baselines = metrics.ranking_baselines(labels)
        logger.info(
            "%s: Acc@1 %.4f on %d answerable of %d questions (%.1f %%); random %.4f, first candidate %.4f",
            spec.name,
            value,
            baselines["answerable"],
            baselines["questions"],
            100 * baselines["answerable_share"],
            baselines["random_acc@1"],
            baselines["first_candidate_acc@1"],
        )
        return {"acc@1": value, **baselines, "main": value}
    if kind == "graded_ranking":
        scores, grades = _ranking_groups(features, outputs)
        result = {**metrics.graded_ranking_scores(scores, grades), **metrics.graded_ranking_baselines(grades)}
        return {**result, "main": result[spec.metric]}
    if kind == "relation_triples":
        result = metrics.triple_scores([e.triples for e in examples], predicted_triples(encoder, outputs))
        return {**result, "main": result["f1"]}
    names = encoder.label_names
    gold = [e.label for e in examples]
    predicted = predicted_labels(encoder, features, outputs)
    result = {
        "accuracy": metrics.accuracy(gold, predicted),
        "macro_f1": metrics.macro_f1(gold, predicted),
        "unseen_labels": sum(label not in encoder.label_index for label in gold),
    }
    if kind == "relation":
        negative = [n for n in names if n.lower() in NEGATIVE_RELATION_LABELS]
        result["micro_f1"] = metrics.micro_f1(gold, predicted, negative)
        result["relation_entities_cut"] = sum(bool(feature.get("cut")) for feature in features)
    result["main"] = result[spec.metric]
    return result
