"""The replication table from the runner's measurements: intervals, paired tests, baselines, JSON and Markdown.

:func:`aggregate` turns per-example outcomes into cells — mean ± 95% Student-t half-width over
pre-training seeds (fine-tuning seeds averaged within each) and a paired bootstrap p-value against
the row's control (:mod:`kgplm.evaluation.statistics`) — plus baseline rows; :func:`render_markdown`
prints it. Scores are fractions in the JSON and ×100 in the Markdown.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os

import numpy as np

from kgplm.evaluation.statistics import metric_from_counts, paired_bootstrap, seed_interval

__all__ = ["TASK_LABELS", "aggregate", "render_markdown", "cell"]

TASK_LABELS = {"cmedqaner": "cMedQANER F1", "cehrner": "cEHRNER F1", "cmedqq": "cMedQQ acc",
               "chip-sts": "CHIP-STS macro-F1", "cmedic": "cMedIC acc"}
SIMILARITY_CANDIDATES = 20  # the positive and 19 hard negatives (kgplm.evaluation.similarity)


def cell(counts: np.ndarray, metric: str, seeds: int, control: np.ndarray | None, resamples: int) -> dict:
    """A table cell from per-example counts (runs, examples, k), runs ordered seed-major (pre-training seed,
    then fine-tuning seed): per-run scores, the seed interval and, given the control's counts, the paired test."""
    runs = metric_from_counts(metric, counts.sum(1))  # (runs,)
    per_seed = runs.reshape(seeds, -1).mean(1)  # fine-tuning seeds averaged within each pre-training seed
    interval = seed_interval(per_seed)
    result = {"mean": interval.mean, "half_width": None if math.isnan(interval.half_width) else interval.half_width,
              "n": interval.n, "per_seed": per_seed.tolist(), "runs": runs.tolist()}
    if control is not None:
        test = paired_bootstrap(counts, control, metric, resamples=resamples, seed=0)
        result.update(p_value=test.p_value, difference=test.difference, difference_low=test.low,
                      difference_high=test.high)
    return result


def _same_examples(outcomes_by_row: dict[str, list[dict]], task: str) -> list[str]:
    ids = None
    for row, outcomes in outcomes_by_row.items():
        for outcome in outcomes:
            if ids is None:
                ids = outcome["ids"]
            elif outcome["ids"] != ids:
                raise RuntimeError(f"{task}: row {row!r} was scored on other test examples than the first row; "
                                   f"every seed and row must see the same examples")
    return ids


def _test_units(task: str, examples) -> tuple[int, str]:
    if examples and hasattr(examples[0], "spans"):
        return sum(len(example.spans) for example in examples), "entities"
    return len(examples), "examples"


LINKER_AS_NER = "linker as NER (the linker's spans, KG type → label fitted on train)"


def aggregate(rows, budget, measured: dict, *, commit: str, device: str, seconds: float) -> dict:
    from _outcomes import baseline_counts
    from kgplm.evaluation.baselines import linker_as_ner
    from kgplm.evaluation.tasks import get_task

    by_name = {row.name: row for row in rows}
    seeds = len(budget.seeds)
    resamples = budget.bootstrap_resamples
    tables = {"fine-tuned": {"columns": [], "cells": {}}, "secondary": {"columns": [], "cells": {}},
              "pre-trained": {"columns": [], "cells": {}}}
    baselines = {name: {} for name in tables}
    notes = {"test units": {}}

    def add(table: str, column: str, row: str, value: dict) -> None:
        tables[table]["cells"].setdefault(row, {})[column] = value

    for task, outcomes_by_row in measured["tasks"].items():
        metric = get_task(task).metric
        ids = _same_examples(outcomes_by_row, task)
        splits = measured["splits"][task]
        units, unit_name = _test_units(task, splits["test"])
        table = "fine-tuned" if units >= 200 else "secondary"
        column = TASK_LABELS.get(task, f"{task} {metric}")
        tables[table]["columns"].append(column)
        scored = {example.id: example for example in splits["test"]}
        scored_units, _ = _test_units(task, [scored[i] for i in ids])
        notes["test units"][column] = (f"{len(ids)} test {'documents' if unit_name == 'entities' else 'examples'}"
                                       + (f" ({scored_units} entities)" if unit_name == "entities" else "")
                                       + f" scored; the full test split has {units} {unit_name}")
        counts = {row: np.asarray([o["counts"] for o in outcomes]) for row, outcomes in outcomes_by_row.items()}
        for row, row_counts in counts.items():
            control = by_name[row].control
            add(table, column, row, cell(row_counts, metric, seeds, counts.get(control), resamples))
        reference = baseline_counts(task, splits["train"], [scored[i] for i in ids])
        baselines[table].setdefault("majority class (all-O for NER)", {})[column] = float(
            metric_from_counts(metric, reference["majority"].sum(0)))
        if reference["chance"] is not None:
            baselines[table].setdefault("chance (uniform random training label)", {})[column] = float(
                metric_from_counts(metric, reference["chance"].sum(1)).mean())
        if measured.get("link") is not None and get_task(task).kind == "ner":  # issue 26.5: the linked spans alone
            baselines[table].setdefault(LINKER_AS_NER, {})[column] = float(linker_as_ner(
                splits["train"], [scored[i] for i in ids], measured["link"])["f1"])

    probe = measured["probe"]
    intrinsic_columns = [f"similarity {name} Acc@1" for name in measured["similarity_sizes"]]
    intrinsic_columns += ["probe seen", "probe unseen"]
    tables["pre-trained"]["columns"] = intrinsic_columns
    hits_by_row = {}
    for row, outcomes in measured["intrinsic"].items():
        columns = {f"similarity {name} Acc@1": [o[name] for o in outcomes] for name in measured["similarity_sizes"]}
        if all("probe" in o for o in outcomes):
            probe_hits = np.asarray([o["probe"] for o in outcomes], dtype=bool)  # (seeds, probes)
            columns["probe seen"] = probe_hits[:, probe.seen]
            columns["probe unseen"] = probe_hits[:, ~probe.seen]
        hits_by_row[row] = {column: _hit_counts(hits) for column, hits in columns.items()}
    for row, columns in hits_by_row.items():
        control = hits_by_row.get(by_name[row].control, {})
        for column, row_counts in columns.items():
            if row_counts.shape[1]:
                add("pre-trained", column, row, cell(row_counts, "accuracy", seeds, control.get(column), resamples))
    for name in measured["similarity_sizes"]:
        baselines["pre-trained"].setdefault("chance", {})[f"similarity {name} Acc@1"] = 1 / SIMILARITY_CANDIDATES
    baselines["pre-trained"]["model-free probe baseline (most frequent tail of the relation)"] = {
        "probe seen": float(probe.baseline_hits[probe.seen].mean()) if probe.seen.any() else None,
        "probe unseen": float(probe.baseline_hits[~probe.seen].mean()) if (~probe.seen).any() else None}
    notes["similarity queries"] = measured["similarity_sizes"]
    notes["probes"] = {"seen": int(probe.seen.sum()), "unseen": int((~probe.seen).sum())}

    for column, (method, evaluation) in measured["own_columns"].items():
        tables["pre-trained"]["columns"].append(column)
        for row, values in measured["own"].get(column, {}).items():
            interval = seed_interval(values)
            add("pre-trained", column, row, {"mean": interval.mean, "n": interval.n, "per_seed": list(values),
                                             "half_width": None if math.isnan(interval.half_width)
                                             else interval.half_width})
        if evaluation.chance is not None:
            baselines["pre-trained"].setdefault("chance", {})[column] = evaluation.chance
        notes[column] = evaluation.description

    return {"title": "Does the knowledge help? The replication table", "smoke": budget.smoke, "commit": commit,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "device": device,
            "machine": {"cpus": os.cpu_count(), "load_average_1min": os.getloadavg()[0]},
            "seconds": round(seconds), "timings": {k: round(v) for k, v in measured["timings"].items()},
            "budget": dataclasses.asdict(budget), "budget_text": budget.describe(),
            "rows": [{"name": row.name, "role": row.role, "group": row.group, "control": row.control,
                      "encoder_inputs": row.encoder_inputs, "pretraining": row.pretraining.key()} for row in rows],
            "tables": tables, "baselines": baselines, "notes": notes}


def _hit_counts(hits) -> np.ndarray:
    """(seeds, examples, 2) accuracy counts from per-example hits (seeds, examples)."""
    hits = np.asarray(hits, dtype=np.float64)
    return np.stack([hits, np.ones_like(hits)], -1)


# -- Markdown ------------------------------------------------------------------------------------------------
def _value(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _interval(entry: dict | None) -> str:
    if entry is None:
        return "—"
    if entry.get("half_width") is None:
        return _value(entry["mean"])
    return f"{100 * entry['mean']:.1f} ± {100 * entry['half_width']:.1f}"


def _p(entry: dict | None) -> str:
    if entry is None or entry.get("p_value") is None:
        return ""
    return "<0.001" if entry["p_value"] < 0.001 else f"{entry['p_value']:.3f}"


TABLE_TITLES = {
    "fine-tuned": "Fine-tuned tasks (test scores ×100)",
    "pre-trained": "Pre-trained models, no fine-tuning: similarity Acc@1, held-out cloze probe (exact match), "
                   "the methods' own evaluations (×100)",
    "secondary": "Secondary table: tasks with fewer than 200 test units (×100)",
}


def render_markdown(result: dict, heading_level: int = 2) -> str:
    """The result as Markdown, its title a heading of ``heading_level`` and each table one level below."""
    title, subtitle = "#" * heading_level, "#" * (heading_level + 1)
    lines = [f"{title} {result['title']}", ""]
    if result["smoke"]:
        lines += ["> **Smoke run.** A tiny budget that checks the runner end to end (every row, column, interval, "
                  "p-value and baseline); its numbers say nothing about the papers' claims.", ""]
    lines += [f"Commit `{result['commit']}`, {result['date']}, device {result['device']} "
              f"({result['machine']['cpus']} CPUs, load average {result['machine']['load_average_1min']:.1f}), "
              f"{result['seconds']} s in all ("
              + ", ".join(f"{k} {v} s" for k, v in result["timings"].items()) + ").", "",
              f"Budget: {result['budget_text']}.", "",
              "Cells: mean ± half-width of the 95% Student-t interval over the pre-training seeds (fine-tuning "
              "seeds averaged within each); p: two-sided paired bootstrap p-value of the row against its "
              "method's control (resampling test examples, one draw shared by every seed of both rows; "
              "`kgplm/evaluation/statistics.py`). Baseline rows are in italics.", ""]
    for name in ("fine-tuned", "pre-trained", "secondary"):
        table = result["tables"][name]
        if not table["columns"]:
            continue
        lines += [f"{subtitle} {TABLE_TITLES[name]}", "",
                  "| row | " + " | ".join(f"{column} | p" for column in table["columns"]) + " |",
                  "|---|" + "---:|---:|" * len(table["columns"])]
        for row in result["rows"]:
            cells = table["cells"].get(row["name"])
            if cells is None:
                continue
            label = f"**{row['name']}**" if row["role"] == "method" else row["name"]
            lines.append(f"| {label} | " + " | ".join(f"{_interval(cells.get(c))} | {_p(cells.get(c))}"
                                                      for c in table["columns"]) + " |")
        for baseline, values in result["baselines"][name].items():
            lines.append(f"| *{baseline}* | " + " | ".join(f"{_value(values.get(c))} | " for c in table["columns"])
                         + " |")
        lines.append("")
    notes = result["notes"]
    lines += ["Test sets: " + "; ".join(f"{column}: {text}" for column, text in notes["test units"].items()) + ".",
              "Similarity queries per set: " + ", ".join(f"{k} {v}" for k, v in notes["similarity queries"].items())
              + f"; probes seen in the pre-training text {notes['probes']['seen']}, unseen "
                f"{notes['probes']['unseen']}.", ""]
    return "\n".join(lines)
