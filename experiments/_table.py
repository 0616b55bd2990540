"""The replication table from the runner's cells: seed intervals, seed-level tests, families, flags, Markdown.

:func:`aggregate` turns the cells (one fine-tuned run each, :mod:`_cells`) and the pre-trained
models' measurements into

* **cells of the table**: mean ± 95% Student-t half-width over pre-training seeds (fine-tuning seeds
  averaged within each), and how many of the cell's runs are *degenerate* (their dev score does
  not beat the best constant predictor's, :func:`_outcomes.best_constant`; marked † and counted in
  the footer);
* **comparisons**, each of a row with the row it names (``Row.control``) on one column, paired by
  pre-training seed: the mean per-seed difference, a paired t-test and an exact sign-flip
  permutation test over the seeds (:mod:`kgplm.evaluation.statistics`), and for fine-tuned columns
  the paired bootstrap's *test-sampling interval* of the difference (how far it would move with
  another test set for these same runs — not a test of the claim). Comparisons are grouped in
  **families**, one per knowledge method: the method vs its control on every column, each ablation
  and "− knowledge at fine-tuning" vs the method, any extra row vs the row it names. The method's
  pre-registered primary endpoints (``study.MethodStudy.primary_endpoints``) are tested only with at
  least :data:`MIN_PRIMARY_SEEDS` seeds and without degenerate runs; an endpoint is *supported* when the
  paired t-test and the two-sided sign-flip test both fall below :data:`PRIMARY_ALPHA` after Holm's
  adjustment over the method's primary endpoints in the table, in the claimed direction; otherwise it is
  "not detected", printed with its minimal detectable effect at 80 % power
  (:func:`kgplm.evaluation.statistics.minimal_detectable_effect`, from the observed SD of the per-seed
  differences, at level α/m, Holm's first step). Every other comparison of the family is secondary:
  its t-test p carries a Holm-adjusted value (over the family's secondary comparisons) beside it, its
  sign-flip p is printed raw;
* **baseline rows**: the best constant predictor (all-O for NER), chance, the linker used as NER, the
  memorisation baseline (:mod:`kgplm.evaluation.baselines`: the training split's mention strings with
  their majority type, longest match; for pair tasks the nearest training pair's label), the probe's
  model-free baseline, each method evaluation's chance.

The header names the protocol file (:data:`PROTOCOL_FILE`) and the population the p-values
generalise over (the continued-pre-training seeds of one base, at the stated fine-tuning seeds and
training subsets).

Scores are fractions in the JSON and ×100 in the Markdown.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os

import numpy as np

from study import study

from kgplm.evaluation.statistics import (
    holm,
    metric_from_counts,
    minimal_detectable_effect,
    paired_bootstrap,
    paired_t_test,
    seed_interval,
    sign_flip_test,
)

__all__ = ["TASK_LABELS", "MIN_PRIMARY_SEEDS", "aggregate", "render_markdown", "cell"]

TASK_LABELS = {
    "cmedqaner": "cMedQANER F1",
    "cehrner": "cEHRNER F1",
    "cmedqq": "cMedQQ acc",
    "chip-sts": "CHIP-STS macro-F1",
    "cmedic": "cMedIC acc",
}
SIMILARITY_CANDIDATES = 20  # the positive and 19 hard negatives (kgplm.evaluation.similarity)
#: the study's pre-registered protocol (rows, endpoints, tests, seeds, budgets), named in every table's header
PROTOCOL_FILE = "experiments/protocols/v5.md"
#: pre-registered: a primary endpoint is tested only with at least this many pre-training seeds (with 6 the
#: two-sided sign-flip p can reach 2/64 = 0.031)
MIN_PRIMARY_SEEDS = 6
#: the pre-registered level: a primary endpoint is supported when its paired t-test and its two-sided sign-flip
#: test are both below it after Holm's adjustment over the method's primary endpoints
PRIMARY_ALPHA = 0.05
#: the power at which a "not detected" endpoint's minimal detectable effect is stated
MDE_POWER = 0.8
#: the rows whose share of their method's gain is read: those that remove or replace part of the method
SHARE_ROLES = ("attribution", "ablation", "no knowledge at fine-tuning")
LINKER_AS_NER = "linker as NER (the linker's spans, KG type → label fitted on train)"
BEST_CONSTANT = "best constant predictor (best single label on dev; all-O for NER)"
MEMORISATION = (
    "memorisation (the training split: its mention strings with their majority type, leftmost-longest match; "
    "pairs: the nearest training pair's label by bigram Jaccard)"
)


def cell(counts: np.ndarray, metric: str, seeds: int, degenerate: list[bool] | None = None) -> dict:
    """A table cell from per-example counts (runs, examples, k), runs ordered seed-major (pre-training seed,
    then fine-tuning seed): per-run scores, per-seed means, the seed interval, the degenerate runs."""
    runs = metric_from_counts(metric, counts.sum(1))  # (runs,)
    per_seed = runs.reshape(seeds, -1).mean(1)  # fine-tuning seeds averaged within each pre-training seed
    return _summary(
        per_seed, runs=runs.tolist(), degenerate=None if degenerate is None else sum(bool(flag) for flag in degenerate)
    )


def _summary(per_seed, **extra) -> dict:
    interval = seed_interval(per_seed)
    return {
        "mean": interval.mean,
        "half_width": None if math.isnan(interval.half_width) else interval.half_width,
        "n": interval.n,
        "per_seed": [float(v) for v in per_seed],
        **extra,
    }


def _test_units(task: str, examples) -> tuple[int, str]:
    if examples and hasattr(examples[0], "spans"):
        return sum(len(example.spans) for example in examples), "entities"
    return len(examples), "examples"


def _cells_by_task(rows, budget, cells) -> dict[str, dict[str, list[dict]]]:
    """task → row → its cells ordered seed-major; every (seed, fine-tuning seed) present, the same test ids."""
    index = {(c["row"], c["seed"], c["task"], c["finetune_seed"]): c for c in cells}
    tasks: dict[str, dict[str, list[dict]]] = {}
    for task in budget.tasks:
        ids = None
        for row in rows:
            if not row.fine_tunes(task):  # the primary table fine-tunes each row on its endpoints' tasks only
                continue
            ordered = []
            for seed in budget.seeds:
                for finetune_seed in budget.finetune_seeds_of(seed):
                    found = index.get((row.name, seed, task, finetune_seed))
                    if found is None:
                        raise RuntimeError(
                            f"no cell for row {row.name!r}, seed {seed}, task {task}, fine-tuning seed {finetune_seed}"
                        )
                    if ids is None:
                        ids = found["outcomes"]["ids"]
                    elif found["outcomes"]["ids"] != ids:
                        raise RuntimeError(
                            f"{task}: {found.get('path', row.name)} was scored on other test examples "
                            f"than the first cell; every seed and row must see the same examples"
                        )
                    ordered.append(found)
            tasks.setdefault(task, {})[row.name] = ordered
    return tasks


def _memorisation(spec, train, test_examples) -> float | None:
    """The memorisation baseline's test score (:mod:`kgplm.evaluation.baselines`); ``None`` for a task kind
    it does not cover."""
    from kgplm.evaluation.baselines import memorisation_ner, nearest_pair_labels
    from kgplm.evaluation.statistics import example_counts

    if spec.kind == "ner":
        return float(memorisation_ner(train, test_examples)["f1"])
    if spec.kind != "pair" or spec.metric not in ("accuracy", "macro_f1"):
        return None
    gold = [example.label for example in test_examples]
    labels = sorted({e.label for e in train} | set(gold)) if spec.metric == "macro_f1" else None
    predicted = nearest_pair_labels(train, test_examples)
    return float(metric_from_counts(spec.metric, example_counts(spec.metric, gold, predicted, labels=labels).sum(0)))


def population(budget) -> str:
    """What the table's seed-level p-values generalise over: the continued-pre-training seeds, at one base,
    one set of fine-tuning seeds and the stated training subsets — and what they do not."""
    subsets = ", ".join(
        f"{task} {'all' if limit is None else limit} training examples" for task, (limit, *_) in budget.tasks.items()
    )
    start = (
        "one base encoder per family (trained once, seed 0)"
        if budget.protocol == "continued"
        else "random initialisation"
    )
    return (
        f"the p-values generalise over continued-pre-training seeds (here {list(budget.seeds)}) from {start}, at "
        + (
            "fine-tuning seed equal to the pre-training seed"
            if budget.paired_finetune_seeds
            else f"fine-tuning seed(s) {list(budget.finetune_seeds)}"
        )
        + f" on fixed training subsets ({subsets}) and one "
        "test set each; not over bases, fine-tuning seeds, training subsets or the papers' full-scale models"
    )


def _check_versions(rows, cells) -> None:
    from _cells import check_versions

    methods = {row.pretraining.method for row in rows} | {row.group for row in rows if row.group}
    check_versions(cells, {method: study(method).results_version for method in methods})


def _intrinsic(measured: dict, tables: dict, baselines: dict, notes: dict, add) -> None:
    """The pre-trained models' similarity and cloze-probe columns (absent from the primary table)."""
    probe = measured["probe"]
    intrinsic_columns = [f"similarity {name} Acc@1" for name in measured["similarity_sizes"]]
    # the probe's primary columns are the queries the model-free baseline misses (hard), seen and unseen in
    # the pre-training text; the queries it answers (easy) are reported apart
    probe_groups = {
        "probe hard seen": probe.hard & probe.seen,
        "probe hard unseen": probe.hard & ~probe.seen,
        "probe easy": ~probe.hard,
    }
    intrinsic_columns += list(probe_groups)
    tables["pre-trained"]["columns"] = intrinsic_columns
    for row, outcomes in measured["intrinsic"].items():
        columns = {f"similarity {name} Acc@1": [o[name] for o in outcomes] for name in measured["similarity_sizes"]}
        if all("probe" in o for o in outcomes):
            probe_hits = np.asarray([o["probe"] for o in outcomes], dtype=bool)  # (seeds, probes)
            columns.update({column: probe_hits[:, mask] for column, mask in probe_groups.items()})
        for column, hits in columns.items():
            hits = np.asarray(hits, dtype=np.float64)
            if hits.shape[1]:
                add("pre-trained", column, row, _summary(hits.mean(1)))
    for name in measured["similarity_sizes"]:
        baselines["pre-trained"].setdefault("chance", {})[f"similarity {name} Acc@1"] = 1 / SIMILARITY_CANDIDATES
    baselines["pre-trained"].setdefault("chance", {}).update(
        {column: float(probe.chance[mask].mean()) if mask.any() else None for column, mask in probe_groups.items()}
    )
    notes["similarity queries"] = measured["similarity_sizes"]
    notes["probes"] = {column.removeprefix("probe "): int(mask.sum()) for column, mask in probe_groups.items()}


def aggregate(
    rows,
    budget,
    measured: dict,
    *,
    commit: str,
    device: str,
    seconds: float,
    secondary_endpoints: dict[str, str] | None = None,
) -> dict:
    from _outcomes import baseline_counts

    from kgplm.evaluation.baselines import linker_as_ner
    from kgplm.evaluation.statistics import example_counts
    from kgplm.evaluation.tasks import get_task

    _check_versions(rows, measured["cells"])
    seeds = len(budget.seeds)
    tables = {
        "fine-tuned": {"columns": [], "cells": {}},
        "secondary": {"columns": [], "cells": {}},
        "pre-trained": {"columns": [], "cells": {}},
    }
    baselines = {name: {} for name in tables}
    notes = {"test units": {}}
    column_tasks: dict[str, str] = {}  # column → the task or method evaluation it measures
    counts_by_column: dict[str, dict[str, np.ndarray]] = {}
    metric_by_column: dict[str, str] = {}
    degenerate_runs = []
    curves: dict[str, dict[str, dict]] = {}

    def add(table: str, column: str, row: str, value: dict) -> None:
        tables[table]["cells"].setdefault(row, {})[column] = value

    for task, cells_by_row in _cells_by_task(rows, budget, measured["cells"]).items():
        spec = get_task(task)
        metric = spec.metric
        splits = measured["splits"][task]
        units, unit_name = _test_units(task, splits["test"])
        table = "fine-tuned" if units >= 200 else "secondary"
        column = TASK_LABELS.get(task, f"{task} {metric}")
        tables[table]["columns"].append(column)
        column_tasks[column], metric_by_column[column] = task, metric
        ids = next(iter(cells_by_row.values()))[0]["outcomes"]["ids"]
        scored = {example.id: example for example in splits["test"]}
        test_examples = [scored[i] for i in ids]
        scored_units, _ = _test_units(task, test_examples)
        notes["test units"][column] = (
            f"{len(ids)} test {'documents' if unit_name == 'entities' else 'examples'}"
            + (f" ({scored_units} entities)" if unit_name == "entities" else "")
            + f" scored; the full test split has {units} {unit_name}"
        )
        counts_by_column[column] = {}
        for row, row_cells in cells_by_row.items():
            counts = np.asarray([c["outcomes"]["counts"] for c in row_cells])
            flags = [c["dev"]["degenerate"] for c in row_cells]
            counts_by_column[column][row] = counts
            add(table, column, row, cell(counts, metric, seeds, flags))
            if all("curve" in c for c in row_cells):
                curves.setdefault(column, {})[row] = learning_curve(row_cells)
            degenerate_runs += [
                {
                    "row": row,
                    "column": column,
                    "seed": c["seed"],
                    "finetune_seed": c["finetune_seed"],
                    "dev": c["dev"]["score"],
                    "constant": c["dev"]["constant"],
                    "reasons": c["dev"].get("reasons") or ["dev does not beat the best constant predictor's"],
                }
                for c in row_cells
                if c["dev"]["degenerate"]
            ]
        constants = {c["dev"]["constant_prediction"] for cells in cells_by_row.values() for c in cells}
        if len(constants) != 1:
            raise RuntimeError(
                f"{task}: runs chose different best constants on dev ({sorted(constants)}); every run "
                f"must see the same dev examples"
            )
        constant = constants.pop()
        prediction = (
            [set()] * len(test_examples) if spec.kind in ("ner", "nested_ner") else [constant] * len(test_examples)
        )
        reference = baseline_counts(task, splits["train"], test_examples)
        all_labels = None
        if spec.metric == "macro_f1":
            all_labels = sorted({e.label for e in splits["train"]} | {e.label for e in test_examples})
        gold = [e.spans if spec.kind in ("ner", "nested_ner") else e.label for e in test_examples]
        baselines[table].setdefault(BEST_CONSTANT, {})[column] = float(
            metric_from_counts(metric, example_counts(metric, gold, prediction, labels=all_labels).sum(0))
        )
        if reference["chance"] is not None:
            baselines[table].setdefault("chance (uniform random training label)", {})[column] = float(
                metric_from_counts(metric, reference["chance"].sum(1)).mean()
            )
        if measured.get("link") is not None and spec.kind == "ner":  # the linked spans alone
            baselines[table].setdefault(LINKER_AS_NER, {})[column] = float(
                linker_as_ner(splits["train"], test_examples, measured["link"])["f1"]
            )
        baselines[table].setdefault(MEMORISATION, {})[column] = _memorisation(spec, splits["train"], test_examples)

    if measured["probe"] is not None:
        _intrinsic(measured, tables, baselines, notes, add)

    for column, (method, evaluation) in measured["own_columns"].items():
        tables["pre-trained"]["columns"].append(column)
        column_tasks[column] = column.split(": ", 1)[1]
        for row, values in measured["own"].get(column, {}).items():
            add("pre-trained", column, row, _summary(values))
        if evaluation.chance is not None:
            baselines["pre-trained"].setdefault("chance", {})[column] = evaluation.chance
        notes[column] = evaluation.description

    families = compare(
        rows,
        tables,
        column_tasks,
        counts_by_column,
        metric_by_column,
        budget.bootstrap_resamples,
        secondary_endpoints=secondary_endpoints,
    )
    commits = sorted({c["commit"] for c in measured["cells"]})
    return {
        "title": "Does the knowledge help? The replication table",
        "protocol_file": PROTOCOL_FILE,
        "population": population(budget),
        "secondary_endpoints": dict(secondary_endpoints or {}),
        "smoke": budget.smoke,
        "commit": commit,
        "cell_commits": commits,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "device": device,
        "machine": {"cpus": os.cpu_count(), "load_average_1min": os.getloadavg()[0]},
        "seconds": round(seconds),
        "timings": {k: round(v) for k, v in measured["timings"].items()},
        "budget": dataclasses.asdict(budget),
        "budget_text": budget.describe(),
        "rows": [
            {
                "name": row.name,
                "role": row.role,
                "group": row.group,
                "control": row.control,
                "encoder_inputs": row.encoder_inputs,
                "pretraining": row.pretraining.key(),
            }
            for row in rows
        ],
        "results_versions": {
            method: version for c in measured["cells"] for method, version in c["results_versions"].items()
        },
        "tables": tables,
        "baselines": baselines,
        "families": families,
        "shares": attribution_shares(rows, tables),
        "curves": curves,
        "degenerate_runs": degenerate_runs,
        # a base's directory name is its recipe key (as under results/bases/); its local cache path is not recorded
        "bases": {family: os.path.basename(path) for family, path in measured.get("bases", {}).items()},
        "fine_tuned_runs": len(measured["cells"]),
        "notes": notes,
    }


# -- comparisons and families -----------------------------------------------------------------------------------
def learning_curve(cells: list[dict]) -> dict:
    """The mean dev score per fine-tuning epoch over ``cells``' runs (each cell's ``curve``); ``runs``: how
    many runs reached each epoch (one stopped early by patience counts up to its last epoch)."""
    longest = max(len(c["curve"]) for c in cells)
    by_epoch = [[c["curve"][i]["dev"] for c in cells if len(c["curve"]) > i] for i in range(longest)]
    return {"dev": [float(np.mean(values)) for values in by_epoch], "runs": [len(values) for values in by_epoch]}


def attribution_shares(rows, tables) -> dict:
    """Method → the share of its gain over its control that each of its family's other rows keeps, per column
    where the method and its control have cells: (row − control) / (method − control), from seed means
    (descriptive; whether the part a row removes is detectable is its paired comparison with the method)."""
    cells = {}
    for table in tables.values():
        for row, columns in table["cells"].items():
            cells.setdefault(row, {}).update(columns)
    shares: dict[str, list[dict]] = {}
    for method in (row for row in rows if row.role == "method"):
        for column, method_cell in cells.get(method.name, {}).items():
            control_cell = cells.get(method.control, {}).get(column)
            if control_cell is None:
                continue
            gain = method_cell["mean"] - control_cell["mean"]
            for row in rows:
                if row.group != method.group or row.role not in SHARE_ROLES:
                    continue
                row_cell = cells.get(row.name, {}).get(column)
                if row_cell is None:
                    continue
                shares.setdefault(method.name, []).append(
                    {
                        "row": row.name,
                        "column": column,
                        "gain": gain,
                        "row_minus_control": row_cell["mean"] - control_cell["mean"],
                        "share": None if gain == 0 else (row_cell["mean"] - control_cell["mean"]) / gain,
                    }
                )
    return shares


def _seed_tests(row_cell: dict, against_cell: dict) -> dict:
    method, comparator = row_cell["per_seed"], against_cell["per_seed"]
    if len(method) != len(comparator):
        raise RuntimeError(f"paired seed-level test: {len(method)} seeds against {len(comparator)}")
    differences = np.subtract(method, comparator)
    entry = {
        "difference": float(np.mean(differences)),
        "n": len(method),
        "sd_differences": float(np.std(differences, ddof=1)) if len(method) >= 2 else None,
        "p_t": None,
        "p_permutation": None,
        "t": None,
    }
    if len(method) >= 2:
        t_test, permutation = paired_t_test(method, comparator), sign_flip_test(method, comparator)
        entry.update(
            p_t=t_test.p_value,
            t=None if math.isnan(t_test.statistic) or math.isinf(t_test.statistic) else t_test.statistic,
            p_permutation=permutation.p_value,
        )
    return entry


def compare(
    rows,
    tables,
    column_tasks,
    counts_by_column,
    metric_by_column,
    resamples: int,
    secondary_endpoints: dict[str, str] | None = None,
) -> dict:
    """Family (knowledge method) → its primary and secondary comparisons (module docstring).

    ``secondary_endpoints``: method → why its pre-registered endpoints are secondary tests in this table
    (a protocol change after the method's first cells); they are tested as primary endpoints are, and
    each entry carries ``secondary`` (the reason), which the table prints beside its status."""
    by_name = {row.name: row for row in rows}
    cells = {}
    for table in tables.values():
        for row, columns in table["cells"].items():
            cells.setdefault(row, {}).update(columns)
    families = {}
    for row in rows:
        if row.group is None or row.control is None or row.control not in by_name:
            continue
        endpoints = {endpoint.task: endpoint for endpoint in study(row.group).primary_endpoints}
        family = families.setdefault(row.group, {"primary": [], "secondary": []})
        for column, row_cell in cells.get(row.name, {}).items():
            against = cells.get(row.control, {}).get(column)
            if against is None:
                continue
            entry = {
                "row": row.name,
                "against": row.control,
                "role": row.role,
                "column": column,
                **_seed_tests(row_cell, against),
                "degenerate": (row_cell.get("degenerate") or 0) + (against.get("degenerate") or 0),
            }
            if column in counts_by_column:
                bootstrap = paired_bootstrap(
                    counts_by_column[column][row.name],
                    counts_by_column[column][row.control],
                    metric_by_column[column],
                    resamples=resamples,
                    seed=0,
                )
                entry["test_sampling_interval"] = [bootstrap.low, bootstrap.high]
            endpoint = endpoints.get(column_tasks.get(column)) if row.role == "method" else None
            if endpoint is not None:
                entry.update(endpoint=f"{endpoint.task} {endpoint.metric}", direction=endpoint.direction)
                family["primary"].append(entry)
            else:
                family["secondary"].append(entry)
    for method, family in families.items():
        measured = {column_tasks.get(entry["column"]) for entry in family["primary"]}
        family["missing_endpoints"] = sorted(
            f"{e.task} {e.metric}" for e in study(method).primary_endpoints if e.task not in measured
        )
        _decide_primary(family["primary"])
        reason = (secondary_endpoints or {}).get(method)
        for entry in family["primary"] if reason else []:
            entry["secondary"] = reason
        secondary = family["secondary"]
        tested = [entry for entry in secondary if entry["p_t"] is not None]
        for entry, adjusted in zip(tested, holm([entry["p_t"] for entry in tested])):
            entry["p_t_holm"] = adjusted
    return families


def _decide_primary(entries: list[dict]) -> None:
    """Holm-adjust each test's p over the method's tested primary endpoints, then each endpoint's status."""
    tested = [
        entry
        for entry in entries
        if entry["n"] >= MIN_PRIMARY_SEEDS and not entry["degenerate"] and entry["p_t"] is not None
    ]
    for name in ("p_t", "p_permutation"):
        for entry, adjusted in zip(tested, holm([entry[name] for entry in tested]) if tested else []):
            entry[f"{name}_holm"] = adjusted
    for entry in entries:
        entry["corrected_over"] = len(tested)
        if entry in tested and entry["sd_differences"] is not None:
            entry["minimal_detectable_effect"] = minimal_detectable_effect(
                entry["sd_differences"], entry["n"], alpha=PRIMARY_ALPHA / len(tested), power=MDE_POWER
            )
        entry["status"] = _primary_status(entry, entry["direction"])


def _primary_status(entry: dict, direction: str) -> str:
    if entry["n"] < MIN_PRIMARY_SEEDS:
        return f"not tested: {entry['n']} pre-training seeds, the pre-registered minimum is {MIN_PRIMARY_SEEDS}"
    if entry["degenerate"]:
        return f"not tested: {entry['degenerate']} degenerate runs (†) in the method or its control"
    favourable = entry["difference"] > 0 if direction == "higher" else entry["difference"] < 0
    both = entry["p_t_holm"] < PRIMARY_ALPHA and entry["p_permutation_holm"] < PRIMARY_ALPHA
    rule = f"p (t) and p (sign-flip) both < {PRIMARY_ALPHA} after Holm over {entry['corrected_over']} endpoint(s)"
    if both:
        return f"supported ({rule}, in the claimed direction)" if favourable else f"contradicted ({rule}, against it)"
    effect = entry.get("minimal_detectable_effect")
    return f"not detected (not {rule}); minimal detectable effect at {MDE_POWER:.0%} power: " + (
        "—" if effect is None else f"{100 * effect:.1f}"
    )


# -- Markdown ------------------------------------------------------------------------------------------------
def _value(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _interval(entry: dict | None) -> str:
    if entry is None:
        return "—"
    text = (
        _value(entry["mean"])
        if entry.get("half_width") is None
        else (f"{100 * entry['mean']:.1f} ± {100 * entry['half_width']:.1f}")
    )
    if entry.get("degenerate"):
        text += f" †{entry['degenerate']}/{len(entry['runs'])}"
    return text


def _p(value) -> str:
    if value is None:
        return "—"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _signed(value) -> str:
    return f"{100 * value:+.1f}"


TABLE_TITLES = {
    "fine-tuned": "Fine-tuned tasks (test scores ×100)",
    "pre-trained": "Pre-trained models, no fine-tuning: similarity Acc@1, cloze probe recall@5 on the queries "
    "the model-free baseline misses (hard; the easy ones apart), the methods' own evaluations (×100)",
    "secondary": "Secondary table: tasks with fewer than 200 test units (×100)",
}

PROTOCOL = (
    "Cells: mean ± half-width of the 95% Student-t interval over the pre-training seeds (fine-tuning seeds "
    "averaged within each). † k/N: k of the cell's N fine-tuned runs are degenerate on dev: they do not beat the "
    "best constant predictor, or chance, or (classification) their Cohen's κ is ≤ 0 "
    "(`kgplm/evaluation/degenerate.py`). Comparisons are paired by pre-training seed: δ is the mean per-seed "
    "difference (row − the row it is compared with); p (t) is a two-sided paired t-test and p (sign-flip) an exact "
    "two-sided sign-flip permutation test over the per-seed differences — a second test that needs no normality, "
    "whose smallest value with n seeds is 2/2ⁿ (0.031 for 6 seeds). The test-sampling interval is the 95% "
    "paired-bootstrap interval of δ over test examples for these runs (test-set noise only, not evidence across "
    f"seeds). Primary endpoints are pre-registered (the method vs its control), tested only with ≥ "
    f"{MIN_PRIMARY_SEEDS} seeds and no degenerate run; both p-values are Holm-adjusted over the method's primary "
    f"endpoints, and an endpoint is supported only when both adjusted p-values are < {PRIMARY_ALPHA} in the claimed "
    "direction. Otherwise it is “not detected”, with its minimal detectable effect: the δ the t-test would detect "
    f"with {MDE_POWER:.0%} power at level α/m given the observed SD of the per-seed differences — a smaller "
    "effect is not ruled out. Every other comparison of a method's family (the method vs its control on other "
    "columns; each ablation, attribution row and “− knowledge at fine-tuning” vs the row it names) is secondary, its "
    "p (t) Holm-adjusted over the family (`kgplm/evaluation/statistics.py`). Baseline rows are in italics."
)


def _render_shares(shares: dict, subtitle: str) -> list[str]:
    lines = []
    for method, entries in shares.items():
        lines += [
            f"{subtitle} Attribution: {method}",
            "",
            "The share of the method's gain over its control that each row keeps, (row − control) / (method − "
            "control), from the seed means (descriptive; the row's paired comparison with the method above says "
            "whether the part it removes is detectable). A share is not read when the gain itself is not "
            "detected.",
            "",
            "| row | column | method − control | row − control | share kept |",
            "|---|---|---:|---:|---:|",
        ]
        for entry in entries:
            share = "—" if entry["share"] is None else f"{entry['share']:.2f}"
            lines.append(
                f"| {entry['row']} | {entry['column']} | {_signed(entry['gain'])} | "
                f"{_signed(entry['row_minus_control'])} | {share} |"
            )
        lines.append("")
    return lines


def _render_curves(curves: dict, rows: list[dict], subtitle: str) -> list[str]:
    lines = []
    for column, by_row in curves.items():
        epochs = max(len(curve["dev"]) for curve in by_row.values())
        lines += [
            f"{subtitle} Learning curves: {column}",
            "",
            "Dev score ×100 after each fine-tuning epoch, the mean over the row's runs (a run stopped early by "
            "patience counts up to its last epoch; the number of runs is shown where it drops).",
            "",
            "| row | " + " | ".join(str(epoch + 1) for epoch in range(epochs)) + " |",
            "|---|" + "---:|" * epochs,
        ]
        for row in rows:
            curve = by_row.get(row["name"])
            if curve is None:
                continue
            full = curve["runs"][0]
            values = [
                f"{100 * dev:.1f}" + ("" if runs == full else f" ({runs})")
                for dev, runs in zip(curve["dev"], curve["runs"])
            ]
            values += ["—"] * (epochs - len(values))
            lines.append(f"| {row['name']} | " + " | ".join(values) + " |")
        lines.append("")
    return lines


def render_markdown(result: dict, heading_level: int = 2) -> str:
    """The result as Markdown, its title a heading of ``heading_level`` and each table one level below."""
    title, subtitle = "#" * heading_level, "#" * (heading_level + 1)
    lines = [f"{title} {result['title']}", ""]
    if result["smoke"]:
        lines += [
            "> **Smoke run.** A tiny budget that checks the runner end to end (every row, column, interval, "
            "test, flag and baseline); its numbers say nothing about the papers' claims.",
            "",
        ]
    commits = result.get("cell_commits", [])
    lines += [
        f"Table built at commit `{result['commit']}` from cells computed at "
        + ", ".join(f"`{c}`" for c in commits)
        + f"; {result['date']}, device {result['device']} "
        f"({result['machine']['cpus']} CPUs, load average {result['machine']['load_average_1min']:.1f}), "
        f"{result['seconds']} s in all ("
        + ", ".join(f"{k} {v} s" for k, v in result["timings"].items())
        + "). Results versions: "
        + ", ".join(f"{k} {v}" for k, v in sorted(result.get("results_versions", {}).items()))
        + ".",
        "",
        f"Budget: {result['budget_text']}.",
        "",
    ]
    if result.get("protocol_file"):
        lines += [
            f"Protocol: `{result['protocol_file']}` (committed before the study's first cell); {result['population']}.",
            "",
        ]
    if result.get("bases"):
        lines += [
            "Bases (protocol continued): " + ", ".join(sorted(result["bases"])) + "; each base's recipe, the "
            "SHA-256 of its weights and its curves are in `experiments/results/bases/`.",
            "",
        ]
    lines += [PROTOCOL, ""]
    for name in ("fine-tuned", "pre-trained", "secondary"):
        table = result["tables"][name]
        if not table["columns"]:
            continue
        heading = TABLE_TITLES[name]
        if name == "pre-trained" and "similarity queries" not in result["notes"]:
            heading = "Pre-trained models, no fine-tuning: the methods' own evaluations (×100)"
        lines += [
            f"{subtitle} {heading}",
            "",
            "| row | " + " | ".join(table["columns"]) + " |",
            "|---|" + "---:|" * len(table["columns"]),
        ]
        for row in result["rows"]:
            cells = table["cells"].get(row["name"])
            if cells is None:
                continue
            label = f"**{row['name']}**" if row["role"] == "method" else row["name"]
            lines.append(f"| {label} | " + " | ".join(_interval(cells.get(c)) for c in table["columns"]) + " |")
        for baseline, values in result["baselines"][name].items():
            lines.append(f"| *{baseline}* | " + " | ".join(_value(values.get(c)) for c in table["columns"]) + " |")
        lines.append("")
    degenerate = result["degenerate_runs"]
    lines += [
        f"† {len(degenerate)} of {result['fine_tuned_runs']} fine-tuned runs are degenerate on dev (they do not "
        "beat the best constant predictor or chance, or their κ ≤ 0)"
        + (
            ": "
            + "; ".join(
                f"{d['row']} / {d['column']} (seed {d['seed']}, fine-tuning seed {d['finetune_seed']}: dev "
                f"{_value(d['dev'])}, constant {_value(d['constant'])}; "
                + ", ".join(d.get("reasons") or ["does not beat the constant"])
                + ")"
                for d in degenerate[:30]
            )
            + ("; …" if len(degenerate) > 30 else "")
            if degenerate
            else ""
        )
        + ".",
        "",
    ]
    for method, family in result["families"].items():
        lines += [f"{subtitle} Evidence: {method}", ""]
        lines += [
            "Primary endpoints (pre-registered; the method vs its fair control):",
            "",
            "| endpoint | δ | n seeds | p (t) | p (sign-flip) | Holm p (t) | Holm p (sign-flip) | minimal detectable "
            "effect | test-sampling interval of δ | status |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for entry in family["primary"]:
            interval = entry.get("test_sampling_interval")
            effect = entry.get("minimal_detectable_effect")
            lines.append(
                f"| {entry['endpoint']} ({entry['direction']} is better) | {_signed(entry['difference'])} | "
                f"{entry['n']} | {_p(entry['p_t'])} | {_p(entry['p_permutation'])} | {_p(entry.get('p_t_holm'))} | "
                f"{_p(entry.get('p_permutation_holm'))} | {'—' if effect is None else f'{100 * effect:.1f}'} | "
                + (f"[{_signed(interval[0])}, {_signed(interval[1])}]" if interval else "—")
                + f" | {entry['status']}"
                + (f"; **secondary test**: {entry['secondary']}" if entry.get("secondary") else "")
                + " |"
            )
        for missing in family.get("missing_endpoints", []):
            lines.append(
                f"| {missing} | — | — | — | — | — | — | — | — | not measured: the task is not among this run's |"
            )
        lines += [
            "",
            f"Secondary comparisons ({len(family['secondary'])} in the family; p (t) Holm-adjusted within it):",
            "",
            "| row | compared with | column | δ | n | p (t) | Holm | p (sign-flip) | † |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for entry in family["secondary"]:
            against = (
                "the method"
                if entry["against"] == method
                else ("the control" if entry["role"] == "method" else entry["against"])
            )
            lines.append(
                f"| {entry['row']} | {against} | {entry['column']} | {_signed(entry['difference'])} | "
                f"{entry['n']} | {_p(entry['p_t'])} | {_p(entry.get('p_t_holm'))} | "
                f"{_p(entry['p_permutation'])} | {entry['degenerate'] or ''} |"
            )
        lines.append("")
    lines += _render_shares(result.get("shares", {}), subtitle)
    lines += _render_curves(result.get("curves", {}), result["rows"], subtitle)
    notes = result["notes"]
    lines += ["Test sets: " + "; ".join(f"{column}: {text}" for column, text in notes["test units"].items()) + "."]
    if "similarity queries" not in notes:
        return "\n".join(lines + [""])
    lines += [
        "Similarity queries per set: "
        + ", ".join(f"{k} {v}" for k, v in notes["similarity queries"].items())
        + "; probe queries (seen/unseen: stated in the pre-training text or not; easy: answered by the "
        "model-free baseline, the slot's most frequent fillers among the other facts): "
        + ", ".join(f"{group} {count}" for group, count in notes["probes"].items())
        + ".",
        "",
    ]
    return "\n".join(lines)
