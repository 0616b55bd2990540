"""EP-PLM: product attribute triples (graph, table, exclusions), PAP loss against a hand computation,
negatives never positive, the PAP step schedule, gradients, and a real-text run that fine-tunes on cMedQANER."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

import kgplm
from kgplm.exceptions import ConfigurationError, DataFormatError
from kgplm.methods.epplm import (
    AttributeGroup,
    EpplmCollator,
    EpplmConfig,
    EpplmForPreTraining,
    ProductAttributes,
    attribute_distances,
    is_pap_step,
    product_attribute_objective,
    read_attribute_table,
)
from kgplm.models import TINY_TEXT_ENCODER
from kgplm.text.masking import Masker
from tests.methods.electra_real_text import (
    fine_tune_discriminator_on_cmedqaner,
    train_on_dialogues,
)
from tests.test_api import TOY_GRAPH

NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


# -- triples ---------------------------------------------------------------------------------------------------
def test_toy_graph_indications_become_groups():
    from kgplm import KGStore

    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    attributes = ProductAttributes.from_store(store)
    assert {(g.title, g.attribute, g.values) for g in attributes.groups} == {
        ("二甲双胍", "适应症", ("糖尿病",)),
        ("胰岛素", "适应症", ("糖尿病",)),
        ("阿司匹林", "适应症", tuple(sorted(["发热", "头痛", "脑卒中"]))),
        ("氨氯地平", "适应症", ("高血压",)),
        ("布洛芬", "适应症", tuple(sorted(["发热", "头痛"]))),
    }
    assert [attributes.values[i] for i in attributes.pool("适应症")] == sorted(
        ["糖尿病", "发热", "头痛", "脑卒中", "高血压"]
    )
    literal = ProductAttributes.from_store(store, ["usage"])  # literal attributes are values too
    assert [(g.title, g.values) for g in literal.groups] == [("二甲双胍", ("口服，一次0.5g，一日2次",))]
    assert len(ProductAttributes.from_store(store, [])) == 0


def test_tables_are_read_merged_excluded_and_bad_lines_located(tmp_path):
    table = tmp_path / "products.tsv"
    table.write_text(
        "感冒灵颗粒\t适应症\t感冒|头痛| 发热\n\n感冒灵颗粒\t适应症\t咳嗽\n布洛芬\t成份\t布洛芬\n", encoding="utf-8"
    )
    groups = read_attribute_table(table)
    assert groups[0] == AttributeGroup("感冒灵颗粒", "适应症", ("感冒", "头痛", "发热"))
    attributes = ProductAttributes(groups)
    assert [(g.title, g.attribute, g.values) for g in attributes.groups] == [
        ("布洛芬", "成份", ("布洛芬",)),
        ("感冒灵颗粒", "适应症", tuple(sorted(["感冒", "头痛", "发热", "咳嗽"]))),
    ]
    smaller = attributes.without([("感冒灵颗粒", "适应症", "咳嗽"), ("布洛芬", "成份", "布洛芬")])
    assert smaller.triples() == [("感冒灵颗粒", "适应症", v) for v in sorted(["感冒", "头痛", "发热"])]
    attributes.save(tmp_path / "a.json")
    assert ProductAttributes.load(tmp_path / "a.json").triples() == attributes.triples()
    attributes.write_table(tmp_path / "again.tsv")
    assert ProductAttributes.from_table(tmp_path / "again.tsv").triples() == attributes.triples()
    bad = tmp_path / "bad.tsv"
    bad.write_text("感冒灵颗粒\t适应症\t感冒\n布洛芬\t成份\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad.tsv:2.*2 tab-separated fields"):
        read_attribute_table(bad)
    bad.write_text("感冒灵颗粒\t适应症\t | \n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad.tsv:1.*empty"):
        read_attribute_table(bad)


# -- the loss --------------------------------------------------------------------------------------------------
def test_pap_loss_equals_a_hand_computation():
    """Group 0: one positive, two negatives; group 1: two positives, four negatives; γ = 4."""
    queries = torch.tensor([[0.0, 1.0], [2.0, -1.0]])
    values = torch.tensor([[0.5, 1.0], [3.0, 3.0], [-1.0, 0.0], [2.0, -2.0], [9.0, 1.0]])
    group = torch.tensor([0, 0, 0, 1, 1, 1, 1, 1, 1])
    value = torch.tensor([0, 1, 2, 3, 0, 4, 1, 2, 2])
    label = torch.tensor([1, 0, 0, 1, 1, 0, 0, 0, 0])
    distances = attribute_distances(queries, values, group, value)
    by_hand_distances = [
        sum(abs(q - v) for q, v in zip(queries[g].tolist(), values[x].tolist()))
        for g, x in zip(group.tolist(), value.tolist())
    ]
    assert distances.tolist() == pytest.approx(by_hand_distances)

    def log_sigmoid(x):
        return -math.log1p(math.exp(-x))

    gamma, total = 4.0, 0.0
    for g in (0, 1):
        rows = [i for i in range(9) if group[i] == g]
        positives = [by_hand_distances[i] for i in rows if label[i] == 1]
        negatives = [by_hand_distances[i] for i in rows if label[i] == 0]
        assert len(negatives) == 2 * len(positives)  # k = 2 × positives
        total += -sum(log_sigmoid(gamma - d) for d in positives) / len(positives) - sum(
            log_sigmoid(d - gamma) for d in negatives
        ) / len(negatives)
    objective = product_attribute_objective(distances, group, label, gamma)
    assert objective.loss.item() == pytest.approx(total / 2, rel=1e-6)
    assert objective.count == 2


# -- batches ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from kgplm.text.tokenization import build_vocab

    texts = ["阿司匹林适应症发热头痛脑卒中", "布洛芬成份感冒咳嗽鼻塞", "二甲双胍糖尿病高血压氨氯地平"] * 20
    return build_vocab(texts, 120, min_frequency=1, show_progress=False)


def attributes_with_shared_values() -> ProductAttributes:
    return ProductAttributes(
        [
            AttributeGroup("阿司匹林", "适应症", ("发热", "头痛", "脑卒中")),
            AttributeGroup("布洛芬", "适应症", ("发热", "头痛")),
            AttributeGroup("二甲双胍", "适应症", ("糖尿病",)),
            AttributeGroup("氨氯地平", "适应症", ("高血压",)),
            AttributeGroup("感冒灵", "适应症", ("感冒", "发热", "咳嗽", "鼻塞", "头痛")),
            AttributeGroup("布洛芬", "成份", ("布洛芬",)),  # no other 成份 value: never a PAP group
        ]
    )


def make_collator(tokenizer, attributes, **overrides) -> EpplmCollator:
    options = dict(
        probability=1.0, schedule="with_rtd", max_values=3, negative_ratio=2, query_length=16, value_length=8
    )
    options.update(overrides)
    masker = Masker.from_tokenizer(tokenizer, "bert", mask_fraction=1.0, random_fraction=0.0)
    return EpplmCollator(
        attributes=attributes,
        tokenizer=tokenizer,
        masker=masker,
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
        sentence_order=False,
        **options,
    )


def text_rows(tokenizer, count=8):
    return {"input_ids": [tokenizer("阿司匹林适应症发热头痛")["input_ids"] for _ in range(count)]}


def test_negatives_never_equal_a_positive_and_come_from_the_same_attribute(tokenizer):
    attributes = attributes_with_shared_values()
    collator = make_collator(tokenizer, attributes)
    seen = set()
    for seed in range(2000):
        group, positives, negatives = collator.sample_group(np.random.default_rng(seed))
        values = attributes.value_ids(group)
        title, attribute = attributes.groups[group].title, attributes.groups[group].attribute
        seen.add((title, attribute))
        assert set(positives.tolist()) <= set(values.tolist()) and len(positives) == min(3, len(values))
        assert len(negatives) == 2 * len(positives)  # k = 2 × positives
        assert not set(negatives.tolist()) & set(values.tolist())  # never a positive of the group
        assert set(negatives.tolist()) <= set(attributes.pool(attribute).tolist())  # the same attribute's values
    # every group that can have a negative is drawn; 布洛芬's 成份 (the only 成份 group) never
    assert seen == {(g.title, g.attribute) for g in attributes.groups if g.attribute == "适应症"}

    batch = collator(text_rows(tokenizer), np.array([[0, 0, i] for i in range(8)]))
    assert batch.target_counts["pap"] == len(batch["pap_query_ids"]) == 8
    assert len(torch.unique(batch["pap_value_ids"], dim=0)) == len(batch["pap_value_ids"])  # each value once
    for row in range(8):
        chosen = batch["pap_candidate_group"] == row
        labels, rows = batch["pap_candidate_label"][chosen], batch["pap_candidate_value"][chosen]
        assert int((labels == 0).sum()) == 2 * int((labels == 1).sum())
        assert not set(rows[labels == 0].tolist()) & set(rows[labels == 1].tolist())


def test_pap_steps_are_one_per_block_and_agree_across_micro_batches(tokenizer):
    steps = [s for s in range(2000) if is_pap_step(3, s, 0.05)]
    assert len(steps) == 100 and all(len([s for s in steps if b * 20 <= s < b * 20 + 20]) == 1 for b in range(100))
    assert [s for s in range(2000) if is_pap_step(3, s, 0.05)] == steps  # a function of (seed, step)
    assert steps != [s for s in range(2000) if is_pap_step(4, s, 0.05)]
    assert not any(is_pap_step(0, s, 0.0) for s in range(100)) and all(is_pap_step(0, s, 1.0) for s in range(10))
    collator = make_collator(tokenizer, attributes_with_shared_values(), probability=0.05)
    rows = text_rows(tokenizer, 4)
    for step in range(40):
        halves = [
            collator({"input_ids": rows["input_ids"][:2]}, np.array([[3, step, 0], [3, step, 1]])),
            collator({"input_ids": rows["input_ids"][2:]}, np.array([[3, step, 2], [3, step, 3]])),
        ]
        assert [("pap_query_ids" in half) for half in halves] == [is_pap_step(3, step, 0.05)] * 2


def test_the_share_of_pap_steps_is_rho_in_every_prefix():
    """ρ = 0.15 is 300 of 2,000 steps (a hand count: 0.15 × 2,000), not 1/round(1/0.15) = 1/7 (286); every first n
    steps hold ⌊0.15 n⌋ or ⌈0.15 n⌉, and PAP steps are 6 or 7 steps apart."""
    for probability, expected in ((0.15, 300), (0.3, 600), (0.05, 100), (0.4, 800)):
        flags = [is_pap_step(7, s, probability) for s in range(2000)]
        assert sum(flags) == expected, probability
        counts = np.cumsum(flags)
        for n in range(1, 2001):
            assert math.floor(probability * n) - 1e-9 <= counts[n - 1] <= math.ceil(probability * n - 1e-9), (
                probability,
                n,
            )
    steps = [s for s in range(2000) if is_pap_step(7, s, 0.15)]
    assert set(np.diff(steps).tolist()) <= {6, 7}


def test_alternate_schedule_makes_pap_only_batches_and_the_generator_gets_no_pap_gradient(tokenizer):
    attributes = attributes_with_shared_values()
    batch = make_collator(tokenizer, attributes, schedule="alternate")(
        text_rows(tokenizer), np.array([[0, 0, i] for i in range(8)])
    )
    assert "input_ids" not in batch and "pap_query_ids" in batch and set(batch.target_counts) == {"pap"}
    torch.manual_seed(0)
    model = EpplmForPreTraining(EpplmConfig(vocab_size=len(tokenizer), **TINY_TEXT_ENCODER, **NO_DROPOUT))
    output = model(**batch)
    assert set(output.losses) == {"pap"}
    output.loss.backward()
    for name, parameter in model.named_parameters():
        reached = parameter.grad is not None and bool(parameter.grad.any())
        if name.startswith(("generator.", "rtd_head.")):
            assert not reached, name
        elif name.startswith(("pap_projection.", "bert.pooler.")) or ".layer.0.attention.self.query." in name:
            assert reached, name


def test_epplm_record_and_config():
    from kgplm.methods import get

    spec = get("epplm")
    assert spec.artefacts == {"product_attributes"} and spec.default_masking == "word_entity"
    config = EpplmConfig()
    assert (config.rtd_weight, config.pap_margin, config.pap_probability, config.mask_fraction) == (
        50.0,
        4.0,
        0.05,
        1.0,
    )
    with pytest.raises(ConfigurationError, match="pap_schedule"):
        EpplmConfig(pap_schedule="sometimes")


def test_method_data_reaches_the_stage_and_unknown_keys_fail(tmp_path):
    from tests.test_api import toy_arguments, write_toy_corpus

    corpus = write_toy_corpus(tmp_path / "notes.txt")
    table = tmp_path / "products.tsv"
    table.write_text("感冒灵颗粒\t适应症\t感冒|头痛\n", encoding="utf-8")
    excluded = tmp_path / "held_out.tsv"
    excluded.write_text("阿司匹林\t适应症\t脑卒中\n", encoding="utf-8")
    result = kgplm.train(
        "epplm",
        **toy_arguments(corpus, tmp_path / "run", max_steps=4, checkpoint_every=4, log_every=2),
        method_data={"product_attributes": str(table), "exclude_attributes": str(excluded)},
    )
    saved = ProductAttributes.load(Path(result.output_dir) / "kg" / "product_attributes.json")
    triples = set(saved.triples())
    assert ("感冒灵颗粒", "适应症", "感冒") in triples and ("阿司匹林", "适应症", "发热") in triples
    assert ("阿司匹林", "适应症", "脑卒中") not in triples
    with pytest.raises(ConfigurationError, match="unknown method_data keys"):
        kgplm.train(
            "epplm",
            **toy_arguments(corpus, tmp_path / "other", max_steps=2),
            method_data={"attribute_table": str(table)},
        )


# -- real text -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def epplm_run(cmekg_store, shared_data, tmp_path_factory):
    """CMeKG's drug attributes; PAP on every other step so that its curve has points."""
    return train_on_dialogues(
        "epplm",
        cmekg_store,
        shared_data,
        tmp_path_factory.mktemp("epplm"),
        learning_rate=3e-3,
        model_options={"pap_probability": 0.5, "pap_max_values": 4},
    )


@pytest.mark.slow
def test_every_epplm_loss_decreases_on_real_medical_text(epplm_run):
    for name in ("loss", "mlm", "rtd", "pap"):
        curve = epplm_run.curve(name)
        assert len(curve) == 4 and curve[-1] < curve[0], (name, curve)


@pytest.mark.slow
def test_the_epplm_discriminator_fine_tunes_on_cmedqaner(epplm_run, shared_data, tmp_path):
    _, pretrained = fine_tune_discriminator_on_cmedqaner(epplm_run, shared_data, tmp_path / "ner")
    assert "pooler.dense.weight" in pretrained.bert.state_dict()  # D with the pooler PAP trained


def test_a_resumed_run_repeats_the_pap_schedule_and_the_losses(tmp_path):
    """Train 8 steps with a checkpoint at 4; drop the last checkpoint and resume: the same PAP steps, same losses."""
    import shutil

    from tests.test_api import toy_arguments, write_toy_corpus

    corpus = write_toy_corpus(tmp_path / "notes.txt")
    arguments = toy_arguments(
        corpus, tmp_path / "run", max_steps=8, checkpoint_every=4, log_every=1, model_options={"pap_probability": 0.25}
    )
    whole = kgplm.train("epplm", **arguments).metrics
    assert sum("pap" in record for record in whole) == 2  # one PAP step per block of 4
    shutil.rmtree(tmp_path / "run" / "checkpoints" / "step-0000008")
    shutil.rmtree(tmp_path / "run" / "model")
    resumed = kgplm.train("epplm", **arguments).metrics
    assert resumed == whole
