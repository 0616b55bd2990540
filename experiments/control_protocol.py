"""The continued-pre-training learning rate of a study version, chosen on a family's control alone.

A control that ends below its own starting checkpoint credits the method with the control's loss. So
before any row runs, for one knowledge method's control (``--method``, e.g. smedbert: its fair control
from ``study.py``) and each learning rate of a grid (``--rates``, warm-up ``--warmup-steps``), the
control is pre-trained from the family's base with a seed that is not a study seed (``--seed``, default
100) and fine-tuned on cMedQANER with the fine-tuning budget :mod:`finetune_protocol` chose (its
``<family>-cmedqaner-choice.json``), fine-tuning seed 0; the base is fine-tuned the same way. The rates
run largest first (:func:`next_rate`), and stop at the first whose control keeps the base's dev score:
no smaller rate can be chosen over it. Each rate's dev score is written to
``experiments/results/protocol/<method>-control-rates.jsonl`` as it finishes (a rate already there at the
same fine-tuning budget is skipped). The fine-tuning budget is the method's own where the protocol gave its
rows one (``<method>-cmedqaner-choice.json``), else its family's.

:func:`choose_rate` applies the protocol's rule: the **largest** rate whose control dev score is at
least the base's; when none is, the smallest, flagged ``loses_ground``. The method's own dev score plays
no part. The choice goes to ``<method>-control-choice.json`` and into the protocol file; every row of
the family then pre-trains at that rate and warm-up.

    .venv/bin/python experiments/control_protocol.py --method smedbert [--rates 1e-3 5e-4 2e-4 1e-4]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

from _shared import write_json  # noqa: E402
from _runs import code_version  # noqa: E402
from finetune_protocol import append_record, choice_path, read_records  # noqa: E402

from kgplm.exceptions import ArtifactError, ConfigurationError  # noqa: E402

HERE = Path(__file__).resolve().parent
logger = logging.getLogger("replicate")


def choose_rate(records: Sequence[dict], base_dev: float) -> dict:
    """``{"learning_rate", "warmup_steps", "control_dev", "base_dev", "loses_ground"}`` by the rule in the
    module docstring; ``records``: ``{"learning_rate", "warmup_steps", "dev"}`` per rate tried."""
    if not records:
        raise ConfigurationError("choose_rate: no control runs to choose from")
    keeping = [record for record in records if record["dev"] >= base_dev]
    chosen = (
        max(keeping, key=lambda r: r["learning_rate"]) if keeping else min(records, key=lambda r: r["learning_rate"])
    )
    return {
        "learning_rate": chosen["learning_rate"],
        "warmup_steps": chosen["warmup_steps"],
        "control_dev": chosen["dev"],
        "base_dev": base_dev,
        "loses_ground": not keeping,
    }


def next_rate(rates: Sequence[float], done: dict[float, float], base_dev: float) -> float | None:
    """The next rate to run, largest first (``done``: rate → control dev score so far), or None once the
    rule's choice is settled: a rate already run keeps the control at or above the base (no smaller rate
    can be chosen over it), or every rate has run."""
    for rate in sorted(rates, reverse=True):
        if rate not in done:
            return rate
        if done[rate] >= base_dev:
            return None
    return None


def _dev(directory: Path) -> float:
    return float(json.loads((directory / "results.json").read_text(encoding="utf-8"))["dev"]["main"])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", default="smedbert")
    parser.add_argument("--rates", type=float, nargs="+", default=[1e-3, 5e-4, 2e-4, 1e-4])
    parser.add_argument("--warmup-steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=100, help="the control's pre-training seed (not a study seed)")
    parser.add_argument("--work", type=Path, default=HERE / ".cache" / "replicate")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "protocol")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import replicate
    import torch

    torch.set_num_threads(args.threads)
    family = replicate.base_family(args.method)
    chosen = choice_path(args.out, "cmedqaner", args.method, family)
    if not chosen.is_file():
        raise ArtifactError(f"{chosen}: no fine-tuning budget yet; run experiments/finetune_protocol.py first")
    finetuning = json.loads(chosen.read_text(encoding="utf-8"))
    rows = replicate.plan_rows([args.method], primary=True)
    [control] = [row for row in rows if row.role == "control"]
    budget = dataclasses.replace(
        replicate.Budget(),
        seeds=(args.seed,),
        finetune_seeds=(0,),
        warmup_steps=args.warmup_steps,
        tasks={"cmedqaner": [None, finetuning["epochs"], finetuning["learning_rate"]]},
    )
    shared = replicate.shared_inputs(args.work, budget, rows)
    replicate.shared_corpus(shared, budget, control.pretraining)
    base = replicate.pretrain_bases(args.work, shared, budget, rows, args.device, 1, args.threads)[family]
    _, base_directory = replicate.finetune(args.work, budget, base, "cmedqaner", 0, True, args.device)
    base_dev = _dev(base_directory)
    path = args.out / f"{args.method}-control-rates.jsonl"
    setting = (args.warmup_steps, args.seed, [finetuning["epochs"], finetuning["learning_rate"]])

    def done() -> dict[float, float]:
        return {
            r["learning_rate"]: r["dev"]
            for r in read_records(path)
            if (r["warmup_steps"], r["seed"], r["finetuning"]) == setting and r["learning_rate"] in args.rates
        }

    while (rate := next_rate(args.rates, done(), base_dev)) is not None:
        started, cpu = time.perf_counter(), time.process_time()
        at_rate = dataclasses.replace(budget, learning_rate=rate)
        run = replicate.pretrain(args.work, shared, at_rate, control.pretraining, args.seed, args.device, base)
        _, directory = replicate.finetune(args.work, at_rate, run, "cmedqaner", 0, True, args.device)
        record = {
            "method": args.method,
            "control": control.name,
            "learning_rate": rate,
            "warmup_steps": args.warmup_steps,
            "seed": args.seed,
            "finetuning": [finetuning["epochs"], finetuning["learning_rate"]],
            "dev": _dev(directory),
            "base_dev": base_dev,
            "wall_s": round(time.perf_counter() - started),
            "cpu_s": round(time.process_time() - cpu),
            "commit": code_version(),
        }
        append_record(path, record)
        logger.info("control at lr %g: dev %.1f (base %.1f)", rate, 100 * record["dev"], 100 * base_dev)
    records = [{"learning_rate": rate, "warmup_steps": args.warmup_steps, "dev": dev} for rate, dev in done().items()]
    choice = {
        **choose_rate(records, base_dev),
        "method": args.method,
        "control": control.name,
        "commit": code_version(),
    }
    write_json(args.out / f"{args.method}-control-choice.json", choice)
    print(json.dumps(choice, indent=1))


if __name__ == "__main__":
    main()
