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
        collector.add_triple(
            collector.entity(store.entity_iri(h)),
            collector.relation(store.relation_iris[r], store.relation_name(r)),
            collector.entity(store.entity_iri(t)),
        )
    return collector.build()


def dense_walk(store: KGStore):
    """Row-stochastic P of the undirected walk (each triple counted once, self-loops dropped), built
    from the triples directly rather than through kgplm's TransitionMatrix."""
    import numpy as np

    n = store.num_entities
    counts = np.zeros((n, n))
    for h, _, t in store.triples.tolist():
        if h != t:
            counts[h, t] += 1
            counts[t, h] += 1
    return counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)


def directed_walk_and_pagerank(store: KGStore, alpha: float):
    """The directed walk P (head → tail, self-loops dropped), its out-degrees and its global PageRank g
    with restart α, a dangling node's mass spread uniformly; plain numpy power iteration."""
    import numpy as np

    n = store.num_entities
    counts = np.zeros((n, n))
    for h, _, t in store.triples.tolist():
        if h != t:
            counts[h, t] += 1
    out_degree = counts.sum(axis=1)
    walk = counts / np.maximum(out_degree, 1)[:, None]
    dangling = out_degree == 0
    pagerank = np.full(n, 1 / n)
    for _ in range(2000):
        pagerank = (1 - alpha) * (pagerank @ walk + pagerank[dangling].sum() / n) + alpha / n
    return walk, out_degree, pagerank
