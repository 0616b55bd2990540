"""Stop signals: the loop finishes its step, checkpoints, raises PreemptedError; the rerun resumes bit for bit."""

from __future__ import annotations

import json
import os
import signal

import pytest
from safetensors.torch import load_file

from kgplm.exceptions import ConfigurationError, PreemptedError
from kgplm.training.interrupts import StopRequest, check_stop_signals
from kgplm.training.trainer import TrainerSettings, train_loop
from tests.training.helpers import Fit, FitRows, fit_collate

SETTINGS = TrainerSettings(
    max_steps=6, batch_size=4, learning_rate=0.1, log_every=1, checkpoint_every=4, weight_decay=0.0
)


def _signal_after(step: int, number: int):
    def report(record):
        if record["step"] == step:
            os.kill(os.getpid(), number)  # delivered before the loop checks for a stop request

    return report


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGUSR1])
def test_a_signal_stops_after_the_step_with_a_checkpoint_and_the_rerun_resumes_bit_for_bit(tmp_path, number):
    reference = train_loop(
        Fit(), FitRows(), fit_collate, output_dir=tmp_path / "whole", settings=SETTINGS, progress=False
    )
    previous = signal.getsignal(number)
    with pytest.raises(PreemptedError) as stopped:
        train_loop(
            Fit(),
            FitRows(),
            fit_collate,
            output_dir=tmp_path / "run",
            settings=SETTINGS,
            progress=False,
            report=_signal_after(2, number),
        )
    assert signal.getsignal(number) is previous  # the handler is the caller's again
    error = stopped.value
    assert (error.signal_name, error.step) == (signal.Signals(number).name, 2)
    assert error.checkpoint == str(tmp_path / "run" / "checkpoints" / "step-0000002")  # not a multiple of 4
    assert "run the same call again to resume" in str(error)
    assert [r["step"] for r in map(json.loads, (tmp_path / "run" / "metrics.jsonl").read_text().splitlines())] == [1, 2]

    resumed = train_loop(Fit(), FitRows(), fit_collate, output_dir=tmp_path / "run", settings=SETTINGS, progress=False)
    assert resumed == reference
    assert (tmp_path / "run" / "metrics.jsonl").read_bytes() == (tmp_path / "whole" / "metrics.jsonl").read_bytes()
    final = [
        load_file(str(path / "checkpoints" / "step-0000006" / "model.safetensors"))["w"]
        for path in (tmp_path / "whole", tmp_path / "run")
    ]
    assert final[0].tolist() == final[1].tolist()


def test_a_signal_during_the_last_step_lets_the_run_finish(tmp_path):
    metrics = train_loop(
        Fit(),
        FitRows(),
        fit_collate,
        output_dir=tmp_path,
        settings=SETTINGS,
        progress=False,
        report=_signal_after(SETTINGS.max_steps, signal.SIGUSR1),
    )
    assert metrics[-1]["step"] == SETTINGS.max_steps


def test_signals_outside_the_stop_list_keep_their_handling(tmp_path):
    received = []
    previous = signal.signal(signal.SIGUSR2, lambda number, frame: received.append(number))
    try:
        metrics = train_loop(
            Fit(),
            FitRows(),
            fit_collate,
            output_dir=tmp_path,
            settings=SETTINGS,
            progress=False,
            report=_signal_after(2, signal.SIGUSR2),
            stop_signals=("SIGTERM",),
        )
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert received == [signal.SIGUSR2] and metrics[-1]["step"] == SETTINGS.max_steps


def test_stop_signal_names_are_checked():
    assert check_stop_signals(["usr1", "SIGTERM", "TERM"]) == ("SIGUSR1", "SIGTERM")
    for bad in ("SIGKILL", "SIGNOPE"):
        with pytest.raises(ConfigurationError, match=bad):
            check_stop_signals([bad])
    with StopRequest(["SIGUSR1"]) as request:
        assert not request.requested
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR1)  # a second signal changes nothing
        assert request.signal_name == "SIGUSR1"
