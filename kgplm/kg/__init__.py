"""Knowledge graphs: the :class:`KGStore`, its importers (registered by format) and exporters.

The names are imported on first use, so that ``kgplm.kg.importers`` (which the command line's
``--help`` reads) loads without pandas or rdflib.
"""

from __future__ import annotations

import importlib

__all__ = ["KGStore", "GraphCollector", "open_store"]

_LAZY = {"KGStore": "kgplm.kg.store", "GraphCollector": "kgplm.kg.collector", "open_store": "kgplm.kg.store"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'kgplm.kg' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
