"""Stop signals: a preempted run finishes its step, writes a checkpoint and exits with a distinct status.

A cluster scheduler preempts a job with a signal some seconds before it kills it (SLURM sends
``SIGTERM``, or the signal ``sbatch --signal`` names, e.g. ``SIGUSR1``). While the pre-training
loop runs, :class:`StopRequest` turns each of the run's stop signals (default
:data:`DEFAULT_STOP_SIGNALS`) into a request: the loop finishes the optimiser step it is in,
writes a checkpoint, logs where it is and raises :class:`~kgplm.exceptions.PreemptedError`;
``kgplm train`` then exits with :data:`PREEMPTED_EXIT_STATUS`. Rerunning the same call resumes
from that checkpoint exactly. Under data parallelism the ranks exchange their requests after every
step, so all of them stop after the same step even when the signal reached only some.

Further stop signals while one is pending change nothing (under ``torchrun`` on a cluster a worker
may get the scheduler's signal and the one ``torchrun`` forwards); ``SIGKILL`` still ends a process
at once.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterable, Sequence

from kgplm.exceptions import ConfigurationError

__all__ = [
    "StopRequest",
    "DEFAULT_STOP_SIGNALS",
    "PREEMPTED_EXIT_STATUS",
    "INTERRUPTED_EXIT_STATUS",
    "check_stop_signals",
]

logger = logging.getLogger(__name__)

#: The signals a run stops on by default: SLURM's preemption signal and the usual ``--signal`` choice.
DEFAULT_STOP_SIGNALS: tuple[str, ...] = ("SIGTERM", "SIGUSR1")

#: ``kgplm train``'s exit status after a stop signal (``EX_TEMPFAIL`` of sysexits.h: "try again later").
PREEMPTED_EXIT_STATUS = 75

#: ``kgplm``'s exit status after Ctrl-C (128 + SIGINT, what shells report for an interrupted command).
INTERRUPTED_EXIT_STATUS = 130

_UNCATCHABLE = {"SIGKILL", "SIGSTOP"}


def check_stop_signals(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` as a tuple of signal names (``"SIGTERM"``, ``"USR1"`` …), checked against this platform's."""
    if isinstance(names, str):
        names = [names]
    checked = []
    for name in names:
        text = str(name).upper()
        text = text if text.startswith("SIG") else f"SIG{text}"
        if text in _UNCATCHABLE or not isinstance(getattr(signal, text, None), signal.Signals):
            catchable = sorted(
                s.name
                for s in signal.Signals
                if s.name not in _UNCATCHABLE
                and not s.name.startswith("SIG_")
                and s.name not in ("SIGRTMIN", "SIGRTMAX")
            )
            raise ConfigurationError(
                f"stop_signals: {name!r} is not a signal a process can catch here "
                f"(expected names such as {', '.join(catchable[:8])} …)"
            )
        checked.append(text)
    return tuple(dict.fromkeys(checked))


class StopRequest:
    """While entered, the named signals set :attr:`signal_name` instead of ending the process.

    Handlers can only be installed from the main thread; elsewhere (a loop run from a worker
    thread) the request is inert and the signals keep their handling.
    """

    def __init__(self, names: Sequence[str] = DEFAULT_STOP_SIGNALS) -> None:
        self.names = check_stop_signals(names)
        self.signal_name: str | None = None
        self._previous: dict[signal.Signals, object] = {}

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def _handle(self, number: int, frame) -> None:
        if self.signal_name is None:
            self.signal_name = signal.Signals(number).name

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is not threading.main_thread():
            logger.debug("not in the main thread: stop signals keep their handling")
            return self
        for name in self.names:
            number = signal.Signals[name]
            self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        for number, previous in self._previous.items():
            signal.signal(number, previous)
        self._previous.clear()
