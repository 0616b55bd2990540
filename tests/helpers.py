"""Helpers several test modules share: a stop signal sent while a finished model is saved, and a model
whose weights are replaced in place."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from safetensors.torch import load_file, save_file

__all__ = ["stop_signal_while_saving", "replace_weights"]


@contextmanager
def stop_signal_while_saving(monkeypatch, module) -> Iterator[list[int]]:
    """Send SIGUSR1 to this process when ``module.atomic_directory`` begins writing (the finished model's
    directory). Yields the list where the signal lands when no kgplm handler holds it (instead of ending
    pytest); the earlier SIGUSR1 handler is restored on exit."""
    delivered: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda number, frame: delivered.append(number))
    saving = module.atomic_directory

    def signalled_while_saving(path):
        os.kill(os.getpid(), signal.SIGUSR1)
        return saving(path)

    monkeypatch.setattr(module, "atomic_directory", signalled_while_saving)
    try:
        yield delivered
    finally:
        signal.signal(signal.SIGUSR1, previous)


def replace_weights(weights: Path) -> bytes:
    """Give the model in ``weights`` (a safetensors file) other weights at the same path — its first
    tensor plus 0.01 — and return the file's earlier bytes, to put them back."""
    original = weights.read_bytes()
    tensors = load_file(str(weights))
    name = sorted(tensors)[0]
    save_file({**tensors, name: tensors[name] + 0.01}, str(weights), metadata={"format": "pt"})
    return original
