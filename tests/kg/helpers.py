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


def store_from_edges(edges, num_entities: int | None = None) -> KGStore:
    """A store from ``(head, relation, tail)`` id triples; entities ``http://x/0`` … in id order."""
    from kgplm.kg import GraphCollector

    collector = GraphCollector(source="test")
    nodes = num_entities or (max(max(h, t) for h, _, t in edges) + 1)
    for i in range(nodes):
        collector.entity(f"http://x/{i}")
    for h, r, t in edges:
        collector.add_triple(h, collector.relation(f"http://x/r{r}"), t)
    return collector.build()


def bfs_subgraph(store: KGStore, start: str, size: int) -> KGStore:
    """The first ``size`` entities reached breadth-first from ``start``, with the triples among them."""
    import numpy as np

    from kgplm.kg import GraphCollector

    first = store.entity_id(start)
    chosen, frontier = {first}, [first]
    while frontier and len(chosen) < size:
        node = frontier.pop(0)
        for neighbor in store.one_hop(node)[0].tolist():
            if neighbor not in chosen and len(chosen) < size:
                chosen.add(neighbor)
                frontier.append(neighbor)
    triples = store.triples
    inside = np.isin(triples[:, 0], list(chosen)) & np.isin(triples[:, 2], list(chosen))
    collector = GraphCollector(source=f"{store.source}-subgraph")
    for entity in sorted(chosen):
        collector.add_label(collector.entity(store.entity_iri(entity)), store.entity_name(entity), "zh", 1)
    for h, r, t in triples[inside].tolist():
        collector.add_triple(collector.entity(store.entity_iri(h)),
                             collector.relation(store.relation_iris[r], store.relation_name(r)),
                             collector.entity(store.entity_iri(t)))
    return collector.build()
