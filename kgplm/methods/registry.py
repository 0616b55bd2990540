"""Registering a method: :func:`register` enters a :class:`~kgplm.registry.MethodSpec` into the method
registry (:mod:`kgplm.registry`, where every lookup goes) and makes the Hugging Face Auto classes open
the method's models. A method's own module calls it when imported; a third-party package calls it
from the module its ``kgplm.methods`` entry point names."""

from __future__ import annotations

from kgplm import registry
from kgplm.models.auto import register_auto_classes
from kgplm.models.configuration import KgplmConfig
from kgplm.registry import (
    MethodContext,
    MethodEvaluation,
    MethodSpec,
    available,
    get,
    known_artefacts,
    method_table,
    unregister,
)

__all__ = [
    "known_artefacts",
    "MethodContext",
    "MethodEvaluation",
    "MethodSpec",
    "available",
    "get",
    "register",
    "unregister",
    "method_table",
]


def register(spec: MethodSpec, *, replace: bool = False) -> MethodSpec:
    """Add ``spec`` under ``spec.name`` (a second registration of a name fails unless ``replace``), and
    register its config class with the Auto classes when it is a :class:`~kgplm.models.KgplmConfig`."""
    registry.register(spec, replace=replace)
    if isinstance(spec.config_class, type) and issubclass(spec.config_class, KgplmConfig):
        register_auto_classes(spec.config_class)  # AutoModel & co. open this method's models
    return spec
