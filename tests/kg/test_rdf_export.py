"""Writing a store as RDF: the format follows the extension, every readable format round-trips,
blank nodes keep their identity, and IRIs that cannot be written are named."""

from __future__ import annotations

from pathlib import Path

import pytest
import rdflib
from rdflib.compare import isomorphic

from kgplm import KGStore
from kgplm.exceptions import EmptyGraphError, KgplmError
from tests.conftest import TOY_TURTLE
from tests.kg.helpers import canonical

EX = "http://example.org/"

#: (file suffix, rdflib's name of the format that suffix means) for every format the reader supports
EXPORT_FORMATS = [
    (".ttl", "turtle"),
    (".nt", "nt"),
    (".nq", "nquads"),
    (".trig", "trig"),
    (".rdf", "xml"),
    (".xml", "xml"),
    (".owl", "xml"),
    (".jsonld", "json-ld"),
    (".n3", "n3"),
    (".ttl.gz", "turtle"),
    (".nt.gz", "nt"),
]

#: statements of TOY_TURTLE that describe the schema and are not part of a store, so never exported
SCHEMA_STATEMENTS = {
    (rdflib.URIRef(EX + "treats"), rdflib.RDF.type, rdflib.OWL.ObjectProperty),
    (rdflib.URIRef(EX + "treats"), rdflib.RDFS.domain, rdflib.URIRef(EX + "Drug")),
}


def comparable(graph: rdflib.Graph) -> set:
    """The statements of ``graph``; names of predicates and classes without their language tag (a store
    keeps one name per relation and type, not its language)."""
    schema_terms = set(graph.predicates()) | set(graph.objects(None, rdflib.RDF.type))
    return {(s, p, str(o)) if s in schema_terms and p == rdflib.RDFS.label else (s, p, o) for s, p, o in graph}


def read_with_rdflib(path: Path, rdflib_format: str) -> rdflib.Graph:
    """The file read by rdflib alone (default graph of a dataset format), as one graph."""
    import gzip

    data = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    if rdflib_format in ("nquads", "trig"):
        dataset = rdflib.Dataset()
        dataset.parse(data=data, format=rdflib_format)
        graph = rdflib.Graph()
        for s, p, o, _ in dataset.quads():
            graph.add((s, p, o))
        return graph
    return rdflib.Graph().parse(data=data, format=rdflib_format)


@pytest.mark.parametrize("suffix,rdflib_format", EXPORT_FORMATS)
def test_export_infers_the_format_and_round_trips(
    tmp_path: Path, toy_turtle: Path, suffix: str, rdflib_format: str
) -> None:
    store = KGStore.from_rdf(toy_turtle, show_progress=False)
    path = store.to_rdf(tmp_path / f"out{suffix}")  # no format: the extension decides
    # rdflib, reading the file as what its extension says, finds the source's statements (schema excepted)
    source = rdflib.Graph().parse(data=TOY_TURTLE, format="turtle")
    assert comparable(read_with_rdflib(path, rdflib_format)) == comparable(source) - SCHEMA_STATEMENTS
    # and kgplm reads back the same entities, triples, names, aliases, types and attributes
    assert canonical(KGStore.from_rdf(path, show_progress=False)) == canonical(store)


def test_explicit_format_still_wins(tmp_path: Path, toy_turtle: Path) -> None:
    store = KGStore.from_rdf(toy_turtle, show_progress=False)
    path = store.to_rdf(tmp_path / "graph.txt", format="nt")
    assert canonical(KGStore.from_rdf(path, format="nt", show_progress=False)) == canonical(store)
    with pytest.raises(KgplmError, match="format"):
        store.to_rdf(tmp_path / "graph.unknown")


BLANK_TURTLE = """\
@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
_:a-b ex:p ex:x ; rdfs:label "dash" .
_:a_b ex:p ex:y ; rdfs:label "underscore" .
_:a.b ex:q _:a-b .
_:a_2Db ex:q _:a_b .
"""


@pytest.mark.parametrize("suffix,rdflib_format", EXPORT_FORMATS)
def test_export_keeps_blank_nodes_apart(tmp_path: Path, suffix: str, rdflib_format: str) -> None:
    source = tmp_path / "blank.ttl"
    source.write_text(BLANK_TURTLE, encoding="utf-8")
    store = KGStore.from_rdf(source, show_progress=False)
    assert store.num_entities == 6 and store.num_triples == 4
    path = store.to_rdf(tmp_path / f"out{suffix}")
    assert isomorphic(read_with_rdflib(path, rdflib_format), rdflib.Graph().parse(source))
    again = KGStore.from_rdf(path, show_progress=False)
    assert (again.num_entities, again.num_triples) == (6, 4)
    assert sorted(again.entity_name(again.entity_id(name)) for name in ("dash", "underscore")) == ["dash", "underscore"]


def test_an_iri_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    # rdflib's parser accepts an escaped space inside an IRI; no RDF syntax can write it back
    path = tmp_path / "odd.nt"
    path.write_text(
        "<http://example.org/a\\u0020b> <http://example.org/p> <http://example.org/c> .\n", encoding="utf-8"
    )
    store = KGStore.from_rdf(path, parser="rdflib", show_progress=False)
    with pytest.raises(KgplmError, match="http://example.org/a b"):
        store.to_rdf(tmp_path / "out.ttl")
    assert not (tmp_path / "out.ttl").exists()


#: the local name of W3C Turtle test ``localName_with_assigned_nfc_PN_CHARS_BASE_character_boundaries``: the ends
#: of each PN_CHARS_BASE range, up to U+E01EF, which Turtle admits in a prefixed name but RFC 3987 not in an IRI
NFC_BOUNDARIES = (
    "AZaz\u00c0\u00d6\u00d8\u00f6\u00f8\u02ff\u0370\u037d\u0384\u1ffe\u200c\u200d\u2070\u2189\u2c00"
    "\u2fd5\u3001\ud7fb\ufa0e\ufdc7\ufdf0\uffef\U00010000\U000e01ef"
)


@pytest.mark.parametrize("suffix", [".nt", ".ttl", ".rdf"])
def test_a_local_name_turtle_admits_but_iris_do_not_is_written_so_that_it_reads_back(tmp_path: Path, suffix: str):
    path = tmp_path / "boundaries.ttl"
    path.write_text(
        f"@prefix p: <http://a.example/> .\n<http://a.example/s> <http://a.example/p> p:{NFC_BOUNDARIES} .\n",
        encoding="utf-8",
    )
    store = KGStore.from_rdf(path, show_progress=False)
    again = KGStore.from_rdf(store.to_rdf(tmp_path / f"out{suffix}"), show_progress=False)
    assert canonical(again) == canonical(store)
    assert sorted(again.entity_name(i) for i in range(again.num_entities)) == sorted(["s", NFC_BOUNDARIES])
    # the code point IRIs may not hold is percent-encoded; the name (percent-decoded) keeps it
    assert again.entity_iri(again.entity_id(NFC_BOUNDARIES)) == f"http://a.example/{NFC_BOUNDARIES[:-1]}%F3%A0%87%AF"


def test_a_store_emptied_by_schema_filtering_is_refused_before_it_is_written(tmp_path: Path):
    path = tmp_path / "schema.ttl"
    path.write_text(
        "@prefix ex: <http://example.org/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        "ex:p rdfs:domain ex:C .\n",
        encoding="utf-8",
    )
    store = KGStore.from_rdf(path, show_progress=False)
    assert store.num_entities == 0
    with pytest.raises(EmptyGraphError, match="has no entity.*nothing was written"):
        store.to_rdf(tmp_path / "out.nt")
    assert not (tmp_path / "out.nt").exists()  # rather than a file from_rdf refuses to read
