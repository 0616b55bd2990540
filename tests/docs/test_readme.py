"""README.md is a front page: short, and its generated tables are those the code and results give."""

from __future__ import annotations

import json
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


def _v5_results(method: str = "smedbert", endpoints: tuple[str, ...] = ("cmedqaner",), **entry_fields) -> dict:
    """A protocol-v5 results file for one family, as the runner writes it (only the fields read)."""

    def cell(mean: float, half: float) -> dict:
        return {"mean": mean, "half_width": half}

    control = f"{method} control: mlm"
    base = f"{method} family: the mlm base, no continued pre-training"
    column = {"cmedqaner": "cMedQANER F1", "cehrner": "cEHRNER F1"}
    return {
        "protocol_file": "experiments/protocols/v5.md",
        "rows": [
            {"name": method, "role": "method"},
            {"name": control, "role": "control"},
            {"name": base, "role": "base"},
        ],
        "tables": {
            "fine-tuned": {
                "cells": {
                    method: {column[task]: cell(0.512, 0.021) for task in endpoints},
                    control: {column[task]: cell(0.478, 0.013) for task in endpoints},
                    base: {column[task]: cell(0.47, 0.015) for task in endpoints},
                }
            }
        },
        "baselines": {"fine-tuned": {"memorisation (the training split …)": {column[t]: 0.703 for t in endpoints}}},
        "families": {
            method: {
                "primary": [
                    {
                        "row": method,
                        "against": control,
                        "column": column[task],
                        "endpoint": f"{task} entity_f1",
                        "difference": 0.034,
                        "n": 7,
                        "p_t": 0.0356,
                        "p_permutation": 0.0313,
                        "p_t_holm": 0.0712,
                        "p_permutation_holm": 0.0625,
                        "minimal_detectable_effect": 0.0415,
                        "status": "not detected (not p (t) and p (sign-flip) both < 0.05 …); minimal detectable …",
                        **entry_fields,
                    }
                    for task in endpoints
                ]
            }
        },
    }


def _write_v5(tmp_path, monkeypatch, files: dict[str, dict]):
    import shutil

    import tools.readme as readme

    (tmp_path / "experiments" / "results").mkdir(parents=True)
    shutil.copy(REPO_ROOT / readme.RESULTS_NAME, tmp_path / readme.RESULTS_NAME)
    for name, results in files.items():
        (tmp_path / name).write_text(json.dumps(results), encoding="utf-8")
    monkeypatch.setattr(readme, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(readme, "RESULTS", tmp_path / readme.RESULTS_NAME)
    return readme


def test_the_headline_reports_a_v5_endpoint_from_its_file_and_the_others_from_v4(tmp_path, monkeypatch) -> None:
    """An endpoint protocol v5 measured is read from its v5 file (base, control, method, memorisation,
    Holm-adjusted p-values, the smallest detectable effect of a 'not detected', a secondary test's reason);
    it leaves the v4 table, and the method's other v4 endpoint stays there."""
    readme = _write_v5(
        tmp_path, monkeypatch, {"experiments/results/replicate-v5-smedbert.json": _v5_results(secondary="re-chosen")}
    )
    v5_part, v4_part = readme.headline_table().split("\n\nProtocol v4, not re-tested under v5. ")
    assert "over 7 pre-training seeds" in v5_part and "`experiments/results/replicate-v5-smedbert.json`" in v5_part
    assert (
        "| `smedbert` | cmedqaner entity_f1 | 47.0 ± 1.5 | 47.8 ± 1.3 | 51.2 ± 2.1 | 70.3 | +3.4 | 0.071 | 0.062 | "
        "not detected (smallest detectable effect 4.2) as a secondary test (re-chosen) |"
    ) in v5_part.splitlines()
    assert "| `smedbert` | cmedqaner entity_f1 |" not in v4_part
    assert "| `smedbert` | cmedqq accuracy |" in v4_part and "| `kebiolm` | cmedqaner entity_f1 |" in v4_part
    smedbert = readme.methods_table().split("| `smedbert` |")[1].splitlines()[0]
    assert smedbert.endswith(
        "| cmedqaner entity_f1; cmedqq accuracy | not detected (smallest detectable effect 4.2) as a secondary test; "
        "not tested: 6 runs learnt nothing beyond a constant (protocol v4) |"
    )


def test_two_v5_files_and_an_empty_endpoint_list(tmp_path, monkeypatch) -> None:
    """Both families' v5 files are read; a v5 file that measured no endpoint of a method leaves the method's
    v4 endpoints in place."""
    empty = _v5_results("kebiolm", endpoints=())
    readme = _write_v5(
        tmp_path,
        monkeypatch,
        {
            "experiments/results/replicate-v5-smedbert.json": _v5_results(),
            "experiments/results/replicate-v5-kebiolm.json": empty,
        },
    )
    table = readme.headline_table()
    assert "| `kebiolm` | cmedqaner entity_f1 | 23.0 ± 4.4 |" in table  # still from v4
    (tmp_path / "experiments/results/replicate-v5-kebiolm.json").write_text(
        json.dumps(_v5_results("kebiolm", endpoints=("cmedqaner", "cehrner"))), encoding="utf-8"
    )
    v5_part, v4_part = readme.headline_table().split("\n\nProtocol v4, not re-tested under v5. ")
    assert "| `kebiolm` | cmedqaner entity_f1 | 47.0 ± 1.5 |" in v5_part
    assert "| `kebiolm` | cehrner entity_f1 | 47.0 ± 1.5 |" in v5_part
    assert "| `kebiolm` |" not in v4_part and "| `embert` |" in v4_part


def test_without_v5_files_the_headline_is_protocol_v4s(tmp_path, monkeypatch) -> None:
    import tools.readme as readme

    monkeypatch.setattr(readme, "V5_RESULTS", (str(tmp_path / "absent.json"),))
    table = readme.headline_table()
    assert table.startswith("Test scores × 100") and "Protocol v" not in table and "| `smedbert` |" in table
