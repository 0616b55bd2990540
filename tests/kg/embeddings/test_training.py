"""TransE / TransR training: what it learns, determinism, argument checks, the two backends."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from kgplm.exceptions import ConfigurationError
from kgplm.kg.embeddings import rank_triples, split_triples, train_kg_embeddings
from kgplm.kg.embeddings.training import bernoulli_head_probabilities
from tests.kg.embeddings.helpers import file_hashes


def test_transe_learns_a_composed_relation_it_never_saw_for_held_out_pairs(composition_store):
    store = composition_store
    treats = store.relation_id("treats")
    is_test = (store.triples[:, 1] == treats) & (np.arange(store.num_triples) % 3 == 0)
    train, test = store.triples[~is_test], store.triples[is_test]
    # L2: the composition h + r₁ + r₂ = t is exact in the optimum (L1's sign gradients stop short of it)
    emb = train_kg_embeddings(
        store,
        method="transe",
        dim=32,
        epochs=300,
        batch_size=16,
        num_negatives=4,
        learning_rate=0.02,
        margin=1.0,
        norm=2,
        triples=train,
        seed=0,
        progress=False,
    )
    assert emb.history[-1]["loss"] < emb.history[0]["loss"]
    metrics = emb.evaluate(test, filter_triples=store.triples, progress=False)
    assert metrics["hits@1"] >= 0.9, metrics
    fit = emb.evaluate(train, filter_triples=store.triples, progress=False)
    assert fit["hits@1"] >= 0.9, fit


def test_transr_fits_the_training_graph_from_transe(composition_store):
    store = composition_store
    transe = train_kg_embeddings(
        store,
        method="transe",
        dim=16,
        epochs=100,
        batch_size=16,
        num_negatives=4,
        learning_rate=0.02,
        seed=0,
        progress=False,
    )
    transr = train_kg_embeddings(
        store,
        method="transr",
        dim=16,
        relation_dim=8,
        epochs=150,
        batch_size=16,
        num_negatives=4,
        learning_rate=0.02,
        margin=0.5,
        seed=0,
        initialize_from=transe,
        progress=False,
    )
    assert transr.projections.shape == (store.num_relations, 16, 8)
    assert transr.history[-1]["loss"] < transr.history[0]["loss"]
    assert transr.evaluate(store.triples, filter_triples=store.triples, progress=False)["hits@1"] >= 0.9
    # constraints of the paper hold on the result
    assert float(transr.entity_embeddings.norm(dim=1).max()) <= 1 + 1e-5
    assert float(transr.relation_embeddings.norm(dim=1).max()) <= 1 + 1e-5
    torch.testing.assert_close(transe.entity_embeddings.norm(dim=1), torch.ones(store.num_entities))


def test_training_is_deterministic_for_a_seed(composition_store):
    runs = [
        train_kg_embeddings(composition_store, dim=8, epochs=3, batch_size=8, seed=5, progress=False) for _ in range(2)
    ]
    assert torch.equal(runs[0].entity_embeddings, runs[1].entity_embeddings)
    other = train_kg_embeddings(composition_store, dim=8, epochs=3, batch_size=8, seed=6, progress=False)
    assert not torch.equal(runs[0].entity_embeddings, other.entity_embeddings)


def test_bernoulli_probabilities_by_hand():
    # relation 0: one head with three tails (1-to-N) → tph 3, hpt 1 → corrupt the head with p 3/4
    # relation 1: three heads, one tail (N-to-1) → tph 1, hpt 3 → p 1/4
    triples = np.array([[0, 0, 1], [0, 0, 2], [0, 0, 3], [4, 1, 9], [5, 1, 9], [6, 1, 9]])
    assert bernoulli_head_probabilities(triples, 3).tolist() == pytest.approx([0.75, 0.25, 0.5])


def test_bad_arguments_fail_early(composition_store):
    with pytest.raises(ConfigurationError, match="method"):
        train_kg_embeddings(composition_store, method="rotate")
    with pytest.raises(ConfigurationError, match="TransE has one embedding size"):
        train_kg_embeddings(composition_store, method="transe", dim=8, relation_dim=4)
    with pytest.raises(ConfigurationError, match="optimizer"):
        train_kg_embeddings(composition_store, optimizer="adam")
    with pytest.raises(ConfigurationError, match="shape"):
        train_kg_embeddings(composition_store, triples=np.zeros((3, 2), dtype=int))
    with pytest.raises(ConfigurationError, match="entity ids outside"):
        train_kg_embeddings(composition_store, triples=np.array([[0, 0, 10_000]]))


def test_two_identical_trainings_save_byte_identical_directories(tmp_path, composition_store, monkeypatch):
    """No clock in the artefact: the second training runs under a clock 100 times faster (a loaded
    machine); timings are logged and kept on the object (``timings``), not saved."""
    import time

    for name in ("first", "second"):
        if name == "second":
            real = time.perf_counter
            start = real()
            monkeypatch.setattr(time, "perf_counter", lambda: start + 100 * (real() - start))
        transe = train_kg_embeddings(composition_store, dim=6, epochs=2, batch_size=8, seed=3, progress=False)
        transr = train_kg_embeddings(
            composition_store,
            method="transr",
            dim=6,
            relation_dim=4,
            epochs=2,
            batch_size=8,
            seed=3,
            initialize_from=transe,
            progress=False,
        )
        transe.save(tmp_path / name / "transe")
        transr.save(tmp_path / name / "transr")
        assert transe.timings["training_seconds"] > 0 and transr.timings["triples_per_second"] > 0
    first, second = file_hashes(tmp_path / "first"), file_hashes(tmp_path / "second")
    assert sorted(first) == [
        "transe/config.json",
        "transe/embeddings.safetensors",
        "transr/config.json",
        "transr/embeddings.safetensors",
    ]
    assert first == second
    assert "seconds" not in (tmp_path / "first" / "transe" / "config.json").read_text()


def test_cmekg_embeddings_rank_held_out_links_far_above_chance(cmekg_store):
    store = cmekg_store
    train, test = split_triples(store.triples, test_fraction=0.01, seed=0)
    emb = train_kg_embeddings(
        store, method="transe", dim=32, epochs=2, triples=train, learning_rate=0.02, progress=False
    )
    assert emb.history[1]["loss"] < emb.history[0]["loss"]
    metrics = emb.evaluate(test[:300], filter_triples=store.triples, sides=("tail",), progress=False)
    # chance: mean rank ≈ num_entities / 2 ≈ 58k
    assert metrics["mean_rank"] < store.num_entities / 10, metrics


@pytest.mark.parametrize("optimizer", ["sparse_adam", "adagrad", "sgd"])
def test_torch_backend_trains_transe_like_the_numba_backend(composition_store, optimizer):
    """The torch path (CUDA's, run here on CPU) and the numba kernels give the same embeddings and ranks."""
    runs = {
        backend: train_kg_embeddings(
            composition_store,
            dim=8,
            epochs=6,
            batch_size=8,
            learning_rate=0.05,
            seed=3,
            optimizer=optimizer,
            backend=backend,
            progress=False,
        )
        for backend in ("numba", "torch")
    }
    assert runs["numba"].config["backend"] == "numba" and runs["torch"].config["backend"] == "torch"
    start = train_kg_embeddings(
        composition_store, dim=8, epochs=1, batch_size=8, learning_rate=0.0, seed=3, optimizer=optimizer, progress=False
    )
    assert not torch.allclose(runs["torch"].entity_embeddings, start.entity_embeddings, atol=1e-2)  # it trained
    torch.testing.assert_close(runs["torch"].entity_embeddings, runs["numba"].entity_embeddings, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(
        runs["torch"].relation_embeddings, runs["numba"].relation_embeddings, rtol=1e-4, atol=1e-5
    )
    assert [entry["loss"] for entry in runs["torch"].history] == pytest.approx(
        [entry["loss"] for entry in runs["numba"].history], rel=1e-5
    )
    for side in ("head", "tail"):
        np.testing.assert_array_equal(
            rank_triples(runs["torch"], composition_store.triples, side=side),
            rank_triples(runs["numba"], composition_store.triples, side=side),
        )


def test_torch_backend_trains_transr_like_the_numba_backend(composition_store):
    transe = train_kg_embeddings(composition_store, dim=8, epochs=3, batch_size=8, seed=3, progress=False)
    runs = [
        train_kg_embeddings(
            composition_store,
            method="transr",
            dim=8,
            relation_dim=6,
            epochs=4,
            batch_size=8,
            learning_rate=0.05,
            seed=3,
            initialize_from=transe,
            backend=backend,
            progress=False,
        )
        for backend in ("numba", "torch")
    ]
    for name in ("entity_embeddings", "relation_embeddings", "projections"):
        torch.testing.assert_close(getattr(runs[1], name), getattr(runs[0], name), rtol=1e-4, atol=1e-5)


def test_backend_choice_is_checked(composition_store):
    with pytest.raises(ConfigurationError, match="backend"):
        train_kg_embeddings(composition_store, dim=8, epochs=1, backend="jax", progress=False)
    with pytest.raises(ConfigurationError, match="backend='torch'"):
        train_kg_embeddings(composition_store, dim=8, epochs=1, device="meta", backend="numba", progress=False)
    auto = train_kg_embeddings(composition_store, dim=8, epochs=1, progress=False)
    assert auto.config["backend"] == "numba"  # auto on CPU


def test_learning_rate_sets_the_step_size_and_the_deprecated_lr_gives_the_identical_tables(composition_store):
    """``learning_rate`` is the step size: at 0 the tables stay where the seed put them (after the
    constraint pass); ``lr`` is its old spelling, which warns and trains to the same bytes."""
    common = dict(dim=8, epochs=2, batch_size=8, seed=3, optimizer="sgd", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frozen = train_kg_embeddings(composition_store, learning_rate=0.0, **common)
        moved = train_kg_embeddings(composition_store, learning_rate=0.05, **common)
    start = torch.empty(composition_store.num_entities, 8).uniform_(
        -6 / 8**0.5, 6 / 8**0.5, generator=torch.Generator().manual_seed(3)
    )
    torch.testing.assert_close(frozen.entity_embeddings, torch.nn.functional.normalize(start, dim=1))
    assert not torch.allclose(moved.entity_embeddings, frozen.entity_embeddings, atol=1e-3)
    assert (frozen.config["lr"], moved.config["lr"]) == (0.0, 0.05)

    with pytest.warns(
        FutureWarning, match=r"train_kg_embeddings: the keyword argument 'lr' is deprecated.*'learning_rate'"
    ):
        old = train_kg_embeddings(composition_store, lr=0.05, **common)
    for name in ("entity_embeddings", "relation_embeddings"):
        assert torch.equal(getattr(old, name), getattr(moved, name))
    assert (old.config, old.history) == (moved.config, moved.history)

    with pytest.raises(ConfigurationError, match="both .*'lr'.*'learning_rate'"):
        train_kg_embeddings(composition_store, lr=0.05, learning_rate=0.05, **common)
