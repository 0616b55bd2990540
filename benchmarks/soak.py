"""Soak check: ``kgplm train`` interrupted again and again with SIGTERM and SIGKILL, resumed each time, ends
with the weights of an uninterrupted run.

Run: ``python benchmarks/soak.py [--steps 300] [--interruptions 30] [--seed 0]`` (``--smoke``: 40 steps,
one SIGTERM and one SIGKILL, for the tests).

A tiny SMedBERT (dropout off) is pre-trained on the toy graph with ``kgplm train`` in a subprocess,
once without interruption and once under a seeded schedule of interruptions: after the run has made
progress (a new line in ``metrics.jsonl``), it waits a random fraction of a second and sends SIGTERM
(a preemption: the run finishes its step, checkpoints and exits 75) or SIGKILL (a lost node: the run
resumes from its last periodic checkpoint), then relaunches the same command, until the run exits 0.
Prints one row per launch and a summary: how many interruptions of each kind the run survived and
whether ``model/model.safetensors`` and ``metrics.jsonl`` equal the uninterrupted run's byte for byte.
Exit status 1 when they differ.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TOY_GRAPH = REPO_ROOT / "graphs" / "toy_medical.ttl"
TEXT_MODEL = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 80,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}
PREEMPTED = 75  # kgplm.training.interrupts.PREEMPTED_EXIT_STATUS


def write_corpus(path: Path, lines: int = 80) -> Path:
    """Clinical-note-like sentences naming three entities of the toy graph each."""
    from kgplm import KGStore

    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    names = [store.entity_name(e) for e in range(store.num_entities)]
    rng = random.Random(0)
    text = []
    for _ in range(lines):
        first, second, third = rng.sample(names, 3)
        text.append(f"患者主诉{first}三天，伴有{second}，既往有{third}病史，建议复查并随访观察。")
    path.write_text("\n".join(text), encoding="utf-8")
    return path


def command(corpus: Path, output_dir: Path, steps: int, checkpoint_every: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "kgplm",
        "train",
        "--method",
        "smedbert",
        "--graph",
        str(TOY_GRAPH),
        "--corpus",
        str(corpus),
        "--output-dir",
        str(output_dir),
        "--text-model",
        json.dumps(TEXT_MODEL),
        "--vocab-size",
        "300",
        "--entity-dim",
        "16",
        "--kg-epochs",
        "2",
        "--max-steps",
        str(steps),
        "--batch-size",
        "8",
        "--learning-rate",
        "2e-3",
        "--checkpoint-every",
        str(checkpoint_every),
        "--log-every",
        "1",
        "--max-length",
        "64",
        "--device",
        "cpu",
        "--num-threads",
        "1",
        "--no-progress",
    ]


def environment() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1")


def logged_steps(output_dir: Path) -> int:
    path = output_dir / "metrics.jsonl"
    if not path.is_file():
        return 0
    steps = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            steps = max(steps, json.loads(line)["step"])
        except ValueError:
            pass
    return steps


def checkpoint_step(output_dir: Path) -> int:
    """The step of the last complete checkpoint (0 without one): where a launch resumes."""
    steps = (
        [
            int(p.name.split("-")[1])
            for p in (output_dir / "checkpoints").glob("step-*")
            if (p / "trainer_state.json").is_file()
        ]
        if (output_dir / "checkpoints").is_dir()
        else []
    )
    return max(steps, default=0)


def interrupted_launch(
    argv: list[str], output_dir: Path, kind: signal.Signals | None, delay: float, timeout: float
) -> tuple[int, int, int]:
    """Launch; once the loop has logged a step past the checkpoint it resumed from, wait ``delay`` s and send
    ``kind`` (None: let it finish). Returns (exit status, step resumed from, logged step after)."""
    before = checkpoint_step(output_dir)
    metrics = output_dir / "metrics.jsonl"
    launched = time.time()
    process = subprocess.Popen(
        argv, cwd=REPO_ROOT, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + timeout

    def progressed() -> bool:  # a line this launch wrote (an older file may still hold later steps)
        return metrics.is_file() and metrics.stat().st_mtime >= launched and logged_steps(output_dir) > before

    if kind is not None:
        while process.poll() is None and not progressed() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(delay)
        if process.poll() is None:
            process.send_signal(kind)
    status = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    return status, before, logged_steps(output_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--interruptions", type=int, default=30, help="signals to send before letting the run end")
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="seed of the interruption schedule")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds any launch may take")
    parser.add_argument("--work-dir", default=None, help="default: a temporary directory")
    parser.add_argument("--smoke", action="store_true", help="40 steps, one SIGTERM then one SIGKILL")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.interruptions, args.checkpoint_every = 40, 2, 10
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="kgplm-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = write_corpus(work / "notes.txt")
    reference, soaked = work / "reference", work / "soaked"

    started = time.monotonic()
    status, _, _ = interrupted_launch(
        command(corpus, reference, args.steps, args.checkpoint_every), reference, None, 0.0, args.timeout
    )
    if status != 0:
        print(f"the uninterrupted run failed (exit {status})")
        return 1
    reference_seconds = time.monotonic() - started

    rng = random.Random(args.seed)
    counts = {"SIGTERM": 0, "SIGKILL": 0}
    print("| launch | signal | exit | resumed from step → last logged step |")
    print("|---:|---|---:|---|")
    launch, started = 0, time.monotonic()
    argv = command(corpus, soaked, args.steps, args.checkpoint_every)
    while True:
        launch += 1
        kind = None
        if sum(counts.values()) < args.interruptions:
            kind = (
                rng.choice([signal.SIGTERM, signal.SIGKILL])
                if not args.smoke
                else [signal.SIGTERM, signal.SIGKILL][sum(counts.values())]
            )
        delay = rng.uniform(0.0, 0.05 if args.smoke else 0.4)  # the smoke run's steps are few: signal early
        status, before, after = interrupted_launch(argv, soaked, kind, delay, args.timeout)
        sent = kind.name if kind is not None else "—"
        print(f"| {launch} | {sent} | {status} | {before} → {after} |", flush=True)
        if status == 0 and (soaked / "model" / "model.safetensors").is_file():
            break
        if kind is None:
            print(f"the run failed without a signal (exit {status})")
            return 1
        expected = {signal.SIGTERM: PREEMPTED, signal.SIGKILL: -signal.SIGKILL}[kind]
        if status != expected:
            print(f"{kind.name} ended the run with exit {status}, expected {expected}")
            return 1
        counts[kind.name] += 1
    soaked_seconds = time.monotonic() - started

    same_model = (soaked / "model" / "model.safetensors").read_bytes() == (
        reference / "model" / "model.safetensors"
    ).read_bytes()
    same_metrics = (soaked / "metrics.jsonl").read_bytes() == (reference / "metrics.jsonl").read_bytes()
    print()
    print(
        f"steps {args.steps}, checkpoint every {args.checkpoint_every}; survived {counts['SIGTERM']} SIGTERM and "
        f"{counts['SIGKILL']} SIGKILL over {launch} launches"
    )
    print(
        f"final weights equal the uninterrupted run's: {'yes' if same_model else 'NO'}; metrics.jsonl equal: "
        f"{'yes' if same_metrics else 'NO'}"
    )
    print(f"wall time: uninterrupted {reference_seconds:.0f} s, interrupted {soaked_seconds:.0f} s")
    return 0 if same_model and same_metrics else 1


if __name__ == "__main__":
    sys.exit(main())
