"""The replication runner without models: rows from the registry, cache keys, and the aggregation
(intervals, paired bootstrap, baselines) on hand-made outcomes checked against hand computations."""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import replicate  # noqa: E402
from _table import aggregate, render_markdown  # noqa: E402

from kgplm.evaluation.tasks import PairExample, SpanExample  # noqa: E402
from kgplm.methods import Control, MethodEvaluation, get, register, unregister  # noqa: E402

CONTROL = "smedbert control: mlm, use_sop=True (whole_entity masking)"
SPANS = "smedbert: control + linked mention spans at fine-tuning"
SHUFFLED = "smedbert: shuffled graph"


def test_an_ablation_that_changes_the_masking_pre_trains_with_it():
    rows = {row.name: row for row in replicate.plan_rows(["kebiolm"])}
    wem = rows["kebiolm − no whole entity masking"]
    assert wem.role == "ablation" and wem.pretraining.masking == "whole_word"
    assert wem.pretraining.model_options == () and wem.pretraining != rows["kebiolm"].pretraining
    assert rows["kebiolm"].pretraining.masking == "word_entity"
    assert rows["kebiolm − frozen entities"].pretraining.masking == "word_entity"


def test_rows_from_the_registry():
    rows = {row.name: row for row in replicate.plan_rows(["smedbert"])}
    assert list(rows) == ["smedbert", "smedbert − knowledge at fine-tuning", "smedbert − no hybrid attention",
                          "smedbert − no knowledge losses", SPANS, SHUFFLED, CONTROL, "mlm (token masking, no SOP)"]
    method, text_only = rows["smedbert"], rows["smedbert − knowledge at fine-tuning"]
    assert method.pretraining == replicate.Pretraining("smedbert", "whole_entity")
    # the same pre-trained models, fine-tuned without SMedBERT's linked mentions
    assert text_only.pretraining == method.pretraining and text_only.encoder_inputs is False
    assert rows[CONTROL].pretraining == replicate.Pretraining("mlm", "whole_entity", (("use_sop", True),))
    assert rows["smedbert − no knowledge losses"].pretraining.model_options == (("use_knowledge_losses", False),)
    assert all(rows[name].control == CONTROL for name in list(rows)[:4])
    assert rows[CONTROL].control is None and rows["mlm (token masking, no SOP)"].pretraining.masking == "bert"
    # the attribution rows the record declares (issue 26.5), both compared with the method
    assert rows[SPANS].pretraining == rows[CONTROL].pretraining and rows[SPANS].finetune_options == (
        ("mention_spans", True),)
    assert rows[SHUFFLED].pretraining == replicate.Pretraining("smedbert", "whole_entity", (),
                                                               (("graph_shuffle_seed", 0),))
    assert rows[SPANS].control == rows[SHUFFLED].control == "smedbert"
    # their runs and fine-tunings are cached apart from the rows they vary
    budget = replicate.Budget()
    assert replicate.pretraining_key(budget, rows[SHUFFLED].pretraining, 0, "s") != replicate.pretraining_key(
        budget, method.pretraining, 0, "s")
    assert replicate.finetuning_key(budget, "run", "cmedqaner", 0, True, rows[SPANS].finetune_options) != \
        replicate.finetuning_key(budget, "run", "cmedqaner", 0, True)


@pytest.fixture()
def method_with_its_own_evaluation():
    spec = dataclasses.replace(get("mlm"), name="toy-knowledge", control=Control("mlm", masking="whole_entity"),
                               ablations={"no_thing": {"use_sop": True}},
                               evaluations={"auc": MethodEvaluation(run=lambda *a, **k: 0.5, chance=0.5)})
    register(spec)
    yield spec
    unregister(spec.name)


def test_a_methods_own_evaluation_becomes_a_column(method_with_its_own_evaluation):
    rows = replicate.plan_rows(["toy-knowledge"])
    assert [row.role for row in rows] == ["method", "ablation", "control", "reference"]  # no extra encoder inputs
    columns = replicate.method_evaluation_columns(rows)
    assert list(columns) == ["toy-knowledge: auc"] and columns["toy-knowledge: auc"][1].chance == 0.5


def test_an_evaluation_on_held_out_facts_filters_every_rows_text_and_feeds_its_method_data(tmp_path):
    """EP-PLM's PAP AUC: its method's runs get method_data (in their cache key), the control's none; the shared
    text loses the lines its filter drops, once for both columns."""
    rows = replicate.plan_rows(["epplm"])
    assert {"epplm: PAP AUC", "epplm: PAP AUC, drug-shuffled"} <= set(replicate.method_evaluation_columns(rows))
    assert replicate.evaluation_method_data("epplm") == {"pap_held_out": 300}
    assert replicate.evaluation_method_data("electra") == {}
    budget = replicate.Budget()
    keys = [replicate.pretraining_key(budget, replicate.Pretraining.of(name), 0, "shared") for name in ("epplm", "electra")]
    assert keys[0]["method_data"] == {"pap_held_out": 300} and keys[1]["method_data"] == {}
    calls = []

    def drop_second(store, lines):
        calls.append(len(lines))
        return [line for number, line in enumerate(lines) if number != 1]

    spec = dataclasses.replace(get("mlm"), name="toy-held-out", control=Control("mlm"),
                               evaluations={name: MethodEvaluation(run=lambda *a, **k: 0.5, filter_text=drop_second)
                                            for name in ("a", "b")})
    register(spec)
    try:
        corpus = tmp_path / "corpus.txt"
        corpus.write_text("一\n二\n三", encoding="utf-8")
        filtered = replicate.held_out_text_removed(tmp_path, None, corpus, replicate.plan_rows(["toy-held-out"]))
        assert filtered != corpus and filtered.read_text(encoding="utf-8").splitlines() == ["一", "三"]
        assert calls == [3]  # the same filter once, whichever columns share it
    finally:
        unregister(spec.name)
    assert replicate.held_out_text_removed(tmp_path, None, corpus, replicate.plan_rows(["smedbert"])) == corpus


def test_every_setting_that_changes_a_result_changes_the_cache_key():
    budget = replicate.Budget()
    pretraining = replicate.Pretraining("mlm", "bert")
    base = replicate.pretraining_key(budget, pretraining, 0, "shared")
    changes = {"steps": 800, "batch_size": 32, "learning_rate": 5e-4, "encoder": {"hidden_size": 64},
               "max_length": 64, "vocab_size": 4000, "facts": 10, "dialogues": 10, "kg_method": "transr",
               "entity_dim": 32, "kg_epochs": 3}
    assert set(changes) == set(replicate.PRETRAINING_FIELDS)
    for name, value in changes.items():
        changed = replicate.pretraining_key(dataclasses.replace(budget, **{name: value}), pretraining, 0, "shared")
        assert replicate.key_hash(changed) != replicate.key_hash(base), name
    assert replicate.key_hash(replicate.pretraining_key(budget, pretraining, 1, "shared")) != replicate.key_hash(base)
    # settings of later stages leave the pre-training cache alone
    later = dataclasses.replace(budget, finetune_seeds=(5,), bootstrap_resamples=10, probes=3)
    assert replicate.pretraining_key(later, pretraining, 0, "shared") == base
    fine = replicate.finetuning_key(budget, "run", "cmedqq", 0, True)
    for variant in (dataclasses.replace(budget, finetune_learning_rate=1e-4),
                    dataclasses.replace(budget, tasks={"cmedqq": [100, 2]}),
                    dataclasses.replace(budget, max_eval_examples=50)):
        assert replicate.finetuning_key(variant, "run", "cmedqq", 0, True) != fine
    assert replicate.finetuning_key(budget, "run", "cmedqq", 0, False) != fine


def _accuracy_counts(correct_per_run: list[list[int]]) -> list[dict]:
    return [{"ids": [f"t{i}" for i in range(len(correct))],
             "counts": [[float(c), 1.0] for c in correct]} for correct in correct_per_run]


def test_aggregation_by_hand():
    """3 pre-training seeds × 2 fine-tuning seeds on a 4-example pair task, a method and its control."""
    budget = dataclasses.replace(replicate.Budget(), seeds=(0, 1, 2), finetune_seeds=(0, 1),
                                 tasks={"cmedqq": [None, 1]}, bootstrap_resamples=400)
    method_row = replicate.Row("m", "method", replicate.Pretraining("smedbert", "whole_entity"), "m", "c")
    twin_row = replicate.Row("m − twin", "ablation", replicate.Pretraining("smedbert", "bert"), "m", "c")
    control_row = replicate.Row("c", "control", replicate.Pretraining("mlm", "whole_entity"), "m")
    # the method is right on every example in every run; the control on none; the twin equals the control
    method = _accuracy_counts([[1, 1, 1, 1]] * 6)
    control = _accuracy_counts([[0, 0, 0, 0]] * 6)
    # a row whose runs differ: accuracies 1/4, 3/4 | 2/4, 2/4 | 4/4, 2/4 → per-seed means 0.5, 0.5, 0.75
    varied = _accuracy_counts([[1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1], [0, 1, 0, 1]])
    test = [PairExample(f"t{i}", "a", "b", label) for i, label in enumerate(["1", "0", "1", "1"])]
    train = [PairExample(f"r{i}", "a", "b", label) for i, label in enumerate(["1", "1", "0"])]
    probe = SimpleNamespace(seen=np.array([True, False]), baseline_hits=np.array([True, False]))
    hits = [{"D1": [1, 0], "probe": [1, 0]}] * 3
    measured = {"tasks": {"cmedqq": {"m": method, "m − twin": control, "c": control, "v": varied}},
                "splits": {"cmedqq": {"train": train, "test": test}},
                "intrinsic": {"m": hits, "c": hits}, "own": {}, "own_columns": {}, "similarity_sizes": {"D1": 2},
                "probe": probe, "timings": {"all": 1.0}}
    rows = [method_row, twin_row, control_row, replicate.Row("v", "reference", replicate.Pretraining("mlm", "bert"))]
    result = aggregate(rows, budget, measured, commit="abc", device="cpu", seconds=1.0)

    cells = result["tables"]["secondary"]["cells"]  # 4 test examples: below the headline's 200
    assert result["tables"]["fine-tuned"]["columns"] == []
    varied_cell = cells["v"]["cMedQQ acc"]
    assert varied_cell["per_seed"] == pytest.approx([0.5, 0.5, 0.75])
    t_quantile = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # Student t, 2 degrees of freedom, closed form
    sample_sd = math.sqrt(((0.5 - 7 / 12) ** 2 * 2 + (0.75 - 7 / 12) ** 2) / 2)
    assert varied_cell["mean"] == pytest.approx(7 / 12)
    assert varied_cell["half_width"] == pytest.approx(t_quantile * sample_sd / math.sqrt(3))
    assert "p_value" not in varied_cell  # a reference row is tested against nothing
    # δ* = 1 in every resample (no draw can change an all-right vs all-wrong comparison): p = 1 / (B + 1)
    assert cells["m"]["cMedQQ acc"]["difference"] == 1.0
    assert cells["m"]["cMedQQ acc"]["p_value"] == pytest.approx(1 / 401)
    assert cells["m − twin"]["cMedQQ acc"]["p_value"] == 1.0  # identical to its control
    baselines = result["baselines"]["secondary"]
    assert baselines["majority class (all-O for NER)"]["cMedQQ acc"] == 0.75  # "1", the training majority
    assert baselines["chance (uniform random training label)"]["cMedQQ acc"] == pytest.approx(0.5, abs=0.05)
    pretrained = result["tables"]["pre-trained"]["cells"]
    assert pretrained["m"]["probe seen"]["mean"] == 1.0 and pretrained["m"]["probe unseen"]["mean"] == 0.0
    assert pretrained["m"]["similarity D1 Acc@1"]["half_width"] == 0.0
    assert result["baselines"]["pre-trained"]["chance"]["similarity D1 Acc@1"] == 0.05
    markdown = render_markdown(result)
    assert "| **m** | 100.0 ± 0.0 | 0.002 |" in markdown  # 1/401 = 0.0025 → 0.002
    assert "| *majority class (all-O for NER)* | 75.0 |" in markdown
    assert markdown.startswith("## ") and "\n### Secondary table" in markdown
    assert render_markdown(result, 3).startswith("### ") and "\n#### Secondary table" in render_markdown(result, 3)
    readme = f"intro\n{replicate.README_MARKERS[0]}\nold table\n{replicate.README_MARKERS[1]}\nrest\n"
    updated = replicate.between_markers(readme, "| new |")
    assert updated == f"intro\n{replicate.README_MARKERS[0]}\n| new |\n{replicate.README_MARKERS[1]}\nrest\n"


def test_ner_baselines_and_unit_count():
    budget = dataclasses.replace(replicate.Budget(), seeds=(0,), finetune_seeds=(0,), tasks={"cmedqaner": [None, 1]})
    row = replicate.Row("r", "reference", replicate.Pretraining("mlm", "bert"))
    test = [SpanExample(f"d{i}", "糖尿病患者", ((0, 3, "dis"),) * 1) for i in range(250)]
    outcome = {"ids": [e.id for e in test], "counts": [[1.0, 1.0, 1.0]] * 250}  # every entity found
    measured = {"tasks": {"cmedqaner": {"r": [outcome]}}, "splits": {"cmedqaner": {"train": test, "test": test}},
                "intrinsic": {}, "own": {}, "own_columns": {}, "similarity_sizes": {},
                "probe": SimpleNamespace(seen=np.array([True]), baseline_hits=np.array([False])), "timings": {}}
    result = aggregate([row], budget, measured, commit="abc", device="cpu", seconds=0.0)
    assert result["tables"]["fine-tuned"]["columns"] == ["cMedQANER F1"]  # 250 entities: headline
    assert result["tables"]["fine-tuned"]["cells"]["r"]["cMedQANER F1"]["mean"] == 1.0
    assert result["baselines"]["fine-tuned"]["majority class (all-O for NER)"]["cMedQANER F1"] == 0.0
    assert "cMedQANER F1" not in result["baselines"]["fine-tuned"].get("chance (uniform random training label)", {})


def test_the_linker_as_ner_baseline_row():
    """With the run's linker in the measurements, NER columns get the linker-as-NER baseline (by hand:
    the linker finds "糖尿病" typed Disease in every document; train maps Disease → dis; F1 = 1 on the one
    gold entity, with a spurious second span typed Person mapped to nothing)."""
    budget = dataclasses.replace(replicate.Budget(), seeds=(0,), finetune_seeds=(0,), tasks={"cmedqaner": [None, 1]})
    row = replicate.Row("r", "reference", replicate.Pretraining("mlm", "bert"))
    test = [SpanExample(f"d{i}", "糖尿病患者", ((0, 3, "dis"),)) for i in range(4)] + [
        SpanExample("d4", "患者糖尿病", ((2, 5, "dis"),))]
    outcome = {"ids": [e.id for e in test], "counts": [[1.0, 1.0, 1.0]] * 5}
    measured = {"tasks": {"cmedqaner": {"r": [outcome]}}, "splits": {"cmedqaner": {"train": test, "test": test}},
                "intrinsic": {}, "own": {}, "own_columns": {}, "similarity_sizes": {},
                "probe": SimpleNamespace(seen=np.array([True]), baseline_hits=np.array([False])), "timings": {},
                "link": lambda text: [(0, 3, "Disease"), (3, 5, "Person")]}
    result = aggregate([row], budget, measured, commit="abc", device="cpu", seconds=0.0)
    baseline = result["baselines"]["secondary"]["linker as NER (the linker's spans, KG type → label fitted on train)"]
    # four documents right, "患者糖尿病" wrong twice over (a missed gold, a false (0, 3)): P = R = 4/5
    assert baseline["cMedQANER F1"] == pytest.approx(0.8)
