"""Which fine-tuning budget lets a control learn each primary task? (issue 28: the smoke runs' fine-tunings
were all constant predictors, so the table's budgets are measured before the run, on the families' bases.)

For a pre-trained run (``--model``, e.g. a base of ``experiments/replicate.py``) and each task × budget
(train examples × epochs × learning rate), one fine-tuning with seed 0 through ``replicate.finetune``
(cached under ``--work`` by every setting): the dev score beside the best constant predictor's on the
same dev examples (a run that does not beat it has learnt nothing), the test score and the CPU seconds.
Prints a table and appends it to ``--out`` (JSON lines keyed by model, task, budget and commit).

    .venv/bin/python experiments/finetune_budget.py --model RUN --task cmedqq --examples 2000 4000 --epochs 2 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from pathlib import Path

import _shared  # noqa: E402,F401  (puts benchmarks/ on the path: _data, _runs)
from _runs import code_version  # noqa: E402

HERE = Path(__file__).resolve().parent


def measure(
    work: Path, model: Path, task: str, examples: int | None, epochs: int, learning_rate: float, device: str
) -> dict:
    import replicate
    from _outcomes import best_constant

    from kgplm.evaluation.tasks import load_task

    budget = dataclasses.replace(
        replicate.Budget(), tasks={task: [examples, epochs]}, finetune_learning_rate=learning_rate
    )
    started = time.process_time()
    outcomes, directory = replicate.finetune(work, budget, model, task, 0, True, device)
    results = json.loads((directory / "results.json").read_text(encoding="utf-8"))
    splits = load_task(task, replicate.SHARED / "tasks")
    by_id = {example.id: example for example in splits["dev"]}
    constant = best_constant(task, splits["train"], [by_id[i] for i in results["example_ids"]["dev"]])
    dev = float(results["dev"]["main"])
    return {
        "model": str(model),
        "task": task,
        "examples": examples,
        "epochs": epochs,
        "learning_rate": learning_rate,
        "dev": dev,
        "constant": constant["score"],
        "learns": dev > constant["score"] + 1e-9,
        "test": float(results["test"]["main"]),
        "cpu_seconds": round(time.process_time() - started, 1),
        "commit": code_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a kgplm pre-training run directory")
    parser.add_argument("--task", required=True)
    parser.add_argument("--examples", type=int, nargs="+", default=[2000], help="train examples (0: all)")
    parser.add_argument("--epochs", type=int, nargs="+", default=[2])
    parser.add_argument("--learning-rates", type=float, nargs="+", default=[5e-4])
    parser.add_argument("--work", type=Path, default=HERE / ".cache" / "finetune_budget")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "finetune_budget.jsonl")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import torch

    torch.set_num_threads(1)
    rows = []
    for examples in args.examples:
        for epochs in args.epochs:
            for learning_rate in args.learning_rates:
                row = measure(args.work, args.model, args.task, examples or None, epochs, learning_rate, args.device)
                rows.append(row)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                with args.out.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(row) + "\n")
    print(f"commit {code_version()}; model {args.model}; task {args.task}; fine-tuning seed 0 (×100)")
    print("| train examples | epochs | lr | dev | best constant on dev | learns | test | CPU s |")
    print("|---:|---:|---:|---:|---:|---|---:|---:|")
    for row in rows:
        print(
            f"| {row['examples'] or 'all'} | {row['epochs']} | {row['learning_rate']:g} | {100 * row['dev']:.1f} | "
            f"{100 * row['constant']:.1f} | {'yes' if row['learns'] else 'no'} | {100 * row['test']:.1f} | "
            f"{row['cpu_seconds']} |"
        )


if __name__ == "__main__":
    main()
