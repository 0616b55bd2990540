"""Every name a kgplm module lists in ``__all__`` exists, so ``from kgplm.x import *`` works."""

from __future__ import annotations

import importlib
import pkgutil

import kgplm


def test_every_name_in_every_all_exists() -> None:
    missing = []
    for info in pkgutil.walk_packages(kgplm.__path__, prefix="kgplm."):
        if info.name in ("kgplm.__main__",):
            continue
        module = importlib.import_module(info.name)
        missing += [f"{info.name}.{name}" for name in getattr(module, "__all__", ()) if not hasattr(module, name)]
    assert not missing, missing
