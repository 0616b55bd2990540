"""TaskEncoder: windows over long documents decoded to document offsets, relation windows, CMeIE triples."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kgplm.evaluation.tasks import RelationExample, SpanExample, get_task, load_task
from kgplm.finetuning.encoding import TaskEncoder, label_names_for
from kgplm.finetuning.scoring import score


def gold_tag_outputs(encoder: TaskEncoder, features: list[dict]) -> list[np.ndarray]:
    """What a model that predicts every training tag would output (ignored positions: O)."""
    size = len(encoder.label_names)
    return [np.eye(size)[np.where(f["labels"] < 0, 0, f["labels"])] for f in features]


def one_hot(names: list[str], labels: list[str]) -> list[np.ndarray]:
    return [np.eye(len(names))[names.index(label)] for label in labels]


# -- item 3: long documents ----------------------------------------------------------------------------------
@pytest.mark.parametrize("task", ["cehrner", "cmedqaner"])
def test_gold_tags_reach_f1_one_on_long_test_documents(task, tokenizer, tasks_root):
    """The best reachable test F1 through encode → decode (was 0.54 for cEHRNER, 0.94 for cMedQANER at 128).

    Tags sit on each word's first piece (issue 29.5), so a gold span that starts or ends inside a word (a
    Latin or digit run such as "10mg" cut after "10": 3 of 632 in cMedQANER's test split) cannot be decoded:
    recall is exactly the share of gold spans on word boundaries, and each such span costs at most one false
    positive. Every other span comes back exactly."""
    spec, splits = get_task(task), load_task(task, tasks_root)
    encoder = TaskEncoder(spec, tokenizer, label_names=label_names_for(spec, splits["train"]), max_length=128)
    features = encoder.encode(splits["test"])
    result = score(encoder, splits["test"], features, gold_tag_outputs(encoder, features))
    gold = sum(len(example.spans) for example in splits["test"])
    unreachable = encoder.statistics["spans_not_on_word_boundaries"]
    assert unreachable <= 0.01 * gold, encoder.statistics
    assert result["recall"] == pytest.approx((gold - unreachable) / gold), (result, encoder.statistics)
    assert result["precision"] >= (gold - unreachable) / gold - 1e-12
    if unreachable == 0:
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
            strings[(s0, s1)] = feature["text"][feature["offsets"][s0][0] : feature["offsets"][s1 - 1][1]]
            strings[(o0, o1)] = feature["text"][feature["offsets"][o0][0] : feature["offsets"][o1 - 1][1]]
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


def test_loss_items_count_what_each_head_averages_over():
    """Data parallelism weights each rank's mean loss by its share of these counts (hand-counted)."""
    import torch

    from kgplm.finetuning.loop import loss_items

    # graded ranking: ordered pairs of one query with a higher grade — query 0: (2>1), (2>0), (1>0); query 1: ties
    graded = {"labels": torch.tensor([2, 1, 0, 1, 1]), "candidate_group": torch.tensor([0, 0, 0, 1, 1])}
    assert loss_items(graded, "graded_ranking") == 3
    # answer ranking: questions with a correct candidate (query 1 has none)
    ranking = {"labels": torch.tensor([0, 1, 0, 0]), "candidate_group": torch.tensor([0, 0, 1, 1])}
    assert loss_items(ranking, "qa_ranking") == 1
    # token tasks and relation triples: labelled tokens
    tags = torch.tensor([[-100, 0, 1, 2, -100], [-100, 0, -100, -100, -100]])
    assert loss_items({"labels": tags}, "ner") == loss_items({"labels": tags}, "relation_triples") == 4
    assert loss_items({"labels": torch.tensor([0, 2, 1])}, "classification") == 3
