"""Knowledge graphs: the :class:`KGStore`, its importers (registered by format) and exporters."""

from kgplm.kg.collector import GraphCollector
from kgplm.kg.importers import open_store
from kgplm.kg.store import KGStore

__all__ = ["KGStore", "GraphCollector", "open_store"]
