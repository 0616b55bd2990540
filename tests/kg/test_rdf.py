"""RDF import (every format, both parsers), export and round trips."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import rdflib

from kgplm import KGStore
from kgplm.exceptions import (
    ConfigurationError,
    DataFormatError,
    EmptyGraphError,
    EncodingError,
    KgplmError,
    MissingFileError,
)
from tests.conftest import TOY_TURTLE
from tests.kg.helpers import canonical

EX = "http://example.org/"


def test_toy_graph_mapping(toy_turtle: Path) -> None:
    store = KGStore.from_rdf(toy_turtle, show_progress=False)
    # entities: linked or typed or labelled IRIs; not the predicates, classes or the property
    assert [store.entity_iri(i) for i in range(store.num_entities)] == [
        EX + "diabetes",
        EX + "polyuria",
        EX + "thirst",
        EX + "metformin",
        EX + "glucophage",
        EX + "lonely",
    ]
    assert store.num_relations == 3 and store.num_triples == 4
    assert set(store.relation_names) == {"常见症状", "治疗", "sameAs"}
    assert store.entity_type(0) == "疾病" and store.entity_type(1) == "Symptom" and store.entity_type(3) == "Drug"
    assert store.entity_type(4) is None
    # names and aliases keep language tags; zh is preferred for the display name
    assert store.entity_name(0) == "糖尿病"
    assert ("diabetes", "en", "label") in store.labels(0)
    assert ("diabetes mellitus", "en", "exactSynonym") in store.labels(0)
    assert store.aliases(0) == ["diabetes", "消渴", "diabetes mellitus"]
    # prefLabel beats rdfs:label in the same language
    assert store.entity_name(2) == "口渴" and store.aliases(2) == ["烦渴"]
    # owl:sameAs: kept as a relation, names copied both ways
    assert (3, store.relation_id("sameAs"), 4) in set(map(tuple, store.triples.tolist()))
    assert "格华止" in store.aliases(3)
    assert set(store.aliases(4)) == {"二甲双胍", "metformin"}
    # an IRI without labels is named by its local name
    assert store.entity_name(5) == "lonely"
    # literal-valued predicates are attributes, not edges
    attributes = store.attributes(0)
    assert set(zip(attributes.predicate, attributes.value)) == {("icd10", "E14"), ("prevalence", "0.11")}
    assert "http://www.w3.org/2001/XMLSchema#decimal" in set(attributes.datatype)


def test_lookup_by_name_alias_iri(toy_turtle: Path) -> None:
    store = KGStore.from_rdf(toy_turtle, show_progress=False)
    assert store.entity_id("糖尿病") == 0
    assert store.entity_id("消渴") == 0
    assert store.entity_id("Diabetes Mellitus") == 0  # case-insensitive fallback
    assert store.entity_id(EX + "thirst") == 2
    # 格华止 is glucophage's name and metformin's derived alias: the display name wins
    assert store.entity_id("格华止") == 4
    assert store.entity_ids("格华止") == [4, 3]


@pytest.mark.parametrize(
    "rdflib_format,suffix",
    [
        ("nt", ".nt"),
        ("xml", ".rdf"),
        ("json-ld", ".jsonld"),
        ("nquads", ".nq"),
        ("trig", ".trig"),
        ("turtle", ".ttl"),
    ],
)
def test_every_format_gives_the_same_store(tmp_path: Path, toy_turtle: Path, rdflib_format: str, suffix: str) -> None:
    reference = canonical(KGStore.from_rdf(toy_turtle, show_progress=False))
    graph = rdflib.Dataset() if rdflib_format in ("nquads", "trig") else rdflib.Graph()
    graph.parse(data=TOY_TURTLE, format="turtle")
    path = tmp_path / f"toy{suffix}"
    graph.serialize(destination=str(path), format=rdflib_format)
    assert canonical(KGStore.from_rdf(path, show_progress=False)) == reference


@pytest.mark.parametrize("suffix", [".ttl", ".rdf", ".jsonld"])
def test_rdflib_parser_agrees_with_oxigraph(tmp_path: Path, toy_turtle: Path, suffix: str) -> None:
    graph = rdflib.Graph().parse(data=TOY_TURTLE, format="turtle")
    path = tmp_path / f"toy{suffix}"
    graph.serialize(destination=str(path), format={".ttl": "turtle", ".rdf": "xml", ".jsonld": "json-ld"}[suffix])
    fast = KGStore.from_rdf(path, show_progress=False)
    slow = KGStore.from_rdf(path, parser="rdflib", show_progress=False)
    assert canonical(fast) == canonical(slow)


def test_gzip_and_several_files(tmp_path: Path) -> None:
    first, second = TOY_TURTLE.split("ex:metformin", 1)
    prefixes = "\n".join(line for line in TOY_TURTLE.splitlines() if line.startswith("@prefix"))
    (tmp_path / "a.ttl").write_text(first, encoding="utf-8")
    with gzip.open(tmp_path / "b.ttl.gz", "wt", encoding="utf-8") as handle:
        handle.write(prefixes + "\nex:metformin" + second)
    store = KGStore.from_rdf([tmp_path / "a.ttl", tmp_path / "b.ttl.gz"], show_progress=False)
    toy = KGStore.from_rdf(tmp_path / "a.ttl", show_progress=False)
    assert toy.num_triples == 2
    assert store.num_entities == 6 and store.num_triples == 4
    assert "格华止" in store.aliases(store.entity_id("二甲双胍"))


def test_round_trip_through_turtle_and_ntriples(tmp_path: Path, toy_turtle: Path) -> None:
    store = KGStore.from_rdf(toy_turtle, show_progress=False)
    for fmt, name in (("turtle", "out.ttl"), ("nt", "out.nt")):
        path = store.to_rdf(tmp_path / name, format=fmt)
        assert canonical(KGStore.from_rdf(path, show_progress=False)) == canonical(store)


def test_cmekg_subgraph_round_trip(tmp_path: Path, cmekg_tsv: Path) -> None:
    """Chinese names, full-width punctuation and spaces survive minting IRIs, Turtle and re-import."""
    subset = tmp_path / "cmekg_part.tsv"
    with gzip.open(cmekg_tsv, "rt", encoding="utf-8") as source, open(subset, "w", encoding="utf-8") as target:
        for index, line in enumerate(source):
            if index >= 30000:
                break
            target.write(line)
    store = KGStore.from_cmekg(subset, show_progress=False)
    path = store.to_rdf(tmp_path / "part.ttl")
    again = KGStore.from_rdf(path, show_progress=False)
    assert canonical(again) == canonical(store)
    assert (again.num_entities, again.num_relations, again.num_triples) == (
        store.num_entities,
        store.num_relations,
        store.num_triples,
    )


def test_rdflib_graph_view(toy_turtle: Path, tmp_path: Path) -> None:
    store = KGStore.from_rdf(toy_turtle, show_progress=False)
    graph = store.graph
    assert graph is store.graph  # cached
    diabetes = rdflib.URIRef(EX + "diabetes")
    assert (diabetes, rdflib.URIRef(EX + "hasSymptom"), rdflib.URIRef(EX + "polyuria")) in graph
    assert (diabetes, rdflib.RDFS.label, rdflib.Literal("糖尿病", lang="zh")) in graph
    # the view is rebuilt after save/load
    loaded = KGStore.load(store.save(tmp_path / "store"))
    assert set(loaded.graph) == set(graph)


def test_malformed_turtle_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.ttl"
    path.write_text(
        '@prefix ex: <http://example.org/> .\nex:a ex:b ex:c .\nex:a ex:b "unterminated .\n', encoding="utf-8"
    )
    with pytest.raises(DataFormatError) as caught:
        KGStore.from_rdf(path, show_progress=False)
    assert caught.value.line in (3, 4)
    assert str(path) in str(caught.value) and "turtle" in str(caught.value)


def test_malformed_with_rdflib_parser(tmp_path: Path) -> None:
    path = tmp_path / "bad.nt"
    path.write_text("<http://a> <http://b> .\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="bad.nt"):
        KGStore.from_rdf(path, parser="rdflib", show_progress=False)


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.nt"
    path.write_bytes('<http://a> <http://b> <http://c> .\n<http://a> <http://l> "caf\xe9" .\n'.encode("latin-1"))
    with pytest.raises(EncodingError) as caught:
        KGStore.from_rdf(path, show_progress=False)
    assert caught.value.line == 2 and "UTF-8" in str(caught.value)


def test_missing_file_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(MissingFileError, match="nowhere.ttl"):
        KGStore.from_rdf(tmp_path / "nowhere.ttl")
    odd = tmp_path / "graph.data"
    odd.write_text("", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="format"):
        KGStore.from_rdf(odd)


def test_a_graph_without_links_loads(tmp_path: Path) -> None:
    """Names, attributes and types without any entity-to-entity link: a store with zero triples."""
    path = tmp_path / "literals.ttl"
    path.write_text(
        "@prefix ex: <http://example.org/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        'ex:a rdfs:label "甲"@zh ; ex:icd10 "E14" .\n'
        'ex:b ex:note "only an attribute" .\n'
        "ex:c a ex:Disease .\n",
        encoding="utf-8",
    )
    store = KGStore.from_rdf(path, show_progress=False)
    assert (store.num_entities, store.num_relations, store.num_triples) == (3, 0, 0)
    assert [store.entity_iri(i) for i in range(3)] == [EX + "a", EX + "b", EX + "c"]
    assert store.entity_name(0) == "甲" and store.entity_type(2) == "Disease"
    assert list(store.attributes("b").value) == ["only an attribute"]
    assert store.describe()["num_attributes"] == 2
    assert store.adjacency().shape == (3, 3) and store.neighbors("甲").empty
    again = KGStore.load(store.save(tmp_path / "store"))
    assert again.equals(store)


def test_a_file_without_statements_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.ttl"
    path.write_text("@prefix ex: <http://example.org/> .\n# nothing else\n", encoding="utf-8")
    with pytest.raises(EmptyGraphError, match="no statement") as caught:
        KGStore.from_rdf(path, show_progress=False)
    assert str(path) in str(caught.value) and "literal attributes" not in str(caught.value)
    assert issubclass(EmptyGraphError, KgplmError)


def test_relative_iris_name_base_iri(tmp_path: Path) -> None:
    path = tmp_path / "relative.ttl"
    path.write_text("<a> <linked-to> <b> .\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="base_iri=") as caught:
        KGStore.from_rdf(path, show_progress=False)
    assert caught.value.line == 1
    store = KGStore.from_rdf(path, base_iri="http://example.org/kg/", show_progress=False)
    assert [store.entity_iri(i) for i in range(2)] == ["http://example.org/kg/a", "http://example.org/kg/b"]
    assert store.relation_iris == ["http://example.org/kg/linked-to"]


def test_rdfxml_errors_carry_a_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.rdf"
    path.write_text(
        '<?xml version="1.0"?>\n'
        '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://example.org/">\n'
        '  <rdf:Description rdf:about="http://example.org/a">\n'
        '    <ex:p rdf:resource="http://example.org/b"/>\n'
        "  </rdf:Description>\n"
        '  <rdf:Description rdf:about="http://example.org/c">\n'
        '    <ex:p rdf:resource="http://example.org/d">\n'
        "  </rdf:Description>\n"
        "</rdf:RDF>\n",
        encoding="utf-8",
    )
    with pytest.raises(DataFormatError) as caught:
        KGStore.from_rdf(path, show_progress=False)
    # the unclosed <ex:p> of line 7 is found where </rdf:Description> closes on line 8
    assert caught.value.line == 8
    assert f"{path}:8" in str(caught.value)


SAME_AS_TURTLE = """\
@prefix ex: <http://example.org/> .
@prefix umls: <http://example.org/umls/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
ex:headache rdfs:label "头痛"@zh ; ex:seenIn ex:migraine ; skos:exactMatch umls:C0018681 .
umls:C0018681 skos:prefLabel "Headache"@en ; ex:code "C0018681" .
ex:cephalalgia rdfs:label "头疼"@zh ; owl:sameAs ex:headache ; ex:seenIn ex:flu .
ex:migraine rdfs:label "偏头痛"@zh ; a ex:Disease .
ex:flu rdfs:label "流感"@zh .
"""


def test_merge_same_as(tmp_path: Path) -> None:
    path = tmp_path / "same.ttl"
    path.write_text(SAME_AS_TURTLE, encoding="utf-8")
    plain = KGStore.from_rdf(path, show_progress=False)
    assert plain.num_entities == 5 and plain.describe().get("merged_entities", 0) == 0
    store = KGStore.from_rdf(path, merge_same_as=True, show_progress=False)
    # headache, C0018681 and cephalalgia are one entity: the first seen keeps its IRI and display name
    assert store.num_entities == 3 and store.describe()["merged_entities"] == 2
    headache = store.entity_id("头痛")
    assert store.entity_iri(headache) == EX + "headache" and store.entity_name(headache) == "头痛"
    for other in ("Headache", "头疼", "http://example.org/umls/C0018681", EX + "cephalalgia"):
        assert store.entity_id(other) == headache
    assert set(store.aliases(headache)) == {"Headache", "头疼"}
    # links of the merged nodes are redirected; the equivalence links themselves are gone
    triples = {
        (store.entity_name(h), store.relation_name(r), store.entity_name(t)) for h, r, t in store.triples.tolist()
    }
    assert triples == {("头痛", "seenIn", "偏头痛"), ("头痛", "seenIn", "流感")}
    assert store.relation_names == ["seenIn"]
    assert list(store.attributes(headache).value) == ["C0018681"]
    # the merged IRIs are written back as owl:sameAs, so a merged store round-trips
    again = KGStore.from_rdf(store.to_rdf(tmp_path / "merged.ttl"), merge_same_as=True, show_progress=False)
    assert canonical(again) == canonical(store)


def test_remote_jsonld_context_is_never_fetched(tmp_path: Path) -> None:
    path = tmp_path / "remote.jsonld"
    path.write_text(
        '{"@context": "http://example.org/context.jsonld", "@id": "http://a", "p": {"@id": "http://b"}}',
        encoding="utf-8",
    )
    for parser in ("oxigraph", "rdflib"):
        with pytest.raises(DataFormatError):
            KGStore.from_rdf(path, parser=parser, show_progress=False)


def test_duplicate_triples_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "dup.nt"
    path.write_text(
        "<http://a> <http://r> <http://b> .\n" * 3 + "<http://a> <http://r> <http://c> .\n", encoding="utf-8"
    )
    store = KGStore.from_rdf(path, show_progress=False)
    assert store.num_triples == 2 and store.describe()["duplicate_triples"] == 2


def test_two_process_parse_equals_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kgplm.kg.rdf as rdf

    lines = [f"<http://x/e{i}> <http://x/r{i % 3}> <http://x/e{(i * 7) % 50}> .\n" for i in range(400)]
    lines += [f'<http://x/e{i}> <http://www.w3.org/2000/01/rdf-schema#label> "名{i}"@zh .\n' for i in range(50)]
    lines += ["_:b1 <http://x/r0> <http://x/e1> .\n", "<http://x/e2> <http://x/r1> _:b1 .\n"]
    path = tmp_path / "big.nt"
    path.write_text("".join(reversed(lines)), encoding="utf-8")
    monkeypatch.setattr(rdf, "PARALLEL_MIN_BYTES", 0)
    sequential = KGStore.from_rdf(path, workers=1, show_progress=False)
    parallel = KGStore.from_rdf(path, workers=2, show_progress=False)
    assert parallel.equals(sequential)  # same ids too: nodes keep their first-appearance order


def test_two_process_parse_reports_the_absolute_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kgplm.kg.rdf as rdf

    lines = [f"<http://x/e{i}> <http://x/r> <http://x/e{i + 1}> .\n" for i in range(300)]
    lines[250] = "<http://x/e250> <http://x/r> broken .\n"
    path = tmp_path / "broken.nt"
    path.write_text("".join(lines), encoding="utf-8")
    monkeypatch.setattr(rdf, "PARALLEL_MIN_BYTES", 0)
    with pytest.raises(DataFormatError) as caught:
        KGStore.from_rdf(path, workers=2, show_progress=False)
    assert caught.value.line == 251 and str(path) in str(caught.value)


def test_shipped_toy_graph() -> None:
    """graphs/toy_medical.ttl, counted by hand: 6 diseases, 5 drugs + glucophage, 12 symptoms, 5 departments."""
    path = Path(__file__).resolve().parents[2] / "graphs" / "toy_medical.ttl"
    store = KGStore.from_rdf(path, show_progress=False)
    assert (store.num_entities, store.num_relations, store.num_triples) == (29, 5, 33)
    assert store.describe()["entities_per_type"] == {"症状": 12, "疾病": 6, "科室": 5, "药物": 5, None: 1}
    headache = store.entity_id("头痛")
    assert sorted(store.neighbors(headache).neighbor) == ["布洛芬", "感冒", "脑卒中", "阿司匹林", "高血压"]
    assert store.entity_id("中风") == store.entity_id("stroke")
