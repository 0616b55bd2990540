"""GraphCollector: merging equivalent entities, checked by hand on a small graph."""

from __future__ import annotations

from kgplm.kg import GraphCollector

SAME_AS = "http://www.w3.org/2002/07/owl#sameAs"


def test_merge_linked_by_hand() -> None:
    collector = GraphCollector(source="test")
    a, b, c, d, e = (collector.entity(f"http://x/{n}") for n in "abcde")
    r, same = collector.relation("http://x/r"), collector.relation(SAME_AS)
    for head, relation, tail in [(a, r, b), (b, same, c), (c, r, d), (d, r, d), (c, r, b), (e, same, d), (c, same, b)]:
        collector.add_triple(head, relation, tail)
    collector.add_label(b, "B", "en", 1)
    collector.add_label(c, "C", "zh", 0)
    collector.add_label(d, "D", "en", 2)
    collector.add_label(e, "E", "", 1)  # d has no name of its own: e's name stays a name
    collector.add_type(c, collector.type("http://x/T"))
    assert collector.merge_linked([SAME_AS]) == 2  # c into b, e into d
    store = collector.build()
    iris = [store.entity_iri(i) for i in range(store.num_entities)]
    assert iris == ["http://x/a", "http://x/b", "http://x/d"]
    assert store.relation_iris == ["http://x/r"]  # no sameAs triple is left
    name = store.entity_name
    # c -r-> b became a self-loop of b through the merge (dropped); d's own self-loop stays
    assert {(name(h), name(t)) for h, _, t in store.triples.tolist()} == {("a", "B"), ("B", "E"), ("E", "E")}
    assert name(1) == "B" and ("C", "zh", "altLabel") in store.labels(1) and store.entity_types(1) == ["T"]
    assert name(2) == "E"  # d had only an alias, so e's name became the display name
    assert store.entity_id("http://x/c") == 1 and store.entity_id("http://x/e") == 2 and store.entity_id("C") == 1
    assert store.merged_iris() == {"http://x/c": 1, "http://x/e": 2}
    assert store.describe()["merged_entities"] == 2
