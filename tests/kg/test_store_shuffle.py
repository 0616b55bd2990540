"""KGStore.with_shuffled_links: the same graph attached to the wrong entities (issue 26.5's control)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kgplm import KGStore
from kgplm.kg.store import shuffled_entity_permutation

TOY_GRAPH = Path(__file__).resolve().parents[2] / "graphs" / "toy_medical.ttl"


def _triples(store) -> set[tuple[int, int, int]]:
    return set(map(tuple, np.asarray(store.triples, dtype=np.int64).tolist()))


def test_shuffled_links_relabel_every_triple_and_keep_names_types_and_degrees():
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    shuffled = store.with_shuffled_links(7)
    permutation = shuffled_entity_permutation(store.num_entities, 7)
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
        zip(moved_neighbors.tolist(), moved_relations.tolist()))
    # what text links to stays on its id
    assert [shuffled.entity_name(e) for e in range(store.num_entities)] == [store.entity_name(e)
                                                                             for e in range(store.num_entities)]
    assert (shuffled.primary_type_ids() == store.primary_type_ids()).all()
    assert shuffled.shuffled_links == {"seed": 7} and store.shuffled_links is None


def test_shuffled_links_are_seeded(tmp_path):
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    assert _triples(store.with_shuffled_links(1)) == _triples(store.with_shuffled_links(1))
    assert _triples(store.with_shuffled_links(1)) != _triples(store.with_shuffled_links(2))
    store.with_shuffled_links(1).save(tmp_path / "shuffled")
    reloaded = KGStore.load(tmp_path / "shuffled")
    assert _triples(reloaded) == _triples(store.with_shuffled_links(1)) and reloaded.shuffled_links == {"seed": 1}
