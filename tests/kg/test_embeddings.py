"""TransE / TransR training, filtered evaluation, and the import/export formats."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from kgplm import KGStore
from kgplm.exceptions import ArtifactError, ConfigurationError, DataFormatError, KgplmError
from kgplm.kg import _embedding_kernels as kernels
from kgplm.kg.embeddings import (
    KGEmbeddings,
    _bernoulli_head_probabilities,
    _RowTable,
    rank_triples,
    split_triples,
    train_kg_embeddings,
    translation_energy,
    write_triples_tsv,
)

NUM_GROUPS = 12


def _store_from_rows(tmp_path, rows, name="kg.tsv") -> KGStore:
    path = tmp_path / name
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows), encoding="utf-8")
    return KGStore.from_triples(path, show_progress=False)


@pytest.fixture(scope="module")
def composition_store(tmp_path_factory) -> KGStore:
    """Drug i has ingredient i, ingredient i targets disease i, so drug i treats disease i."""
    rows = []
    for i in range(NUM_GROUPS):
        rows += [
            (f"drug{i}", "has_ingredient", f"ingredient{i}"),
            (f"ingredient{i}", "targets", f"disease{i}"),
            (f"drug{i}", "treats", f"disease{i}"),
            (f"disease{i}", "has_symptom", f"symptom{i}"),
        ]
    return _store_from_rows(tmp_path_factory.mktemp("composition"), rows)


def _random_embeddings(
    method: str,
    num_entities: int,
    num_relations: int,
    *,
    seed: int = 0,
    norm: int = 1,
    entity_dim: int = 6,
    relation_dim: int = 4,
) -> KGEmbeddings:
    generator = torch.Generator().manual_seed(seed)
    relation_dim = entity_dim if method == "transe" else relation_dim
    return KGEmbeddings(
        method=method,
        entity_embeddings=torch.randn(num_entities, entity_dim, generator=generator),
        relation_embeddings=torch.randn(num_relations, relation_dim, generator=generator),
        projections=(
            torch.randn(num_relations, entity_dim, relation_dim, generator=generator) * 0.3
            if method == "transr"
            else None
        ),
        norm=norm,
    )


# -- scoring --------------------------------------------------------------------------------------
def test_transr_energy_matches_per_triple_matrix_products():
    emb = _random_embeddings("transr", 9, 3, norm=2)
    triples = np.array([[0, 2, 1], [3, 0, 4], [5, 1, 5], [8, 2, 0], [2, 0, 7]])
    expected = []
    for head, relation, tail in triples:
        matrix = emb.projections[relation]
        h = emb.entity_embeddings[head] @ matrix
        t = emb.entity_embeddings[tail] @ matrix
        h = h / max(1.0, float(h.norm()))
        t = t / max(1.0, float(t.norm()))
        expected.append(float((h + emb.relation_embeddings[relation] - t).norm(p=2)))
    torch.testing.assert_close(emb.energy(triples), torch.tensor(expected), rtol=1e-5, atol=1e-6)


def test_transe_energy_is_the_l1_distance():
    emb = _random_embeddings("transe", 5, 2, norm=1)
    e, r = emb.entity_embeddings, emb.relation_embeddings
    expected = (e[1] + r[0] - e[3]).abs().sum()
    torch.testing.assert_close(emb.energy([[1, 0, 3]])[0], expected)


def test_translation_energy_gradient_reaches_every_input():
    vectors = [torch.randn(4, 3, requires_grad=True) for _ in range(3)]
    matrices = torch.randn(2, 3, 3, requires_grad=True)
    translation_energy(*vectors, 2, matrices=matrices, group_sizes=[1, 3]).sum().backward()
    for tensor in (*vectors, matrices):
        assert tensor.grad is not None and bool(tensor.grad.abs().sum() > 0)


# -- ranking --------------------------------------------------------------------------------------
def _brute_force_ranks(emb: KGEmbeddings, triples, side: str, known: set) -> list[float]:
    ranks = []
    for head, relation, tail in triples:
        truth = head if side == "head" else tail
        candidates = []
        for entity in range(emb.num_entities):
            triple = (entity, relation, tail) if side == "head" else (head, relation, entity)
            if entity != truth and triple in known:
                continue  # filtered: another true answer
            candidates.append(float(emb.energy([triple])[0]))
        true_energy = float(emb.energy([(head, relation, tail)])[0])
        optimistic = 1 + sum(c < true_energy for c in candidates)
        pessimistic = sum(c <= true_energy for c in candidates)
        ranks.append((optimistic + pessimistic) / 2)
    return ranks


@pytest.mark.parametrize("method", ["transe", "transr"])
@pytest.mark.parametrize("side", ["head", "tail"])
def test_filtered_ranks_agree_with_brute_force(method, side):
    rng = np.random.default_rng(3)
    emb = _random_embeddings(method, 15, 3, seed=4)
    # two entities with identical vectors create ties, which the realistic rank must handle
    emb.entity_embeddings[7] = emb.entity_embeddings[2]
    known = {tuple(t) for t in rng.integers(0, [15, 3, 15], size=(60, 3)).tolist()}
    test = np.array(sorted(known))[:25]
    filtered = rank_triples(emb, test, side=side, filter_triples=np.array(sorted(known)), batch_size=4)
    assert filtered.tolist() == pytest.approx(_brute_force_ranks(emb, test.tolist(), side, known))
    raw = rank_triples(emb, test, side=side)
    assert raw.tolist() == pytest.approx(_brute_force_ranks(emb, test.tolist(), side, set()))
    assert np.all(raw >= filtered)


def test_evaluate_reports_the_metrics_of_the_ranks():
    emb = _random_embeddings("transe", 10, 2, seed=1)
    triples = np.array([[0, 0, 1], [2, 1, 3], [4, 0, 5]])
    ranks = np.concatenate([rank_triples(emb, triples, side=s) for s in ("head", "tail")])
    metrics = emb.evaluate(triples, progress=False)
    assert metrics["mrr"] == pytest.approx(np.mean(1 / ranks))
    assert metrics["hits@3"] == pytest.approx(np.mean(ranks <= 3))
    assert metrics["mean_rank"] == pytest.approx(ranks.mean())
    assert metrics["num_ranks"] == 6


def test_evaluate_accepts_labelled_triples(tmp_path, composition_store):
    """Triples of names or IRIs, as PyKEEN users read them from a TSV, rank like their id triples."""
    store = composition_store
    emb = _random_embeddings("transe", store.num_entities, store.num_relations, seed=2)
    ids = store.triples[:10]
    write_triples_tsv(store, tmp_path / "test.tsv", ids)  # IRIs, PyKEEN's format
    by_iri = [line.split("\t") for line in (tmp_path / "test.tsv").read_text(encoding="utf-8").splitlines()]
    by_name = [(store.entity_name(h), store.relation_name(r), store.entity_name(t)) for h, r, t in ids.tolist()]
    expected = emb.evaluate(ids, filter_triples=store.triples, progress=False)
    for labelled in (by_iri, by_name, np.array(by_name, dtype=object)):
        assert emb.evaluate(labelled, store=store, filter_triples=store.triples, progress=False) == expected
    with pytest.raises(KgplmError, match="drug999"):
        emb.evaluate([("drug0", "treats", "drug999")], store=store, progress=False)
    with pytest.raises(KgplmError, match="cures"):
        emb.evaluate([("drug0", "cures", "disease0")], store=store, progress=False)
    with pytest.raises(KgplmError, match="store="):
        emb.evaluate(by_name, progress=False)


# -- training -------------------------------------------------------------------------------------
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
        lr=0.02,
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
        store, method="transe", dim=16, epochs=100, batch_size=16, num_negatives=4, lr=0.02, seed=0, progress=False
    )
    transr = train_kg_embeddings(
        store,
        method="transr",
        dim=16,
        relation_dim=8,
        epochs=150,
        batch_size=16,
        num_negatives=4,
        lr=0.02,
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


@pytest.mark.parametrize("optimizer", ["sparse_adam", "adagrad", "sgd"])
@pytest.mark.parametrize(
    "constraint", [kernels.CONSTRAINT_NONE, kernels.CONSTRAINT_UNIT_SPHERE, kernels.CONSTRAINT_UNIT_BALL]
)
def test_numba_row_updates_equal_the_torch_reference(optimizer, constraint):
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(30, 5, generator=generator)
    tables = [
        _RowTable(weight.clone(), optimizer=optimizer, lr=0.05, constraint=constraint, use_kernels=flag)
        for flag in (True, False)
    ]
    touched = torch.zeros(30, dtype=torch.bool)
    for step in range(4):
        ids = torch.randint(0, 25, (12,), generator=generator)  # rows 25..29 are never used
        touched[ids] = True
        target = torch.randn(12, 5, generator=generator)
        for table in tables:
            rows, inverse = table.gather(ids)
            ((rows[inverse] - target) ** 2).sum().backward()
            table.step()
    torch.testing.assert_close(tables[0].weight, tables[1].weight, rtol=1e-5, atol=1e-6)
    # lazy updates: rows no batch used are exactly as they started
    assert torch.equal(tables[0].weight[~touched], weight[~touched])
    assert not torch.allclose(tables[0].weight[touched], weight[touched])


def test_lazy_adam_matches_torch_sparse_adam_on_touched_rows():
    weight = torch.randn(20, 4, generator=torch.Generator().manual_seed(0))
    embedding = torch.nn.Embedding.from_pretrained(weight.clone(), freeze=False, sparse=True)
    reference = torch.optim.SparseAdam(embedding.parameters(), lr=0.1)
    table = _RowTable(weight.clone(), optimizer="sparse_adam", lr=0.1, constraint=kernels.CONSTRAINT_NONE)
    for ids in ([1, 2, 2, 5], [5, 7], [1, 19, 0]):
        ids = torch.tensor(ids)
        reference.zero_grad()
        embedding(ids).pow(2).sum().backward()
        reference.step()
        rows, inverse = table.gather(ids)
        rows[inverse].pow(2).sum().backward()
        table.step()
    torch.testing.assert_close(table.weight, embedding.weight.detach(), rtol=1e-5, atol=1e-6)


def test_bernoulli_probabilities_by_hand():
    # relation 0: one head with three tails (1-to-N) → tph 3, hpt 1 → corrupt the head with p 3/4
    # relation 1: three heads, one tail (N-to-1) → tph 1, hpt 3 → p 1/4
    triples = np.array([[0, 0, 1], [0, 0, 2], [0, 0, 3], [4, 1, 9], [5, 1, 9], [6, 1, 9]])
    assert _bernoulli_head_probabilities(triples, 3).tolist() == pytest.approx([0.75, 0.25, 0.5])


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


# -- splits and files -----------------------------------------------------------------------------
def test_split_keeps_every_test_entity_in_train(composition_store):
    triples = composition_store.triples
    train, test = split_triples(triples, test_fraction=0.2, seed=1)
    assert len(train) + len(test) == len(triples)
    assert 0 < len(test) <= round(0.2 * len(triples))
    seen = set(train[:, [0, 2]].ravel().tolist())
    assert set(test[:, [0, 2]].ravel().tolist()) <= seen
    again = split_triples(triples, test_fraction=0.2, seed=1)
    assert np.array_equal(again[1], test)


def test_save_load_round_trip_is_exact(tmp_path, composition_store):
    emb = train_kg_embeddings(
        composition_store, method="transr", dim=6, relation_dim=4, epochs=2, batch_size=8, progress=False
    )
    emb.save(tmp_path / "emb")
    loaded = KGEmbeddings.load(tmp_path / "emb", store=composition_store)
    assert loaded.method == "transr" and loaded.norm == emb.norm and loaded.config == emb.config
    for name in ("entity_embeddings", "relation_embeddings", "projections"):
        assert torch.equal(getattr(loaded, name), getattr(emb, name))
    assert torch.equal(loaded.energy(composition_store.triples), emb.energy(composition_store.triples))
    assert not list(tmp_path.glob(".emb.tmp-*"))


def _file_hashes(directory):
    import hashlib

    return {
        path.relative_to(directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


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
    first, second = _file_hashes(tmp_path / "first"), _file_hashes(tmp_path / "second")
    assert sorted(first) == [
        "transe/config.json",
        "transe/embeddings.safetensors",
        "transr/config.json",
        "transr/embeddings.safetensors",
    ]
    assert first == second
    assert "seconds" not in (tmp_path / "first" / "transe" / "config.json").read_text()


def test_loading_for_another_store_names_both_shapes(tmp_path, composition_store):
    emb = _random_embeddings("transe", 7, 2)
    emb.save(tmp_path / "emb")
    with pytest.raises(ArtifactError, match=r"7 entity rows.*\(7, 6\).*48 entities"):
        KGEmbeddings.load(tmp_path / "emb", store=composition_store)


def test_openke_round_trip_and_reordering(tmp_path, composition_store):
    store = composition_store
    emb = train_kg_embeddings(store, method="transr", dim=6, relation_dim=4, epochs=1, batch_size=8, progress=False)
    emb.to_openke(tmp_path / "openke", store)
    parameters = json.loads((tmp_path / "openke" / "embedding.vec.json").read_text())
    assert sorted(parameters) == ["ent_embeddings.weight", "rel_embeddings.weight", "transfer_matrix.weight"]
    assert np.array(parameters["transfer_matrix.weight"]).shape == (store.num_relations, 24)
    back = KGEmbeddings.from_openke(tmp_path / "openke", store)
    assert back.method == "transr"
    for name in ("entity_embeddings", "relation_embeddings", "projections"):
        assert torch.equal(getattr(back, name), getattr(emb, name))

    # a dump whose ids are in another order is mapped back through entity2id.txt
    permutation = np.random.default_rng(0).permutation(store.num_entities)
    shuffled = {
        "ent_embeddings.weight": emb.entity_embeddings[permutation].tolist(),
        "rel_embeddings.weight": emb.relation_embeddings.tolist(),
        "transfer_matrix.weight": parameters["transfer_matrix.weight"],
    }
    other = tmp_path / "shuffled"
    other.mkdir()
    (other / "embedding.vec.json").write_text(json.dumps(shuffled))
    (other / "entity2id.txt").write_text(
        f"{store.num_entities}\n" + "".join(f"{store.entity_iri(int(e))}\t{row}\n" for row, e in enumerate(permutation))
    )
    remapped = KGEmbeddings.from_openke(other, store)
    assert torch.equal(remapped.entity_embeddings, emb.entity_embeddings)


def test_openke_shape_mismatch_is_reported(tmp_path, composition_store):
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(
            {
                "ent_embeddings.weight": [[0.0] * 4] * 3,
                "rel_embeddings.weight": [[0.0] * 2] * 2,
                "transfer_matrix.weight": [[0.0] * 5] * 2,
            }
        )
    )
    with pytest.raises(ArtifactError, match=r"\(2, 5\).*\(2, 8\)"):
        KGEmbeddings.from_openke(path)
    path.write_text(json.dumps({"ent_embeddings.weight": [[0.0] * 4] * 3, "rel_embeddings.weight": [[0.0] * 4]}))
    with pytest.raises(ArtifactError, match=r"3 entity rows.*48 entities"):
        KGEmbeddings.from_openke(path, composition_store)
    (tmp_path / "broken.json").write_text('{"ent_embeddings.weight": [[1.0, ')
    with pytest.raises(DataFormatError, match="broken.json:1"):
        KGEmbeddings.from_openke(tmp_path / "broken.json")


@pytest.mark.parametrize("method", ["transe", "transr"])
def test_dglke_round_trip(tmp_path, composition_store, method):
    emb = train_kg_embeddings(
        composition_store,
        method=method,
        dim=6,
        relation_dim=6 if method == "transe" else 4,
        epochs=1,
        batch_size=8,
        progress=False,
    )
    emb.to_dglke(tmp_path / "dglke", composition_store, dataset="toy")
    expected_name = "toy_TransR_entity.npy" if method == "transr" else "toy_TransE_l1_entity.npy"
    assert (tmp_path / "dglke" / expected_name).is_file()
    back = KGEmbeddings.from_dglke(tmp_path / "dglke", composition_store)
    assert (back.method, back.norm) == (method, emb.norm)
    assert torch.equal(back.entity_embeddings, emb.entity_embeddings)
    if method == "transr":
        assert torch.equal(back.projections, emb.projections)


def test_triples_tsv_reads_back_as_the_same_graph(tmp_path, composition_store):
    path = write_triples_tsv(composition_store, tmp_path / "triples.tsv")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == composition_store.num_triples and all(line.count("\t") == 2 for line in lines)
    head, relation, tail = lines[0].split("\t")
    h, r, t = composition_store.triples[0]
    assert (head, relation, tail) == (
        composition_store.entity_iri(h),
        composition_store.relation_iris[r],
        composition_store.entity_iri(t),
    )


def test_cmekg_embeddings_rank_held_out_links_far_above_chance(cmekg_store):
    store = cmekg_store
    train, test = split_triples(store.triples, test_fraction=0.01, seed=0)
    emb = train_kg_embeddings(store, method="transe", dim=32, epochs=2, triples=train, lr=0.02, progress=False)
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
            lr=0.05,
            seed=3,
            optimizer=optimizer,
            backend=backend,
            progress=False,
        )
        for backend in ("numba", "torch")
    }
    assert runs["numba"].config["backend"] == "numba" and runs["torch"].config["backend"] == "torch"
    start = train_kg_embeddings(
        composition_store, dim=8, epochs=1, batch_size=8, lr=0.0, seed=3, optimizer=optimizer, progress=False
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
            lr=0.05,
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
