"""Preemption of fine-tuning: a stop signal checkpoints after the step; the rerun ends bit for bit as an
uninterrupted run (in this process, and ``kgplm finetune`` signalled as a scheduler would)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

import kgplm
from kgplm.exceptions import ConfigurationError, PreemptedError
from kgplm.training.checkpoints import latest_checkpoint, verify_checkpoint
from kgplm.finetuning.encoding import TaskEncoder
from tests.helpers import replace_weights, stop_signal_while_saving
from tests.test_finetune import tiny_chinese_model  # noqa: F401 (the fixture)

REPO_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 600
#: 64 training examples in steps of 16: 4 steps an epoch; the tiny encoder has dropout on
ARGUMENTS = dict(
    task="cmedqaner",
    epochs=3,
    batch_size=16,
    learning_rate=3e-3,
    patience=10,
    max_train_examples=64,
    max_eval_examples=32,
    progress=False,
)


def _signal_in_epoch(monkeypatch, number: int, epoch: int, step: int | None) -> None:
    """Send ``number`` to this process at the ``step``-th training batch of epoch ``epoch`` (counted from 1), or,
    with ``step=None``, while epoch ``epoch`` is scored on dev."""
    import kgplm.finetuning.loop as finetuning

    real_collate, real_score = TaskEncoder.collate, finetuning.score
    scored, batches = [], []

    def collate(self, features):
        batches.append(None)
        if step is not None and len(scored) == epoch - 1 and len(batches) == step:
            os.kill(os.getpid(), number)
        return real_collate(self, features)

    def score(*arguments, **options):
        scored.append(None)
        batches.clear()  # the next batches are the next epoch's training batches
        if step is None and len(scored) == epoch:
            os.kill(os.getpid(), number)
        return real_score(*arguments, **options)

    monkeypatch.setattr(TaskEncoder, "collate", collate)
    monkeypatch.setattr(finetuning, "score", score)


def _weights(directory: Path) -> bytes:
    return (directory / "model" / "model.safetensors").read_bytes()


def test_a_signal_checkpoints_fine_tuning_and_the_rerun_ends_bit_for_bit(
    tiny_chinese_model,  # noqa: F811
    shared_data,
    tmp_path,
    monkeypatch,
):
    common = dict(model=tiny_chinese_model, data_dir=shared_data / "tasks", **ARGUMENTS)
    whole = kgplm.finetune(output_dir=tmp_path / "whole", **common)
    assert not (tmp_path / "whole" / "checkpoints").exists()

    with monkeypatch.context() as patch:
        _signal_in_epoch(patch, signal.SIGUSR1, epoch=2, step=2)  # in the middle of an epoch, a best epoch kept
        previous = signal.getsignal(signal.SIGUSR1)
        with pytest.raises(PreemptedError) as stopped:
            kgplm.finetune(output_dir=tmp_path / "run", **common)
        assert signal.getsignal(signal.SIGUSR1) is previous
    error = stopped.value
    checkpoint = latest_checkpoint(tmp_path / "run")
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert (state["epoch"], state["batch"], len(state["losses"]), len(state["history"])) == (1, 2, 2, 1)
    assert (error.signal_name, error.step, error.checkpoint) == ("SIGUSR1", state["step"], str(checkpoint))
    assert checkpoint.name == f"step-{state['step']:07d}" and state["step"] > 2
    verify_checkpoint(checkpoint)  # written whole, with checksums, including the best epoch's weights
    assert json.loads((checkpoint / "checksums.json").read_text())["best_model.safetensors"]
    assert not (tmp_path / "run" / "model").exists()

    # another call into that directory does not take the checkpoint
    with pytest.raises(ConfigurationError, match="learning_rate"):
        kgplm.finetune(output_dir=tmp_path / "run", **{**common, "learning_rate": 1e-3})
    assert latest_checkpoint(tmp_path / "run") == checkpoint

    resumed = kgplm.finetune(output_dir=tmp_path / "run", **common)
    assert resumed.history == whole.history and resumed.dev == whole.dev and resumed.test == whole.test
    assert _weights(tmp_path / "run") == _weights(tmp_path / "whole")
    assert not (tmp_path / "run" / "checkpoints").exists()  # a finished run keeps no checkpoint


def test_a_signal_between_epochs_resumes_at_the_next_epoch(
    tiny_chinese_model,  # noqa: F811
    shared_data,
    tmp_path,
    monkeypatch,
):
    common = dict(model=tiny_chinese_model, data_dir=shared_data / "tasks", **{**ARGUMENTS, "epochs": 2})
    whole = kgplm.finetune(output_dir=tmp_path / "whole", **common)
    with monkeypatch.context() as patch:
        _signal_in_epoch(patch, signal.SIGTERM, epoch=1, step=None)  # while epoch 1 is scored on dev
        with pytest.raises(PreemptedError) as stopped:
            kgplm.finetune(output_dir=tmp_path / "run", **common)
    state = json.loads((latest_checkpoint(tmp_path / "run") / "trainer_state.json").read_text())
    assert (state["epoch"], state["batch"], state["losses"], len(state["history"])) == (1, 0, [], 1)
    assert stopped.value.step == state["step"]
    resumed = kgplm.finetune(output_dir=tmp_path / "run", **common)
    assert resumed.history == whole.history and resumed.test == whole.test
    assert _weights(tmp_path / "run") == _weights(tmp_path / "whole")


def test_a_checkpoint_resumes_only_from_the_weights_it_was_made_from(
    tiny_chinese_model,  # noqa: F811
    shared_data,
    tmp_path,
    monkeypatch,
):
    """The same call after the model at the same path was replaced (retrained, rebuilt) refuses the
    checkpoint instead of continuing another model's fine-tuning; with the original weights back it resumes."""
    model = tmp_path / "tiny"
    shutil.copytree(tiny_chinese_model, model)
    common = dict(model=model, data_dir=shared_data / "tasks", **{**ARGUMENTS, "epochs": 2})
    whole = kgplm.finetune(output_dir=tmp_path / "whole", **common)
    with monkeypatch.context() as patch:
        _signal_in_epoch(patch, signal.SIGUSR1, epoch=1, step=2)
        with pytest.raises(PreemptedError):
            kgplm.finetune(output_dir=tmp_path / "run", **common)
    weights = model / "model" / "model.safetensors"
    original = replace_weights(weights)
    with pytest.raises(ConfigurationError, match="starting_weights: .*model.safetensors"):
        kgplm.finetune(output_dir=tmp_path / "run", **common)
    weights.write_bytes(original)
    resumed = kgplm.finetune(output_dir=tmp_path / "run", **common)
    assert resumed.history == whole.history and resumed.test == whole.test
    assert _weights(tmp_path / "run") == _weights(tmp_path / "whole")


# -- kgplm finetune, signalled from outside -----------------------------------------------------------------
def _command(model: Path, data_dir: Path, output_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "kgplm",
        "--verbose",
        "finetune",
        "--model",
        str(model),
        "--task",
        "cmedqaner",
        "--data-dir",
        str(data_dir),
        "--output-dir",
        str(output_dir),
        "--epochs",
        "3",
        "--batch-size",
        "16",
        "--learning-rate",
        "3e-3",
        "--patience",
        "10",
        "--max-train-examples",
        "64",
        "--max-eval-examples",
        "32",
        "--no-progress",
    ]


ENVIRONMENT = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1")


def _run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=REPO_ROOT, env=ENVIRONMENT, capture_output=True, text=True, timeout=TIMEOUT)


def _signal_after_first_epoch(command: list[str], number: int) -> tuple[int, str]:
    """Start ``command``; once it logs its first epoch, send ``number``; return (exit status, stderr)."""
    process = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=ENVIRONMENT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines = []
    deadline = time.monotonic() + TIMEOUT
    try:
        for line in process.stderr:
            lines.append(line)
            if "epoch 1: train loss" in line:
                os.kill(process.pid, number)
                break
            assert time.monotonic() < deadline, "the run took too long to finish its first epoch"
        assert any("epoch 1: train loss" in line for line in lines), "".join(lines)[-3000:]
        _, rest = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, "".join(lines) + rest


def test_kgplm_finetune_exits_75_on_sigterm_and_the_rerun_resumes_bit_for_bit(
    tiny_chinese_model,  # noqa: F811
    shared_data,
    tmp_path,
):
    whole = _run(_command(tiny_chinese_model, shared_data / "tasks", tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr[-3000:]
    command = _command(tiny_chinese_model, shared_data / "tasks", tmp_path / "run")
    status, stderr = _signal_after_first_epoch(command, signal.SIGTERM)
    assert status == 75, stderr[-3000:]
    assert "Traceback" not in stderr
    assert "stopped after step" in stderr and "run the same call again to resume" in stderr
    checkpoint = latest_checkpoint(tmp_path / "run")
    assert checkpoint is not None and str(checkpoint) in stderr
    verify_checkpoint(checkpoint)
    rerun = _run(command)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"resuming fine-tuning from {checkpoint}" in rerun.stderr
    results = [json.loads((tmp_path / name / "results.json").read_text()) for name in ("whole", "run")]
    assert results[1] == results[0]
    assert (
        load_file(str(tmp_path / "run" / "model" / "model.safetensors")).keys()
        == load_file(str(tmp_path / "whole" / "model" / "model.safetensors")).keys()
    )
    assert _weights(tmp_path / "run") == _weights(tmp_path / "whole")


def test_ctrl_c_during_fine_tuning_ends_with_one_line(tiny_chinese_model, shared_data, tmp_path):  # noqa: F811
    command = _command(tiny_chinese_model, shared_data / "tasks", tmp_path / "run")
    status, stderr = _signal_after_first_epoch(command, signal.SIGINT)
    assert status == 130, stderr[-3000:]
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.startswith("kgplm:")]
    assert lines == [
        "kgplm: interrupted; no checkpoint was written yet; running the same command again starts the run over"
    ], stderr[-3000:]


def test_a_stop_signal_while_the_fine_tuned_model_is_saved_ends_the_call_normally(
    tiny_chinese_model,  # noqa: F811
    shared_data,
    tmp_path,
    monkeypatch,
):
    """A preemption signal after the last epoch, while the model is written, is held until the call
    completes: the process lives on and the model directory is whole."""
    from kgplm.finetuning import api

    with stop_signal_while_saving(monkeypatch, api) as delivered:
        result = kgplm.finetune(
            model=tiny_chinese_model, data_dir=shared_data / "tasks", output_dir=tmp_path / "run", **ARGUMENTS
        )
    assert delivered == []
    assert (result.model_dir / "model.safetensors").is_file() and (tmp_path / "run" / "results.json").is_file()
