"""TransE / TransR training at scale (issue 30.4): the memory a training run holds beyond its tables,
and the same tables as before the memory changes."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from kgplm import KGStore
from kgplm.kg.embeddings import train_kg_embeddings
from kgplm.kg.embeddings.training import bernoulli_head_probabilities

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "kg_embeddings_before_issue30" / "expected.npz"


def _golden_store(tmp_path) -> KGStore:
    """The graph the tables in ``GOLDEN`` were trained on (see its README)."""
    rng = np.random.default_rng(3)
    rows = set()
    while len(rows) < 60:
        head, tail = rng.integers(0, 20, 2)
        relation = rng.integers(0, 3)
        rows.add((f"e{head}", f"r{relation}", f"e{tail}"))
    path = tmp_path / "kg.tsv"
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in sorted(rows)), encoding="utf-8")
    return KGStore.from_triples(path, show_progress=False)


@pytest.mark.parametrize("method", ["transe", "transr"])
@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_epochs_equal_the_tables_trained_before_the_memory_changes(tmp_path, method, backend):
    store = _golden_store(tmp_path)
    expected = np.load(GOLDEN)
    trained = train_kg_embeddings(
        store, method=method, dim=4, epochs=3, batch_size=16, num_negatives=2, seed=7, progress=False, backend=backend
    )
    key = f"{method}-{backend}"
    np.testing.assert_allclose(trained.entity_embeddings.numpy(), expected[f"{key}-ent"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(trained.relation_embeddings.numpy(), expected[f"{key}-rel"], rtol=1e-5, atol=1e-6)
    if method == "transr":
        np.testing.assert_allclose(trained.projections.numpy(), expected[f"{key}-proj"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose([row["loss"] for row in trained.history], expected[f"{key}-hist"], rtol=1e-6)


def _chain_store(tmp_path, num_entities: int, num_relations: int) -> KGStore:
    path = tmp_path / "chain.tsv"
    path.write_text(
        "".join(f"e{i}\tr{i % num_relations}\te{i + 1}\n" for i in range(num_entities - 1)), encoding="utf-8"
    )
    return KGStore.from_triples(path, show_progress=False)


@pytest.mark.parametrize("negative_sampling", ["bernoulli", "uniform"])
def test_an_epoch_holds_no_copy_of_the_triples(tmp_path, negative_sampling):
    """numpy's allocations (traced by tracemalloc) while training on n int32 triples stay below 12·n
    bytes (measured: 9 with the Bernoulli statistics, 3 without; 63 before issue 30.4): no int64 copy
    of the triples (24·n bytes), no per-relation masks. The per-epoch
    permutation (torch, 8·n bytes) is the one array of the triples' length an epoch needs."""
    num_entities, num_relations, count = 3000, 4, 200_000
    store = _chain_store(tmp_path, num_entities, num_relations)
    rng = np.random.default_rng(0)
    triples = np.stack(
        [
            rng.integers(0, num_entities, count),
            rng.integers(0, num_relations, count),
            rng.integers(0, num_entities, count),
        ],
        1,
    ).astype(np.int32)
    train_kg_embeddings(store, dim=2, epochs=1, batch_size=50_000, triples=triples[:10], progress=False)  # compile
    tracemalloc.start()
    try:
        embeddings = train_kg_embeddings(
            store,
            dim=2,
            epochs=1,
            batch_size=10_000,
            triples=triples,
            negative_sampling=negative_sampling,
            progress=False,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert embeddings.config["num_training_triples"] == count
    assert peak < 12 * count, f"numpy peak {peak / 1e6:.1f} MB for {count} triples"


def test_bernoulli_probabilities_equal_the_per_relation_definition():
    """tph / (tph + hpt) per relation (Wang et al. 2014), each relation's rows taken apart by hand."""
    rng = np.random.default_rng(5)
    triples = np.stack([rng.integers(0, 30, 400), rng.integers(0, 6, 400), rng.integers(0, 30, 400)], 1)
    triples = triples[triples[:, 1] != 4]  # relation 4 has no triple: it keeps 1/2
    expected = np.full(7, 0.5)
    for relation in range(7):
        rows = triples[triples[:, 1] == relation]
        if len(rows):
            tails_per_head = len(rows) / len(set(rows[:, 0].tolist()))
            heads_per_tail = len(rows) / len(set(rows[:, 2].tolist()))
            expected[relation] = tails_per_head / (tails_per_head + heads_per_tail)
    for array in (triples, triples.astype(np.int32)):
        assert bernoulli_head_probabilities(array, 7).tolist() == expected.tolist()
