"""benchmarks/scale.py's PEPR stages on a tiny generated UMLS set: both tables built, each scored."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import scale  # noqa: E402
import synthetic_umls  # noqa: E402


@pytest.fixture()
def tiny(tmp_path, monkeypatch):
    monkeypatch.setattr(scale, "CACHE", tmp_path)
    synthetic_umls.write_synthetic_umls(tmp_path / "umls-300", 300, seed=0)
    scale.run_stage("import", "300")
    return tmp_path


def _recalls(note: str) -> dict[str, float]:
    return {name: float(value) for name, value in re.findall(r"(pepr(?:_coarse)?) ([0-9.]+) \(min", note)}


def test_pepr_recall_needs_a_table(tiny):
    with pytest.raises(SystemExit, match="no PEPR table"):
        scale.run_stage("pepr_recall", "300")


def test_pepr_recall_scores_the_default_and_the_coarse_table_against_exact_pepr(tiny):
    from kgplm.kg.pepr import NeighborTable

    for stage in ("pepr", "pepr_coarse"):
        result = scale.run_stage(stage, "300")
        assert result["count"] == 300 and "contested" in result["note"]
    assert _recalls(scale.run_stage("pepr_recall", "300")["note"]) == {"pepr": 1.0, "pepr_coarse": 1.0}

    # a coarse table that keeps each contested seed's worst-ranked candidates instead: its recall drops,
    # the default table's does not
    paths = scale._paths("300")
    table = NeighborTable.load(paths["pepr_coarse"])
    store = scale._store(paths)
    from kgplm.kg.pepr.pagerank import one_hop_candidates

    indptr, neighbors, _, _ = one_hop_candidates(store, np.arange(store.num_entities))
    worst = table.neighbors.copy()
    for seed in np.flatnonzero(np.diff(indptr) > 10):
        kept = set(table.neighbors[table.row_of(seed)].tolist())
        others = [v for v in neighbors[indptr[seed] : indptr[seed + 1]].tolist() if v not in kept]
        worst[table.row_of(seed), : len(others)] = others[:10]
    NeighborTable(table.seeds, worst, table.relations, table.directions, table.scores, config=table.config).save(
        paths["pepr_coarse"]
    )
    recalls = _recalls(scale.run_stage("pepr_recall", "300")["note"])
    assert recalls["pepr"] == 1.0 and recalls["pepr_coarse"] < 0.9


def test_the_growth_exponent_reads_the_step_alone_where_the_rate_does(monkeypatch, capsys):
    """A KeBioLM step: 0.71 s CPU at 115k, 6.40 s at 1M, inside stages of 11 s and 31 s (the model's build):
    the exponent is log(6.40 / 0.71) / log(1M / 115k) = 1.02, not the stages' 0.50; RSS from the peaks."""
    figures = {"115k": (0.71, 11.4, 0.81), "1M": (6.40, 31.1, 2.18)}

    def measure(stage, size, timeout, commit, reuse, in_process=False):
        step, cpu, rss = figures[size]
        return {
            "count": 1,
            "unit": "steps",
            "seconds_override": step,
            "cpu": cpu,
            "wall": cpu,
            "peak_rss_gb": rss,
            "note": "",
            "commit": commit,
        }

    monkeypatch.setattr(scale, "measure", measure)
    monkeypatch.setattr(scale, "_ensure_rrf", lambda size: None)
    scale.main(["--sizes", "115k", "1M", "--stages", "kebiolm"])
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| kebiolm |")][-1]
    step_exponent = np.log(6.40 / 0.71) / np.log(1_000_000 / 115_000)
    rss_exponent = np.log(2.18 / 0.81) / np.log(1_000_000 / 115_000)
    assert row == f"| kebiolm | {step_exponent:.2f} | {rss_exponent:.2f} |"


def test_linker_link_measures_both_loads_on_the_same_text(tiny, monkeypatch):
    monkeypatch.setattr(scale, "TEXT_MB", 0.5)  # the stage links TEXT_MB of text; 8 MB takes long in a test
    scale.run_stage("linker_build", "300")
    result = scale.run_stage("linker_link", "300")
    memory, mapped = map(
        float, re.findall(r"([0-9.]+) MB per CPU-second loaded into memory, ([0-9.]+) memory-mapped", result["note"])[0]
    )
    assert result["unit"] == "MB" and result["count"] == pytest.approx(scale.TEXT_MB, rel=0.01)
    assert result["count"] / result["seconds_override"] == pytest.approx(memory, rel=0.01)  # the rate column
    assert result["mb_per_cpu_second"]["memory"] == pytest.approx(memory, rel=0.01)
    assert result["mb_per_cpu_second"]["mapped"] == pytest.approx(mapped, rel=0.01)
    assert mapped > 0 and int(re.search(r"([0-9,]+) mentions", result["note"]).group(1).replace(",", "")) > 0


def test_link_ratio_against_the_comparator_by_hand():
    cmekg = {"count": 8.0, "seconds_override": 2.0, "cpu": 30.0, "mb_per_cpu_second": {"memory": 4.0, "mapped": 3.0}}
    large = {"count": 8.0, "seconds_override": 4.0, "cpu": 50.0, "mb_per_cpu_second": {"memory": 2.0, "mapped": 1.0}}
    assert scale._link_ratio(cmekg, large) == "2.00 in memory, 3.00 memory-mapped"
    old_record = {"count": 8.0, "seconds_override": 8.0, "cpu": 9.0, "note": "1.00 MB per CPU-second; 5 mentions"}
    assert scale._link_ratio(cmekg, old_record) == "4.00 in memory"
