"""The importer registry: formats dispatch to their importers, unknown ones are named, plugins plug in."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from kgplm import KGStore
from kgplm.exceptions import ConfigurationError, KgplmError, MissingFileError
from kgplm.kg import GraphCollector, importers, open_store
from tests.kg.helpers import canonical

BUILT_IN = ["store", "rdf", "triples", "cmekg", "obo", "umls_rrf", "sparql"]


def test_built_in_formats_are_registered() -> None:
    assert importers.available()[: len(BUILT_IN)] == BUILT_IN
    assert {"tsv", "umls"} <= set(importers.available(aliases=True))
    assert importers.get("TSV") is importers.get("triples") and importers.get("umls") is importers.get("umls_rrf")


def test_unknown_format_lists_the_known_ones(toy_turtle: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        open_store(toy_turtle, format="graphml")
    message = str(caught.value)
    assert "'graphml'" in message and all(name in message for name in BUILT_IN)
    assert isinstance(caught.value, KgplmError)


@pytest.fixture()
def sources(tmp_path: Path, toy_turtle: Path) -> dict[str, Path]:
    """One small file or directory per built-in format."""
    tsv = tmp_path / "edges.tsv"
    tsv.write_text("aspirin\ttreats\theadache\nheadache\tsymptom_of\tflu\n", encoding="utf-8")
    cmekg = tmp_path / "cmekg_part.tsv"
    cmekg.write_text("阿司匹林片\t成份\t阿司匹林\n阿司匹林片\t别称\t阿司匹林肠溶片\n", encoding="utf-8")
    obo = tmp_path / "tiny.obo"
    obo.write_text(
        "format-version: 1.2\n\n[Term]\nid: X:1\nname: one\n\n[Term]\nid: X:2\nname: two\nis_a: X:1\n", encoding="utf-8"
    )
    umls = tmp_path / "umls"
    umls.mkdir()
    (umls / "MRCONSO.RRF").write_text(
        "C1|ENG|P|L1|PF|S1|Y|A1||||MSH|PT|D1|Headache|0|N||\nC2|ENG|P|L2|PF|S2|Y|A2||||MSH|PT|D2|Migraine|0|N||\n",
        encoding="utf-8",
    )
    (umls / "MRREL.RRF").write_text("C1|A1|AUI|RN|C2|A2|AUI|isa|R1||MSH|MSH|||N||\n", encoding="utf-8")
    saved = KGStore.from_rdf(toy_turtle, show_progress=False).save(tmp_path / "saved")
    return {"rdf": toy_turtle, "triples": tsv, "cmekg": cmekg, "obo": obo, "umls_rrf": umls, "store": saved}


@pytest.mark.parametrize("name", ["rdf", "triples", "cmekg", "obo", "umls_rrf", "store"])
def test_each_format_dispatches_to_its_importer(sources: dict[str, Path], name: str) -> None:
    path = sources[name]
    guessed = open_store(path, show_progress=False)
    named = open_store(path, format=name, show_progress=False)
    assert importers.guess(path).name == name
    assert canonical(guessed) == canonical(named)
    expected_source = {"store": "rdf", "triples": "triples", "umls_rrf": "umls"}.get(name, name)
    assert guessed.source == expected_source and guessed.num_triples > 0
    direct = {
        "rdf": KGStore.from_rdf,
        "triples": KGStore.from_triples,
        "cmekg": KGStore.from_cmekg,
        "obo": KGStore.from_obo,
        "umls_rrf": KGStore.from_umls_rrf,
        "store": KGStore.load,
    }[name]
    assert canonical(direct(path)) == canonical(guessed)


def test_guessing_sparql_urls_and_errors(tmp_path: Path, toy_turtle: Path) -> None:
    assert importers.guess("http://localhost:7878/query").name == "sparql"
    assert importers.guess("https://example.org/sparql").name == "sparql"
    assert importers.guess("cmekg").name == "cmekg"
    gz = tmp_path / "toy.ttl.gz"
    gz.write_bytes(gzip.compress(toy_turtle.read_bytes()))
    assert importers.guess(gz).name == "rdf"
    with pytest.raises(MissingFileError):
        open_store(tmp_path / "missing.ttl")
    odd = tmp_path / "graph.gexf"
    odd.write_text("<gexf/>", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"suffix '\.gexf'.*\.ttl"):
        open_store(odd)
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(ConfigurationError, match="no importer recognises the directory"):
        open_store(tmp_path / "empty_dir")


def read_edge_list(path, *, relation: str = "linked", show_progress: bool = True) -> KGStore:
    """A third-party importer: one ``a -- b`` edge per line."""
    collector = GraphCollector(source="edgelist", location=str(path))
    link = collector.relation(f"http://example.org/{relation}", relation)
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        left, right = (part.strip() for part in line.split("--"))
        collector.add_triple(
            collector.entity(f"http://example.org/{left}"), link, collector.entity(f"http://example.org/{right}")
        )
    return collector.build()


@pytest.fixture()
def edge_list_plugin():
    importers.register("edgelist", read_edge_list, suffixes=(".edges",), description="a -- b lines")
    yield
    importers.unregister("edgelist")


def test_a_third_party_importer_is_found_by_open_store(tmp_path: Path, edge_list_plugin) -> None:
    path = tmp_path / "graph.edges"
    path.write_text("a -- b\nb -- c\n", encoding="utf-8")
    store = open_store(path)
    assert store.source == "edgelist" and store.num_triples == 2 and store.relation_names == ["linked"]
    assert open_store(path, format="edgelist", relation="knows").relation_names == ["knows"]
    assert "edgelist" in importers.available()
    with pytest.raises(ConfigurationError, match="already registered"):
        importers.register("edgelist", read_edge_list)
    # a plugin may take a suffix over from a built-in importer: the later registration wins
    tsv = tmp_path / "graph.tsv"
    shutil.copy(path, tsv)
    importers.register("edgelist_tsv", read_edge_list, suffixes=(".tsv",))
    try:
        assert open_store(tsv).source == "edgelist"
    finally:
        importers.unregister("edgelist_tsv")
    assert importers.guess(tsv).name == "triples"


def test_entry_point_plugins_are_registered_lazily(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from importlib.metadata import EntryPoint

    entry_point = EntryPoint(
        name="edgelist_ep", value="tests.kg.test_importers:read_edge_list", group=importers.ENTRY_POINT_GROUP
    )
    monkeypatch.setattr(
        "importlib.metadata.entry_points",
        lambda group=None: [entry_point] if group == importers.ENTRY_POINT_GROUP else [],
    )
    monkeypatch.setattr(importers, "_entry_points_loaded", False)
    try:
        assert "edgelist_ep" in importers.available()
        path = tmp_path / "g.txt"
        path.write_text("x -- y\n", encoding="utf-8")
        assert open_store(path, format="edgelist_ep").num_triples == 1
    finally:
        importers.unregister("edgelist_ep", missing_ok=True)


def test_broken_plugin_is_a_clear_error(toy_turtle: Path) -> None:
    importers.register("broken", "kgplm.kg.no_such_module:read")
    try:
        with pytest.raises(ConfigurationError, match="'broken' importer .* cannot be imported"):
            open_store(toy_turtle, format="broken")
    finally:
        importers.unregister("broken")
