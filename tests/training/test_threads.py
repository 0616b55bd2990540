"""One num_threads for torch and numba; the same call at the same thread count gives the same bytes under load."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numba
import pytest
import torch

import kgplm
from kgplm.exceptions import ConfigurationError
from kgplm.training import threads
from kgplm.training.threads import check_num_threads, default_num_threads, thread_limits
from tests.test_api import toy_arguments, write_toy_corpus


def test_thread_limits_size_both_pools_and_restore_them():
    numba.get_num_threads()  # numba's OpenMP pool starts (and sets the count torch reports) on its first use
    before = (torch.get_num_threads(), numba.get_num_threads())
    with thread_limits(1):
        assert (torch.get_num_threads(), numba.get_num_threads()) == (1, 1)
    assert (torch.get_num_threads(), numba.get_num_threads()) == before


def test_the_default_is_omp_num_threads_else_the_cores_shared_among_local_processes(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_num_threads() == check_num_threads(None) == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 5, 7, 9}, raising=False)
    assert threads.available_cores() == 6 and default_num_threads() == 6
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert default_num_threads() == 1  # 6 cores among 4 torchrun processes on this machine
    assert check_num_threads(5) == 5
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ConfigurationError, match="num_threads"):
            check_num_threads(bad)


@pytest.fixture
def busy_neighbour():
    """Another process keeping a core busy, as on a shared machine."""
    process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield process
    process.kill()
    process.wait(timeout=60)


def test_two_calls_at_a_fixed_thread_count_give_the_same_bytes_under_load(tmp_path, busy_neighbour):
    corpus = write_toy_corpus(tmp_path / "notes.txt", lines=40)
    runs = []
    for name in ("first", "second"):
        result = kgplm.train(
            "smedbert",
            **toy_arguments(
                corpus,
                tmp_path / name,
                max_steps=4,
                checkpoint_every=2,
                log_every=1,
                kg_epochs=2,
                device="cpu",
                num_threads=2,
            ),
        )
        runs.append(result.output_dir)
    assert busy_neighbour.poll() is None  # the load lasted the whole time
    for relative in (
        "model/model.safetensors",
        "metrics.jsonl",
        "kg/neighbors.npz",
        "checkpoints/step-0000004/optimizer.safetensors",
    ):
        assert (runs[0] / relative).read_bytes() == (runs[1] / relative).read_bytes(), relative
    config = json.loads((runs[0] / "run_config.json").read_text())
    assert config["num_threads"] == 2
    assert config["stages"]["threads"]["torch"] == 2 and config["stages"]["threads"]["numba"] == min(
        2, numba.config.NUMBA_NUM_THREADS
    )
