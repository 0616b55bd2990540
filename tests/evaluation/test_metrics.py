"""Metrics against seqeval and hand-computed values."""

from __future__ import annotations

import random

import pytest
from seqeval.metrics import f1_score as seqeval_f1
from seqeval.metrics.sequence_labeling import get_entities

from kgplm.evaluation.metrics import (
    accuracy,
    accuracy_at_1,
    entity_scores,
    macro_f1,
    micro_f1,
    spans_from_tags,
    tags_from_spans,
)
from kgplm.exceptions import ConfigurationError


def random_tags(rng: random.Random, length: int, scheme: str) -> list[str]:
    prefixes = "BI" if scheme == "bio" else "BIES"
    return [rng.choice(["O", "O"] + [f"{p}-{t}" for p in prefixes for t in ("dis", "sym")]) for _ in range(length)]


@pytest.mark.parametrize("scheme", ["bio", "bioes"])
def test_decoding_matches_seqeval_on_ill_formed_sequences(scheme):
    rng = random.Random(7)
    for _ in range(500):
        tags = random_tags(rng, rng.randint(1, 12), scheme)
        expected = sorted((start, end + 1, kind) for kind, start, end in get_entities(tags))
        assert sorted(spans_from_tags(tags)) == expected, tags


@pytest.mark.parametrize("scheme", ["bio", "bioes"])
def test_entity_f1_equals_seqeval_on_the_same_predictions(scheme):
    rng = random.Random(11)
    gold = [random_tags(rng, 15, scheme) for _ in range(60)]
    predicted = [
        [tag if rng.random() < 0.7 else rng.choice(random_tags(rng, 1, scheme)) for tag in sequence]
        for sequence in gold
    ]
    ours = entity_scores([spans_from_tags(g) for g in gold], [spans_from_tags(p) for p in predicted])["f1"]
    assert ours == pytest.approx(seqeval_f1(gold, predicted), abs=1e-12)
    assert 0.2 < ours < 0.95  # the comparison is not trivial


@pytest.mark.parametrize("scheme", ["bio", "bioes"])
def test_tags_round_trip(scheme):
    spans = [(0, 1, "dis"), (2, 5, "sym"), (5, 7, "dis")]
    tags = tags_from_spans(8, spans, scheme)
    assert spans_from_tags(tags) == spans
    if scheme == "bioes":
        assert tags == ["S-dis", "O", "B-sym", "I-sym", "E-sym", "B-dis", "E-dis", "O"]
    with pytest.raises(ConfigurationError, match="overlaps"):
        tags_from_spans(8, [(0, 3, "a"), (2, 4, "b")], scheme)


def test_entity_scores_by_hand():
    gold = [[(0, 2, "a"), (3, 5, "b")], [(1, 2, "a")]]
    predicted = [[(0, 2, "a"), (3, 5, "a")], []]
    result = entity_scores(gold, predicted)  # 1 true positive, 2 predicted, 3 gold
    assert result == pytest.approx({"precision": 0.5, "recall": 1 / 3, "f1": 0.4})


def test_classification_metrics_by_hand():
    gold, predicted = ["a", "a", "b", "c"], ["a", "b", "b", "b"]
    assert accuracy(gold, predicted) == 0.5
    # F1: a = 2·1·0.5/1.5 = 2/3, b = 2·(1/3)·1/(4/3) = 0.5, c = 0
    assert macro_f1(gold, predicted) == pytest.approx((2 / 3 + 0.5 + 0) / 3)
    # micro F1 without the negative label "a": tp 1 (b), predicted 3, gold 2 → P 1/3, R 1/2, F1 0.4
    assert micro_f1(gold, predicted, negative_labels=["a"]) == pytest.approx(0.4)


def test_accuracy_at_1_skips_questions_without_an_answer():
    scores = [[0.1, 0.9, 0.3], [0.8, 0.2], [0.5, 0.4]]
    labels = [[0, 1, 0], [0, 1], [0, 0]]
    assert accuracy_at_1(scores, labels) == 0.5
    with pytest.raises(ConfigurationError):
        accuracy_at_1([[1.0]], [[0]])


def test_accuracy_at_1_counts_ties_as_misses():
    # a constant model ties every candidate: no question is answered, whatever the candidate order
    assert accuracy_at_1([[0.5, 0.5, 0.5], [1.0, 1.0]], [[1, 0, 0], [0, 1]]) == 0.0
    # a tie below the top does not matter; a tie at the top does, even between two correct candidates
    assert accuracy_at_1([[0.9, 0.2, 0.2], [0.4, 0.4, 0.1]], [[1, 0, 0], [1, 1, 0]]) == 0.5


def test_macro_f1_equals_sklearn_over_the_present_labels():
    from sklearn.metrics import f1_score

    rng = random.Random(5)
    labels = [f"c{i}" for i in range(12)]
    gold = [rng.choice(labels[:8]) for _ in range(300)]
    predicted = [g if rng.random() < 0.6 else rng.choice(labels) for g in gold]
    present = sorted(set(gold) | set(predicted))
    assert len(present) > 8  # some labels occur only among the predictions
    expected = f1_score(gold, predicted, average="macro", labels=present)
    assert macro_f1(gold, predicted) == pytest.approx(expected, abs=1e-12)


def test_graded_ranking_scores_by_hand_and_against_brute_force_baselines():
    import itertools
    import math

    from kgplm.evaluation.metrics import graded_ranking_baselines, graded_ranking_scores

    grades = [[2, 0, 1], [1, 1, 0], [0, 0]]
    scores = [[0.9, 0.5, 0.1], [0.3, 0.3, 0.3], [0.2, 0.1]]
    result = graded_ranking_scores(scores, grades)
    # query 1: pairs (2>0) right, (2>1) right, (1>0) wrong; query 2: two pairs, both tied; query 3: none
    assert result["pairs"] == 5 and result["pairwise_accuracy"] == pytest.approx(2 / 5)

    def dcg(gains):
        return sum(g / math.log2(r + 2) for r, g in enumerate(gains))

    first = dcg([3, 0, 1]) / dcg([3, 1, 0])
    second = dcg([0, 1, 1]) / dcg([1, 1, 0])  # all tied: worst grade first
    assert result["ndcg"] == pytest.approx((first + second) / 2)  # query 3 has no relevant document
    expected = []
    for query in grades[:2]:  # the mean over every permutation
        gains = [2**g - 1 for g in query]
        expected.append(
            sum(dcg(p) for p in itertools.permutations(gains))
            / math.factorial(len(gains))
            / dcg(sorted(gains, reverse=True))
        )
    assert graded_ranking_baselines(grades)["random_ndcg"] == pytest.approx(sum(expected) / 2)
