"""A full disk while an artefact is written leaves the previous version intact and names the path and the space.

On a real size-limited file system (a tmpfs the test mounts; skipped where it cannot) and with an
injected ``ENOSPC``.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess

import pytest
import torch

from kgplm._io import atomic_file
from kgplm.exceptions import DiskFullError, KgplmError
from kgplm.training import checkpoints
from kgplm.training.checkpoints import latest_checkpoint, save_checkpoint, verify_checkpoint


@pytest.fixture
def small_filesystem(tmp_path):
    """A 768 KiB tmpfs mounted for the test."""
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a size-limited tmpfs needs root and mount(8); the injected-ENOSPC tests cover the code")
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=768k", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if result.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip()}); the injected-ENOSPC tests cover the code")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _trained_linear():
    torch.manual_seed(0)
    model = torch.nn.Linear(200, 200)  # 160 KB of weights, 320 KB of AdamW moments: one checkpoint fits, two do not
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    model(torch.ones(3, 200)).sum().backward()
    optimizer.step()
    scheduler.step()
    return model, optimizer, scheduler


def _leftovers(directory):
    return [p.name for p in directory.rglob("*") if ".tmp-" in p.name]


def test_a_checkpoint_that_fills_the_disk_leaves_the_previous_one(small_filesystem):
    model, optimizer, scheduler = _trained_linear()
    first = save_checkpoint(small_filesystem, model, optimizer, scheduler, {"step": 1}, keep=2)
    size = sum(p.stat().st_size for p in first.iterdir())
    with pytest.raises(DiskFullError) as full:
        save_checkpoint(small_filesystem, model, optimizer, scheduler, {"step": 2}, keep=2)
    error = full.value
    assert isinstance(error, KgplmError) and isinstance(error, OSError)
    assert error.path == str(small_filesystem / "checkpoints" / "step-0000002")
    assert error.needed >= error.written > 0 and error.free is not None
    assert str(small_filesystem / "checkpoints" / "step-0000002") in str(error) and f"{error.needed:,} bytes" in str(
        error
    )
    assert latest_checkpoint(small_filesystem) == first
    verify_checkpoint(first)  # intact, byte for byte what its checksums say
    assert sum(p.stat().st_size for p in first.iterdir()) == size
    assert _leftovers(small_filesystem) == []  # the temporary copy is gone: the space is free again
    assert shutil.disk_usage(small_filesystem).free == error.free


def test_a_file_that_fills_the_disk_leaves_the_previous_version(small_filesystem):
    target = small_filesystem / "artefact.bin"
    with atomic_file(target, "wb") as handle:
        handle.write(b"old" * 1000)
    with pytest.raises(DiskFullError, match=str(target)):
        with atomic_file(target, "wb") as handle:
            for _ in range(100):
                handle.write(b"\0" * 65536)
                handle.flush()
    assert target.read_bytes() == b"old" * 1000
    assert _leftovers(small_filesystem) == []


def test_an_injected_enospc_while_a_checkpoint_is_written_leaves_the_previous_one(tmp_path, monkeypatch):
    model, optimizer, scheduler = _trained_linear()
    first = save_checkpoint(tmp_path, model, optimizer, scheduler, {"step": 1}, keep=2)
    written = []
    real_save_file = checkpoints.save_file

    def filling(tensors, filename, metadata=None):
        if written:  # the second file of the checkpoint meets a full disk half-way
            with open(filename, "wb") as handle:
                handle.write(b"\0" * 1000)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filename)
        written.append(filename)
        real_save_file(tensors, filename, metadata=metadata)

    monkeypatch.setattr(checkpoints, "save_file", filling)
    with pytest.raises(DiskFullError, match="step-0000002: it needs at least") as full:
        save_checkpoint(tmp_path, model, optimizer, scheduler, {"step": 2}, keep=2)
    assert full.value.needed >= sum(p.stat().st_size for p in first.iterdir())  # at least the previous one's size
    assert latest_checkpoint(tmp_path) == first
    verify_checkpoint(first)
    assert _leftovers(tmp_path) == []


def test_an_injected_enospc_in_a_file_write_is_reported_with_the_path(tmp_path):
    target = tmp_path / "table.json"
    target.write_text("previous")
    with pytest.raises(DiskFullError, match="table.json"):
        with atomic_file(target, "w") as handle:
            handle.write("partial")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert target.read_text() == "previous"
    assert _leftovers(tmp_path) == []


def test_a_store_saved_onto_a_full_disk_leaves_the_previous_store(small_filesystem):
    from pathlib import Path

    from kgplm import KGStore

    toy = KGStore.from_rdf(Path(__file__).resolve().parents[2] / "graphs" / "toy_medical.ttl", show_progress=False)
    target = toy.save(small_filesystem / "store")
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    free = shutil.disk_usage(small_filesystem).free
    (small_filesystem / "filler").write_bytes(b"\0" * (free - 4096 - sum(map(len, before.values())) // 2))
    with pytest.raises(DiskFullError, match="store"):
        toy.save(target)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert _leftovers(small_filesystem) == []
    assert KGStore.load(target).equals(toy)


# -- metrics.jsonl: an append that meets a full disk ------------------------------------------------------------
class _FillingFile:
    """An unbuffered file whose ``after``-th write stores half its bytes (a short write, as ``write(2)`` makes
    when the disk fills), after which every write fails with ``ENOSPC``."""

    def __init__(self, real, after: int) -> None:
        self.real, self.after, self.writes = real, after, 0

    def write(self, data) -> int:
        self.writes += 1
        if self.writes > self.after:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if self.writes == self.after:
            return self.real.write(bytes(data[: len(data) // 2]))
        return self.real.write(data)

    def __getattr__(self, name):
        return getattr(self.real, name)


def _fill_at(monkeypatch, after: int) -> None:
    import kgplm._io

    def opening(path, mode="r", **options):
        handle = open(path, mode, **options)
        return handle if mode.startswith("r") and "+" not in mode else _FillingFile(handle, after)  # a full disk reads

    monkeypatch.setattr(kgplm._io, "open", opening, raising=False)


def test_a_metrics_record_that_meets_a_full_disk_leaves_the_log_as_it_was(tmp_path, monkeypatch):
    from kgplm.training.trainer import TrainerSettings, train_loop
    from tests.training.helpers import Fit, FitRows, fit_collate

    settings = TrainerSettings(max_steps=6, batch_size=4, learning_rate=0.1, log_every=1, checkpoint_every=2)
    _fill_at(monkeypatch, 3)  # the third record
    with pytest.raises(DiskFullError) as full:
        train_loop(Fit(), FitRows(), fit_collate, output_dir=tmp_path, settings=settings, progress=False)
    path = tmp_path / "metrics.jsonl"
    error = full.value
    assert error.path == str(path) and str(path) in str(error)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert [json.loads(line)["step"] for line in lines] == [1, 2] and all(line.endswith("\n") for line in lines)
    assert error.written == error.needed // 2 > 0 and f"{error.needed:,} bytes" in str(error)

    monkeypatch.undo()  # the disk has room again: the rerun resumes from step 2's checkpoint and completes
    metrics = train_loop(Fit(), FitRows(), fit_collate, output_dir=tmp_path, settings=settings, progress=False)
    assert [record["step"] for record in metrics] == [1, 2, 3, 4, 5, 6]
    third = path.read_bytes().splitlines(keepends=True)[2]
    assert error.needed == len(third)  # the space needed: the record that did not fit, as the rerun wrote it


def test_an_append_onto_a_full_file_system_keeps_the_file(small_filesystem):
    from kgplm._io import AppendFile

    path = small_filesystem / "metrics.jsonl"
    with AppendFile(path) as log:
        log.append('{"step": 1}\n')
    free = shutil.disk_usage(small_filesystem).free
    record = '{"step": 2, "pad": "' + "x" * (free + 65536) + '"}\n'
    with pytest.raises(DiskFullError, match="metrics.jsonl") as full:
        with AppendFile(path) as log:
            log.append(record)
    assert path.read_text() == '{"step": 1}\n'
    assert full.value.needed == len(record) and full.value.written < len(record)
