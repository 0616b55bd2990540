"""What one cell of the study costs: SMedBERT's continued pre-training and its cMedQANER fine-tuning, timed.

The most expensive row of the SMedBERT family (the method itself: PEPR neighbours and the knowledge
module at pre-training, linked mentions at fine-tuning) is pre-trained for ``--steps`` steps of the
study's batch and encoder and fine-tuned for one epoch on cMedQANER's full training split (the study's
fine-tuning, through ``replicate.finetune``). The CPU and wall seconds per step and per epoch go to
``experiments/results/protocol/cell_cost.json``; the protocol sizes the run from them (a cell =
the study's steps × the per-step cost + its epochs × the per-epoch cost). The compute per step does not
depend on the starting weights, so the pre-training starts from random weights (protocol "scratch")
and needs no base.

    .venv/bin/python experiments/cell_cost.py [--steps 40 --threads 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import time
from pathlib import Path

from _shared import write_json  # noqa: E402
from _runs import code_version  # noqa: E402

HERE = Path(__file__).resolve().parent


def _timed(function):
    wall, cpu = time.perf_counter(), time.process_time()
    result = function()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def measure(work: Path, steps: int, device: str) -> dict:
    import replicate

    budget = dataclasses.replace(
        replicate.Budget(),
        protocol="scratch",
        steps=steps,
        seeds=(0,),
        finetune_seeds=(0,),
        tasks={"cmedqaner": [None, 1]},
    )
    rows = replicate.plan_rows(["smedbert"], primary=True)
    shared, shared_wall, shared_cpu = _timed(lambda: replicate.shared_inputs(work, budget, rows))
    method = replicate.Pretraining.of("smedbert")
    _, corpus_wall, corpus_cpu = _timed(lambda: replicate.shared_corpus(shared, budget, method))
    run, pretrain_wall, pretrain_cpu = _timed(lambda: replicate.pretrain(work, shared, budget, method, 0, device))
    _, finetune_wall, finetune_cpu = _timed(lambda: replicate.finetune(work, budget, run, "cmedqaner", 0, True, device))
    study = replicate.Budget()
    return {
        "what": "smedbert pre-training (batch, encoder and max length of the study) and one cMedQANER fine-tuning "
        "epoch on the full training split with linked mentions",
        "steps": steps,
        "batch_size": budget.batch_size,
        "pretraining_wall_s_per_step": pretrain_wall / steps,
        "pretraining_cpu_s_per_step": pretrain_cpu / steps,
        "finetuning_wall_s_per_epoch": finetune_wall,
        "finetuning_cpu_s_per_epoch": finetune_cpu,
        "study_steps": study.steps,
        "one_time_wall_s": {"shared inputs": round(shared_wall), "linked corpus": round(corpus_wall)},
        "one_time_cpu_s": {"shared inputs": round(shared_cpu), "linked corpus": round(corpus_cpu)},
        "torch_threads": __import__("torch").get_num_threads(),
        "cpus": os.cpu_count(),
        "load_average_1min_at_end": os.getloadavg()[0],
        "commit": code_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--work", type=Path, default=HERE / ".cache" / "replicate")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "protocol" / "cell_cost.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import torch

    torch.set_num_threads(args.threads)
    record = measure(args.work, args.steps, args.device)
    write_json(args.out, record)
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
