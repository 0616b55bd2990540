"""The demo behind ``make demo``: the main job on the embedded default graph (CMeKG from ``pycmekg``).

This module is a command-line program: it writes its report to standard output.
"""

from __future__ import annotations

import time
from pathlib import Path

DEMO_ENTITIES = ("糖尿病", "高血压", "阿司匹林", "感冒")


def run_demo(work_dir: str | Path = "artifacts/demo") -> int:
    import pandas as pd

    from kgplm.kg.store import KGStore

    work_dir = Path(work_dir)
    started = time.perf_counter()
    print("== kgplm demo: CMeKG from the pycmekg package ==")
    store = KGStore.from_cmekg()
    print(f"loaded in {time.perf_counter() - started:.1f} s")
    print(store.summary())
    store_dir = store.save(work_dir / "cmekg_store")
    reloaded = KGStore.load(store_dir)
    print(f"saved the compiled store to {store_dir} and loaded it back: {reloaded!r}")
    with pd.option_context("display.max_rows", 30, "display.width", 160):
        for name in DEMO_ENTITIES:
            entity = reloaded.entity_id(name)
            frame = reloaded.neighbors(entity)
            print(f"\n-- {name} (id {entity}, type {reloaded.entity_type(entity)}, {len(frame)} neighbours; "
                  f"aliases: {', '.join(reloaded.aliases(entity)[:6]) or '-'}) --")
            print(frame.head(12).to_string(index=False))
    print(f"\ndemo finished in {time.perf_counter() - started:.1f} s")
    return 0
