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
            f"{query!r} names {len(self.entities)} entities: " + ", ".join(self.entities)
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
