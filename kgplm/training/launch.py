"""What ``torchrun`` told this process, read from the environment without importing torch (the command
line reads it before any model code loads)."""

from __future__ import annotations

import os

__all__ = ["launched_rank"]


def launched_rank() -> int:
    """This process's global rank as ``torchrun`` set it (0 without ``torchrun``)."""
    return int(os.environ.get("RANK", "0"))
