"""The fine-tuning budget of a study version, measured on a family's base before any row runs.

For a family's base encoder (``--family mlm``: the MLM + SOP base every SMedBERT/KeBioLM/EMBERT row
continues from, found as ``experiments/replicate.py`` finds it) and one task (``--task``, default
cMedQANER on its full training split), one fine-tuning per learning rate of a small grid
(``--learning-rates``), each for ``--epochs`` epochs without early stopping (patience = epochs), so
each run's history is the base's learning curve at that rate: the dev score after every epoch.
Every run is written to ``experiments/results/protocol/<family>-<task>-grid.jsonl`` the moment it
finishes (model, its weights' SHA-256, rate, curve, best epoch, its test score, CPU and wall
seconds, commit); a run already there is skipped, so a stopped grid resumes.

:func:`choose` then reads the protocol's rule off the runs: the learning rate whose curve reaches the
highest dev score (ties: the smaller rate), and the budget, the first epoch of that curve whose dev
score is within ``tolerance`` (0.5 points ×100) of the curve's best — where dev stops improving. The
choice goes to ``<family>-<task>-choice.json`` and is what the protocol file records; the same
budget and rate then serve every row of the family. ``--name`` writes the grid and the choice under
another name (e.g. a method whose family the protocol gives a budget of its own, ``kebiolm``, read before
the family's by :func:`choice_path`), and ``--model`` fine-tunes another directory than the base (e.g. a
control, to see at which rates it learns at all). ``--finetune-seeds`` runs each rate with several
fine-tuning seeds; with ``--every-seed-learns`` the choice is the first rate (in the order given) at which
no seed's run is degenerate (:func:`first_where_every_seed_learns`, the protocol's §4b).

    .venv/bin/python experiments/finetune_protocol.py [--family mlm --task cmedqaner \\
        --learning-rates 2e-4 5e-4 1e-3 2e-3 --epochs 10]
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

from _shared import write_json  # noqa: E402
from _runs import code_version  # noqa: E402

from kgplm.exceptions import ArtifactError, ConfigurationError  # noqa: E402

HERE = Path(__file__).resolve().parent
logger = logging.getLogger("replicate")
#: a family's knowledge methods whose rows continue from its base (which rows' shared inputs find it)
FAMILY_METHOD = {"mlm": "smedbert", "electra": "ehealth"}
#: an epoch whose dev score is within this of its curve's best counts as "no longer improving" (F1 as a fraction)
TOLERANCE = 0.005


def choice_path(directory: Path, task: str, method: str, family: str) -> Path:
    """The fine-tuning choice that serves ``method`` on ``task``: ``<method>-<task>-choice.json`` where the
    protocol gave the method's rows a budget of their own, else its family's ``<family>-<task>-choice.json``."""
    own = directory / f"{method}-{task}-choice.json"
    return own if own.is_file() else directory / f"{family}-{task}-choice.json"


def base_directory(work: Path, family: str) -> Path:
    """The family's base as ``replicate.py`` caches it under ``work`` (built by ``replicate.py --bases-only``);
    a base not built yet raises :class:`ArtifactError` saying how to build it."""
    import replicate

    if family not in FAMILY_METHOD:
        raise ConfigurationError(f"family {family!r}: expected one of {sorted(FAMILY_METHOD)}")
    budget = replicate.Budget()
    rows = replicate.plan_rows([FAMILY_METHOD[family]], primary=True)
    shared = replicate.shared_inputs(work, budget, rows)
    key = replicate.base_key(budget, family, shared.kg.path.name)
    directory, done = replicate.cached_directory(work / "base", family, key)
    if not done:
        raise ArtifactError(
            f"{directory}: the {family} base is not built; run experiments/replicate.py --bases-only "
            f"--methods {FAMILY_METHOD[family]} --primary first"
        )
    return directory


def choose(runs: Sequence[dict], tolerance: float = TOLERANCE) -> dict:
    """The learning rate and epoch budget the runs give (module docstring): ``{"learning_rate", "epochs",
    "best_dev", "dev_at_budget", "curve"}``; ``curve``: the chosen rate's dev score per epoch."""
    if not runs:
        raise ConfigurationError("choose: no grid runs to choose from")
    best = min(runs, key=lambda run: (-max(point["dev"] for point in run["curve"]), run["learning_rate"]))
    curve = [point["dev"] for point in best["curve"]]
    peak = max(curve)
    epochs = next(index + 1 for index, dev in enumerate(curve) if dev >= peak - tolerance)
    return {
        "learning_rate": best["learning_rate"],
        "epochs": epochs,
        "best_dev": peak,
        "dev_at_budget": curve[epochs - 1],
        "curve": curve,
        "tolerance": tolerance,
    }


def first_that_learns(rates: Sequence[float], runs: Sequence[dict]) -> float | None:
    """The first of ``rates`` (in their order) whose run learned at all: its best dev score above the best
    constant predictor's (``dev_constant``; the all-O tagger's 0 for NER); None when none did or a rate has no
    run yet. The protocol's §4a reads a family's fine-tuning rate off its control this way, largest first."""
    by_rate = {run["learning_rate"]: run for run in runs}
    for rate in rates:
        run = by_rate.get(rate)
        if run is None:
            return None
        if _learned(run):
            return rate
    return None


def _learned(run: dict) -> bool:
    return max(point["dev"] for point in run["curve"]) > run["dev_constant"]


def first_where_every_seed_learns(rates: Sequence[float], seeds: Sequence[int], runs: Sequence[dict]) -> float | None:
    """The first of ``rates`` (in their order) at which the run of every fine-tuning seed in ``seeds`` learned
    (its best dev score above the best constant predictor's). A rate with a degenerate run is passed over as
    soon as that run exists; None when no rate qualifies or the first candidate still lacks a seed's run."""
    by_key = {(run["learning_rate"], run.get("finetune_seed", 0)): run for run in runs}
    for rate in rates:
        present = [by_key[rate, seed] for seed in seeds if (rate, seed) in by_key]
        if not all(_learned(run) for run in present):
            continue
        return rate if len(present) == len(seeds) else None
    return None


def read_records(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def append_record(path: Path, record: dict) -> None:
    """Append one line: the whole file is rewritten under a temporary name and renamed over it."""
    lines = path.read_text(encoding="utf-8") if path.is_file() else ""
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(lines + json.dumps(record) + "\n", encoding="utf-8")
    temporary.replace(path)


def grid_run(work: Path, base: Path, task: str, learning_rate: float, epochs: int, device: str, seed: int = 0) -> dict:
    """One fine-tuning of ``base`` at ``learning_rate`` for ``epochs`` epochs with fine-tuning seed ``seed``, no
    early stop; its curve."""
    import replicate
    from _cells import file_sha256
    from _outcomes import best_constant

    import kgplm
    from kgplm.evaluation.tasks import load_task

    budget = replicate.Budget()
    output = work / "protocol" / (f"{base.name}-{task}-lr{learning_rate:g}-e{epochs}" + (f"-s{seed}" if seed else ""))
    wall, cpu = time.perf_counter(), time.process_time()
    result = kgplm.finetune(
        model=base,
        task=task,
        data_dir=replicate.SHARED / "tasks",
        output_dir=output,
        epochs=epochs,
        batch_size=budget.finetune_batch_size,
        learning_rate=learning_rate,
        patience=epochs,
        max_length=budget.finetune_max_length,
        max_train_examples=None,
        seed=seed,
        device=device,
        progress=False,
    )
    splits = load_task(task, replicate.SHARED / "tasks")
    results = json.loads((output / "results.json").read_text(encoding="utf-8"))
    by_id = {example.id: example for example in splits["dev"]}
    constant = best_constant(task, splits["train"], [by_id[i] for i in results["example_ids"]["dev"]])
    curve = [
        {"epoch": point["epoch"], "dev": float(point["dev_main"]), "train_loss": float(point["train_loss"])}
        for point in result.history
    ]
    return {
        "model": str(base),
        "model_sha256": file_sha256(base / "model" / "model.safetensors"),
        "task": task,
        "train_examples": len(splits["train"]),
        "learning_rate": learning_rate,
        "epochs": epochs,
        "batch_size": budget.finetune_batch_size,
        "max_length": budget.finetune_max_length,
        "finetune_seed": seed,
        "curve": curve,
        "best_epoch": max(curve, key=lambda point: point["dev"])["epoch"],
        "test_at_best_epoch": float(result.test["main"]),
        "dev_constant": constant["score"],
        "wall_s": round(time.perf_counter() - wall, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
        "commit": code_version(),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", default="mlm", choices=sorted(FAMILY_METHOD))
    parser.add_argument("--task", default="cmedqaner")
    parser.add_argument("--learning-rates", type=float, nargs="+", default=[2e-4, 5e-4, 1e-3, 2e-3])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument(
        "--model", type=Path, help="a base directory (default: the family's, as replicate.py builds it)"
    )
    parser.add_argument("--work", type=Path, default=HERE / ".cache" / "replicate")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "protocol")
    parser.add_argument("--name", help="the grid's and the choice's file name prefix (default: the family)")
    parser.add_argument(
        "--first-that-learns",
        action="store_true",
        help="run the rates in the order given and stop at the first whose run beats the best constant "
        "predictor on dev; the choice is that rate (the protocol's rule for a control, §4a)",
    )
    parser.add_argument(
        "--finetune-seeds", type=int, nargs="+", default=[0], help="fine-tune each rate with each of these seeds"
    )
    parser.add_argument(
        "--every-seed-learns",
        action="store_true",
        help="run the rates in the order given, each with every --finetune-seeds seed, passing over a rate at "
        "its first degenerate run; the choice is the first rate at which every seed's run beats the best "
        "constant predictor on dev (the protocol's §4b)",
    )
    args = parser.parse_args(argv)
    if args.first_that_learns and args.every_seed_learns:
        parser.error("--first-that-learns and --every-seed-learns are two rules; give one")
    if len(args.finetune_seeds) > 1 and not args.every_seed_learns:
        parser.error("several --finetune-seeds serve --every-seed-learns; the other rules read one curve per rate")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import torch

    from _cells import file_sha256

    torch.set_num_threads(args.threads)
    base = args.model or base_directory(args.work, args.family)
    digest = file_sha256(base / "model" / "model.safetensors")
    args.out.mkdir(parents=True, exist_ok=True)
    name = args.name or args.family
    grid_path = args.out / f"{name}-{args.task}-grid.jsonl"
    started = time.perf_counter()

    def grid() -> list[dict]:
        return [
            run
            for run in read_records(grid_path)
            if run["model_sha256"] == digest
            and run["task"] == args.task
            and run["epochs"] == args.epochs
            and run["learning_rate"] in args.learning_rates
            and run.get("finetune_seed", 0) in args.finetune_seeds
        ]

    def settled() -> bool:
        if args.first_that_learns:
            return first_that_learns(args.learning_rates, grid()) is not None
        if args.every_seed_learns:
            return first_where_every_seed_learns(args.learning_rates, args.finetune_seeds, grid()) is not None
        return False

    for learning_rate in args.learning_rates:
        for seed in args.finetune_seeds:
            if settled():
                break
            if args.every_seed_learns and any(
                run["learning_rate"] == learning_rate and not _learned(run) for run in grid()
            ):
                break  # this rate has a degenerate run: the rule passes it over
            done = any(run["learning_rate"] == learning_rate and run.get("finetune_seed", 0) == seed for run in grid())
            if done:
                logger.info("lr %g, seed %d: already in %s", learning_rate, seed, grid_path)
                continue
            record = grid_run(args.work, base, args.task, learning_rate, args.epochs, args.device, seed)
            append_record(grid_path, record)
            logger.info(
                "lr %g, seed %d: dev %s (best epoch %d) in %.0f s",
                learning_rate,
                seed,
                " ".join(f"{100 * point['dev']:.1f}" for point in record["curve"]),
                record["best_epoch"],
                record["wall_s"],
            )
    runs = grid()
    if args.first_that_learns:
        rule = {"learning_rate": first_that_learns(args.learning_rates, runs), "rule": "first rate that learns"}
    elif args.every_seed_learns:
        rule = {
            "learning_rate": first_where_every_seed_learns(args.learning_rates, args.finetune_seeds, runs),
            "rule": "first rate at which every fine-tuning seed learns",
            "finetune_seeds": list(args.finetune_seeds),
        }
    else:
        rule = choose(runs)
    choice = {
        **rule,
        "family": args.family,
        "task": args.task,
        "model_sha256": digest,
        "grid": sorted(run["learning_rate"] for run in runs),
        "grid_epochs": args.epochs,
        "wall_s_this_invocation": round(time.perf_counter() - started),
        "commit": code_version(),
    }
    write_json(args.out / f"{name}-{args.task}-choice.json", choice)
    print(json.dumps(choice, indent=1))
    if (args.first_that_learns or args.every_seed_learns) and choice["learning_rate"] is None:
        raise ConfigurationError(
            f"no rate of {args.learning_rates} satisfies the rule ({choice['rule']}); every run is in {grid_path}"
        )


if __name__ == "__main__":
    main()
