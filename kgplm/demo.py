"""The demo behind ``make demo``: the main job on the embedded default graph (CMeKG from ``pycmekg``).

Loads CMeKG, saves and reloads the compiled store, computes the top-10 PEPR neighbour table of
every entity (fast mode) and prints raw and PEPR-ranked neighbours of a few entities, then trains
TransE embeddings (5% of the links held out) and reports filtered link prediction on them, and
finally pre-trains a small SMedBERT on CMeKG's own facts written as sentences (the package holds
no long free text) with those artefacts and prints the start and end of the loss curve.
This module is a command-line program: it writes its report to standard output.
"""

from __future__ import annotations

import time
from pathlib import Path

from kgplm._io import atomic_file

DEMO_ENTITIES = ("糖尿病", "高血压", "阿司匹林", "感冒")


#: measured on a fresh clone with 2 busy cores; printed when the demo starts
EXPECTED_DURATION = "about 15 minutes on 2 busy CPU cores"


def run_demo(work_dir: str | Path = "artifacts/demo") -> int:
    import pandas as pd

    from kgplm.kg.pepr import NeighborTable, top_k_neighbors
    from kgplm.kg.store import KGStore

    work_dir = Path(work_dir)
    started = time.perf_counter()
    print("== kgplm demo: CMeKG from the pycmekg package ==")
    print(
        f"expected duration: {EXPECTED_DURATION} (loading CMeKG, PEPR of every entity, TransE, "
        f"300 SMedBERT steps); a rerun reuses the saved artefacts"
    )
    store = KGStore.from_cmekg()
    print(f"loaded in {time.perf_counter() - started:.1f} s")
    print(store.summary())
    store_dir = store.save(work_dir / "cmekg_store")
    store = KGStore.load(store_dir)
    print(f"saved the compiled store to {store_dir} and loaded it back: {store!r}")

    table_path = work_dir / "pepr_top10.npz"
    step = time.perf_counter()
    if table_path.is_file():
        table = NeighborTable.load(table_path)
        print(f"\nreusing the PEPR table {table_path} (delete it to recompute)")
    else:
        print("\n== PEPR: top-10 neighbours of every entity (fast mode, paper jump, alpha 0.15) ==")
        table = top_k_neighbors(store, k=10, mode="fast")
        table.save(table_path)
    filled = (table.neighbors >= 0).sum(axis=1)
    print(
        f"{len(table):,} entities in {time.perf_counter() - step:.1f} s; mean {filled.mean():.2f} neighbours "
        f"per entity, {int((filled == 10).sum()):,} with a full top-10; saved to {table_path}"
    )

    with pd.option_context("display.max_rows", 30, "display.width", 160):
        for name in DEMO_ENTITIES:
            entity = store.entity_id(name)
            raw = store.neighbors(entity)
            print(
                f"\n-- {name} (id {entity}, type {store.entity_type(entity)}, {len(raw)} neighbours; "
                f"aliases: {', '.join(store.aliases(entity)[:6]) or '-'}) --"
            )
            print("first raw neighbours:")
            print(raw.head(6).to_string(index=False))
            print("top-10 by PEPR:")
            print(table.to_frame(store, entity).to_string(index=False))
    embed_knowledge_graph(store, work_dir)
    pretrain_smedbert(store, work_dir, table_path)
    print(f"\ndemo finished in {time.perf_counter() - started:.1f} s")
    return 0


def embed_knowledge_graph(store, work_dir: Path, *, epochs: int = 5, num_evaluated: int = 1000) -> None:
    """Train TransE (dim 100) on 95% of CMeKG's links, evaluate on held-out ones, save."""
    import numpy as np

    from kgplm.kg.embeddings import split_triples, train_kg_embeddings

    print(f"\n== KG embeddings: TransE, dim 100, {epochs} epochs on 95% of the links ==")
    train, test = split_triples(store.triples, test_fraction=0.05, seed=0)
    embeddings = train_kg_embeddings(store, method="transe", dim=100, epochs=epochs, triples=train, seed=0)
    losses = " → ".join(f"{row['loss']:.4f}" for row in embeddings.history)
    print(
        f"{len(train):,} training triples at {embeddings.timings['triples_per_second']:,.0f} triples/s; "
        f"mean loss per epoch {losses}"
    )
    sample = test[np.random.default_rng(0).permutation(len(test))[:num_evaluated]]
    metrics = embeddings.evaluate(sample, filter_triples=store.triples)
    print(
        f"filtered link prediction on {len(sample):,} of {len(test):,} held-out triples (head and tail): "
        f"MRR {metrics['mrr']:.3f}, Hits@1 {metrics['hits@1']:.3f}, Hits@10 {metrics['hits@10']:.3f}, "
        f"mean rank {metrics['mean_rank']:.0f} of {store.num_entities:,}"
    )
    path = embeddings.save(work_dir / "transe_100")
    print(f"saved to {path} (safetensors + JSON; to_openke / to_dglke export the other formats)")


def verbalize_triples(store, num_texts: int) -> list[str]:
    """One short description per entity from its links, e.g. "糖尿病的常见症状有多尿、口渴、乏力。".

    The pycmekg package holds no long free text (its long literal values number under two
    thousand and are mostly English names), so the demo's corpus is CMeKG's own facts written as
    sentences: every entity with at least four links, up to four relations and five objects each.
    """
    return [text for text, _ in verbalized_facts(store, num_texts)]


def verbalized_facts(store, num_texts: int) -> list[tuple[str, list[tuple[int, int, int]]]]:
    """:func:`verbalize_triples`' texts, each with the (head, relation, tail) triples it states."""
    import numpy as np

    texts = []
    for entity in range(store.num_entities):
        tails, relations = store.out_edges(entity)
        if len(tails) < 4:
            continue
        name = store.entity_name(entity)
        clauses, stated = [], []
        for relation in np.unique(relations)[:4].tolist():
            objects = [int(t) for t in tails[relations == relation][:5]]
            clauses.append(f"{store.relation_name(relation)}有{'、'.join(store.entity_name(t) for t in objects)}")
            stated += [(entity, relation, t) for t in objects]
        texts.append((f"{name}的" + "；".join(clauses) + "。", stated))
        if len(texts) == num_texts:
            break
    return texts


def pretrain_smedbert(store, work_dir: Path, table_path: Path, *, num_texts: int = 3000, max_steps: int = 300) -> None:
    """Pre-train a small SMedBERT (hidden 128, 4 layers) on CMeKG's facts written as sentences."""
    import kgplm

    corpus = work_dir / "cmekg_sentences.txt"
    if not corpus.is_file():
        with atomic_file(corpus, "w", encoding="utf-8") as handle:
            handle.write("\n".join(verbalize_triples(store, num_texts)))
    print(
        f"\n== SMedBERT pre-training: {max_steps} steps on {num_texts:,} CMeKG entity descriptions "
        f"(hidden 128, 4 layers; the PEPR table and TransE embeddings above) =="
    )
    started = time.perf_counter()
    result = kgplm.train(
        "smedbert",
        graph=work_dir / "cmekg_store",
        corpus=corpus,
        output_dir=work_dir / "smedbert",
        kg_embeddings=work_dir / "transe_100",
        neighbor_table=table_path,
        vocab_size=8000,
        max_steps=max_steps,
        batch_size=16,
        learning_rate=1e-3,
        log_every=10,
        checkpoint_every=100,
        max_length=128,
    )
    print(
        f"{result.steps} steps in {time.perf_counter() - started:.1f} s (including vocabulary, linking and "
        f"corpus building); metrics in {result.output_dir / 'metrics.jsonl'}"
    )
    names = ("loss", "mlm", "sop", "mnem", "mmem")
    print(f"{'step':>6}" + "".join(f"{name:>9}" for name in names))
    for record in result.metrics[:3] + [None] + result.metrics[-3:]:
        if record is None:
            print(f"{'…':>6}")
            continue
        # a loss absent from every step of a logging window (MMeM without a masked mention) is not logged
        print(f"{record['step']:>6}" + "".join(f"{record.get(name, float('nan')):>9.4f}" for name in names))
    print(f"model saved to {result.model_dir} (load with kgplm.models.load_pretrained)")
