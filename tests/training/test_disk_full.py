"""A full disk while an artefact is written leaves the previous version intact and names the path and the space.

On a real size-limited file system (a tmpfs the test mounts; skipped where it cannot) and with an
injected ``ENOSPC``.
"""

from __future__ import annotations

import errno
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
