"""Data the benchmarks share: the CMeKG store (cached) and real text (CMeKG facts as sentences + dialogues)."""

from __future__ import annotations

import csv
import os
from pathlib import Path

SHARED = Path(os.environ.get("KGPLM_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
DIALOGUES = SHARED / "corpus" / "medical_dialogue" / "sample_IM_5000-6000.utf8.csv"


def cmekg_store(work: Path):
    """CMeKG from the shared TSV, compiled once into ``work/cmekg_store``."""
    from kgplm import KGStore

    store_dir = work / "cmekg_store"
    if (store_dir / "manifest.json").is_file():
        return KGStore.load(store_dir)
    store = KGStore.from_cmekg(SHARED / "kg" / "cmekg" / "triples.tsv.gz", show_progress=False)
    store.save(store_dir)
    return store


def dialogues(count: int) -> list[str]:
    """The first ``count`` consultations (question + answer) of the Chinese medical dialogue sample."""
    with open(DIALOGUES, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))[:count]
    return [(row["ask"] + row["answer"]).replace("\n", " ") for row in rows]


def mixed_corpus(path: Path, store, num_facts: int, num_dialogues: int) -> Path:
    """``num_facts`` CMeKG entity descriptions written as sentences, then ``num_dialogues`` consultations."""
    from kgplm.demo import verbalize_triples

    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(verbalize_triples(store, num_facts) + dialogues(num_dialogues)), encoding="utf-8")
    return path


def fact_probe(path: Path, store, num_facts: int, per_relation: int = 10) -> Path:
    """A KG cloze probe over the facts the first ``num_facts`` CMeKG descriptions state (at most
    ``per_relation`` queries per relation, half held out of training), written once to ``path``."""
    import numpy as np

    from kgplm.demo import verbalized_facts
    from kgplm.evaluation.probing import build_probe

    if not path.is_file():
        stated = np.array([t for _, triples in verbalized_facts(store, num_facts) for t in triples], dtype=np.int64)
        build_probe(store, queries_per_relation=per_relation, held_out_fraction=0.5, triples=stated, seed=0).save(path)
    return path
