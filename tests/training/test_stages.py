"""The training stages' inputs: with a knowledge graph, text is linked with the linking graph's names."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kgplm import KGStore
from kgplm.kg import GraphCollector
from kgplm.training.stages import StageInputs

TOY_GRAPH = Path(__file__).resolve().parents[2] / "graphs" / "toy_medical.ttl"


def _same_ids_without_names(store: KGStore) -> KGStore:
    """A store with ``store``'s entity and relation ids and triples but no label at all."""
    collector = GraphCollector(source="no names")
    for iri in store.entity_iris:
        collector.entity(iri)
    for iri in store.relation_iris:
        collector.relation(iri)
    for head, relation, tail in np.asarray(store.triples).tolist():
        collector.add_triple(head, relation, tail)
    return collector.build()


def test_the_linker_reads_the_linking_store_when_the_artefacts_come_from_another(tmp_path):
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    nameless = _same_ids_without_names(store)
    assert list(nameless.entity_iris) == list(store.entity_iris) and nameless.entity_name(0) != store.entity_name(0)
    corpus = tmp_path / "notes.txt"
    corpus.write_text("患者有糖尿病和多尿。", encoding="utf-8")
    common = dict(arguments={}, corpus=corpus, corpus_options={}, progress=False)
    linked = StageInputs(store=nameless, linking_store=store, **common).linker.link("患者有糖尿病和多尿。")
    expected = {store.entity_id("糖尿病"), store.entity_id("多尿")}
    assert {mention.entity_id for mention in linked} == expected
    assert StageInputs(store=nameless, **common).linker.link("患者有糖尿病和多尿。") == []
