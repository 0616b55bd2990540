"""One writer per run directory: a second process is refused at once; a lock left by a killed one is taken over."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import kgplm
from kgplm.exceptions import KgplmError, RunDirectoryLockedError
from kgplm.training.locking import LOCK_FILE_NAME, RunDirectoryLock
from tests.test_api import TOY_GRAPH, write_toy_corpus

REPO_ROOT = Path(__file__).resolve().parents[2]
HOLDER = (
    "import sys\nfrom kgplm.training.locking import RunDirectoryLock\n"
    "with RunDirectoryLock(sys.argv[1]):\n    print('held', flush=True)\n    sys.stdin.read()\n"
)


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock on ``tmp_path / "run"`` until its stdin closes."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "run")],
        cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline().strip() == "held"
    yield process
    if process.poll() is None:
        process.stdin.close()
        process.wait(timeout=60)


def test_a_second_process_is_refused_naming_the_holders_host_and_pid(tmp_path, holder):
    with pytest.raises(RunDirectoryLockedError) as refused:
        RunDirectoryLock(tmp_path / "run").acquire()
    assert (refused.value.host, refused.value.pid) == (socket.gethostname(), holder.pid)
    assert f"process {holder.pid} on host {socket.gethostname()}" in str(refused.value)
    assert isinstance(refused.value, KgplmError)

    holder.stdin.close()  # the holder ends and releases: the directory is free again
    holder.wait(timeout=60)
    assert not (tmp_path / "run" / LOCK_FILE_NAME).exists()
    with RunDirectoryLock(tmp_path / "run") as lock:
        assert lock.held


def test_train_into_a_directory_another_process_writes_fails_before_writing_anything(tmp_path, holder):
    corpus = write_toy_corpus(tmp_path / "notes.txt")
    with pytest.raises(RunDirectoryLockedError, match=str(holder.pid)):
        kgplm.train(
            "smedbert",
            graph=str(TOY_GRAPH),
            corpus=str(corpus),
            output_dir=tmp_path / "run",
            max_steps=2,
            batch_size=4,
            progress=False,
            device="cpu",
        )
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [LOCK_FILE_NAME]  # the holder's only


def test_a_lock_left_by_a_killed_process_is_taken_over_with_a_warning(tmp_path, holder, caplog):
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=60)
    left = json.loads((tmp_path / "run" / LOCK_FILE_NAME).read_text())
    assert left == {"host": socket.gethostname(), "pid": holder.pid}
    with caplog.at_level(logging.WARNING, logger="kgplm.training.locking"):
        lock = RunDirectoryLock(tmp_path / "run").acquire()
    try:
        assert (
            f"lock left by process {holder.pid} on host {socket.gethostname()}, which is no longer running"
            in caplog.text
        )
        assert json.loads((tmp_path / "run" / LOCK_FILE_NAME).read_text()) == {
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
    finally:
        lock.release()
    assert not (tmp_path / "run" / LOCK_FILE_NAME).exists()


def test_a_directory_the_lock_created_is_removed_when_the_call_left_it_empty(tmp_path):
    with RunDirectoryLock(tmp_path / "new"):
        assert (tmp_path / "new" / LOCK_FILE_NAME).is_file()
    assert not (tmp_path / "new").exists()
    (tmp_path / "kept").mkdir()
    with RunDirectoryLock(tmp_path / "kept"):
        pass
    assert (tmp_path / "kept").is_dir()
