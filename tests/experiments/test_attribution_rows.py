"""The attribution rows of the SMedBERT and KeBioLM families: what each row pre-trains and fine-tunes with, and
the typed gazetteer's table reaching the fine-tuning of its cells."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from kgplm.exceptions import ConfigurationError
from kgplm.methods import get

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import replicate  # noqa: E402
import study  # noqa: E402
from study import AttributionRow  # noqa: E402

SMEDBERT_CONTROL = "smedbert control: mlm, use_sop=True (whole_entity masking)"
KEBIOLM_CONTROL = "kebiolm control: mlm (word_entity masking)"


def test_the_primary_families_hold_the_registered_rows():
    rows = replicate.plan_rows(["smedbert", "kebiolm"], primary=True)
    names = {group: [row.name for row in rows if row.group == group] for group in ("smedbert", "kebiolm")}
    assert names["smedbert"] == [
        "smedbert",
        "smedbert − knowledge at fine-tuning",
        "smedbert: control + typed gazetteer",
        "smedbert: shuffled graph",
        "smedbert: type-preserving shuffled graph",
        SMEDBERT_CONTROL,
    ]
    assert names["kebiolm"] == [
        "kebiolm",
        "kebiolm: control + silver NER",
        "kebiolm: linking without fusion",
        KEBIOLM_CONTROL,
    ]
    by_name = {row.name: row for row in rows}
    assert all(by_name[n].control == "smedbert" for n in names["smedbert"][1:5])
    assert all(by_name[n].control == "kebiolm" for n in names["kebiolm"][1:3])


def test_each_attribution_row_pre_trains_and_fine_tunes_what_it_says():
    rows = {row.name: row for row in replicate.plan_rows(["smedbert", "kebiolm"], primary=True)}
    gazetteer = rows["smedbert: control + typed gazetteer"]
    assert gazetteer.pretraining == rows[SMEDBERT_CONTROL].pretraining  # the control's own runs, shared
    assert gazetteer.finetune_options == (("mention_spans", "typed"),) and gazetteer.encoder_inputs
    assert rows["smedbert: type-preserving shuffled graph"].pretraining == replicate.Pretraining(
        "smedbert", "whole_entity", (), (("graph_shuffle", "within_types"), ("graph_shuffle_seed", 0))
    )
    silver, no_fusion = rows["kebiolm: control + silver NER"], rows["kebiolm: linking without fusion"]
    assert silver.pretraining == replicate.Pretraining(
        "kebiolm", "word_entity", (("entity_fusion", False), ("entity_linking", False))
    )
    assert no_fusion.pretraining == replicate.Pretraining("kebiolm", "word_entity", (("entity_fusion", False),))
    # the control's masking: the silver-NER row differs from the control by the detection objective only
    assert silver.pretraining.masking == rows[KEBIOLM_CONTROL].pretraining.masking
    assert silver.finetune_options == no_fusion.finetune_options == ()
    # each is cached apart from the method's runs
    budget = replicate.Budget()
    keys = {
        replicate.key_hash(replicate.pretraining_key(budget, row.pretraining, 0, "s"))
        for row in (silver, no_fusion, rows["kebiolm"])
    }
    assert len(keys) == 3


def test_an_attribution_rows_model_options_join_its_bases():
    record = study.study("smedbert")
    study.add(
        study.MethodStudy(
            "smedbert",
            results_version=record.results_version,
            primary_endpoints=record.primary_endpoints,
            control=record.control,
            attribution_rows={"control without SOP": AttributionRow(base="control", model_options={"use_sop": False})},
        ),
        replace=True,
    )
    try:
        rows = {row.name: row for row in replicate.plan_rows(["smedbert"], primary=True)}
    finally:
        study.add(record, replace=True)
    assert rows["smedbert: control without SOP"].pretraining == replicate.Pretraining(
        "mlm", "whole_entity", (("use_sop", False),)
    )


def test_every_attribution_option_is_a_field_or_argument_it_changes():
    import inspect

    import kgplm

    finetune_arguments = set(inspect.signature(kgplm.finetune).parameters)
    for name in study.studied():
        record = study.study(name)
        for label, row in record.attribution_rows.items():
            method = name if row.base == "method" else record.control.method
            assert set(row.model_options) <= set(get(method).config_class.option_names()), (name, label)
            assert set(row.finetune_options) <= finetune_arguments, (name, label)


def test_the_gazetteer_cells_fine_tune_with_the_table_the_methods_runs_read(tmp_path, monkeypatch):
    rows = {row.name: row for row in replicate.plan_rows(["smedbert"], primary=True)}
    budget = replicate.Budget()
    gazetteer = replicate.cell_job(budget, rows["smedbert: control + typed gazetteer"], 0, "cmedqaner", 0, "shared-x")
    plain = replicate.cell_job(budget, rows[SMEDBERT_CONTROL], 0, "cmedqaner", 0, "shared-x")
    assert gazetteer.inputs["gazetteer_of"] == ["smedbert", "shared-x"] and "gazetteer_of" not in plain.inputs
    # SMedBERT's runs are given the shared directory's table (prepopulate): the budget's TransE for every method,
    # or each method's own (SMedBERT: TransR); the gazetteer reads the same
    expected = tmp_path / "shared-x" / "kg" / "transe"
    assert replicate.gazetteer_table(tmp_path, budget, "smedbert", "shared-x") == str(expected)
    own = replicate.Budget(kg_method=None)
    assert replicate.gazetteer_table(tmp_path, own, "smedbert", "shared-x") == str(
        tmp_path / "shared-x" / "kg" / "embeddings"
    )
    # compute_cell hands the table to replicate.finetune
    seen = {}

    def fake_finetune(work, budget, run, task, seed, encoder_inputs, device, options=(), kg_embeddings=None):
        seen.update(options=options, kg_embeddings=kg_embeddings)
        raise RuntimeError("stop here")

    monkeypatch.setattr(replicate, "finetune", fake_finetune)
    monkeypatch.setitem(replicate._CELL_CONTEXT, "work", tmp_path)
    monkeypatch.setitem(replicate._CELL_CONTEXT, "budget", budget)
    monkeypatch.setitem(replicate._CELL_CONTEXT, "device", "cpu")
    gazetteer.inputs["pretrained"] = str(tmp_path / "run")
    with pytest.raises(RuntimeError, match="stop here"):
        replicate.compute_cell(gazetteer)
    assert seen == {"options": (("mention_spans", "typed"),), "kg_embeddings": str(expected)}


def test_the_row_listing_names_each_rows_options(capsys, monkeypatch):
    monkeypatch.setenv(replicate.RUN_COMMIT, "test")
    replicate.main(["--list-rows", "--primary", "--methods", "kebiolm", "--base-rows"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (
        "kebiolm: control + silver NER [attribution, vs kebiolm]: kebiolm (word_entity masking; "
        "entity_fusion=False, entity_linking=False); tasks cmedqaner, cehrner"
    )
    assert lines[3:] == [
        "kebiolm control: mlm (word_entity masking) [control, vs kebiolm family: the mlm base, no continued "
        "pre-training]: mlm (word_entity masking); tasks cmedqaner, cehrner",
        "kebiolm family: the mlm base, no continued pre-training [base]: the mlm base itself; tasks cmedqaner, cehrner",
    ]
    listing = replicate.describe_rows(replicate.plan_rows(["smedbert"], primary=True))
    assert "smedbert − knowledge at fine-tuning [no knowledge at fine-tuning, vs smedbert]: smedbert " in listing
    assert "fine-tuned with the text only" in listing and "fine-tuned with mention_spans=typed" in listing


def test_each_family_fine_tunes_its_base_itself_and_compares_the_control_with_it(monkeypatch, tmp_path):
    rows = replicate.plan_rows(["smedbert", "kebiolm"], primary=True, base_rows=True)
    by_name = {row.name: row for row in rows}
    bases = [row for row in rows if row.role == "base"]
    assert [(row.name, row.group) for row in bases] == [
        ("smedbert family: the mlm base, no continued pre-training", "smedbert"),
        ("kebiolm family: the mlm base, no continued pre-training", "kebiolm"),
    ]
    assert by_name[SMEDBERT_CONTROL].control == bases[0].name and by_name[KEBIOLM_CONTROL].control == bases[1].name
    assert bases[1].tasks == ("cmedqaner", "cehrner")  # its family's primary endpoints
    # without base rows the control is compared with nothing (the scratch protocol has no base)
    assert {row.role for row in replicate.plan_rows(["smedbert"], primary=True)} == {
        "method",
        "no knowledge at fine-tuning",
        "attribution",
        "control",
    }

    # the base rows are never pre-trained: every seed's run is the base directory
    planned = []

    def fake_pretraining(items, *args):
        planned.extend(items)
        return [tmp_path / f"{pretraining.method}-{seed}" for pretraining, seed, _ in items]

    monkeypatch.setattr(replicate, "_run_pretraining", fake_pretraining)
    base = tmp_path / "base"
    runs = replicate.pretrain_all(tmp_path, None, replicate.Budget(), rows, "cpu", 1, 1, [3, 4], {"mlm": base})
    assert runs[bases[0].pretraining] == [base, base]
    assert all(pretraining != bases[0].pretraining for pretraining, _, _ in planned)
    assert len(planned) == 2 * len({row.pretraining for row in rows if row.role != "base"})
    assert all(start == base for _, _, start in planned)  # every other row continues from the base


def test_a_base_cell_is_keyed_by_the_base_not_by_continued_pre_training():
    rows = {row.name: row for row in replicate.plan_rows(["kebiolm"], primary=True, base_rows=True)}
    base_row = rows["kebiolm family: the mlm base, no continued pre-training"]
    budget = replicate.Budget()
    digests = {"task": "fixed"}

    def key(row, budget, seed=0):
        return replicate.cell_job(budget, row, seed, "cmedqaner", seed, "shared-x", data=digests).key

    faster = dataclasses.replace(budget, learning_rate=2e-4, warmup_steps=40, steps=200)
    assert key(base_row, faster) == key(base_row, budget)  # continued pre-training does not touch it
    assert key(rows[KEBIOLM_CONTROL], faster) != key(rows[KEBIOLM_CONTROL], budget)
    assert key(base_row, dataclasses.replace(budget, base_steps=1000)) != key(base_row, budget)
    assert key(base_row, budget, seed=1) != key(base_row, budget)  # the fine-tuning seed is paired with it
    assert key(base_row, budget)["optimisation"]["pretraining"] is None


def test_a_protocols_cut_leaves_out_the_rows_it_names_and_nothing_else(capsys, monkeypatch):
    monkeypatch.setenv(replicate.RUN_COMMIT, "test")
    rows = replicate.plan_rows(["smedbert", "kebiolm"], primary=True, base_rows=True)
    cut = ["smedbert: shuffled graph", "kebiolm: linking without fusion"]
    kept = replicate.without_rows(rows, cut)
    assert [row.name for row in kept] == [row.name for row in rows if row.name not in cut]
    assert len(kept) == len(rows) - 2
    with pytest.raises(ConfigurationError, match=r"\['smedbert: shuffled'\] are not planned rows"):
        replicate.without_rows(rows, ["smedbert: shuffled"])
    with pytest.raises(ConfigurationError, match=r"\['smedbert'\] cannot be cut, other rows are compared with them"):
        replicate.without_rows(rows, ["smedbert"])
    replicate.main(["--list-rows", "--primary", "--methods", "kebiolm", "--cut-rows", *cut[1:]])
    listed = capsys.readouterr().out
    assert "kebiolm: linking without fusion" not in listed and "kebiolm: control + silver NER" in listed
