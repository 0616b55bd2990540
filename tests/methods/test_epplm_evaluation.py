"""EP-PLM's PAP evaluation and PAP negatives: popularity-matched training negatives, the title-agnostic baseline
loss against a Monte Carlo estimate, withheld values never negatives, the held-out split leaving the drug's other
attributes and text, matched evaluation negatives, and the drug-shuffle control at chance."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import kgplm
from kgplm.methods.epplm import AttributeGroup, EpplmConfig, ProductAttributes
from kgplm.methods.epplm.evaluation import (
    auc,
    build_evaluation_set,
    chance_interval,
    drop_leaking_text,
    held_out_triples,
    length_scores,
    pap_held_out_pairs,
    popularity_scores,
    title_agnostic_auc,
    title_agnostic_baseline_loss,
)
from tests.methods.test_epplm import make_collator, tokenizer  # noqa: F401  (the fixture)


def skewed_attributes(num_drugs: int = 120, seed: int = 0) -> ProductAttributes:
    """Drugs whose 适应症 mix a few values many drugs share (short) with many values of one drug (long), as in
    CMeKG; each drug also has a 不良反应 and a 功能主治 text restating one of its indications."""
    rng = np.random.default_rng(seed)
    common = [f"病{i}" for i in range(12)]  # short, shared
    groups = []
    for drug in range(num_drugs):
        shared = rng.choice(len(common), size=int(rng.integers(1, 4)), replace=False, p=None)
        values = [common[i] for i in shared.tolist()]
        values += [f"罕见综合征{drug}之{k}" for k in range(int(rng.integers(1, 4)))]  # long, this drug's only
        title = f"药{drug}号片"
        groups.append(AttributeGroup(title, "适应症", tuple(values)))
        groups.append(AttributeGroup(title, "不良反应", (f"反应{drug % 7}",)))
        groups.append(AttributeGroup(title, "功能主治", (f"用于{values[0]}",)))
    return ProductAttributes(groups)


def sampled_candidates(collator, attributes, draws: int = 3000):
    """(value id, label, weight) of the collator's candidates over ``draws`` groups: weights as Eq. 3 averages."""
    rows = []
    for seed in range(draws):
        group, positives, negatives = collator.sample_group(np.random.default_rng(seed))
        rows += [(attributes.groups[group].attribute, int(v), 1, 1 / len(positives)) for v in positives]
        rows += [(attributes.groups[group].attribute, int(v), 0, 1 / len(negatives)) for v in negatives]
    return rows


def candidate_popularity_auc(attributes, rows) -> float:
    popularity = {}
    for attribute in attributes.attributes:
        popularity.update(
            {(attribute, int(v)): int(c) for v, c in zip(attributes.pool(attribute), attributes.pool_counts(attribute))}
        )
    scores = np.array([popularity[(a, v)] for a, v, _, _ in rows], dtype=float)
    labels = np.array([label for _, _, label, _ in rows])
    return auc(scores[labels == 1], scores[labels == 0])


# -- training negatives ----------------------------------------------------------------------------------------
def test_default_training_negatives_are_as_popular_as_the_positives(tokenizer):
    """With uniform negatives a title-agnostic popularity scorer separates the collator's candidates; the default
    (frequency-matched) leaves it near chance. The analytic AUC agrees with the sampled one."""
    attributes = skewed_attributes()
    assert EpplmConfig().pap_negatives == "frequency"
    default = make_collator(tokenizer, attributes, max_values=20)
    sampled = candidate_popularity_auc(attributes, sampled_candidates(default, attributes))
    assert abs(sampled - 0.5) < 0.06, sampled
    assert abs(title_agnostic_auc(attributes, "frequency") - 0.5) < 0.06
    uniform = make_collator(tokenizer, attributes, max_values=20, negatives="uniform")
    separated = candidate_popularity_auc(attributes, sampled_candidates(uniform, attributes))
    assert separated > 0.6 and title_agnostic_auc(attributes, "uniform") > 0.6, separated


def test_frequency_negatives_follow_how_many_titles_have_the_value(tokenizer):
    """Hand law: for 阿司匹林 (发热, 头痛, 脑卒中) the other 适应症 values are 糖尿病 (2 titles) and 高血压 (1): 2/3, 1/3."""
    attributes = ProductAttributes(
        [
            AttributeGroup("二甲双胍", "适应症", ("糖尿病",)),
            AttributeGroup("胰岛素", "适应症", ("糖尿病",)),
            AttributeGroup("阿司匹林", "适应症", ("发热", "头痛", "脑卒中")),
            AttributeGroup("氨氯地平", "适应症", ("高血压",)),
        ]
    )
    collator = make_collator(tokenizer, attributes)
    aspirin = [g.title for g in attributes.groups].index("阿司匹林")
    counts = Counter()
    for seed in range(4000):
        group, _, negatives = collator.sample_group(np.random.default_rng(seed))
        if group == aspirin:
            counts.update(attributes.values[i] for i in negatives.tolist())
    total = sum(counts.values())
    assert set(counts) == {"糖尿病", "高血压"}
    assert abs(counts["糖尿病"] / total - 2 / 3) < 0.03


def test_the_title_agnostic_baseline_loss_equals_a_monte_carlo_fit(tokenizer):
    """The analytic loss of the best (attribute, value) scorer equals the loss of q_v = W₊/(W₊ + W₋) fitted on
    sampled batches (clipped at σ(γ)), for both laws; it lies below a constant scorer's 2 ln 2."""
    attributes = skewed_attributes(60)
    for law in ("frequency", "uniform"):
        rows = sampled_candidates(
            make_collator(tokenizer, attributes, max_values=20, negatives=law), attributes, draws=20000
        )
        weights: dict[tuple, list[float]] = {}
        for attribute, value, label, weight in rows:
            weights.setdefault((attribute, value), [0.0, 0.0])[label] += weight / 20000
        ceiling = 1 / (1 + math.exp(-4.0))
        fitted = 0.0
        for negative, positive in weights.values():
            q = min(positive / (positive + negative), ceiling)
            fitted -= (positive * math.log(q) if positive else 0.0) + (negative * math.log1p(-q) if negative else 0.0)
        analytic = title_agnostic_baseline_loss(attributes, law)
        assert abs(analytic - fitted) < 0.03, (law, analytic, fitted)
        assert analytic < 2 * math.log(2)
    assert title_agnostic_baseline_loss(attributes, "uniform") < title_agnostic_baseline_loss(attributes, "frequency")


def test_a_withheld_value_is_never_a_negative_of_its_own_title(tokenizer, tmp_path):
    """阿司匹林's held-out 脑卒中 stays in the pool (布洛芬 has it) but is never drawn against 阿司匹林, under either law."""
    attributes = ProductAttributes(
        [
            AttributeGroup("阿司匹林", "适应症", ("发热", "头痛", "脑卒中")),
            AttributeGroup("布洛芬", "适应症", ("脑卒中",)),
            AttributeGroup("二甲双胍", "适应症", ("糖尿病",)),
            AttributeGroup("氨氯地平", "适应症", ("高血压",)),
        ]
    )
    training = attributes.without([("阿司匹林", "适应症", "脑卒中")])
    stroke = training.values.index("脑卒中")
    assert stroke in training.pool("适应症").tolist()
    aspirin = [g.title for g in training.groups].index("阿司匹林")
    for law in ("frequency", "uniform"):
        collator = make_collator(tokenizer, training, negatives=law)
        drawn_for_aspirin = set()
        for seed in range(3000):
            group, _, negatives = collator.sample_group(np.random.default_rng(seed))
            if group == aspirin:
                drawn_for_aspirin.update(negatives.tolist())
        assert drawn_for_aspirin and stroke not in drawn_for_aspirin, law
    saved = ProductAttributes.load(training.save(tmp_path / "a.json"))
    assert saved.true_values("阿司匹林", "适应症") == {"发热", "头痛", "脑卒中"}  # withheld survives a save


# -- the held-out split ------------------------------------------------------------------------------------------
def test_a_held_out_drug_leaves_its_other_attributes_and_its_text(tmp_path):
    """The stage with pap_held_out: no triple of a held-out drug's other attributes is trained on; the value stays
    in training for another drug; no pre-training text line names the drug with one of its values."""
    from kgplm.methods.epplm.stage import product_attributes_stage
    from kgplm.training.run import RunDirectory
    from kgplm.training.stages import StageInputs

    attributes = skewed_attributes()
    table = attributes.write_table(tmp_path / "products.tsv")
    run = RunDirectory(tmp_path / "run")
    inputs = StageInputs(
        arguments={"method_data": {"graph_attributes": [], "product_attributes": str(table), "pap_held_out": 20}},
        store=_EmptyStore(),
        corpus=None,
        corpus_options={},
        progress=False,
    )
    training = product_attributes_stage(run, inputs)
    assert len(training.held_out) == 20
    trained = set(training.triples())
    held_titles = {title for title, _, _ in training.held_out}
    for title, attribute, value in training.held_out:
        assert (title, attribute, value) not in trained
        assert any(g.attribute == attribute and value in g.values for g in training.groups)  # another drug has it
        assert not [t for t in trained if t[0] == title and t[1] != attribute]  # 不良反应, 功能主治 gone
        assert [t for t in trained if t[0] == title and t[1] == attribute]  # its other indications stay
    lines = [
        f"{title}的适应症有{'、'.join(g.values)}。"
        for g in attributes.groups
        if g.attribute == "适应症"
        for title in [g.title]
    ]
    lines += [f"{g.title}的功能主治：{g.values[0]}。" for g in attributes.groups if g.attribute == "功能主治"]
    lines += [f"{g.title}可能引起{g.values[0]}。" for g in attributes.groups if g.attribute == "不良反应"]
    kept = drop_leaking_text(lines, training)
    assert len(kept) == len(lines) - 3 * len(held_titles)
    for title in held_titles:
        values = {v for a in attributes.attributes for v in attributes.true_values(title, a)}
        assert not [line for line in kept if title in line and any(v in line for v in values)], title


class _EmptyStore:
    relation_names: list = []
    attribute_predicate_names: list = []


def test_the_registered_held_out_split_reaches_a_real_run(tmp_path):
    """``kgplm.train`` with the evaluation's method_data writes the held-out pairs and withheld triples."""
    from kgplm.methods import get
    from tests.test_api import toy_arguments, write_toy_corpus

    evaluation = get("epplm").evaluations["PAP AUC"]
    assert evaluation.chance == 0.5 and evaluation.method_data["pap_held_out"] > 0
    corpus = write_toy_corpus(tmp_path / "notes.txt")
    result = kgplm.train(
        "epplm",
        **toy_arguments(corpus, tmp_path / "run", max_steps=2, checkpoint_every=2, log_every=1),
        method_data={"pap_held_out": 1},
    )
    saved = ProductAttributes.load(Path(result.output_dir) / "kg" / "product_attributes.json")
    assert len(saved.held_out) == 1
    title, attribute, value = saved.held_out[0]
    assert (title, attribute, value) not in saved.triples() and value in saved.true_values(title, attribute)


# -- the evaluation set ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def held_out_set():
    attributes = skewed_attributes(400, seed=1)
    pairs = pap_held_out_pairs(attributes, 150)
    training = attributes.holding_out(pairs, held_out_triples(attributes, pairs))
    return training, build_evaluation_set(training, per_pair=4)


def test_matched_negatives_are_as_popular_and_as_long_as_the_positives(held_out_set):
    """Drug-ignoring scorers (popularity, length) sit inside the chance interval; unmatched negatives (uniform
    over distinct values) would not; no negative is true of its drug, withheld values included."""
    training, evaluation = held_out_set
    low, high = chance_interval(len(evaluation.positives), len(evaluation.negatives))
    for scores in (lambda pairs: popularity_scores(training, pairs), length_scores):
        value = auc(scores(evaluation.positives), scores(evaluation.negatives))
        assert low <= value <= high, value
    for title, value in evaluation.negatives + evaluation.shuffled_negatives:
        assert value not in training.true_values(title, "适应症")
    pool = [training.values[i] for i in training.pool("适应症")]
    rng = np.random.default_rng(0)
    unmatched = [(t, pool[i]) for t, _ in evaluation.positives for i in rng.integers(len(pool), size=4)]
    assert auc(popularity_scores(training, evaluation.positives), popularity_scores(training, unmatched)) > high


def test_the_drug_shuffle_control_sits_at_chance_for_a_scorer_that_knows_the_drugs(held_out_set):
    """An oracle that knows every true (drug, value) — withheld ones too — scores 1.0 on the matched set and falls
    inside the chance interval once each value is scored against another drug; a drug-ignoring scorer gets the same
    AUC in both."""
    training, evaluation = held_out_set
    rng = np.random.default_rng(0)

    def oracle(pairs):
        return np.array([float(v in training.true_values(t, "适应症")) for t, v in pairs]) + 1e-3 * rng.random(
            len(pairs)
        )

    assert auc(oracle(evaluation.positives), oracle(evaluation.negatives)) == 1.0
    assert len(evaluation.shuffled_positives) >= 0.9 * len(evaluation.positives)
    assert all(
        p[0] != s[0]
        for p, s in zip(
            sorted(evaluation.positives, key=lambda p: p[1]), sorted(evaluation.shuffled_positives, key=lambda p: p[1])
        )
    )
    shuffled = auc(oracle(evaluation.shuffled_positives), oracle(evaluation.shuffled_negatives))
    low, high = chance_interval(len(evaluation.shuffled_positives), len(evaluation.shuffled_negatives))
    assert low <= shuffled <= high, shuffled
    assert auc(
        length_scores(evaluation.shuffled_positives), length_scores(evaluation.shuffled_negatives)
    ) == pytest.approx(auc(length_scores(evaluation.positives), length_scores(evaluation.negatives)), abs=0.02)


def test_auc_and_chance_interval_by_hand():
    assert auc(np.array([3.0, 1.0]), np.array([2.0, 0.0, 1.0])) == pytest.approx((2 + 1 + 0.5 + 0 + 1 + 0) / 6)
    low, high = chance_interval(10, 40)
    assert high - 0.5 == pytest.approx(1.96 * math.sqrt(51 / (12 * 400)))


def test_the_probe_scores_every_pair_and_repeats_itself(tokenizer, held_out_set):
    """The probe on a frozen tiny D: one finite score per pair, the same scores from the same seed, and AUCs in
    [0, 1] for the matched set and the shuffle control."""
    import torch

    from kgplm.methods.epplm import EpplmForPreTraining
    from kgplm.methods.epplm.evaluation import evaluate_scorer, probe_scorer
    from kgplm.models import TINY_TEXT_ENCODER

    training, evaluation = held_out_set
    torch.manual_seed(0)
    model = EpplmForPreTraining(EpplmConfig(vocab_size=len(tokenizer), **TINY_TEXT_ENCODER))
    scores = [probe_scorer(model, tokenizer, training, steps=3, seed=1)(evaluation.positives[:7]) for _ in range(2)]
    assert scores[0].shape == (7,) and np.isfinite(scores[0]).all()
    np.testing.assert_array_equal(scores[0], scores[1])
    result = evaluate_scorer(probe_scorer(model, tokenizer, training, steps=2), evaluation)
    assert set(result) == {"auc", "shuffled"} and all(0.0 <= v <= 1.0 for v in result.values())
