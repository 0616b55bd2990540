"""The replication runner without models: rows from the study spec, cache and cell keys, and the aggregation
(seed intervals, seed-level tests, Holm within a family, flags, baselines) on hand-made cells checked against
hand computations and scipy."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from kgplm.exceptions import ArtifactError, ConfigurationError
from kgplm.methods import get

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import replicate  # noqa: E402
import _table  # noqa: E402
from _table import aggregate, render_markdown  # noqa: E402

from kgplm.evaluation.tasks import PairExample, SpanExample  # noqa: E402
import study  # noqa: E402
from study import Control, MethodStudy  # noqa: E402

from kgplm.methods import MethodEvaluation, register, unregister  # noqa: E402

CONTROL = "smedbert control: mlm, use_sop=True (whole_entity masking)"
SPANS = "smedbert: control + typed gazetteer"
SHUFFLED = "smedbert: shuffled graph"
TYPE_PRESERVING = "smedbert: type-preserving shuffled graph"


def test_an_ablation_that_changes_the_masking_pre_trains_with_it():
    rows = {row.name: row for row in replicate.plan_rows(["kebiolm"])}
    wem = rows["kebiolm − no whole entity masking"]
    assert wem.role == "ablation" and wem.pretraining.masking == "whole_word"
    assert wem.pretraining.model_options == () and wem.pretraining != rows["kebiolm"].pretraining
    assert rows["kebiolm"].pretraining.masking == "word_entity"
    assert rows["kebiolm − frozen entities"].pretraining.masking == "word_entity"


def test_rows_from_the_study_spec():
    rows = {row.name: row for row in replicate.plan_rows(["smedbert"])}
    assert list(rows)[:4] == [
        "smedbert",
        "smedbert − knowledge at fine-tuning",
        "smedbert − no hybrid attention",
        "smedbert − no knowledge losses",
    ]
    assert list(rows)[4:] == [SPANS, SHUFFLED, TYPE_PRESERVING, CONTROL, "mlm (token masking, no SOP)"]
    method, text_only = rows["smedbert"], rows["smedbert − knowledge at fine-tuning"]
    assert method.pretraining == replicate.Pretraining("smedbert", "whole_entity")
    # the same pre-trained models, fine-tuned without SMedBERT's linked mentions
    assert text_only.pretraining == method.pretraining and text_only.encoder_inputs is False
    assert rows[CONTROL].pretraining == replicate.Pretraining("mlm", "whole_entity", (("use_sop", True),))
    assert rows["smedbert − no knowledge losses"].pretraining.model_options == (("use_knowledge_losses", False),)
    # the method is compared with its control; what it is made of (ablations, its fine-tuning inputs) with the method
    assert method.control == CONTROL
    assert all(rows[name].control == "smedbert" and rows[name].group == "smedbert" for name in list(rows)[1:4])
    assert rows[CONTROL].control is None and rows["mlm (token masking, no SOP)"].pretraining.masking == "bert"
    # the attribution rows the record declares (issue 26.5), both compared with the method
    assert rows[SPANS].pretraining == rows[CONTROL].pretraining and rows[SPANS].finetune_options == (
        ("mention_spans", "typed"),
    )
    assert rows[SHUFFLED].pretraining == replicate.Pretraining(
        "smedbert", "whole_entity", (), (("graph_shuffle_seed", 0),)
    )
    assert rows[SPANS].control == rows[SHUFFLED].control == "smedbert"
    # their runs and fine-tunings are cached apart from the rows they vary
    budget = replicate.Budget()
    assert replicate.pretraining_key(budget, rows[SHUFFLED].pretraining, 0, "s") != replicate.pretraining_key(
        budget, method.pretraining, 0, "s"
    )
    assert replicate.finetuning_key(
        budget, "run", "cmedqaner", 0, True, rows[SPANS].finetune_options
    ) != replicate.finetuning_key(budget, "run", "cmedqaner", 0, True)


def test_extra_rows_slot_into_a_methods_family(monkeypatch):
    def spans_row(name, spec, method_row, control_row):
        if name != "smedbert":
            return []
        return [replicate.Row("control + mention spans", "attribution", method_row.pretraining, name, control_row)]

    monkeypatch.setattr(replicate, "EXTRA_ROWS", [spans_row])
    rows = replicate.plan_rows(["smedbert", "kebiolm"])
    names = [row.name for row in rows]
    assert names.count("control + mention spans") == 1
    assert names.index("control + mention spans") < names.index(CONTROL)
    monkeypatch.setattr(replicate, "EXTRA_ROWS", [spans_row, spans_row])
    with pytest.raises(RuntimeError, match="planned twice"):
        replicate.plan_rows(["smedbert"])


@pytest.fixture()
def method_with_its_own_evaluation():
    spec = dataclasses.replace(
        get("mlm"), name="toy-knowledge", evaluations={"auc": MethodEvaluation(run=lambda *a, **k: 0.5, chance=0.5)}
    )
    register(spec)
    study.add(
        MethodStudy(
            "toy-knowledge",
            results_version=1,
            control=Control("mlm", masking="whole_entity"),
            ablations={"no_thing": {"use_sop": True}},
        )
    )
    yield spec
    study.remove(spec.name)
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
    keys = [
        replicate.pretraining_key(budget, replicate.Pretraining.of(name), 0, "shared") for name in ("epplm", "electra")
    ]
    assert keys[0]["method_data"] == {"pap_held_out": 300} and keys[1]["method_data"] == {}
    calls = []

    def drop_second(store, lines):
        calls.append(len(lines))
        return [line for number, line in enumerate(lines) if number != 1]

    spec = dataclasses.replace(
        get("mlm"),
        name="toy-held-out",
        evaluations={name: MethodEvaluation(run=lambda *a, **k: 0.5, filter_text=drop_second) for name in ("a", "b")},
    )
    register(spec)
    study.add(MethodStudy("toy-held-out", results_version=1, control=Control("mlm")))
    try:
        corpus = tmp_path / "corpus.txt"
        corpus.write_text("一\n二\n三", encoding="utf-8")
        filtered = replicate.held_out_text_removed(tmp_path, None, corpus, replicate.plan_rows(["toy-held-out"]))
        assert filtered != corpus and filtered.read_text(encoding="utf-8").splitlines() == ["一", "三"]
        assert calls == [3]  # the same filter once, whichever columns share it
    finally:
        study.remove(spec.name)
        unregister(spec.name)
    assert replicate.held_out_text_removed(tmp_path, None, corpus, replicate.plan_rows(["smedbert"])) == corpus


#: a changed value for every Budget field (the test fails when a field is added without one here)
CHANGED = {
    "steps": 800,
    "batch_size": 32,
    "learning_rate": 5e-4,
    "warmup_steps": 40,
    "encoder": {"hidden_size": 64},
    "max_length": 64,
    "vocab_size": 4000,
    "facts": 10,
    "dialogues": 10,
    "kg_method": "transr",
    "entity_dim": 32,
    "kg_epochs": 3,
    "seeds": (5,),
    "finetune_seeds": (5,),
    "paired_finetune_seeds": True,
    "tasks": {"cmedqq": [100, 2]},
    "max_eval_examples": 50,
    "finetune_learning_rate": 1e-4,
    "finetune_batch_size": 8,
    "finetune_max_length": 64,
    "similarity_queries": 7,
    "similarity_pool": 70,
    "probes": 3,
    "bootstrap_resamples": 10,
    "smoke": True,
    "protocol": "scratch",
    "base_steps": 100,
    "base_batch_size": 8,
    "base_learning_rate": 1e-4,
}


def _every_key(budget: replicate.Budget) -> dict:
    """Every cache and cell key the runner derives from a budget, for one row, seed, task and fine-tuning seed."""
    row = replicate.Row("smedbert", "method", replicate.Pretraining("smedbert", "whole_entity"), "smedbert", "c")
    return {
        "shared": replicate.shared_key(budget),
        **{
            f"corpus {variant}": replicate.corpus_key(budget, *variant)
            for variant in ((False, False), (True, False), (True, True))
        },
        "pretraining": replicate.pretraining_key(budget, row.pretraining, 0, "shared"),
        "finetuning": replicate.finetuning_key(budget, "run", "cmedqq", 0, True),
        "cell": replicate.cell_job(budget, row, 0, "cmedqq", 0, "shared").key,
        "intrinsic": replicate.intrinsic_key(budget, "run"),
        "run": replicate.run_key(budget),
    }


def test_every_setting_that_changes_a_result_changes_a_cache_or_cell_key():
    budget = replicate.Budget()
    assert set(CHANGED) == {field.name for field in dataclasses.fields(replicate.Budget)}
    base = {name: replicate.key_hash(key) for name, key in _every_key(budget).items()}
    for name, value in CHANGED.items():
        changed = {
            key_name: replicate.key_hash(key)
            for key_name, key in _every_key(dataclasses.replace(budget, **{name: value})).items()
        }
        moved = {key_name for key_name in base if changed[key_name] != base[key_name]}
        if name in replicate.TABLE_FIELDS:  # they choose which cells are read, not what a cell holds
            assert not moved, (name, moved)
        else:
            assert moved, name
    # the linked corpora are keyed by max_length (a stale corpus of another length was once reused)
    shorter = dataclasses.replace(budget, max_length=64)
    assert replicate.corpus_key(shorter, True, False) != replicate.corpus_key(budget, True, False)
    assert "max_length" in replicate.corpus_key(budget, False, False)


DATA = {"task": {"train": "1" * 64, "dev": "2" * 64, "test": "3" * 64}, "kg": "4" * 64, "corpus": "5" * 64}


def test_cell_keys_change_with_each_newly_keyed_setting_and_not_with_a_cosmetic_one(monkeypatch):
    import kgplm
    from kgplm.methods.smedbert.configuration import SmedbertConfig
    from kgplm.text import linking
    from kgplm.finetuning import loop as finetuning
    from kgplm.training import trainer

    budget = replicate.Budget()
    row = replicate.Row("smedbert", "method", replicate.Pretraining("smedbert", "whole_entity"), "smedbert", "c")

    def key(*, sha="a" * 64, data=DATA, pretrained=None):
        job = replicate.cell_job(budget, row, 0, "cmedqaner", 0, "s", pretrained, base_weights_sha256=sha, data=data)
        return replicate.key_hash(job.key)

    original = key()
    assert key(sha="b" * 64) != original  # the base's weights
    for name in ("kg", "corpus"):  # the data's content
        assert key(data={**DATA, name: "9" * 64}) != original
    assert key(data={**DATA, "task": {**DATA["task"], "dev": "9" * 64}}) != original
    assert key(pretrained=Path("/elsewhere")) == original  # where the model lies is no part of what it is
    true_train = kgplm.train

    def changed(monkeypatched) -> bool:
        with monkeypatch.context() as patch:
            monkeypatched(patch)
            return key() != original

    assert changed(lambda patch: patch.setitem(replicate.PEPR_SETTINGS, "num_neighbors", 5))
    assert changed(lambda patch: patch.setitem(replicate.PEPR_SETTINGS, "pepr_mode", "exact"))

    class Linker(linking.EntityLinker):
        def __init__(self, store=None, *, min_length: int = 3, **options):
            super().__init__(store, min_length=min_length, **options)

    assert changed(lambda patch: patch.setattr(linking, "EntityLinker", Linker))

    @dataclasses.dataclass(frozen=True)
    class Clipped(trainer.TrainerSettings):
        max_grad_norm: float = 0.5

    @dataclasses.dataclass
    class FineClipped(finetuning.FineTuneSettings):
        max_grad_norm: float = 0.5

    assert changed(lambda patch: patch.setattr(trainer, "TrainerSettings", Clipped))
    assert changed(lambda patch: patch.setattr(finetuning, "FineTuneSettings", FineClipped))

    def train(method, *, warmup_steps=None, weight_decay=0.1, gradient_accumulation_steps=1, log_every=10):
        return true_train

    def cosmetic_train(method, *, warmup_steps=None, weight_decay=0.01, gradient_accumulation_steps=1, log_every=99):
        return true_train

    def finetune(*, warmup_ratio=0.2, weight_decay=0.01, patience="auto"):
        return None

    assert changed(lambda patch: patch.setattr(kgplm, "train", train))  # weight decay
    assert changed(lambda patch: patch.setattr(kgplm, "finetune", finetune))  # warm-up ratio
    assert not changed(lambda patch: patch.setattr(kgplm, "train", cosmetic_train))  # how often it logs

    def weighted(self, mnem_weight: float = 3.0, mmem_weight: float = 4.0, **options):
        pass

    assert changed(lambda patch: patch.setattr(SmedbertConfig, "__init__", weighted))  # a loss weight
    keyed = replicate.cell_job(budget, row, 0, "cmedqaner", 0, "s", base_weights_sha256="a" * 64, data=DATA).key
    assert keyed["optimisation"]["pretraining"]["loss_weights"] == {"mnem_weight": 2.0, "mmem_weight": 4.0}
    assert keyed["optimisation"]["finetuning"]["max_grad_norm"] == 1.0 and keyed["linker"]["min_length"] == 2
    json.dumps(keyed)  # a cell's key is written as JSON


def test_a_graph_shuffle_option_picks_the_graph_control():
    from graph_controls import derangement_within_types

    from kgplm import KGStore

    store = KGStore.from_rdf(Path(__file__).resolve().parents[2] / "graphs" / "toy_medical.ttl", show_progress=False)
    shared = SimpleNamespace(store=store)
    within = replicate.train_arguments(shared, (("graph_shuffle", "within_types"), ("graph_shuffle_seed", 2)))
    assert within["knowledge_graph"].derived_from["shuffled_links_within_types"]["seed"] == 2
    permutation = derangement_within_types(store.primary_type_ids(), 2)
    triples = np.asarray(store.triples)
    expected = {(int(permutation[h]), int(r), int(permutation[t])) for h, r, t in triples}
    assert set(map(tuple, np.asarray(within["knowledge_graph"].triples).tolist())) == expected
    assert (
        "shuffled_links"
        in replicate.train_arguments(shared, (("graph_shuffle_seed", 2),))["knowledge_graph"].derived_from
    )
    assert replicate.train_arguments(shared, (("mention_spans", True),)) == {"mention_spans": True}
    from kgplm.exceptions import ConfigurationError

    with pytest.raises(ConfigurationError, match="graph_shuffle='types'"):
        replicate.train_arguments(shared, (("graph_shuffle", "types"), ("graph_shuffle_seed", 2)))
    with pytest.raises(ConfigurationError, match="needs a graph_shuffle_seed"):
        replicate.train_arguments(shared, (("graph_shuffle", "within_types"),))


def test_a_task_may_have_its_own_fine_tuning_learning_rate():
    """Pair tasks and NER want different learning rates on the same base (finetune_budget.py): a task's own
    rate is its fine-tuning key's rate; a task without one keeps the budget's and its key."""
    budget = replicate.Budget(tasks={"cmedqq": [2000, 3, 2e-3], "cmedqaner": [800, 4]}, finetune_learning_rate=5e-4)
    assert budget.task_budget("cmedqq") == (2000, 3, 2e-3)
    assert budget.task_budget("cmedqaner") == (800, 4, 5e-4)
    assert replicate.finetuning_key(budget, "r", "cmedqq", 0, True)["finetune_learning_rate"] == 2e-3
    same = dataclasses.replace(budget, tasks={"cmedqq": [2000, 3], "cmedqaner": [800, 4]}, finetune_learning_rate=2e-3)
    assert replicate.finetuning_key(same, "r", "cmedqq", 0, True) == replicate.finetuning_key(
        budget, "r", "cmedqq", 0, True
    )
    assert replicate.finetuning_key(budget, "r", "cmedqaner", 0, True)["finetune_learning_rate"] == 5e-4
    assert "cmedqq 2000 train examples × 3 epochs (lr 0.002)" in budget.describe()
    assert "cmedqaner 800 train examples × 4 epochs;" in budget.describe()  # the budget's rate: not repeated
    with pytest.raises(ValueError, match="expected"):
        replicate.Budget(tasks={"cmedqq": [2000, 3, 2e-3, 1]}).task_budget("cmedqq")


def test_a_bumped_results_version_changes_the_pretraining_and_cell_keys():
    budget = replicate.Budget()
    row = replicate.Row("smedbert", "method", replicate.Pretraining("smedbert", "whole_entity"), "smedbert", "c")
    control = replicate.Row("c", "control", replicate.Pretraining("mlm", "whole_entity"), "smedbert")
    before = (
        replicate.pretraining_key(budget, row.pretraining, 0, "s"),
        replicate.cell_job(budget, row, 0, "cmedqq", 0, "s").key,
        replicate.cell_job(budget, control, 0, "cmedqq", 0, "s").key,
    )
    original = study.study("smedbert")
    study.add(dataclasses.replace(original, results_version=original.results_version + 1), replace=True)
    try:
        after = (
            replicate.pretraining_key(budget, row.pretraining, 0, "s"),
            replicate.cell_job(budget, row, 0, "cmedqq", 0, "s").key,
            replicate.cell_job(budget, control, 0, "cmedqq", 0, "s").key,
        )
    finally:
        study.add(original, replace=True)
    assert all(a != b for a, b in zip(before, after))  # the control's cells belong to smedbert's family too


VERSIONS = {"smedbert": study.study("smedbert").results_version, "mlm": study.study("mlm").results_version}


def _cells(
    row: str,
    task: str,
    correct_per_run: list[list[int]],
    seeds=(0, 1, 2),
    finetune_seeds=(0, 1),
    degenerate=(),
    constant="1",
) -> list[dict]:
    """Cells of one row on a pair task, runs seed-major; ``degenerate``: indices of runs flagged on dev."""
    runs = [(seed, finetune_seed) for seed in seeds for finetune_seed in finetune_seeds]
    assert len(runs) == len(correct_per_run)
    return [
        {
            "row": row,
            "seed": seed,
            "task": task,
            "finetune_seed": finetune_seed,
            "commit": f"commit-{seed}",
            "results_versions": dict(VERSIONS),
            "outcomes": {"ids": [f"t{i}" for i in range(len(correct))], "counts": [[float(c), 1.0] for c in correct]},
            "dev": {
                "score": 0.5,
                "constant": 0.5 if index in degenerate else 0.4,
                "constant_prediction": constant,
                "degenerate": index in degenerate,
            },
        }
        for index, ((seed, finetune_seed), correct) in enumerate(zip(runs, correct_per_run))
    ]


def _measured(cells, test, train, intrinsic=None) -> dict:
    # probe queries: hard & seen, hard & unseen, then two the model-free baseline answers (easy)
    probe = SimpleNamespace(
        seen=np.array([True, False, True, False]),
        hard=np.array([True, True, False, False]),
        chance=np.array([0.1, 0.2, 0.3, 0.4]),
    )
    return {
        "cells": cells,
        "splits": {"cmedqq": {"train": train, "test": test}},
        "intrinsic": intrinsic or {},
        "own": {},
        "own_columns": {},
        "similarity_sizes": {"D1": 2} if intrinsic else {},
        "probe": probe,
        "timings": {"all": 1.0},
    }


def test_aggregation_by_hand():
    """3 pre-training seeds × 2 fine-tuning seeds on a 4-example pair task: SMedBERT's family by hand."""
    from scipy.stats import ttest_rel

    budget = dataclasses.replace(
        replicate.Budget(), seeds=(0, 1, 2), finetune_seeds=(0, 1), tasks={"cmedqq": [None, 1]}, bootstrap_resamples=400
    )
    method_row = replicate.Row("m", "method", replicate.Pretraining("smedbert", "whole_entity"), "smedbert", "c")
    twin_row = replicate.Row("m − twin", "ablation", replicate.Pretraining("smedbert", "bert"), "smedbert", "m")
    varied_row = replicate.Row(
        "m − varied", "ablation", replicate.Pretraining("smedbert", "bert", {"x": 1}), "smedbert", "m"
    )
    control_row = replicate.Row("c", "control", replicate.Pretraining("mlm", "whole_entity"), "smedbert")
    reference_row = replicate.Row("v", "reference", replicate.Pretraining("mlm", "bert"))
    # the method is right on every example in every run; the control on none; the twin equals the control
    right, wrong = [[1, 1, 1, 1]] * 6, [[0, 0, 0, 0]] * 6
    # runs whose accuracies are 1/4, 3/4 | 2/4, 2/4 | 4/4, 2/4 → per-seed means 0.5, 0.5, 0.75
    varied = [[1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1], [0, 1, 0, 1]]
    cells = (
        _cells("m", "cmedqq", right)
        + _cells("m − twin", "cmedqq", wrong)
        + _cells("m − varied", "cmedqq", varied)
        + _cells("c", "cmedqq", wrong, degenerate={3})
        + _cells("v", "cmedqq", varied)
    )
    test = [PairExample(f"t{i}", "a", "b", label) for i, label in enumerate(["1", "0", "1", "1"])]
    train = [PairExample(f"r{i}", "a", "b", label) for i, label in enumerate(["1", "1", "0"])]
    hits = [{"D1": [1, 0], "probe": [1, 0, 1, 0]}] * 3
    rows = [method_row, twin_row, varied_row, control_row, reference_row]
    result = aggregate(
        rows, budget, _measured(cells, test, train, {"m": hits, "c": hits}), commit="abc", device="cpu", seconds=1.0
    )

    table = result["tables"]["secondary"]["cells"]  # 4 test examples: below the headline's 200
    assert result["tables"]["fine-tuned"]["columns"] == []
    varied_cell = table["v"]["cMedQQ acc"]
    assert varied_cell["per_seed"] == pytest.approx([0.5, 0.5, 0.75])
    t_quantile = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # Student t, 2 degrees of freedom, closed form
    sample_sd = math.sqrt(((0.5 - 7 / 12) ** 2 * 2 + (0.75 - 7 / 12) ** 2) / 2)
    assert varied_cell["mean"] == pytest.approx(7 / 12)
    assert varied_cell["half_width"] == pytest.approx(t_quantile * sample_sd / math.sqrt(3))
    assert table["c"]["cMedQQ acc"]["degenerate"] == 1 and table["m"]["cMedQQ acc"]["degenerate"] == 0

    family = result["families"]["smedbert"]
    assert "v" not in {entry["row"] for entry in family["primary"] + family["secondary"]}  # a reference row
    # the pre-registered endpoint (SMedBERT: cMedQQ accuracy), the method vs its control, seed-paired
    [primary] = family["primary"]
    assert (primary["row"], primary["against"], primary["column"]) == ("m", "c", "cMedQQ acc")
    assert primary["difference"] == 1.0 and primary["n"] == 3
    assert primary["p_permutation"] == 2 / 8  # all 2^3 sign patterns: only ± the observed one reach |Σd| = 3
    assert primary["test_sampling_interval"] == [1.0, 1.0]  # no resample of test examples moves δ = 1
    assert primary["status"].startswith("not tested: 3 pre-training seeds")
    # ablations are compared with the method, in the method's family, Holm-adjusted over its secondaries
    secondary = {(entry["row"], entry["column"]): entry for entry in family["secondary"]}
    assert secondary[("m − twin", "cMedQQ acc")]["against"] == "m"
    assert secondary[("m − twin", "cMedQQ acc")]["difference"] == -1.0
    varied_entry = secondary[("m − varied", "cMedQQ acc")]
    reference = ttest_rel([0.5, 0.5, 0.75], [1.0, 1.0, 1.0])
    assert varied_entry["p_t"] == pytest.approx(reference.pvalue) and varied_entry["t"] == pytest.approx(
        reference.statistic
    )
    # the family's 6 secondary t p-values: twin 0 (a constant difference), varied p, and the method vs the control
    # on similarity D1, probe hard seen, hard unseen, easy (identical hits: 1, 1, 1, 1). Holm: 6·0, 5·p, then 1s.
    assert len(secondary) == 6
    assert varied_entry["p_t_holm"] == pytest.approx(min(1.0, 5 * reference.pvalue))
    assert secondary[("m − twin", "cMedQQ acc")]["p_t_holm"] == 0.0
    assert secondary[("m", "similarity D1 Acc@1")]["p_t_holm"] == 1.0
    assert "p_permutation_holm" not in varied_entry  # the secondary sign-flip p is printed raw

    baselines = result["baselines"]["secondary"]
    assert baselines[_table.BEST_CONSTANT]["cMedQQ acc"] == 0.75  # "1" for every test pair
    assert baselines["chance (uniform random training label)"]["cMedQQ acc"] == pytest.approx(0.5, abs=0.05)
    # every pair reads ("a", "b"): all training pairs overlap equally, the first ("1") is the nearest
    assert baselines[_table.MEMORISATION]["cMedQQ acc"] == 0.75
    pretrained = result["tables"]["pre-trained"]["cells"]
    assert pretrained["m"]["probe hard seen"]["mean"] == 1.0 and pretrained["m"]["probe hard unseen"]["mean"] == 0.0
    assert pretrained["m"]["probe easy"]["mean"] == 0.5
    chance = result["baselines"]["pre-trained"]["chance"]
    assert chance["probe hard seen"] == pytest.approx(0.1) and chance["probe easy"] == pytest.approx(0.35)
    assert result["notes"]["probes"] == {"hard seen": 1, "hard unseen": 1, "easy": 2}
    assert pretrained["m"]["similarity D1 Acc@1"]["half_width"] == 0.0
    assert result["baselines"]["pre-trained"]["chance"]["similarity D1 Acc@1"] == 0.05
    assert result["cell_commits"] == ["commit-0", "commit-1", "commit-2"]  # every commit a cell came from
    markdown = render_markdown(result)
    assert "| **m** | 100.0 ± 0.0 |" in markdown
    assert "| c | 0.0 ± 0.0 †1/6 |" in markdown  # the degenerate run is flagged in its cell
    assert "† 1 of 30 fine-tuned runs are degenerate on dev" in markdown and "c / cMedQQ acc (seed 1" in markdown
    assert f"| *{_table.BEST_CONSTANT}* | 75.0 |" in markdown
    assert (
        "| cmedqq accuracy (higher is better) | +100.0 | 3 | <0.001 | 0.250 | — | — | — | [+100.0, +100.0] | not tested"
        in markdown
    )
    assert "### Evidence: smedbert" in markdown and "`commit-0`, `commit-1`, `commit-2`" in markdown
    assert markdown.startswith("## ") and "\n### Secondary table" in markdown
    assert render_markdown(result, 3).startswith("### ") and "\n#### Secondary table" in render_markdown(result, 3)
    readme = f"intro\n{replicate.README_MARKERS[0]}\nold table\n{replicate.README_MARKERS[1]}\nrest\n"
    updated = replicate.between_markers(readme, "| new |")
    assert updated == f"intro\n{replicate.README_MARKERS[0]}\n| new |\n{replicate.README_MARKERS[1]}\nrest\n"


def _primary(method, control, seeds):
    budget = dataclasses.replace(
        replicate.Budget(), seeds=seeds, finetune_seeds=(0,), tasks={"cmedqq": [None, 1]}, bootstrap_resamples=50
    )
    method_row = replicate.Row("m", "method", replicate.Pretraining("smedbert", "whole_entity"), "smedbert", "c")
    control_row = replicate.Row("c", "control", replicate.Pretraining("mlm", "whole_entity"), "smedbert")
    cells = _cells("m", "cmedqq", method, seeds, (0,)) + _cells("c", "cmedqq", control, seeds, (0,))
    test = [PairExample(f"t{i}", "a", "b", label) for i, label in enumerate(["1", "0", "1", "1"])]
    result = aggregate(
        [method_row, control_row], budget, _measured(cells, test, test), commit="abc", device="cpu", seconds=0.0
    )
    [primary] = result["families"]["smedbert"]["primary"]
    return result, primary


def test_a_results_file_names_each_base_by_its_recipe_key_not_by_where_it_was_cached():
    budget = dataclasses.replace(
        replicate.Budget(), seeds=(0, 1, 2), finetune_seeds=(0, 1), tasks={"cmedqq": [None, 1]}, bootstrap_resamples=50
    )
    method_row = replicate.Row("m", "method", replicate.Pretraining("smedbert", "whole_entity"), "smedbert", "c")
    control_row = replicate.Row("c", "control", replicate.Pretraining("mlm", "whole_entity"), "smedbert")
    cells = _cells("m", "cmedqq", [[1, 1, 1, 1]] * 6) + _cells("c", "cmedqq", [[0, 0, 0, 0]] * 6)
    test = [PairExample(f"t{i}", "a", "b", label) for i, label in enumerate(["1", "0", "1", "1"])]
    train = [PairExample(f"r{i}", "a", "b", label) for i, label in enumerate(["1", "1", "0"])]
    measured = {**_measured(cells, test, train), "probe": None, "bases": {"mlm": "/home/someone/cache/base/mlm-93b5"}}
    result = aggregate([method_row, control_row], budget, measured, commit="abc", device="cpu", seconds=1)
    assert result["bases"] == {"mlm": "mlm-93b5"}
    assert "/home/someone" not in render_markdown(result)


def test_a_primary_endpoint_is_supported_when_the_t_test_and_the_sign_flip_agree():
    seeds = (0, 1, 2, 3, 4, 5)
    method = [[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1, 1]]
    control = [[0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]]
    result, primary = _primary(method, control, seeds)
    assert primary["n"] == 6 and primary["p_permutation"] == 2 / 64  # exact: the smallest two-sided p with 6 seeds
    assert primary["p_t"] < 0.05 and primary["corrected_over"] == 1  # one endpoint in the table: Holm is identity
    assert primary["p_t_holm"] == primary["p_t"] and primary["status"].startswith("supported")
    assert result["families"]["smedbert"]["missing_endpoints"] == ["cmedqaner entity_f1"]  # not among the tasks run
    markdown = render_markdown(result)
    assert "| cmedqaner entity_f1 | — |" in markdown
    assert f"Protocol: `{_table.PROTOCOL_FILE}`" in markdown and "continued-pre-training seeds" in markdown
    assert "generalise over continued-pre-training seeds (here [0, 1, 2, 3, 4, 5])" in result["population"]
    assert "fine-tuning seed(s) [0]" in result["population"] and "cmedqq all training examples" in result["population"]


def test_a_t_test_alone_is_not_detected_and_prints_its_minimal_detectable_effect():
    from scipy.stats import ttest_rel

    from kgplm.evaluation.statistics import minimal_detectable_effect

    seeds = (0, 1, 2, 3, 4, 5)
    # per-seed differences +0.5 five times and −0.25 once: t-test p ≈ 0.03, sign-flip 4/64 = 0.0625
    method = [[1, 1, 1, 0]] * 5 + [[1, 0, 0, 0]]
    control = [[1, 0, 0, 0]] * 5 + [[1, 1, 0, 0]]
    result, primary = _primary(method, control, seeds)
    differences = [0.5] * 5 + [-0.25]
    assert primary["p_t"] == pytest.approx(ttest_rel([0.75] * 5 + [0.25], [0.25] * 5 + [0.5]).pvalue)
    assert primary["p_t"] < 0.05 and primary["p_permutation"] == 4 / 64
    effect = minimal_detectable_effect(float(np.std(differences, ddof=1)), 6)
    assert primary["minimal_detectable_effect"] == pytest.approx(effect)
    assert primary["status"].startswith("not detected") and f"{100 * effect:.1f}" in primary["status"]
    assert f"| {100 * effect:.1f} |" in render_markdown(result)
    # five seeds: below the pre-registered minimum, not tested at all
    _, five = _primary(method[:5], control[:5], seeds[:5])
    assert five["status"].startswith("not tested: 5 pre-training seeds")


def test_paired_fine_tuning_seeds_read_seed_s_fine_tuned_with_seed_s():
    seeds = (0, 1, 2, 3, 4, 5)
    budget = dataclasses.replace(
        replicate.Budget(),
        seeds=seeds,
        finetune_seeds=(0, 1),
        paired_finetune_seeds=True,
        tasks={"cmedqq": [None, 1]},
        bootstrap_resamples=20,
    )
    assert budget.finetune_seeds_of(3) == (3,) and "fine-tuning seeds equal to the pre-training seed" in (
        budget.describe()
    )
    row = replicate.Row("r", "reference", replicate.Pretraining("mlm", "bert"))
    cells = _cells("r", "cmedqq", [[1, 0, 0, 0]] * 6, seeds, (0,))
    for cell in cells:
        cell["finetune_seed"] = cell["seed"]
    test = [PairExample(f"t{i}", "a", "b", label) for i, label in enumerate(["1", "0", "1", "1"])]
    result = aggregate([row], budget, _measured(cells, test, test), commit="abc", device="cpu", seconds=0.0)
    assert result["tables"]["secondary"]["cells"]["r"]["cMedQQ acc"]["per_seed"] == [0.25] * 6
    assert "fine-tuning seed equal to the pre-training seed" in result["population"]
    with pytest.raises(RuntimeError, match="fine-tuning seed 0"):  # unpaired, the table wants seed 0 for every s
        aggregate(
            [row],
            dataclasses.replace(budget, paired_finetune_seeds=False, finetune_seeds=(0,)),
            _measured(cells, test, test),
            commit="abc",
            device="cpu",
            seconds=0.0,
        )


def test_holm_over_two_primary_endpoints_needs_both_tests_below_alpha_after_adjustment():
    entries = [
        {
            "n": 6,
            "degenerate": 0,
            "p_t": 0.01,
            "p_permutation": 2 / 64,
            "sd_differences": 0.1,
            "difference": 0.3,
            "direction": "higher",
        },
        {
            "n": 6,
            "degenerate": 0,
            "p_t": 0.02,
            "p_permutation": 2 / 64,
            "sd_differences": 0.1,
            "difference": 0.3,
            "direction": "higher",
        },
    ]
    _table._decide_primary(entries)
    # Holm over 2: sign-flip 2/64 → 0.0625 for both; t 0.02, 0.02 — the sign-flip blocks "supported"
    assert [e["p_permutation_holm"] for e in entries] == pytest.approx([0.0625, 0.0625])
    assert [e["p_t_holm"] for e in entries] == pytest.approx([0.02, 0.02])
    assert all(e["status"].startswith("not detected") for e in entries)
    from kgplm.evaluation.statistics import minimal_detectable_effect

    assert entries[0]["minimal_detectable_effect"] == pytest.approx(minimal_detectable_effect(0.1, 6, alpha=0.025))


def test_a_constant_prediction_run_is_flagged():
    from _outcomes import best_constant

    from kgplm.evaluation.statistics import example_counts, metric_from_counts

    train = [PairExample(f"r{i}", "a", "b", label) for i, label in enumerate(["0", "0", "1"])]
    dev = [PairExample(f"d{i}", "a", "b", label) for i, label in enumerate(["1", "0", "1", "1", "0"])]
    constant = best_constant("cmedqq", train, dev)
    assert constant == {"score": 0.6, "prediction": "1"}  # the best single label on dev, not the training majority
    gold = [example.label for example in dev]

    def dev_score(predicted):
        return float(metric_from_counts("accuracy", example_counts("accuracy", gold, predicted).sum(0)))

    assert replicate.dev_record(dev_score(["1"] * 5), constant)["degenerate"] is True  # one class for every pair
    assert replicate.dev_record(dev_score(["0"] * 5), constant)["degenerate"] is True
    assert replicate.dev_record(dev_score(["1", "0", "1", "1", "1"]), constant)["degenerate"] is False
    # above the constant, but not above chance, or with κ ≤ 0: degenerate too, saying why
    record = replicate.dev_record(0.62, constant, chance=0.65, kappa=0.1)
    assert record["degenerate"] and record["reasons"] == ["dev 0.6200 does not beat chance 0.6500"]
    record = replicate.dev_record(0.7, constant, chance=0.5, kappa=-0.02)
    assert record["degenerate"] and record["reasons"] == ["dev Cohen's kappa -0.0200 <= 0"]
    assert not replicate.dev_record(0.7, constant, chance=0.5, kappa=0.2)["degenerate"]
    ner = [SpanExample("n0", "糖尿病患者", ((0, 3, "dis"),))]
    assert best_constant("cmedqaner", ner, ner) == {"score": 0.0, "prediction": "no entity (all-O)"}
    assert replicate.dev_record(0.0, best_constant("cmedqaner", ner, ner))["degenerate"] is True


def test_a_table_refuses_cells_of_another_results_version():
    from kgplm.exceptions import ArtifactError

    budget = dataclasses.replace(replicate.Budget(), seeds=(0,), finetune_seeds=(0,), tasks={"cmedqq": [None, 1]})
    row = replicate.Row("r", "reference", replicate.Pretraining("mlm", "bert"))
    [stale] = _cells("r", "cmedqq", [[1, 0]], (0,), (0,))
    stale["results_versions"] = {"mlm": 7}
    test = [PairExample(f"t{i}", "a", "b", "1") for i in range(2)]
    with pytest.raises(ArtifactError, match=rf"mlm \(study: {study.study('mlm').results_version}\)"):
        aggregate([row], budget, _measured([stale], test, test), commit="abc", device="cpu", seconds=0.0)


def test_ner_baselines_and_unit_count():
    budget = dataclasses.replace(replicate.Budget(), seeds=(0,), finetune_seeds=(0,), tasks={"cmedqaner": [None, 1]})
    row = replicate.Row("r", "reference", replicate.Pretraining("mlm", "bert"))
    test = [SpanExample(f"d{i}", "糖尿病患者", ((0, 3, "dis"),) * 1) for i in range(250)]
    cell = {
        "row": "r",
        "seed": 0,
        "task": "cmedqaner",
        "finetune_seed": 0,
        "commit": "c",
        "results_versions": {"mlm": study.study("mlm").results_version},
        "outcomes": {"ids": [e.id for e in test], "counts": [[1.0, 1.0, 1.0]] * 250},  # every entity found
        "dev": {"score": 1.0, "constant": 0.0, "constant_prediction": "no entity (all-O)", "degenerate": False},
    }
    measured = {
        "cells": [cell],
        "splits": {"cmedqaner": {"train": test, "test": test}},
        "intrinsic": {},
        "own": {},
        "own_columns": {},
        "similarity_sizes": {},
        "probe": SimpleNamespace(seen=np.array([True]), hard=np.array([True]), chance=np.array([0.0])),
        "timings": {},
    }
    result = aggregate([row], budget, measured, commit="abc", device="cpu", seconds=0.0)
    assert result["tables"]["fine-tuned"]["columns"] == ["cMedQANER F1"]  # 250 entities: headline
    assert result["tables"]["fine-tuned"]["cells"]["r"]["cMedQANER F1"]["mean"] == 1.0
    assert result["baselines"]["fine-tuned"][_table.BEST_CONSTANT]["cMedQANER F1"] == 0.0
    assert "cMedQANER F1" not in result["baselines"]["fine-tuned"].get("chance (uniform random training label)", {})


def test_the_linker_as_ner_baseline_row():
    """With the run's linker in the measurements, NER columns get the linker-as-NER baseline (by hand:
    the linker finds "糖尿病" typed Disease in every document; train maps Disease → dis; F1 = 1 on the one
    gold entity, with a spurious second span typed Person mapped to nothing)."""
    budget = dataclasses.replace(replicate.Budget(), seeds=(0,), finetune_seeds=(0,), tasks={"cmedqaner": [None, 1]})
    row = replicate.Row("r", "reference", replicate.Pretraining("mlm", "bert"))
    test = [SpanExample(f"d{i}", "糖尿病患者", ((0, 3, "dis"),)) for i in range(4)] + [
        SpanExample("d4", "患者糖尿病", ((2, 5, "dis"),))
    ]
    cell = {
        "row": "r",
        "seed": 0,
        "task": "cmedqaner",
        "finetune_seed": 0,
        "commit": "c",
        "results_versions": {"mlm": study.study("mlm").results_version},
        "outcomes": {"ids": [e.id for e in test], "counts": [[1.0, 1.0, 1.0]] * 5},
        "dev": {"score": 1.0, "constant": 0.0, "constant_prediction": "no entity (all-O)", "degenerate": False},
    }
    measured = {
        "cells": [cell],
        "splits": {"cmedqaner": {"train": test, "test": test}},
        "intrinsic": {},
        "own": {},
        "own_columns": {},
        "similarity_sizes": {},
        "probe": SimpleNamespace(seen=np.array([True]), hard=np.array([True]), chance=np.array([0.0])),
        "timings": {},
        "link": lambda text: [(0, 3, "Disease"), (3, 5, "Person")],
    }
    result = aggregate([row], budget, measured, commit="abc", device="cpu", seconds=0.0)
    baseline = result["baselines"]["secondary"][_table.LINKER_AS_NER]
    # four documents right, "患者糖尿病" wrong twice over (a missed gold, a false (0, 3)): P = R = 4/5
    assert baseline["cMedQANER F1"] == pytest.approx(0.8)


# -- issue 28: the primary table and the continued-pre-training protocol ----------------------------------------
def test_the_primary_plan_holds_each_method_its_control_and_attribution_rows_on_its_endpoints_tasks():
    rows = replicate.plan_rows(primary=True)
    by_group: dict[str, list] = {}
    for row in rows:
        by_group.setdefault(row.group, []).append(row)
    assert None not in by_group  # no reference row
    for method, group in by_group.items():
        spec, record = get(method), study.study(method)
        roles = sorted(row.role for row in group)
        expected = (
            ["control", "method"]
            + ["attribution"] * len(record.attribution_rows)
            + (["no knowledge at fine-tuning"] if spec.finetuning_inputs is not None else [])
        )
        assert roles == sorted(expected), method
        tasks = tuple(e.task for e in record.primary_endpoints if e.task != "PAP AUC")
        assert all(row.tasks == tasks for row in group), method
    assert [r.tasks for r in rows if r.group == "epplm"] == [("chip-sts",)] * 2  # its PAP endpoint is an evaluation
    full = {row.name for row in replicate.plan_rows()}
    assert {row.name for row in rows} < full  # the ablations and the reference row are left out
    assert not any(row.role == "ablation" for row in rows)


def test_each_method_continues_from_its_familys_base():
    assert {
        m: replicate.base_family(m) for m in ("mlm", "smedbert", "kebiolm", "embert", "electra", "ehealth", "epplm")
    } == {
        "mlm": "mlm",
        "smedbert": "mlm",
        "kebiolm": "mlm",
        "embert": "mlm",
        "electra": "electra",
        "ehealth": "electra",
        "epplm": "electra",
    }
    budget = replicate.Budget()
    assert budget.protocol == "continued"
    key = replicate.pretraining_key(budget, replicate.Pretraining("ehealth", "whole_word"), 3, "s")
    assert key["base"]["family"] == "electra" and key["base"]["seed"] == replicate.BASE_SEED
    assert key["base"] == replicate.base_key(budget, "electra", "s")
    # the base does not depend on the row's seed: every row of a family continues from the same one
    assert (
        replicate.pretraining_key(budget, replicate.Pretraining("ehealth", "whole_word"), 4, "s")["base"] == key["base"]
    )
    scratch = dataclasses.replace(budget, protocol="scratch")
    assert "base" not in replicate.pretraining_key(scratch, replicate.Pretraining("ehealth", "whole_word"), 3, "s")
    assert replicate.run_directory_name(scratch) != replicate.run_directory_name(budget)
    assert "continued pre-training" in budget.describe() and "from random weights" in scratch.describe()


def test_a_primary_table_reads_only_each_rows_own_tasks():
    """Two tasks; the method and control fine-tune on cmedqq only, a reference row on cmedic only:
    no cell is demanded for the pairs that were never planned, and the cells appear only where measured."""
    budget = dataclasses.replace(
        replicate.Budget(),
        seeds=(0, 1, 2),
        finetune_seeds=(0, 1),
        tasks={"cmedqq": [None, 1], "cmedic": [None, 1]},
        bootstrap_resamples=50,
    )
    method_row = replicate.Row(
        "m", "method", replicate.Pretraining("smedbert", "whole_entity"), "smedbert", "c", tasks=("cmedqq",)
    )
    control_row = replicate.Row(
        "c", "control", replicate.Pretraining("mlm", "whole_entity"), "smedbert", tasks=("cmedqq",)
    )
    other_row = replicate.Row("o", "reference", replicate.Pretraining("mlm", "bert"), tasks=("cmedic",))
    right, wrong = [[1, 1, 1, 1]] * 6, [[0, 0, 0, 0]] * 6
    cells = _cells("m", "cmedqq", right) + _cells("c", "cmedqq", wrong) + _cells("o", "cmedic", right)
    test = [PairExample(f"t{i}", "a", "b", label) for i, label in enumerate(["1", "0", "1", "1"])]
    train = [PairExample(f"r{i}", "a", "b", label) for i, label in enumerate(["1", "1", "0"])]
    measured = _measured(cells, test, train)
    measured["splits"]["cmedic"] = {"train": train, "test": test}
    measured["probe"] = None  # the primary table has no probe or similarity columns
    result = aggregate([method_row, control_row, other_row], budget, measured, commit="abc", device="cpu", seconds=1)
    table = result["tables"]["secondary"]["cells"]
    assert set(table["m"]) == set(table["c"]) == {"cMedQQ acc"}
    assert len(table["o"]) == 1 and "cMedQQ acc" not in table["o"]
    assert result["tables"]["pre-trained"]["columns"] == []
    [primary] = result["families"]["smedbert"]["primary"]
    assert primary["difference"] == 1.0
    markdown = render_markdown(result)
    assert (
        "Similarity queries" not in markdown and "| m | " not in markdown and "| **m** | 100.0 ± 0.0 | — |" in markdown
    )
    # a row planned on a task whose cell is missing still fails loudly
    with pytest.raises(RuntimeError, match="no cell for row 'o'"):
        aggregate(
            [method_row, control_row, other_row],
            budget,
            {**measured, "cells": cells[:-1]},
            commit="abc",
            device="cpu",
            seconds=1,
        )


def test_a_committed_base_is_restored_only_when_its_weights_match_the_record(tmp_path):
    trained = tmp_path / "work" / "base" / "mlm-x"
    (trained / "model").mkdir(parents=True)
    (trained / "tokenizer").mkdir()
    (trained / "model" / "model.safetensors").write_bytes(b"weights")
    (trained / "model" / "config.json").write_text("{}")
    (trained / "tokenizer" / "vocab.txt").write_text("[PAD]\n")
    (trained / "run_config.json").write_text("{}")
    (trained / "metrics.jsonl").write_text('{"step": 1}\n')
    (trained / "checkpoint-5").mkdir()  # training state: not part of what is committed
    committed = tmp_path / "results" / "bases" / "mlm-x"
    replicate._export_base(trained, committed)
    assert sorted(p.name for p in committed.iterdir()) == sorted(replicate.BASE_FILES)
    record = {"weights_sha256": replicate._sha256(trained / "model" / "model.safetensors")}
    restored = tmp_path / "other-machine" / "base" / "mlm-x"
    replicate._restore_base(committed, restored, record)
    for name in ("model/model.safetensors", "model/config.json", "tokenizer/vocab.txt", "metrics.jsonl"):
        assert (restored / name).read_bytes() == (trained / name).read_bytes()
    (committed / "model" / "model.safetensors").write_bytes(b"other weights")
    with pytest.raises(RuntimeError, match="SHA-256"):
        replicate._restore_base(committed, tmp_path / "third" / "base" / "mlm-x", record)


def test_a_rebuilt_base_with_other_weights_does_not_replace_the_registered_record(tmp_path):
    """A base rebuilt with another thread count (or code) has other weights: they are refused and the
    registered record stays as it was; a rebuild with the same weights leaves the record too."""
    record_path = tmp_path / "bases" / "mlm-x.json"
    registered = {"family": "mlm", "weights_sha256": "a" * 64, "commit": "c0", "num_threads": 2}
    replicate.write_base_record(record_path, registered)
    before = record_path.read_bytes()
    with pytest.raises(ArtifactError, match="registered base's are a{64}.*2 threads"):
        replicate.write_base_record(record_path, {**registered, "weights_sha256": "b" * 64, "num_threads": 1})
    assert record_path.read_bytes() == before
    assert not replicate.write_base_record(record_path, {**registered, "seconds": 5, "commit": "c1"})
    assert record_path.read_bytes() == before  # a rebuild bit for bit leaves the registration as it was
    assert replicate.write_base_record(tmp_path / "bases" / "mlm-y.json", registered)


def test_a_base_records_the_step_it_resumed_from(tmp_path):
    """A base stopped part-way is timed only after its last checkpoint: its record says from which step."""
    assert replicate.resumed_step(tmp_path) == 0
    for step in (500, 1000):
        checkpoint = tmp_path / "checkpoints" / f"step-{step:07d}"
        checkpoint.mkdir(parents=True)
        (checkpoint / "trainer_state.json").write_text(json.dumps({"step": step}))
    (tmp_path / "checkpoints" / "step-0001500").mkdir()  # being written (no state yet): not resumable
    assert replicate.resumed_step(tmp_path) == 1000


def test_a_worker_stops_when_its_runner_is_gone(monkeypatch):
    exits = []
    parents = iter([100, 100, 1, 1])  # the first read is the parent at start; then re-parented to init
    monkeypatch.setattr(replicate.os, "getppid", lambda: next(parents))
    monkeypatch.setattr(replicate.os, "_exit", exits.append)
    thread = replicate.exit_with_parent(interval=0.01)
    thread.join(timeout=5)
    assert exits == [1] and not thread.is_alive()


def test_a_runner_computing_its_own_cells_does_not_watch_its_own_parent(monkeypatch, tmp_path):
    """With one worker the runner computes cells itself: a runner started from a shell that then exits is
    re-parented, and must go on (a watcher would end the whole run)."""
    import multiprocessing

    watched = []
    monkeypatch.setattr(replicate, "exit_with_parent", lambda: watched.append(True))
    monkeypatch.setattr(replicate, "_CELL_CONTEXT", {})
    budget = dataclasses.asdict(replicate.Budget())
    replicate._init_cell_worker(str(tmp_path), budget, "cpu", None)
    assert watched == []  # the runner's own process
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())
    replicate._init_cell_worker(str(tmp_path), budget, "cpu", None)
    assert watched == [True]  # a pool worker


def test_an_endpoint_the_protocol_changed_after_its_first_cells_is_labelled_secondary():
    """--secondary-endpoints: the method's endpoint is tested as before (same δ, p and status) and carries
    the reason, which the table prints beside its status."""
    budget = dataclasses.replace(
        replicate.Budget(), seeds=(0, 1, 2), finetune_seeds=(0,), tasks={"cmedqq": [None, 1]}, bootstrap_resamples=50
    )
    method_row = replicate.Row(
        "m", "method", replicate.Pretraining("smedbert", "whole_entity"), "smedbert", "c", tasks=("cmedqq",)
    )
    control_row = replicate.Row(
        "c", "control", replicate.Pretraining("mlm", "whole_entity"), "smedbert", tasks=("cmedqq",)
    )
    right, wrong = [[1, 1, 1, 1]] * 3, [[0, 0, 0, 0]] * 3
    cells = _cells("m", "cmedqq", right, finetune_seeds=(0,)) + _cells("c", "cmedqq", wrong, finetune_seeds=(0,))
    test = [PairExample(f"t{i}", "a", "b", label) for i, label in enumerate(["1", "0", "1", "1"])]
    train = [PairExample(f"r{i}", "a", "b", label) for i, label in enumerate(["1", "1", "0"])]
    measured = _measured(cells, test, train)
    measured["probe"] = None

    def primary(**options):
        result = aggregate(
            [method_row, control_row], budget, measured, commit="abc", device="cpu", seconds=1, **options
        )
        [entry] = result["families"]["smedbert"]["primary"]
        return result, entry

    _, registered = primary()
    result, changed = primary(secondary_endpoints={"smedbert": "re-chosen budget"})
    assert "secondary" not in registered and changed["secondary"] == "re-chosen budget"
    assert {k: v for k, v in changed.items() if k != "secondary"} == registered
    assert result["secondary_endpoints"] == {"smedbert": "re-chosen budget"}
    assert f"| {registered['status']}; **secondary test**: re-chosen budget |" in render_markdown(result)


def test_secondary_endpoints_must_name_a_planned_method():
    with pytest.raises(ConfigurationError, match="--secondary-endpoints kebiolm: not a method this run plans"):
        replicate.main(["--primary", "--methods", "smedbert", "--secondary-endpoints", "kebiolm"])
