"""score(): macro-F1 over present labels, labels unseen in training, ranking ties and baselines, graded ranking."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kgplm.evaluation.tasks import TextExample, get_task, load_task
from kgplm.finetuning.encoding import TaskEncoder, label_names_for
from kgplm.finetuning.scoring import score
from tests.finetuning.test_loop import one_hot


# -- item 2: macro-F1 over present labels --------------------------------------------------------------------
def test_a_perfect_cmedtc_prediction_scores_macro_f1_one(tasks_root):
    spec, splits = get_task("cmedtc"), load_task("cmedtc", tasks_root)
    names = label_names_for(spec, splits["train"])
    encoder = TaskEncoder(spec, None, label_names=names)
    test = splits["test"]
    result = score(encoder, test, [{} for _ in test], one_hot(names, [e.label for e in test]))
    assert result["macro_f1"] == 1.0 and result["main"] == 1.0  # was 0.886: absent labels scored 0


def test_scored_macro_f1_equals_sklearn_over_the_present_labels():
    from sklearn.metrics import f1_score

    rng = random.Random(0)
    names = [f"l{i}" for i in range(10)]
    gold = [rng.choice(names[:6]) for _ in range(200)]
    predicted = [g if rng.random() < 0.7 else rng.choice(names[:8]) for g in gold]
    examples = [TextExample(str(i), "x", g) for i, g in enumerate(gold)]
    encoder = TaskEncoder(get_task("cmedtc"), None, label_names=names)
    result = score(encoder, examples, [{} for _ in examples], one_hot(names, predicted))
    present = sorted(set(gold) | set(predicted))
    assert result["macro_f1"] == pytest.approx(f1_score(gold, predicted, average="macro", labels=present))


# -- item 8: a label unseen in training ----------------------------------------------------------------------
def test_a_dev_label_unseen_in_training_is_an_error_not_an_abort(tokenizer):
    examples = [TextExample("d:1", "头痛", "a"), TextExample("d:2", "发热", "b"), TextExample("d:3", "咳嗽", "new")]
    encoder = TaskEncoder(get_task("cmedic"), tokenizer, label_names=["a", "b"])
    features = encoder.encode(examples)
    assert encoder.statistics["unseen_labels"] == 1
    assert features[2]["labels"] == -100  # never trained on
    result = score(encoder, examples, features, one_hot(["a", "b"], ["a", "b", "a"]))
    assert result["accuracy"] == pytest.approx(2 / 3)
    assert result["unseen_labels"] == 1


# -- item 1: ranking ties and baselines ----------------------------------------------------------------------
def test_a_constant_ranking_model_scores_zero_and_baselines_are_reported():
    from kgplm.evaluation.tasks import RankingExample

    examples = [
        RankingExample("q:1", "q1", ("a", "b", "c"), (1, 0, 0)),
        RankingExample("q:2", "q2", ("a", "b"), (0, 1)),
        RankingExample("q:3", "q3", ("a", "b"), (0, 0)),
    ]
    features = [{"candidate_group": g, "labels": label} for g, e in enumerate(examples) for label in e.labels]
    encoder = TaskEncoder(get_task("cmedqa"), None, label_names=None)
    result = score(encoder, examples, features, [np.float32(0.0)] * len(features))
    assert result["acc@1"] == 0.0
    assert result["answerable"] == 2 and result["answerable_share"] == pytest.approx(2 / 3)
    assert result["random_acc@1"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert result["first_candidate_acc@1"] == pytest.approx(0.5)


def test_graded_ranking_scores_group_documents_by_query(tokenizer):
    from kgplm.evaluation.tasks import RankingExample

    examples = [
        RankingExample("q:1", "头痛", ("a", "b", "c"), (2, 0, 1)),
        RankingExample("q:2", "发热", ("d", "e"), (0, 1)),
    ]
    encoder = TaskEncoder(get_task("cmedir"), tokenizer, label_names=None)
    features = encoder.encode(examples)
    assert [f["candidate_group"] for f in features] == [0, 0, 0, 1, 1]
    result = score(encoder, examples, features, [np.float32(v) for v in (3.0, 1.0, 2.0, 0.0, 1.0)])
    assert result["pairwise_accuracy"] == 1.0 and result["ndcg"] == pytest.approx(1.0) and result["main"] == 1.0
    assert result["random_pairwise_accuracy"] == 0.5
