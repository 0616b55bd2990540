"""KGStore: compilation, lookups, adjacency, PyG views, persistence."""

from __future__ import annotations

import os
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from kgplm import KGStore
from kgplm.exceptions import (
    AmbiguousEntityError,
    ArtifactError,
    ConfigurationError,
    MissingFileError,
    UnknownEntityError,
)
from kgplm.kg import GraphCollector
from tests.kg.helpers import canonical


def small_store() -> KGStore:
    """a -r0-> b, a -r0-> c, b -r1-> c, c -r1-> a, c -r0-> c (self loop), and a duplicate of a -r0-> b."""
    collector = GraphCollector(source="test")
    a, b, c, d = (collector.entity(f"http://x/{n}") for n in "abcd")
    r0, r1 = collector.relation("http://x/r0", "treats"), collector.relation("http://x/r1")
    for h, r, t in [(a, r0, b), (a, r0, c), (b, r1, c), (c, r1, a), (c, r0, c), (a, r0, b)]:
        collector.add_triple(h, r, t)
    drug, disease, thing = (
        collector.type("http://x/Drug"),
        collector.type("http://x/Disease"),
        collector.type("http://x/Thing"),
    )
    for entity, type_id in [(a, drug), (a, thing), (b, disease), (b, thing), (c, thing), (d, thing)]:
        collector.add_type(entity, type_id)
    collector.add_label(a, "阿司匹林", "zh", 1)
    collector.add_label(a, "aspirin", "en", 1)
    collector.add_label(b, "headache", "en", 1)
    collector.add_label(b, "头痛", "zh", 2)
    collector.add_label(c, "pain", "", 1)
    collector.add_label(d, "pain", "", 2)
    collector.add_label(d, "PAIN", "", 2)
    return collector.build()


def test_dedup_counts_and_sorting() -> None:
    store = small_store()
    assert (store.num_entities, store.num_relations, store.num_triples) == (4, 2, 5)
    assert store.describe()["duplicate_triples"] == 1
    triples = store.triples.tolist()
    assert triples == sorted(triples)
    assert store.relation_names == ["treats", "r1"]  # unnamed relation: IRI local name


def test_csr_matches_brute_force() -> None:
    store = small_store()
    for entity in range(store.num_entities):
        out_neighbors, out_relations = store.out_edges(entity)
        in_neighbors, in_relations = store.in_edges(entity)
        expected_out = sorted((t, r) for h, r, t in store.triples.tolist() if h == entity)
        expected_in = sorted((h, r) for h, r, t in store.triples.tolist() if t == entity)
        assert sorted(zip(out_neighbors.tolist(), out_relations.tolist())) == expected_out
        assert sorted(zip(in_neighbors.tolist(), in_relations.tolist())) == expected_in
    out_degree, in_degree = store.degrees()
    assert out_degree.tolist() == [2, 1, 2, 0] and in_degree.tolist() == [1, 1, 3, 0]


def test_with_triples_keeps_the_entities_and_replaces_the_links(tmp_path: Path) -> None:
    store = small_store()
    # a, b, c, d = 0, 1, 2, 3; r0, r1 = 0, 1: d gets a link, a duplicate row is dropped, rows come back sorted
    derived = store.with_triples([[3, 1, 0], [0, 0, 1], [3, 1, 0], [1, 1, 2]], derived_from={"kind": "hand-made"})
    assert derived.triples.tolist() == [[0, 0, 1], [1, 1, 2], [3, 1, 0]] and derived.num_triples == 3
    assert derived.out_edges(3)[0].tolist() == [0] and derived.in_edges(0)[0].tolist() == [3]
    assert derived.degrees()[0].tolist() == [1, 1, 0, 1] and derived.degrees()[1].tolist() == [1, 1, 1, 0]
    for entity in range(store.num_entities):  # what text links to stays on its id
        assert derived.entity_name(entity) == store.entity_name(entity)
        assert derived.entity_types(entity) == store.entity_types(entity)
        assert derived.aliases(entity) == store.aliases(entity)
    assert store.num_triples == 5 and store.derived_from is None  # the original is untouched
    derived.save(tmp_path / "derived")
    reloaded = KGStore.load(tmp_path / "derived")
    assert reloaded.triples.tolist() == derived.triples.tolist() and reloaded.derived_from == {"kind": "hand-made"}
    assert store.with_triples(np.zeros((0, 3), dtype=np.int64)).num_triples == 0


def test_with_triples_refuses_ids_outside_the_store() -> None:
    store = small_store()
    with pytest.raises(ConfigurationError, match="row 1 has tail id 4, outside 0…3"):
        store.with_triples([[0, 0, 1], [0, 0, 4]])
    with pytest.raises(ConfigurationError, match="row 0 has relation id 2, outside 0…1"):
        store.with_triples([[0, 2, 1]])
    with pytest.raises(ConfigurationError, match=r"\(n, 3\) integer array"):
        store.with_triples([[0, 0]])
    with pytest.raises(ConfigurationError, match=r"\(n, 3\) integer array"):
        store.with_triples([[0.0, 0.0, 1.0]])


def test_adjacency_against_networkx() -> None:
    store = small_store()
    graph = nx.MultiDiGraph()
    graph.add_nodes_from(range(store.num_entities))
    graph.add_edges_from((h, t) for h, _, t in store.triples.tolist())
    expected = nx.to_numpy_array(graph, nodelist=range(store.num_entities))
    np.testing.assert_array_equal(store.adjacency().toarray(), expected)
    np.testing.assert_array_equal(store.adjacency(symmetric=True).toarray(), expected + expected.T)


def test_types_primary_is_most_specific() -> None:
    store = small_store()
    assert store.entity_type(0) == "Drug" and store.entity_types(0) == ["Drug", "Thing"]
    assert store.entity_type(3) == "Thing"
    assert store.primary_type_ids().tolist() == [0, 1, 2, 2]


def test_names_and_lookup_errors() -> None:
    store = small_store()
    assert store.entity_name(0) == "阿司匹林" and store.aliases(0) == ["aspirin"]
    assert store.entity_id("头痛") == 1
    assert store.entity_id("pain") == 2  # display name beats d's alias
    with pytest.raises(AmbiguousEntityError, match="Pain"):
        store.entity_id("Pain")  # case-folded: c's name and d's aliases, neither is an exact display name
    with pytest.raises(UnknownEntityError) as caught:
        store.entity_id("headach")
    assert "headache" in caught.value.closest and "closest names" in str(caught.value)
    with pytest.raises(UnknownEntityError, match="0..3"):
        store.entity_name(99)
    with pytest.raises(ConfigurationError, match="unknown relation"):
        store.relation_id("cures")


def test_neighbors_frame() -> None:
    store = small_store()
    frame = store.neighbors("阿司匹林")
    assert list(frame.columns) == ["relation", "direction", "neighbor", "neighbor_id", "neighbor_type"]
    assert sorted(zip(frame.relation, frame.direction, frame.neighbor_id)) == [
        ("r1", "in", 2),
        ("treats", "out", 1),
        ("treats", "out", 2),
    ]
    assert len(store.neighbors(0, direction="out")) == 2 and len(store.neighbors(0, k=1)) == 1
    with pytest.raises(ConfigurationError):
        store.neighbors(0, direction="sideways")


def test_to_pyg_homogeneous_and_hetero() -> None:
    store = small_store()
    data = store.to_pyg()
    assert data.num_nodes == 4 and data.edge_index.shape == (2, 5)
    assert data.edge_index.t().tolist() == store.triples[:, [0, 2]].tolist()
    assert data.edge_type.tolist() == store.triples[:, 1].tolist()
    hetero = store.to_pyg(hetero=True)
    assert sum(hetero[t].num_nodes for t in hetero.node_types) == 4
    assert sum(hetero[e].edge_index.shape[1] for e in hetero.edge_types) == 5
    # every hetero edge maps back to a triple
    recovered = set()
    for head_type, relation, tail_type in hetero.edge_types:
        heads = hetero[head_type].entity_id[hetero[head_type, relation, tail_type].edge_index[0]]
        tails = hetero[tail_type].entity_id[hetero[head_type, relation, tail_type].edge_index[1]]
        recovered |= {(h, store.relation_id(relation), t) for h, t in zip(heads.tolist(), tails.tolist())}
    assert recovered == set(map(tuple, store.triples.tolist()))


def test_save_load_identical_and_memory_mapped(tmp_path: Path) -> None:
    store = small_store()
    directory = store.save(tmp_path / "store")
    loaded = KGStore.load(directory)
    assert loaded.equals(store) and canonical(loaded) == canonical(store)
    assert isinstance(loaded.triples, np.memmap)
    assert loaded.neighbors(0).equals(store.neighbors(0))
    # saving over an existing store replaces it whole, leaving no temporary directories
    store.save(directory)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_failed_save_leaves_previous_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = small_store()
    directory = store.save(tmp_path / "store")
    before = sorted(os.listdir(directory))

    def broken_save(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        store.save(directory)
    monkeypatch.undo()
    assert sorted(os.listdir(directory)) == before and KGStore.load(directory).equals(store)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(MissingFileError):
        KGStore.load(tmp_path / "absent")
    (tmp_path / "not_a_store").mkdir()
    with pytest.raises(ArtifactError, match="manifest.json"):
        KGStore.load(tmp_path / "not_a_store")
    directory = small_store().save(tmp_path / "store")
    (directory / "in_indptr.npy").unlink()
    with pytest.raises(ArtifactError, match="in_indptr.npy"):
        KGStore.load(directory)


def test_describe_and_summary() -> None:
    store = small_store()
    info = store.describe()
    assert info["entities_per_type"] == {"Thing": 2, "Drug": 1, "Disease": 1}
    assert info["triples_per_relation"] == {"treats": 3, "r1": 2}
    assert info["num_names"] == 4 and info["num_aliases"] == 3
    assert "4 entities" in store.summary()
