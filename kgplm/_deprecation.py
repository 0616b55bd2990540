"""Deprecated spellings: an old keyword argument or command-line option keeps working for one release.

When a name changes, the old one is accepted for one release: it is moved to the new name and a
:class:`FutureWarning` (shown to users by default, unlike :class:`DeprecationWarning`) says which
name to use and when the old one goes. Giving both names is an error, since kgplm cannot tell which
one was meant.

Two forms, one rule:

* :func:`renamed_keyword` rewrites a ``kwargs`` dictionary in place — for a function that already
  takes ``**kwargs``, or for command-line options collected into a dictionary;
* :func:`renamed_keywords` decorates a function whose signature has the new names only, so that
  ``inspect.signature``, the documentation and type checkers see the new names::

      @renamed_keywords({"lr": "learning_rate"})
      def train_kg_embeddings(store, *, learning_rate=0.01, ...): ...

      train_kg_embeddings(store, lr=0.05)  # FutureWarning; runs with learning_rate=0.05
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, ParamSpec, TypeVar

from kgplm.exceptions import ConfigurationError

__all__ = ["DEFAULT_SINCE", "DEFAULT_REMOVAL", "renamed_keyword", "renamed_keywords"]

#: the release that first warns about a spelling renamed now
DEFAULT_SINCE = "0.2"
#: the release that stops accepting it
DEFAULT_REMOVAL = "0.3"

P = ParamSpec("P")
R = TypeVar("R")


def renamed_keyword(
    kwargs: MutableMapping[str, Any],
    old: str,
    new: str,
    *,
    since: str = DEFAULT_SINCE,
    removal: str = DEFAULT_REMOVAL,
    owner: str | None = None,
    kind: str = "keyword argument",
    stacklevel: int = 2,
) -> MutableMapping[str, Any]:
    """Move ``kwargs[old]`` to ``kwargs[new]`` with a :class:`FutureWarning`; return ``kwargs``.

    Nothing happens when ``old`` is absent. When both ``old`` and ``new`` are present a
    :class:`~kgplm.exceptions.ConfigurationError` names both. ``owner`` (a function or command
    name) and ``kind`` (``"keyword argument"``, ``"option"`` …) go into the messages.
    ``stacklevel`` counts as for :func:`warnings.warn` called by the caller of this function: the
    default 2 points the warning at the line that called the caller.
    """
    if old not in kwargs:
        return kwargs
    prefix = f"{owner}: " if owner else ""
    if new in kwargs:
        raise ConfigurationError(
            f"{prefix}got both the {kind} {old!r} (deprecated) and {new!r}, which name the same setting; "
            f"pass only {new!r}"
        )
    warnings.warn(
        f"{prefix}the {kind} {old!r} is deprecated since kgplm {since} and will be removed in kgplm {removal}; "
        f"use {new!r}",
        FutureWarning,
        stacklevel=stacklevel + 1,
    )
    kwargs[new] = kwargs.pop(old)
    return kwargs


def renamed_keywords(
    renames: Mapping[str, str], *, since: str = DEFAULT_SINCE, removal: str = DEFAULT_REMOVAL
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function so that each ``old`` keyword of ``renames`` (``{old: new}``) still works,
    through :func:`renamed_keyword`; the warning points at the caller of the decorated function.

    The wrapper keeps the function's name, docstring and signature (``__wrapped__``), so
    ``inspect.signature`` shows the new names only.
    """
    renames = dict(renames)

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        owner = function.__qualname__

        @functools.wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            for old, new in renames.items():
                renamed_keyword(kwargs, old, new, since=since, removal=removal, owner=owner, stacklevel=2)
            return function(*args, **kwargs)

        return wrapper

    return decorate
