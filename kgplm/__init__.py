"""kgplm: knowledge-enhanced pre-trained language models for medicine.

The public names are imported on first use (PEP 562 ``__getattr__``), so ``import kgplm`` and
``kgplm --help`` do not load torch, transformers or pandas.

``import kgplm`` is enough for the Hugging Face Auto classes to open kgplm checkpoints: the model
types are registered (by importing :mod:`kgplm.methods`) as soon as ``transformers`` is imported —
at once when it already is, otherwise right after the program's first ``import transformers``, or,
when a kgplm module itself imports it, right after that kgplm module has finished loading.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.metadata
import sys

from kgplm.exceptions import KgplmError

try:
    __version__ = importlib.metadata.version("kgplm")
except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

#: public name -> the module that defines it
_LAZY = {
    "train": "kgplm.api",
    "train_from_config": "kgplm.api",
    "TrainingResult": "kgplm.api",
    "finetune": "kgplm.api",
    "evaluate": "kgplm.api",
    "predict": "kgplm.api",
    "FineTuningResult": "kgplm.api",
    "KGStore": "kgplm.kg.store",
}
_SUBMODULES = ("methods", "kg", "text", "models", "training", "evaluation", "api", "cli")

__all__ = [
    "KGStore",
    "KgplmError",
    "train",
    "train_from_config",
    "TrainingResult",
    "finetune",
    "evaluate",
    "predict",
    "FineTuningResult",
    "methods",
    "__version__",
]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"kgplm.{name}")
    else:
        raise AttributeError(f"module 'kgplm' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _kgplm_module_is_loading(except_name: str | None = None) -> bool:
    """Whether a kgplm module (other than ``except_name``) is part way through its import."""
    return any(
        name.startswith("kgplm.")
        and name != except_name
        and getattr(getattr(module, "__spec__", None), "_initializing", False)
        for name, module in list(sys.modules.items())
    )


class _AutoClassRegistration(importlib.abc.MetaPathFinder):
    """Registers kgplm's model types with the Auto classes once ``transformers`` has been imported.

    It watches the import of ``transformers`` and of kgplm's own modules: after ``transformers`` has
    loaded, and no kgplm module is part way through its import, it imports :mod:`kgplm.methods` (whose
    methods register their config and model classes) and removes itself from ``sys.meta_path``.
    """

    def __init__(self) -> None:
        self.transformers_loaded = False
        self.busy = False

    def find_spec(self, fullname, path, target=None):
        if self.busy or not (fullname == "transformers" or fullname.startswith("kgplm.")):
            return None
        spec = next(
            (
                found
                for finder in sys.meta_path
                if finder is not self and hasattr(finder, "find_spec")
                for found in [finder.find_spec(fullname, path, target)]
                if found is not None
            ),
            None,
        )
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _RegisteringLoader(spec.loader, self)
        return spec

    def after_load(self, fullname: str) -> None:
        if fullname == "transformers":
            self.transformers_loaded = True
        if self.transformers_loaded and not self.busy and not _kgplm_module_is_loading(except_name=fullname):
            self.register()

    def register(self) -> None:
        self.busy = True
        try:
            importlib.import_module("kgplm.methods")
        finally:
            self.busy = False
            if self in sys.meta_path:
                sys.meta_path.remove(self)


class _RegisteringLoader(importlib.abc.Loader):
    """Wraps a module's loader so that :class:`_AutoClassRegistration` hears when it has loaded."""

    def __init__(self, loader, registration: _AutoClassRegistration) -> None:
        self.loader = loader
        self.registration = registration

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        self.registration.after_load(module.__name__)

    def __getattr__(self, name):  # get_resource_reader, is_package, get_source … of the wrapped loader
        return getattr(self.loader, name)


def _register_auto_classes_when_transformers_loads() -> None:
    registration = _AutoClassRegistration()
    if "transformers" in sys.modules:
        registration.transformers_loaded = True
        if not _kgplm_module_is_loading():
            registration.register()
            return
    sys.meta_path.insert(0, registration)


_register_auto_classes_when_transformers_loads()
