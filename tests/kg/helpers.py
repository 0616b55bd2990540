"""Comparison helpers for stores: canonical, id-free views keyed by IRIs."""

from __future__ import annotations

from kgplm import KGStore


def canonical(store: KGStore) -> dict:
    """Everything a store says, keyed by IRIs so that stores with other id orders compare equal."""
    iri = store.entity_iri
    relation_iris = store.relation_iris
    return {
        "entities": {iri(i) for i in range(store.num_entities)},
        "triples": {(iri(h), relation_iris[r], iri(t)) for h, r, t in store.triples.tolist()},
        "relation_names": dict(zip(store.relation_iris, store.relation_names)),
        "types": {iri(i): tuple(store.entity_types(i)) for i in range(store.num_entities)},
        "names": {iri(i): store.entity_name(i) for i in range(store.num_entities)},
        "labels": {iri(i): frozenset(store.labels(i)) for i in range(store.num_entities)},
        "attributes": {
            iri(i): frozenset(map(tuple, store.attributes(i).itertuples(index=False)))
            for i in range(store.num_entities)
        },
    }
