"""kgplm: knowledge-enhanced pre-trained language models for medicine."""

from kgplm.exceptions import KgplmError
from kgplm.kg.store import KGStore

__version__ = "0.1.0"
__all__ = ["KGStore", "KgplmError", "__version__"]
