"""The attribution rows of the SMedBERT and KeBioLM families: what each row pre-trains and fine-tunes with, and
the typed gazetteer's table reaching the fine-tuning of its cells."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

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


def test_the_row_listing_names_each_rows_options(capsys):
    replicate.main(["--list-rows", "--primary", "--methods", "kebiolm"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (
        "kebiolm: control + silver NER [attribution, vs kebiolm]: kebiolm (word_entity masking; "
        "entity_fusion=False, entity_linking=False); tasks cmedqaner, cehrner"
    )
    assert len(lines) == 4
    listing = replicate.describe_rows(replicate.plan_rows(["smedbert"], primary=True))
    assert "smedbert − knowledge at fine-tuning [no knowledge at fine-tuning, vs smedbert]: smedbert " in listing
    assert "fine-tuned with the text only" in listing and "fine-tuned with mention_spans=typed" in listing
