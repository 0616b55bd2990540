"""README.md is a front page: short, and its generated tables are those the code and results give."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_is_a_front_page() -> None:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for heading in (
        "## Installation",
        "## Three examples",
        "## Methods",
        "## Does the knowledge help?",
        "## Documentation",
        "## Citation and licence",
    ):
        assert heading in text, heading


def test_the_generated_tables_are_current() -> None:
    from tools.readme import stale_files

    assert stale_files() == [], "run python -m tools.readme"


def test_a_stale_table_is_detected(tmp_path, monkeypatch) -> None:
    """The check can fail: a README whose methods table lost a row is reported."""
    import tools.readme as readme

    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `smedbert` |"))
    (tmp_path / "README.md").write_text(text.replace(row + "\n", ""), encoding="utf-8")
    monkeypatch.setattr(readme, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(readme, "BLOCKS", {"README.md": readme.BLOCKS["README.md"]})
    assert readme.stale_files() == ["README.md"]


def test_every_registered_method_has_a_documentation_page(tmp_path) -> None:
    from kgplm.methods import available
    from tools.docs_pages import write_method_pages

    pages = write_method_pages(tmp_path)
    assert sorted(p.stem for p in pages) == sorted(available())
    smedbert = (tmp_path / "smedbert.md").read_text(encoding="utf-8")
    assert ".. automodule:: kgplm.methods.smedbert.modeling" in smedbert and "Zhang et al. (2021)" in smedbert


def _v5_results() -> dict:
    """A protocol-v5 results file for SMedBERT's family, as the runner writes it (only the fields read)."""

    def cell(mean: float, half: float) -> dict:
        return {"mean": mean, "half_width": half}

    control = "smedbert control: mlm"
    base = "smedbert family: the mlm base, no continued pre-training"
    return {
        "protocol_file": "experiments/protocols/v5.md",
        "rows": [
            {"name": "smedbert", "role": "method"},
            {"name": control, "role": "control"},
            {"name": base, "role": "base"},
        ],
        "tables": {
            "fine-tuned": {
                "cells": {
                    "smedbert": {"cMedQANER F1": cell(0.512, 0.021)},
                    control: {"cMedQANER F1": cell(0.478, 0.013)},
                    base: {"cMedQANER F1": cell(0.47, 0.015)},
                }
            }
        },
        "baselines": {"fine-tuned": {"memorisation (the training split …)": {"cMedQANER F1": 0.703}}},
        "families": {
            "smedbert": {
                "primary": [
                    {
                        "row": "smedbert",
                        "against": control,
                        "column": "cMedQANER F1",
                        "endpoint": "cmedqaner entity_f1",
                        "difference": 0.034,
                        "n": 7,
                        "p_t": 0.0712,
                        "p_permutation": 0.0625,
                        "minimal_detectable_effect": 0.0415,
                        "status": "not detected (not p (t) and p (sign-flip) both < 0.05 …); minimal detectable …",
                    }
                ]
            }
        },
    }


def test_the_headline_reports_a_v5_family_from_its_file_and_the_others_from_v4(tmp_path, monkeypatch) -> None:
    """A method re-tested under protocol v5 is read from its v5 file (base, control, method, memorisation,
    both p-values, the smallest detectable effect of a 'not detected'); it leaves the v4 table."""
    import json
    import shutil

    import tools.readme as readme

    (tmp_path / "experiments" / "results").mkdir(parents=True)
    shutil.copy(REPO_ROOT / readme.RESULTS_NAME, tmp_path / readme.RESULTS_NAME)
    (tmp_path / readme.V5_RESULTS[0]).write_text(json.dumps(_v5_results()), encoding="utf-8")
    monkeypatch.setattr(readme, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(readme, "RESULTS", tmp_path / readme.RESULTS_NAME)

    v5_part, v4_part = readme.headline_table().split("\n\nProtocol v4, not re-tested under v5. ")
    assert "over 7 pre-training seeds" in v5_part and "`experiments/results/replicate-v5-smedbert.json`" in v5_part
    assert (
        "| `smedbert` | cmedqaner entity_f1 | 47.0 ± 1.5 | 47.8 ± 1.3 | 51.2 ± 2.1 | 70.3 | +3.4 | 0.071 | 0.062 | "
        "not detected (smallest detectable effect 4.2) |"
    ) in v5_part.splitlines()
    assert "| `smedbert` |" not in v4_part and "| `kebiolm` | cmedqaner entity_f1 |" in v4_part
    methods = readme.methods_table()
    assert "| not detected (smallest detectable effect 4.2) |" in methods.split("| `smedbert` |")[1].splitlines()[0]


def test_without_v5_files_the_headline_is_protocol_v4s(tmp_path, monkeypatch) -> None:
    import tools.readme as readme

    monkeypatch.setattr(readme, "V5_RESULTS", (str(tmp_path / "absent.json"),))
    table = readme.headline_table()
    assert table.startswith("Test scores × 100") and "Protocol v" not in table and "| `smedbert` |" in table
