"""The pre-training methods, one place each, and their registry.

``kgplm.methods.available()`` lists the method names, ``kgplm.methods.get(name)`` returns a
:class:`MethodSpec` (config and model classes, batch building, logged losses, the KG artefacts it
needs, default masking, how its encoder runs at fine-tuning, its own evaluations).
See :mod:`kgplm.methods.registry` and the README's "Adding a method".
"""

from kgplm.methods.registry import (
    MethodContext,
    MethodEvaluation,
    MethodSpec,
    available,
    get,
    known_artefacts,
    method_table,
    register,
    unregister,
)

# The built-in stages declare the artefact names (entity_frequencies, neighbor_table, kg_embeddings) the
# records below ask for; the built-in methods register themselves on import (order = listing order).
import kgplm.training.stages  # noqa: E402,F401  isort: skip
from kgplm.methods import mlm as _mlm  # noqa: E402,F401  isort: skip
from kgplm.methods import smedbert as _smedbert  # noqa: E402,F401  isort: skip
from kgplm.methods import kebiolm as _kebiolm  # noqa: E402,F401  isort: skip
from kgplm.methods import embert as _embert  # noqa: E402,F401  isort: skip
from kgplm.methods import electra as _electra  # noqa: E402,F401  isort: skip
from kgplm.methods import ehealth as _ehealth  # noqa: E402,F401  isort: skip
from kgplm.methods import epplm as _epplm  # noqa: E402,F401  isort: skip

__all__ = [
    "known_artefacts",
    "method_table",
    "MethodContext",
    "MethodEvaluation",
    "MethodSpec",
    "available",
    "get",
    "register",
    "unregister",
]
