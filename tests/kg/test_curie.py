"""Compact ids resolve in ``KGStore.entity_id``: OBO CURIEs and ids, RDF prefixes, UMLS CUIs (issue 29.4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgplm import KGStore
from kgplm.exceptions import UnknownEntityError
from kgplm.kg.curie import DEFAULT_PREFIXES, OBO_PURL, curie_candidates
from tests.kg.test_obo import OBO
from tests.kg.test_umls import write as write_umls

MONDO_OBO = """\
format-version: 1.2
ontology: mondo

[Term]
id: MONDO:0005148
name: type 2 diabetes mellitus
synonym: "277000" EXACT []
"""

TURTLE = """\
@prefix ex: <http://example.org/disease/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:D001 rdfs:label "Epilepsy"@en ; ex:treatedBy ex:D002 .
ex:D002 rdfs:label "Valproate"@en .
"""


def test_obo_curies_and_ids_resolve(tmp_path: Path) -> None:
    (tmp_path / "hp.obo").write_text(OBO, encoding="utf-8")
    hp = KGStore.from_obo(tmp_path / "hp.obo", show_progress=False)
    seizure = hp.entity_id("Seizure")
    assert hp.entity_iri(seizure) == "http://purl.obolibrary.org/obo/HP_0001250"
    for query in ("HP:0001250", "HP_0001250", "obo:HP_0001250", "hp:0001250", OBO_PURL + "HP_0001250"):
        assert hp.entity_id(query) == seizure, query
    assert hp.prefixes == {"HP": OBO_PURL + "HP_"}
    (tmp_path / "mondo.obo").write_text(MONDO_OBO, encoding="utf-8")
    mondo = KGStore.from_obo(tmp_path / "mondo.obo", show_progress=False)
    assert mondo.entity_id("MONDO_0005148") == mondo.entity_id("MONDO:0005148") == 0
    assert mondo.entity_id("277000") == 0  # a name still resolves as a name
    with pytest.raises(UnknownEntityError):
        hp.entity_id("HP:9999999")  # a well-formed id of no entity


def test_umls_cuis_resolve(tmp_path: Path) -> None:
    store = KGStore.from_umls_rrf(write_umls(tmp_path / "umls"), show_progress=False)
    diabetes = store.entity_id("Diabetes Mellitus")
    assert store.entity_id("C0011849") == store.entity_id("umls:C0011849") == diabetes
    assert store.entity_name(store.entity_id("C0025598")) == "Metformin"
    with pytest.raises(UnknownEntityError):
        store.entity_id("C0000000")


@pytest.mark.parametrize("parser", ["oxigraph", "rdflib"])
def test_rdf_prefixes_come_from_the_file(tmp_path: Path, parser: str) -> None:
    path = tmp_path / "graph.ttl"
    path.write_text(TURTLE, encoding="utf-8")
    store = KGStore.from_rdf(path, parser=parser, show_progress=False)
    assert store.prefixes["ex"] == "http://example.org/disease/"
    assert store.entity_name(store.entity_id("ex:D001")) == "Epilepsy"
    assert store.entity_id("ex:D002") == store.entity_id("http://example.org/disease/D002")


def test_candidates_follow_the_documented_default_map() -> None:
    assert curie_candidates("umls:C0011849") == [
        DEFAULT_PREFIXES["umls"] + "C0011849",
        OBO_PURL + "umls_C0011849",
        OBO_PURL + "UMLS_C0011849",
    ]
    assert curie_candidates("C0011849") == [DEFAULT_PREFIXES["umls"] + "C0011849"]
    assert curie_candidates("DOID_9352") == [OBO_PURL + "DOID_9352"]
    assert curie_candidates("HP:0001250", {"HP": "http://example.org/hp#"}) == [
        "http://example.org/hp#0001250",
        OBO_PURL + "HP_0001250",
    ]
    assert curie_candidates("Seizure") == curie_candidates("http://x.org/a") == curie_candidates("糖尿病") == []
