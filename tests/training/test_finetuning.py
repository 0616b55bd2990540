"""TaskEncoder and score: windows over long documents, relation windows, labels unseen in training, metrics."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kgplm.evaluation.tasks import RelationExample, SpanExample, TextExample, get_task, load_task
from kgplm.training.finetuning import TaskEncoder, label_names_for, score


@pytest.fixture(scope="module")
def tokenizer(shared_data):
    from kgplm.text.tokenization import load_tokenizer

    return load_tokenizer(shared_data / "vocab" / "bert-base-chinese" / "vocab.txt")


@pytest.fixture(scope="module")
def tasks_root(shared_data):
    return shared_data / "tasks"


def gold_tag_outputs(encoder: TaskEncoder, features: list[dict]) -> list[np.ndarray]:
    """What a model that predicts every training tag would output (ignored positions: O)."""
    size = len(encoder.label_names)
    return [np.eye(size)[np.where(f["labels"] < 0, 0, f["labels"])] for f in features]


def one_hot(names: list[str], labels: list[str]) -> list[np.ndarray]:
    return [np.eye(len(names))[names.index(label)] for label in labels]


# -- item 3: long documents ----------------------------------------------------------------------------------
@pytest.mark.parametrize("task", ["cehrner", "cmedqaner"])
def test_gold_tags_reach_f1_one_on_long_test_documents(task, tokenizer, tasks_root):
    """The best reachable test F1 through encode → decode (was 0.54 for cEHRNER, 0.94 for cMedQANER at 128)."""
    spec, splits = get_task(task), load_task(task, tasks_root)
    encoder = TaskEncoder(spec, tokenizer, label_names=label_names_for(spec, splits["train"]), max_length=128)
    features = encoder.encode(splits["test"])
    result = score(encoder, splits["test"], features, gold_tag_outputs(encoder, features))
    assert result["f1"] == pytest.approx(1.0), (result, encoder.statistics)
    assert all(len(f["input_ids"]) <= 128 for f in features)
    assert encoder.statistics["spans_truncated"] == 0


def test_windows_decode_to_exact_document_offsets(tokenizer):
    rng = random.Random(2)
    alphabet = "患者头痛发热咳嗽腹泻胸闷乏力恶心呕吐"
    text = "".join(rng.choice(alphabet) for _ in range(400))
    spans, position = [], 0
    while position < 390:  # entities of 1–9 characters everywhere, many across window edges
        start = position + rng.randint(0, 6)
        end = start + rng.randint(1, 9)
        if end > len(text):
            break
        spans.append((start, end, rng.choice(["sym", "dis"])))
        position = end
    example = SpanExample("long:1", text, tuple(spans))
    spec = get_task("cmedqaner")
    encoder = TaskEncoder(spec, tokenizer, label_names=["O", "B-dis", "I-dis", "B-sym", "I-sym"], max_length=24)
    features = encoder.encode([example])
    assert len(features) > 400 // 22  # several windows, each within max_length
    assert all(len(f["input_ids"]) <= 24 for f in features)
    predicted = encoder.predicted_spans([example], features, gold_tag_outputs(encoder, features))
    assert predicted == [set(spans)]
    for start, end, _ in predicted[0]:
        assert text[start:end] == text[start:end] and 0 <= start < end <= len(text)


def test_relation_windows_keep_both_entities_and_count_those_that_cannot_fit(tokenizer):
    filler = "这是一个很长的句子用来填充上下文" * 6  # 96 characters, one token each
    near = RelationExample("r:1", filler + "阿司匹林治疗头痛" + filler, (96, 100), (102, 104), "treat")
    far = RelationExample("r:2", "阿司匹林" + filler + "头痛", (0, 4), (100, 102), "treat")
    spec = get_task("chemprot")
    encoder = TaskEncoder(spec, tokenizer, label_names=["none", "treat"], max_length=32)
    features = encoder.encode([near, far])
    assert encoder.statistics["relation_entities_cut"] == 1
    first = features[0]
    offsets = first["offsets"]
    head, tail = first["head_spans"], first["tail_spans"]
    # the window moved to the entities: the pooled tokens are the entity's characters, not [CLS]
    assert (offsets[head[0]][0], offsets[head[1] - 1][1]) == (96, 100)
    assert (offsets[tail[0]][0], offsets[tail[1] - 1][1]) == (102, 104)
    # the cut example is scored as a miss whatever the model outputs
    result = score(encoder, [near, far], features, one_hot(["none", "treat"], ["treat", "treat"]))
    assert result["accuracy"] == 0.5


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

    examples = [RankingExample("q:1", "q1", ("a", "b", "c"), (1, 0, 0)),
                RankingExample("q:2", "q2", ("a", "b"), (0, 1)),
                RankingExample("q:3", "q3", ("a", "b"), (0, 0))]
    features = [{"candidate_group": g, "labels": label} for g, e in enumerate(examples) for label in e.labels]
    encoder = TaskEncoder(get_task("cmedqa"), None, label_names=None)
    result = score(encoder, examples, features, [np.float32(0.0)] * len(features))
    assert result["acc@1"] == 0.0
    assert result["answerable"] == 2 and result["answerable_share"] == pytest.approx(2 / 3)
    assert result["random_acc@1"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert result["first_candidate_acc@1"] == pytest.approx(0.5)


# -- relation triples (CMeIE) and graded ranking (cMedIR) ----------------------------------------------------
def test_gold_entities_and_predicates_reach_every_representable_cmeie_triple(tokenizer, tasks_root):
    spec, splits = get_task("cmeie"), load_task("cmeie", tasks_root)
    names = label_names_for(spec, splits["train"])
    assert names[0] == "<no relation>" and len(names) == 44
    encoder = TaskEncoder(spec, tokenizer, label_names=names, max_length=512)
    test = splits["test"]
    features = encoder.encode(test)
    # what a model predicting every training label outputs: the gold pairs, one-hot predicates
    outputs = []
    for feature in features:
        strings = {}
        for s0, s1, o0, o1 in feature["entity_pairs"].tolist():
            strings[(s0, s1)] = feature["text"][feature["offsets"][s0][0]: feature["offsets"][s1 - 1][1]]
            strings[(o0, o1)] = feature["text"][feature["offsets"][o0][0]: feature["offsets"][o1 - 1][1]]
        pairs = [(strings[(s0, s1)], strings[(o0, o1)]) for s0, s1, o0, o1 in feature["entity_pairs"].tolist()]
        outputs.append({"pairs": pairs, "pair_logits": np.eye(len(names))[feature["pair_labels"]]})
    result = score(encoder, test, features, outputs)
    gold = sum(len(set(e.triples)) for e in test)
    unreachable = encoder.last_statistics["triples_unreachable"]
    assert unreachable < 0.05 * gold
    assert result["precision"] == 1.0
    assert result["recall"] == pytest.approx((gold - unreachable) / gold, abs=0.01)
    # the entity tags of the features decode to exactly the strings of the pairs
    feature = next(f for f in features if len(f["entity_pairs"]))
    tag_logits = np.eye(len(encoder.entity_tags))[np.where(feature["labels"] < 0, 0, feature["labels"])]
    decoded = {name for name, _ in encoder.entity_candidates(feature["text"], feature, tag_logits)}
    assert decoded == {name for pair in outputs[features.index(feature)]["pairs"] for name in pair}


def test_graded_ranking_scores_group_documents_by_query(tokenizer):
    from kgplm.evaluation.tasks import RankingExample

    examples = [RankingExample("q:1", "头痛", ("a", "b", "c"), (2, 0, 1)), RankingExample("q:2", "发热", ("d", "e"), (0, 1))]
    encoder = TaskEncoder(get_task("cmedir"), tokenizer, label_names=None)
    features = encoder.encode(examples)
    assert [f["candidate_group"] for f in features] == [0, 0, 0, 1, 1]
    result = score(encoder, examples, features, [np.float32(v) for v in (3.0, 1.0, 2.0, 0.0, 1.0)])
    assert result["pairwise_accuracy"] == 1.0 and result["ndcg"] == pytest.approx(1.0) and result["main"] == 1.0
    assert result["random_pairwise_accuracy"] == 0.5
