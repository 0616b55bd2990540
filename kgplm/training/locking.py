"""One writer per run directory: an advisory ``fcntl`` lock held for the whole ``kgplm.train`` call.

A requeued job whose first copy still runs, or two notebook cells started one after the other,
would otherwise write one ``output_dir`` at once. :class:`RunDirectoryLock` takes an exclusive
``flock`` on ``output_dir/.kgplm.lock`` and writes the holder's host and process id into it; a
second call into the directory fails at once with
:class:`~kgplm.exceptions.RunDirectoryLockedError` naming them.

The operating system releases the lock when its process ends, however it ends. A lock file left
by a process that was killed (``kill -9``, a lost node) therefore does not block the next call: it
takes the lock over and logs a warning naming the process that left it. The lock is advisory: it
binds kgplm calls, not other programs, and on network file systems it is only as reliable as their
``flock`` (NFS v4 and Lustre with ``flock`` mounts support it).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
from pathlib import Path

from kgplm.exceptions import RunDirectoryLockedError

__all__ = ["RunDirectoryLock", "LOCK_FILE_NAME"]

logger = logging.getLogger(__name__)

LOCK_FILE_NAME = ".kgplm.lock"


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


class RunDirectoryLock:
    """An exclusive advisory lock on a run directory (a context manager; :meth:`acquire`/:meth:`release`).

    The directory is created when missing, and removed again on release when the call left it empty.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.lock_path = self.path / LOCK_FILE_NAME
        self._descriptor: int | None = None
        self._created = False

    @property
    def held(self) -> bool:
        return self._descriptor is not None

    def _read_holder(self, descriptor: int) -> dict:
        try:
            text = os.pread(descriptor, 4096, 0).decode("utf-8", errors="replace")
            holder = json.loads(text) if text.strip() else {}
        except (OSError, ValueError):
            return {}
        return holder if isinstance(holder, dict) else {}

    def acquire(self) -> "RunDirectoryLock":
        if self.held:
            return self
        self._created = not self.path.exists()
        self.path.mkdir(parents=True, exist_ok=True)
        while True:
            descriptor = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                holder = self._read_holder(descriptor)
                os.close(descriptor)
                if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                raise RunDirectoryLockedError(
                    self.path, str(holder.get("host", "unknown")), holder.get("pid")
                ) from None
            try:  # the holder may have removed the file between our open and flock: lock the file now there
                if os.fstat(descriptor).st_ino == os.stat(self.lock_path).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(descriptor)
        previous = self._read_holder(descriptor)
        host, pid = socket.gethostname(), os.getpid()
        if previous.get("pid") is not None and (previous.get("host"), previous.get("pid")) != (host, pid):
            if previous.get("host") == host:
                state = (
                    "which is no longer running"
                    if not _process_exists(int(previous["pid"]))
                    else "which no longer holds it"
                )
            else:
                state = "which no longer holds it"
            logger.warning(
                "%s: taking over the lock left by process %s on host %s, %s (it ended without "
                "releasing it, e.g. killed)",
                self.path,
                previous["pid"],
                previous.get("host"),
                state,
            )
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, json.dumps({"host": host, "pid": pid}).encode("utf-8"), 0)
        self._descriptor = descriptor
        return self

    def release(self) -> None:
        if self._descriptor is None:
            return
        descriptor, self._descriptor = self._descriptor, None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.lock_path)  # while still holding it; a waiting opener re-checks the inode
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        os.close(descriptor)
        if self._created:
            with contextlib.suppress(OSError):
                self.path.rmdir()  # only when empty: a call that failed before writing leaves nothing

    def __enter__(self) -> "RunDirectoryLock":
        return self.acquire()

    def __exit__(self, *exc_info) -> None:
        self.release()
