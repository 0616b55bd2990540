"""Every importer on arbitrary input: a store or a KgplmError naming where — never another exception — and
every generated store survives ``to_rdf`` → ``from_rdf``.

Example counts are small (the suite runs on two cores); ``derandomize`` makes a run repeatable.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgplm import KGStore
from kgplm.exceptions import KgplmError
from tests.kg.helpers import canonical

FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

#: fragments of each syntax, so that generated files reach past the first character of the parsers
RDF_PIECES = [
    "@prefix ex: <http://example.org/> .\n",
    "ex:a",
    "ex:b",
    "<http://example.org/c>",
    "_:b0",
    " ",
    "\n",
    " .\n",
    " ;",
    " ,",
    '"text"',
    '"x"@en',
    '"1"^^<http://www.w3.org/2001/XMLSchema#integer>',
    "a",
    "ex:C",
    "<",
    ">",
    "@base <http://example.org/> .\n",
    "<rel>",
    "[",
    "]",
    "(",
    ")",
    "#",
    "\\u00e9",
    "'",
]
OBO_PIECES = [
    "format-version: 1.2\n",
    "[Term]\n",
    "[Typedef]\n",
    "id: HP:0000001\n",
    "id: HP:0000002\n",
    "name: Abnormality\n",
    "is_a: HP:0000001 ! all\n",
    'synonym: "x" EXACT []\n',
    'def: "d" []\n',
    "relationship: part_of HP:0000001\n",
    "xref: UMLS:C0000001\n",
    "is_obsolete: true\n",
    "\n",
    "!",
    "\\",
]
TSV_PIECES = [
    "head\trelation\ttail\n",
    "a\tr\tb\n",
    "a\tr\n",
    "\t\t\n",
    '"q"\tr\tb\n',
    "a,r,b\n",
    "\n",
    "\t",
    "é",
    "\r\n",
    '"',
    "#",
]


def _document(pieces):
    return st.lists(st.one_of(st.sampled_from(pieces), st.text(max_size=8)), max_size=30).map("".join)


def _load_or_error(load, path: Path):
    """Either a store, or a KgplmError whose message names ``path`` (its file or directory)."""
    try:
        return load(path)
    except KgplmError as error:
        assert str(path) in str(error) or path.name in str(error), f"{type(error).__name__} without a location: {error}"
        return None


@pytest.mark.parametrize("suffix", [".ttl", ".nt", ".nq", ".trig", ".rdf", ".jsonld", ".n3"])
@FUZZ
@given(text=_document(RDF_PIECES))
def test_rdf_files_give_a_store_or_a_located_error(tmp_path_factory, suffix, text):
    path = tmp_path_factory.mktemp("rdf") / f"input{suffix}"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _load_or_error(lambda p: KGStore.from_rdf(p, show_progress=False), path)


@FUZZ
@given(data=st.binary(max_size=200))
def test_rdf_bytes_give_a_store_or_a_located_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("rdf") / "input.ttl"
    path.write_bytes(b"@prefix ex: <http://example.org/> .\n" + data)
    _load_or_error(lambda p: KGStore.from_rdf(p, show_progress=False), path)


@FUZZ
@given(text=_document(OBO_PIECES))
def test_obo_files_give_a_store_or_a_located_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("obo") / "input.obo"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _load_or_error(lambda p: KGStore.from_obo(p, show_progress=False), path)


@FUZZ
@given(text=_document(TSV_PIECES))
def test_triple_tables_give_a_store_or_a_located_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("tsv") / "input.tsv"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _load_or_error(lambda p: KGStore.from_triples(p, show_progress=False), path)


@FUZZ
@given(text=_document(TSV_PIECES))
def test_cmekg_dumps_give_a_store_or_a_located_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("cmekg") / "cmekg.tsv"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _load_or_error(lambda p: KGStore.from_cmekg(p, show_progress=False), path)


RRF_ROW = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "C0000001",
                "C0000002",
                "ENG",
                "P",
                "PF",
                "Y",
                "A1",
                "RO",
                "isa",
                "T047",
                "Disease",
                "MSH",
                "PT",
                "N",
                "0",
                "",
            ]
        ),
        st.text(max_size=5),
    ),
    max_size=20,
).map(lambda fields: "|".join(fields) + "|\n")


@FUZZ
@given(
    conso=st.lists(RRF_ROW, max_size=6).map("".join),
    rel=st.lists(RRF_ROW, max_size=4).map("".join),
    sty=st.lists(RRF_ROW, max_size=4).map("".join),
)
def test_umls_directories_give_a_store_or_a_located_error(tmp_path_factory, conso, rel, sty):
    directory = tmp_path_factory.mktemp("umls")
    for name, text in (("MRCONSO.RRF", conso), ("MRREL.RRF", rel), ("MRSTY.RRF", sty)):
        (directory / name).write_text(text, encoding="utf-8", errors="surrogatepass")
    _load_or_error(lambda p: KGStore.from_umls_rrf(p, show_progress=False), directory)


# -- generated stores round-trip through RDF -----------------------------------------------------------------------
LOCAL_NAME = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=6)
LITERAL = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)


@FUZZ
@given(
    triples=st.lists(st.tuples(LOCAL_NAME, st.sampled_from(["r", "s", "é"]), LOCAL_NAME), min_size=1, max_size=6),
    labels=st.lists(st.tuples(LOCAL_NAME, LITERAL), max_size=4),
)
def test_generated_stores_round_trip_through_rdf(tmp_path_factory, triples, labels):
    """A store of arbitrary names (loaded from a TSV of triples and an N-Triples file of labels) reads back
    from its own N-Triples and Turtle the same, or the writer refuses it with a located KgplmError."""
    from kgplm.kg.vocabulary import mint_iri

    work = tmp_path_factory.mktemp("round-trip")
    lines = []
    for head, relation, tail in triples:
        lines.append(
            f"<{mint_iri('http://example.org/', 'entity', head)}> "
            f"<{mint_iri('http://example.org/', 'relation', relation)}> "
            f"<{mint_iri('http://example.org/', 'entity', tail)}> ."
        )
    for name, value in labels:
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
        lines.append(
            f"<{mint_iri('http://example.org/', 'entity', name)}> "
            f'<http://www.w3.org/2000/01/rdf-schema#label> "{escaped}" .'
        )
    source = work / "source.nt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = _load_or_error(lambda p: KGStore.from_rdf(p, show_progress=False), source)
    if store is None:
        return
    for suffix in (".nt", ".ttl"):
        written = _load_or_error(lambda p: store.to_rdf(p), work / f"out{suffix}")
        if written is None:
            continue
        assert canonical(KGStore.from_rdf(written, show_progress=False)) == canonical(store), suffix
