"""OBO ontologies: is_a, relationships, synonyms, xrefs, obsolete terms."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgplm import KGStore
from kgplm.exceptions import DataFormatError

OBO = """\
format-version: 1.2
ontology: hp
default-namespace: human_phenotype

[Term]
id: HP:0000001
name: All

[Term]
id: HP:0000118
name: Phenotypic abnormality
synonym: "Organ abnormality" EXACT []
synonym: "Phenotype \\"odd\\"" RELATED [HPO:probinson]
synonym: "Abnormality" BROAD []
xref: UMLS:C4021819
def: "A phenotypic abnormality." [HPO:probinson]
is_a: HP:0000001 ! All

[Term]
id: HP:0001250
name: Seizure
is_a: HP:0000118 ! Phenotypic abnormality
is_a: HP:0000003 ! obsolete parent
relationship: part_of HP:0000118 {source="x"} ! Phenotypic abnormality

[Term]
id: HP:0000003
name: obsolete Multicystic kidney dysplasia
is_obsolete: true

[Typedef]
id: part_of
name: part of
xref: BFO:0000050
"""


def test_obo_mapping(tmp_path: Path) -> None:
    path = tmp_path / "hp.obo"
    path.write_text(OBO, encoding="utf-8")
    store = KGStore.from_obo(path, show_progress=False)
    assert [store.entity_iri(i) for i in range(store.num_entities)] == [
        "http://purl.obolibrary.org/obo/HP_0000001",
        "http://purl.obolibrary.org/obo/HP_0000118",
        "http://purl.obolibrary.org/obo/HP_0001250",
    ]  # the obsolete term is dropped
    triples = {
        (store.entity_name(h), store.relation_name(r), store.entity_name(t)) for h, r, t in store.triples.tolist()
    }
    assert triples == {
        ("Phenotypic abnormality", "is_a", "All"),
        ("Seizure", "is_a", "Phenotypic abnormality"),
        ("Seizure", "part of", "Phenotypic abnormality"),
    }
    abnormality = store.entity_id("Phenotypic abnormality")
    assert store.entity_id("http://purl.obolibrary.org/obo/HP_0000118") == abnormality
    assert store.aliases(abnormality) == ["Organ abnormality", 'Phenotype "odd"']
    assert store.entity_id("Organ abnormality") == abnormality
    attributes = dict(zip(store.attributes(abnormality).predicate, store.attributes(abnormality).value))
    assert attributes["xref"] == "UMLS:C4021819"
    assert attributes["def"] == "A phenotypic abnormality."
    assert attributes["broad_synonym"] == "Abnormality"
    assert store.entity_type(abnormality) == "human_phenotype"


def test_obo_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.obo"
    path.write_text("format-version: 1.2\n\n[Term]\nid: X:1\nname without colon\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        KGStore.from_obo(path, show_progress=False)
    assert caught.value.line == 5
    path.write_text("[Term]\nname: no id\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="without an id") as caught:
        KGStore.from_obo(path, show_progress=False)
    assert caught.value.line == 1
