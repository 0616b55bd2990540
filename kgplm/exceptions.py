"""Errors raised by kgplm.

Every error a user can cause with bad input is a :class:`KgplmError` subclass whose
message says what was wrong, where it was (file and line for data files) and what was
expected. Catch ``KgplmError`` to handle all of them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from os import PathLike

__all__ = [
    "KgplmError",
    "DataFormatError",
    "MissingFileError",
    "EmptyGraphError",
    "EndpointError",
    "UnknownEntityError",
    "AmbiguousEntityError",
    "EncodingError",
    "ConfigurationError",
    "ArtifactError",
    "PreemptedError",
    "RunDirectoryLockedError",
    "DiskFullError",
    "format_location",
]


def format_location(path: str | PathLike | None, line: int | None = None, column: int | None = None) -> str:
    """``path:line:column`` with the parts that are known."""
    if path is None:
        return "<input>"
    location = str(path)
    if line is not None:
        location += f":{line}"
        if column is not None:
            location += f":{column}"
    return location


class KgplmError(Exception):
    """Base class of every error kgplm raises for bad input or bad configuration."""


class ConfigurationError(KgplmError, ValueError):
    """An argument or configuration value is outside what the function accepts."""


class MissingFileError(KgplmError, FileNotFoundError):
    """A file or directory the caller named does not exist."""

    def __init__(self, path: str | PathLike, what: str = "file") -> None:
        self.path = str(path)
        super().__init__(f"{what} not found: {self.path}")


class DataFormatError(KgplmError, ValueError):
    """A data file is malformed; the message names the file and line."""

    def __init__(
        self,
        message: str,
        *,
        path: str | PathLike | None = None,
        line: int | None = None,
        column: int | None = None,
        expected: str | None = None,
    ) -> None:
        self.path = None if path is None else str(path)
        self.line = line
        self.column = column
        text = f"{format_location(path, line, column)}: {message}"
        if expected:
            text += f" (expected {expected})"
        super().__init__(text)


class EncodingError(DataFormatError):
    """A text file is not valid UTF-8."""


class EmptyGraphError(KgplmError, ValueError):
    """A knowledge-graph source holds no statement, or a stage that walks links got a store without triples."""


class EndpointError(KgplmError, ConnectionError):
    """A remote service (a SPARQL endpoint) could not be reached or refused the request."""


class ArtifactError(KgplmError, ValueError):
    """A saved artefact (store directory, table, embeddings) is missing parts or does not match."""


class PreemptedError(KgplmError):
    """A run stopped at a step boundary because the process received a stop signal (``SIGTERM``,
    ``SIGUSR1``: a scheduler preempting the job); ``checkpoint`` is where rerunning the same call resumes.

    ``kgplm train`` exits with :data:`kgplm.training.interrupts.PREEMPTED_EXIT_STATUS` on it."""

    def __init__(self, signal_name: str, step: int, checkpoint: str | PathLike | None) -> None:
        self.signal_name = signal_name
        self.step = step
        self.checkpoint = None if checkpoint is None else str(checkpoint)
        where = f"the checkpoint is {self.checkpoint}" if checkpoint is not None else "no checkpoint was written"
        super().__init__(f"stopped after step {step} on {signal_name}; {where}; run the same call again to resume")


class RunDirectoryLockedError(KgplmError):
    """Another process (``host``, ``pid``) is writing the run directory this call was given."""

    def __init__(self, path: str | PathLike, host: str, pid: int | None) -> None:
        self.path, self.host, self.pid = str(path), host, pid
        holder = f"process {pid} on host {host}" if pid is not None else f"a process on host {host}"
        super().__init__(
            f"{self.path} is in use by {holder} (lock file {self.path}/.kgplm.lock); wait for it to "
            f"end or choose another output directory"
        )


class DiskFullError(KgplmError, OSError):
    """The file system filled while an artefact was written; the previous artefact (if any) is intact."""

    def __init__(self, path: str | PathLike, needed: int, written: int, free: int | None) -> None:
        self.path, self.needed, self.written, self.free = str(path), needed, written, free
        free_text = "" if free is None else f"; {free:,} bytes are free now"
        super().__init__(
            f"no space left on the device while writing {self.path}: it needs at least {needed:,} "
            f"bytes ({written:,} were written when the disk filled){free_text}; the previous version, "
            f"if any, is left as it was"
        )


class UnknownEntityError(KgplmError, KeyError):
    """A name, alias or IRI that matches no entity; the message lists the closest names."""

    def __init__(self, query: str, candidates: Iterable[str] = ()) -> None:
        self.query = query
        self.closest = list(candidates)
        message = f"no entity is named {query!r}"
        if self.closest:
            message += "; closest names: " + ", ".join(repr(c) for c in self.closest)
        super().__init__(message)

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])

    @classmethod
    def with_suggestions(cls, query: str, names: Iterable[str], limit: int = 5) -> "UnknownEntityError":
        """Build the error with the ``limit`` names closest to ``query`` (difflib ratio)."""
        return cls(query, _closest_names(query, names, limit))


class AmbiguousEntityError(KgplmError, KeyError):
    """A name or alias that belongs to several entities."""

    def __init__(self, query: str, entity_descriptions: Iterable[str]) -> None:
        self.query = query
        self.entities = list(entity_descriptions)
        super().__init__(
            f"{query!r} names {len(self.entities)} entities: "
            + ", ".join(self.entities)
            + "; pass an IRI or use entity_ids() to get all of them"
        )

    def __str__(self) -> str:
        return str(self.args[0])


def _closest_names(query: str, names: Iterable[str], limit: int) -> list[str]:
    # difflib over every name is too slow for 100k+ names; pre-filter by shared characters.
    query_chars = set(query)
    shortlist = [n for n in names if query_chars & set(n)] if query_chars else []
    if len(shortlist) > 20000:
        shortlist = sorted(shortlist, key=lambda n: -len(query_chars & set(n)))[:20000]
    return difflib.get_close_matches(query, shortlist, n=limit, cutoff=0.3)
