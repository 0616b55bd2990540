"""Data parallelism on ``torch.distributed``: one process per device, launched by ``torchrun``.

``torchrun --nproc_per_node N -m kgplm train ...`` (or ``kgplm finetune``, or a script calling
:func:`kgplm.train`) starts N processes with ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT`` set; :func:`initialize` turns that into a process group
(``nccl`` for CUDA devices, ``gloo`` on CPU) and a :class:`DistributedContext`. A process group
the caller initialised already is used as it is. Without ``torchrun`` everything runs in one
process and no process group is made.

Why plain ``torch.distributed`` and not Hugging Face Accelerate: the loop already owns exact
accumulation, per-example seeds and checkpoints; what data parallelism adds is the process group,
``DistributedDataParallel`` and four collectives (:meth:`DistributedContext.gather`,
``barrier``, the preparation broadcast, DDP's gradient all-reduce), fewer lines than adapting the
loop to Accelerate's ``prepare``/``accumulate`` abstractions (whose loss averaging is per process
and would still need the target-count weighting), and no new dependency.

Preparation (vocabulary, KG artefacts, linked corpus) runs on rank 0 while the others wait in
:meth:`DistributedContext.main_first`; they then load what rank 0 cached. The wait uses its own
gloo group with a long timeout (:data:`PREPARATION_TIMEOUT`), so building artefacts of a large
graph does not trip the training collectives' timeout; if rank 0 fails, the others raise instead
of waiting. All processes must see the run directory (a shared file system on several machines).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from kgplm.exceptions import ConfigurationError, KgplmError
from kgplm.training.launch import launched_rank

__all__ = ["DistributedContext", "auto_device", "initialize", "current", "launched_rank", "PREPARATION_TIMEOUT"]

logger = logging.getLogger(__name__)

#: How long the other ranks wait for rank 0 to build a run's artefacts.
PREPARATION_TIMEOUT = datetime.timedelta(hours=24)


@dataclass
class DistributedContext:
    """Where this process stands: its rank among ``world_size`` processes and its device.

    ``control`` is a gloo group for the loop's small object exchanges (target counts, logged
    values), ``preparation`` a gloo group with :data:`PREPARATION_TIMEOUT` for waiting on rank 0.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    owns_group: bool = False
    control: Any = None
    preparation: Any = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def describe(self) -> dict[str, Any]:
        """What ``run_config.json`` records under ``stages.distributed``."""
        return {"world_size": self.world_size, "backend": self.backend or "none"}

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier(group=self.control)

    def gather(self, value) -> list:
        """``value`` of every rank, in rank order (a JSON-like object: dicts of numbers)."""
        if not self.enabled:
            return [value]
        gathered: list = [None] * self.world_size
        dist.all_gather_object(gathered, value, group=self.control)
        return gathered

    def broadcast(self, value):
        """Rank 0's ``value`` on every rank (a JSON-like object)."""
        return self.gather(value if self.is_main else None)[0]

    @contextlib.contextmanager
    def main_first(self, what: str) -> Iterator[None]:
        """Rank 0 runs the block first; the others wait, then run it (loading what rank 0 cached).

        A failure on rank 0 is re-raised there and reported on the other ranks instead of
        leaving them waiting.
        """
        if not self.enabled:
            yield
            return
        if not self.is_main:
            message = [None]
            dist.broadcast_object_list(message, src=0, group=self.preparation)
            if message[0] is not None:
                raise KgplmError(f"rank 0 failed while {what}: {message[0]}")
            yield
            return
        try:
            yield
        except BaseException as error:
            dist.broadcast_object_list([f"{type(error).__name__}: {error}"], src=0, group=self.preparation)
            raise
        dist.broadcast_object_list([None], src=0, group=self.preparation)

    def close(self) -> None:
        """Destroy the process group if :func:`initialize` created it."""
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()
            self.owns_group = False


def auto_device(device: str | torch.device = "auto") -> str:
    """``"auto"``: ``"cuda"`` when torch sees a GPU, else ``"cpu"``; any other value as given (as a string).

    This is the one default that reads the machine. kgplm records the resolved value (``run_config.json``,
    ``finetune_config.json``), so a replay runs on the device the run used; on a machine without a GPU
    ``"auto"`` is ``"cpu"`` and a run's artefacts are exactly those of ``device="cpu"``.
    """
    if str(device) != "auto":
        return str(device)
    resolved = "cuda" if torch.cuda.is_available() else "cpu"
    logger.info("device='auto': using %s%s", resolved, "" if resolved == "cuda" else " (torch sees no CUDA GPU)")
    return resolved


def _resolve_device(device: str | torch.device, local_rank: int, world_size: int) -> torch.device:
    device = torch.device(device)
    if device.type != "cuda" or world_size == 1:
        return device
    if device.index is not None and device.index != local_rank:
        raise ConfigurationError(
            f"under torchrun each process uses the GPU of its LOCAL_RANK ({local_rank}); "
            f"pass device='cuda', not {str(device)!r}"
        )
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    return device


def current(device: str | torch.device = "cpu") -> DistributedContext:
    """The context of an already initialised process group (single-process when there is none)."""
    if not (dist.is_available() and dist.is_initialized()):
        return DistributedContext(device=torch.device(device))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    backend = str(dist.get_backend())
    control = None if backend == "gloo" else dist.new_group(backend="gloo")
    preparation = dist.new_group(backend="gloo", timeout=PREPARATION_TIMEOUT)
    return DistributedContext(
        rank=rank,
        world_size=world_size,
        local_rank=local_rank,
        backend=backend,
        device=_resolve_device(device, local_rank, world_size),
        control=control,
        preparation=preparation,
    )


def initialize(device: str | torch.device = "cpu") -> DistributedContext:
    """Join the ``torchrun`` process group (creating it: ``nccl`` on CUDA, ``gloo`` on CPU) or run alone.

    ``device="cuda"`` means the GPU of this process's ``LOCAL_RANK``. Call
    :meth:`DistributedContext.close` when done (it only destroys a group it created).
    """
    if dist.is_available() and dist.is_initialized():
        return current(device)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return DistributedContext(device=torch.device(device))
    if not dist.is_available():
        raise ConfigurationError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    resolved = _resolve_device(device, local_rank, world_size)
    backend = "nccl" if resolved.type == "cuda" else "gloo"
    dist.init_process_group(backend=backend, device_id=resolved if backend == "nccl" else None)
    context = current(resolved)
    context.owns_group = True
    logger.info("rank %d of %d on %s (%s)", context.rank, world_size, resolved, backend)
    return context
