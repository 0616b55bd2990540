"""The study's graph control: the same graph attached to the wrong entities (``graph_controls.shuffle_links``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

from graph_controls import derangement, shuffle_links  # noqa: E402

from kgplm import KGStore  # noqa: E402

TOY_GRAPH = Path(__file__).resolve().parents[2] / "graphs" / "toy_medical.ttl"


def _triples(store) -> set[tuple[int, int, int]]:
    return set(map(tuple, np.asarray(store.triples, dtype=np.int64).tolist()))


def test_shuffled_links_relabel_every_triple_and_keep_names_types_and_degrees():
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    shuffled = shuffle_links(store, 7)
    permutation = derangement(store.num_entities, 7)
    assert sorted(permutation.tolist()) == list(range(store.num_entities))  # a permutation
    assert (permutation != np.arange(store.num_entities)).all()  # every entity gets another's links
    assert _triples(shuffled) == {(int(permutation[h]), r, int(permutation[t])) for h, r, t in _triples(store)}
    # the structure of id π(e) is that of e: degrees move with π, their multiset is unchanged
    out_degree, in_degree = store.degrees()
    shuffled_out, shuffled_in = shuffled.degrees()
    assert (shuffled_out[permutation] == out_degree).all() and (shuffled_in[permutation] == in_degree).all()
    entity = int(np.argmax(out_degree))
    neighbors, relations = store.out_edges(entity)
    moved_neighbors, moved_relations = shuffled.out_edges(int(permutation[entity]))
    assert sorted(zip(permutation[neighbors].tolist(), relations.tolist())) == sorted(
        zip(moved_neighbors.tolist(), moved_relations.tolist())
    )
    # what text links to stays on its id
    assert [shuffled.entity_name(e) for e in range(store.num_entities)] == [
        store.entity_name(e) for e in range(store.num_entities)
    ]
    assert (shuffled.primary_type_ids() == store.primary_type_ids()).all()
    assert shuffled.derived_from == {"shuffled_links": {"seed": 7}} and store.derived_from is None


def test_shuffled_links_are_seeded(tmp_path):
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    assert _triples(shuffle_links(store, 1)) == _triples(shuffle_links(store, 1))
    assert _triples(shuffle_links(store, 1)) != _triples(shuffle_links(store, 2))
    shuffle_links(store, 1).save(tmp_path / "shuffled")
    reloaded = KGStore.load(tmp_path / "shuffled")
    assert _triples(reloaded) == _triples(shuffle_links(store, 1)) and reloaded.derived_from == {
        "shuffled_links": {"seed": 1}
    }


def test_type_preserving_shuffle_keeps_every_type_and_moves_every_link():
    from graph_controls import derangement_within_types, shuffle_links_within_types

    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    types = store.primary_type_ids()
    permutation = derangement_within_types(types, 3)
    assert sorted(permutation.tolist()) == list(range(store.num_entities))
    assert (types[permutation] == types).all()  # every entity's links go to an entity of its own type
    group_sizes = {int(t): int((types == t).sum()) for t in np.unique(types)}
    alone = np.asarray([group_sizes[int(t)] == 1 for t in types])
    assert alone.sum() == 1  # the toy graph's one untyped entity: documented to keep its links
    assert (permutation[~alone] != np.flatnonzero(~alone)).all() and (permutation[alone] == np.flatnonzero(alone)).all()

    shuffled = shuffle_links_within_types(store, 3)
    assert _triples(shuffled) == {(int(permutation[h]), r, int(permutation[t])) for h, r, t in _triples(store)}
    for h, _, t in _triples(store):  # every endpoint of every link moved, unless it is alone in its type
        assert alone[h] or permutation[h] != h
        assert alone[t] or permutation[t] != t
        assert store.entity_type(int(permutation[h])) == store.entity_type(h)
        assert store.entity_type(int(permutation[t])) == store.entity_type(t)
    assert (shuffled.primary_type_ids() == types).all()
    assert shuffled.derived_from == {"shuffled_links_within_types": {"seed": 3, "fixed_entities": 1}}
    # seeded: the same seed gives the same store, another seed another
    assert _triples(shuffle_links_within_types(store, 3)) == _triples(shuffled)
    assert _triples(shuffle_links_within_types(store, 4)) != _triples(shuffled)


def test_within_type_derangement_on_a_hand_made_typing():
    from graph_controls import derangement_within_types

    types = np.asarray([0, 1, 0, 1, 0, 2, -1, -1])
    permutation = derangement_within_types(types, 0)
    assert (types[permutation] == types).all()
    assert permutation[5] == 5  # type 2 has one member
    assert all(permutation[i] != i for i in (0, 1, 2, 3, 4, 6, 7))
    assert (derangement_within_types(types, 0) == permutation).all()
