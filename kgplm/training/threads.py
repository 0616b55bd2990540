"""Thread pools sized together: one ``num_threads`` for torch, numba and the DataLoader workers.

torch (intra-op OpenMP pool) and numba (the PEPR and KG-embedding kernels) each start as many
threads as the machine has cores, and both pools busy-wait between parallel regions. On a machine
shared with other jobs — or with a process pinned to a few cores by a cluster scheduler — the two
pools then fight each other and their neighbours for the same cores, and a run can take many times
longer than on an idle machine.

:func:`thread_limits` sets both pools to ``num_threads`` for the duration of a call (default
:func:`available_cores`: the cores this process may run on, ``os.sched_getaffinity``, which a
SLURM ``--cpus-per-task`` or ``taskset`` restricts, divided among the processes ``torchrun`` starts
on the machine; ``OMP_NUM_THREADS``, when set, wins), and DataLoader worker processes run their
collation on one thread each (:func:`limit_worker_threads`). The ``kgplm`` command also sets
``OMP_WAIT_POLICY=PASSIVE`` (unless set) before torch or numba load, so idle OpenMP threads sleep
instead of spinning; in Python, export it before starting the interpreter.

Floating-point sums split over threads depend on how many there are, so artefacts are
byte-identical only at the same thread count; ``run_config.json`` records the counts used
(``stages.threads``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from kgplm.exceptions import ConfigurationError

__all__ = [
    "available_cores",
    "default_num_threads",
    "check_num_threads",
    "thread_limits",
    "limit_worker_threads",
    "describe_threads",
]

logger = logging.getLogger(__name__)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity; ``os.cpu_count()`` where that is unknown)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def default_num_threads() -> int:
    """``OMP_NUM_THREADS`` when it is set; else :func:`available_cores` shared among the processes ``torchrun``
    starts on the node (``LOCAL_WORLD_SIZE``)."""
    configured = os.environ.get("OMP_NUM_THREADS", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    local_processes = os.environ.get("LOCAL_WORLD_SIZE", "1")
    return max(1, available_cores() // (int(local_processes) if local_processes.isdigit() else 1))


def check_num_threads(num_threads: int | None) -> int:
    """``num_threads`` checked, or :func:`default_num_threads` for ``None``."""
    if num_threads is None:
        return default_num_threads()
    if not isinstance(num_threads, int) or isinstance(num_threads, bool) or num_threads < 1:
        raise ConfigurationError(
            f"num_threads must be a positive integer or None (the cores this process may use, "
            f"{available_cores()} here), got {num_threads!r}"
        )
    return num_threads


def _numba():
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency
        return None
    return numba


@contextlib.contextmanager
def thread_limits(num_threads: int) -> Iterator[None]:
    """torch's and numba's pools at ``num_threads`` threads (numba's at most its start-up maximum,
    ``NUMBA_NUM_THREADS``) while the block runs; their previous sizes afterwards."""
    import torch

    numba = _numba()
    previous_numba = numba.get_num_threads() if numba is not None else None  # starts numba's pool first: that
    previous_torch = torch.get_num_threads()  # can change the OpenMP count torch reports
    # numba's OpenMP layer and torch may share one OpenMP runtime, whose thread count each of them sets: numba
    # first, torch last, on the way in and out
    if numba is not None:
        numba.set_num_threads(min(num_threads, numba.config.NUMBA_NUM_THREADS))
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        if numba is not None:
            numba.set_num_threads(previous_numba)
        torch.set_num_threads(previous_torch)


def limit_worker_threads(worker_id: int) -> None:
    """A DataLoader ``worker_init_fn``: a collating worker uses one torch thread (collation is per-example
    Python and numpy work; the main process's pool keeps the cores for the model)."""
    import torch

    torch.set_num_threads(1)


def describe_threads(num_workers: int = 0) -> dict[str, Any]:
    """What ``run_config.json`` records under ``stages.threads``: the pools' sizes now."""
    import torch

    numba = _numba()
    return {
        "torch": torch.get_num_threads(),
        "numba": numba.get_num_threads() if numba is not None else None,
        "dataloader_workers": num_workers,
        "threads_per_dataloader_worker": 1 if num_workers else None,
        "available_cores": available_cores(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
    }
