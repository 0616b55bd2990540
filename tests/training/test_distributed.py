"""Data parallelism under ``torchrun`` (gloo on CPU): 2 processes equal 1, and resume after SIGKILL.

A tiny SMedBERT with dropout off is pre-trained on the toy graph for 8 steps of a global batch of
8: in this process (one process, one batch of 8 per step) and with ``torchrun --nproc_per_node 2
-m kgplm train`` (each rank 4 examples in 2 micro-batches of 2). Every logged loss must agree
within 1e-5 relative; a 2-process run killed with SIGKILL after a checkpoint and relaunched must
log exactly what the uninterrupted 2-process run logged.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import kgplm
from kgplm.models import TINY_TEXT_ENCODER
from tests.test_api import TOY_GRAPH, write_toy_corpus
from tests.training.helpers import Fit, FitRows, fit_collate, fit_settings, fit_worker

REPO_ROOT = Path(__file__).resolve().parents[2]
TEXT_MODEL = dict(TINY_TEXT_ENCODER, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
STEPS, BATCH = 8, 8
TIMEOUT = 600  # seconds any launch may take (the machine may be loaded)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The 1-process run (one thread, like each torchrun worker) and the artefacts the launches reuse."""
    work = tmp_path_factory.mktemp("ddp")
    corpus = write_toy_corpus(work / "notes.txt")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = kgplm.train(
            "smedbert",
            graph=str(TOY_GRAPH),
            corpus=str(corpus),
            output_dir=work / "one",
            text_model=TEXT_MODEL,
            vocab_size=300,
            entity_dim=16,
            kg_epochs=5,
            max_steps=STEPS,
            batch_size=BATCH,
            learning_rate=2e-3,
            checkpoint_every=2,
            log_every=1,
            max_length=64,
            num_threads=1,
            progress=False,
        )
    finally:
        torch.set_num_threads(threads)
    return {"work": work, "corpus": corpus, "metrics": result.metrics}


def _command(reference, output_dir: Path, extra: tuple[str, ...] = ()) -> list[str]:
    one = reference["work"] / "one"
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "kgplm",
        "train",
        "--method",
        "smedbert",
        "--graph",
        str(TOY_GRAPH),
        "--corpus",
        str(reference["corpus"]),
        "--output-dir",
        str(output_dir),
        "--text-model",
        json.dumps(TEXT_MODEL),
        "--tokenizer",
        str(one / "tokenizer"),
        "--kg-embeddings",
        str(one / "kg" / "embeddings"),
        "--neighbor-table",
        str(one / "kg" / "neighbors.npz"),
        "--entity-dim",
        "16",
        "--max-steps",
        str(STEPS),
        "--batch-size",
        str(BATCH),
        "--gradient-accumulation-steps",
        "2",
        "--learning-rate",
        "2e-3",
        "--checkpoint-every",
        "2",
        "--log-every",
        "1",
        "--max-length",
        "64",
        "--no-progress",
        *extra,
    ]


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (torchrun's workers run in their own sessions)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def _launch(
    reference, output_dir: Path, *, extra: tuple[str, ...] = (), kill_after_checkpoint: str | None = None
) -> None:
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1")
    process = subprocess.Popen(
        _command(reference, output_dir, extra),
        cwd=REPO_ROOT,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if kill_after_checkpoint is None:
        try:
            _, stderr = process.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            for pid in _descendants(process.pid) + [process.pid]:
                os.kill(pid, signal.SIGKILL)
            raise
        assert process.returncode == 0, stderr.decode()[-3000:]
        return
    target = output_dir / "checkpoints" / kill_after_checkpoint
    deadline = time.monotonic() + TIMEOUT
    while not target.is_dir() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    running = process.poll() is None
    for pid in _descendants(process.pid) + [process.pid]:  # the workers and the agent at once, like a lost node
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait(timeout=60)
    process.stderr.close()
    assert running and target.is_dir(), "the run ended (or timed out) before it could be killed"


def _records(output_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def two_processes(reference):
    output_dir = reference["work"] / "two"
    _launch(reference, output_dir)
    return output_dir


def test_two_processes_equal_one_process_of_the_same_global_batch(reference, two_processes):
    two = _records(two_processes)
    one = reference["metrics"]
    assert [r["step"] for r in two] == list(range(1, STEPS + 1))  # rank 0 alone wrote, once per step
    assert [set(r) for r in two] == [set(r) for r in one]
    for a, b in zip(one, two):
        for key in a:
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-7), (a["step"], key)
    stages = json.loads((two_processes / "run_config.json").read_text())["stages"]
    assert stages["distributed"] == {"world_size": 2, "backend": "gloo"}
    assert json.loads((reference["work"] / "one" / "run_config.json").read_text())["stages"]["distributed"] == {
        "world_size": 1,
        "backend": "none",
    }


def test_a_two_process_run_killed_with_sigkill_resumes_to_the_same_losses(reference, two_processes):
    killed = reference["work"] / "killed"
    _launch(reference, killed, kill_after_checkpoint="step-0000002")
    assert not (killed / "model").exists()
    _launch(reference, killed)
    assert (killed / "metrics.jsonl").read_text() == (two_processes / "metrics.jsonl").read_text()  # bit for bit


# -- ranks without targets: the loop in 2 spawned processes against 1 ------------------------------------------
def test_ranks_without_targets_join_the_gradient_all_reduce(tmp_path):
    """A rank whose micro-batches hold no target still meets DDP's all-reduce (no hang) and adds nothing."""
    from safetensors.torch import load_file

    from kgplm.training.trainer import train_loop

    one = train_loop(
        Fit(), FitRows(), fit_collate, output_dir=tmp_path / "one", settings=fit_settings(1), progress=False
    )
    processes = torch.multiprocessing.start_processes(
        fit_worker,
        args=(str(tmp_path / "rendezvous"), str(tmp_path / "two")),
        nprocs=2,
        join=False,
        start_method="spawn",
    )
    deadline = time.monotonic() + TIMEOUT
    while not processes.join(timeout=5):
        if time.monotonic() > deadline:
            for process in processes.processes:
                process.kill()
            pytest.fail("the 2-process loop did not finish (a rank waiting in the all-reduce?)")
    two = _records(tmp_path / "two")
    assert [r["step"] for r in one] == [r["step"] for r in two] == [1, 2, 3, 4, 5]
    assert "fit" not in one[3] and "fit" not in two[3]  # step 4: no target anywhere, nothing logged, no update
    for a, b in zip(one, two):
        assert set(a) == set(b)
        for key in a:
            assert b[key] == pytest.approx(a[key], rel=1e-6), (a["step"], key)
    weights = [
        load_file(str(path / "checkpoints" / "step-0000005" / "model.safetensors"))["w"]
        for path in (tmp_path / "one", tmp_path / "two")
    ]
    torch.testing.assert_close(weights[1], weights[0], rtol=1e-6, atol=1e-7)
    assert not torch.equal(weights[0], torch.tensor([1.0, -0.5]))


# -- stop signals and Ctrl-C through the command line -----------------------------------------------------------
def _single_command(reference, output_dir: Path) -> list[str]:
    """The reference run's arguments as one ``kgplm train`` process (no torchrun, no accumulation)."""
    command = _command(reference, output_dir)
    command = command[command.index("-m", 4) + 1 :]  # drop the torchrun launcher
    at = command.index("--gradient-accumulation-steps")
    del command[at : at + 2]
    return [sys.executable, "-m", *command]


def _run_until_checkpoint_then_signal(
    command: list[str], output_dir: Path, number: int, *, ranks: bool = False
) -> tuple[int, str]:
    """Start ``command``, send ``number`` once ``step-0000002`` exists (to rank 1's worker only when ``ranks``),
    return (exit status, stderr)."""
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1")
    # a shell starts background jobs with SIGINT ignored, and Python keeps it so: give the run a terminal's default
    process = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    target = output_dir / "checkpoints" / "step-0000002"
    deadline = time.monotonic() + TIMEOUT
    while not target.is_dir() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process.poll() is None and target.is_dir(), "the run ended (or timed out) before it could be signalled"
    if ranks:
        workers = [
            pid
            for pid in _descendants(process.pid)
            if b"RANK=1\0" in Path(f"/proc/{pid}/environ").read_bytes().replace(b"LOCAL_RANK=1\0", b"")
        ]
        assert workers, "rank 1's worker was not found"
        os.kill(workers[0], number)
    else:
        os.kill(process.pid, number)
    try:
        _, stderr = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        for pid in _descendants(process.pid) + [process.pid]:
            os.kill(pid, signal.SIGKILL)
        raise
    return process.returncode, stderr.decode()


@pytest.fixture(scope="module")
def single_process(reference):
    """The uninterrupted ``kgplm train`` process the preempted ones are compared with."""
    output_dir = reference["work"] / "single"
    subprocess.run(
        _single_command(reference, output_dir),
        cwd=REPO_ROOT,
        check=True,
        timeout=TIMEOUT,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1"),
        stdout=subprocess.DEVNULL,
    )
    return output_dir


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGUSR1])
def test_a_preempted_run_exits_75_and_resumes_to_the_same_losses(reference, single_process, number):
    output_dir = reference["work"] / f"preempted-{number}"
    command = _single_command(reference, output_dir)
    status, stderr = _run_until_checkpoint_then_signal(command, output_dir, number)
    assert status == 75, stderr[-3000:]
    assert "Traceback" not in stderr
    assert "stopped after step" in stderr and "run the same call again to resume" in stderr
    assert not (output_dir / "model").exists()
    rerun = subprocess.run(
        command,
        cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=TIMEOUT,
    )
    assert rerun.returncode == 0, rerun.stderr.decode()[-3000:]
    assert (output_dir / "metrics.jsonl").read_text() == (single_process / "metrics.jsonl").read_text()  # bit for bit


def test_ctrl_c_ends_with_one_line_naming_the_last_checkpoint(reference):
    output_dir = reference["work"] / "interrupted"
    status, stderr = _run_until_checkpoint_then_signal(
        _single_command(reference, output_dir), output_dir, signal.SIGINT
    )
    assert status == 130, stderr[-3000:]
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.startswith("kgplm:")]
    checkpoint = sorted((output_dir / "checkpoints").glob("step-*"))[-1]
    assert lines == [
        f"kgplm: interrupted; the last checkpoint is {checkpoint}; run the same command again to resume from it"
    ], stderr[-3000:]


def test_a_signal_to_one_rank_stops_both_after_the_same_step_and_the_rerun_resumes(reference, two_processes):
    output_dir = reference["work"] / "preempted-two"
    status, stderr = _run_until_checkpoint_then_signal(
        _command(reference, output_dir), output_dir, signal.SIGTERM, ranks=True
    )
    assert status != 0
    assert "exitcode  : 75" in stderr, stderr[-3000:]  # torchrun reports the workers' status
    assert "stopped after step" in stderr  # rank 0 wrote the checkpoint although rank 1 got the signal
    assert not (output_dir / "model").exists()
    _launch(reference, output_dir)
    assert (output_dir / "metrics.jsonl").read_text() == (two_processes / "metrics.jsonl").read_text()  # bit for bit
