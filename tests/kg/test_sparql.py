"""Loading a graph from a SPARQL endpoint: a real Oxigraph server on 127.0.0.1, and small stub servers
for the failure modes (transient errors, malformed answers, redirects, nothing listening)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from rdflib.compare import isomorphic

from kgplm import KGStore
from kgplm.exceptions import ConfigurationError, DataFormatError, EndpointError
from kgplm.kg import open_store
from tests.conftest import TOY_TURTLE
from tests.kg.helpers import canonical

BLANK_NODES = """\
@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
_:trial ex:studies ex:diabetes ; rdfs:label "一项试验"@zh ; ex:phase "3" .
ex:metformin ex:testedIn _:trial .
"""
NAMED_GRAPH = "http://example.org/graphs/drugs"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def oxigraph_executable() -> str | None:
    beside_python = Path(sys.executable).parent / "oxigraph"
    return str(beside_python) if beside_python.is_file() else shutil.which("oxigraph")


@pytest.fixture(scope="module")
def oxigraph(tmp_path_factory):
    """An Oxigraph server on 127.0.0.1 holding TOY_TURTLE + BLANK_NODES in the default graph and TOY_TURTLE
    alone in NAMED_GRAPH; yields ``(query URL, default-graph file, named-graph file)``."""
    executable = oxigraph_executable()
    if executable is None:
        pytest.skip("the oxigraph server is not installed (pip install oxigraph)")
    directory = tmp_path_factory.mktemp("oxigraph")
    default_file, named_file = directory / "default.ttl", directory / "named.ttl"
    default_file.write_text(TOY_TURTLE + BLANK_NODES.split("\n", 2)[2], encoding="utf-8")
    named_file.write_text(TOY_TURTLE, encoding="utf-8")
    database = directory / "db"
    for arguments in (["--file", str(default_file)], ["--file", str(named_file), "--graph", NAMED_GRAPH]):
        loaded = subprocess.run(
            [executable, "load", "--location", str(database), *arguments], capture_output=True, timeout=60
        )
        if loaded.returncode != 0:
            pytest.skip(f"oxigraph load failed: {loaded.stderr.decode(errors='replace')[-300:]}")
    port = free_port()
    server = subprocess.Popen(
        [executable, "serve-read-only", "--location", str(database), "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/query"
    try:
        deadline = time.monotonic() + 30
        while True:  # bounded wait until the server answers
            if server.poll() is not None:
                pytest.skip(f"the oxigraph server exited: {server.stderr.read().decode(errors='replace')[-300:]}")
            try:
                with urllib.request.urlopen(f"{url}?query=ASK%7B%7D", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.skip("the oxigraph server did not answer within 30 s")
                time.sleep(0.2)
        yield url, default_file, named_file
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def test_paged_default_graph_equals_the_file(oxigraph) -> None:
    url, default_file, _ = oxigraph
    from_file = KGStore.from_rdf(default_file, show_progress=False)
    from_endpoint = KGStore.from_sparql(url, page_size=7, show_progress=False)  # 6+ pages
    assert from_endpoint.source == "sparql"
    # same statements (the blank node included) and same counts; ids may differ (file order vs ORDER BY)
    assert isomorphic(from_endpoint.graph, from_file.graph)
    info_file, info_endpoint = from_file.describe(), from_endpoint.describe()
    for info in (info_file, info_endpoint):
        info.pop("source")
    assert info_endpoint == info_file
    trial = from_endpoint.entity_id("一项试验")
    assert from_endpoint.entity_iri(trial).startswith("_:")
    assert sorted(from_endpoint.neighbors(trial).neighbor) == ["二甲双胍", "糖尿病"]  # one node across pages


def test_named_graph_construct_and_select_queries(oxigraph) -> None:
    url, _, named_file = oxigraph
    expected = canonical(KGStore.from_rdf(named_file, show_progress=False))
    assert canonical(KGStore.from_sparql(url, graph=NAMED_GRAPH, page_size=5, show_progress=False)) == expected
    construct = f"PREFIX g: <{NAMED_GRAPH}>\nCONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH g: {{ ?s ?p ?o }} }}"
    assert canonical(KGStore.from_sparql(url, construct, show_progress=False)) == expected
    select = f"# every triple of one graph\nSELECT ?s ?p ?o WHERE {{ GRAPH <{NAMED_GRAPH}> {{ ?s ?p ?o }} }}"
    assert canonical(KGStore.from_sparql(url, select, page_size=4, show_progress=False)) == expected
    # open_store and the importer registry recognise the URL
    assert canonical(open_store(url, graph=NAMED_GRAPH, show_progress=False)) == expected


def test_cli_imports_from_an_endpoint(oxigraph, tmp_path: Path, capsys) -> None:
    from kgplm.cli import main

    url, _, named_file = oxigraph
    assert (
        main(
            [
                "kg",
                "import",
                "sparql",
                url,
                "--graph",
                NAMED_GRAPH,
                "--page-size",
                "6",
                "--output-dir",
                str(tmp_path / "store"),
            ]
        )
        == 0
    )
    assert canonical(KGStore.load(tmp_path / "store")) == canonical(KGStore.from_rdf(named_file, show_progress=False))


class StubEndpoint:
    """A scripted SPARQL endpoint: each request gets the next ``(status, content type, body, headers)``."""

    def __init__(self, answers: list[tuple[int, str, bytes, dict]]) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[str, str, bytes]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                stub.requests.append((self.command, self.path, body))
                status, content_type, payload, headers = (
                    stub.answers.pop(0) if stub.answers else (500, "text/plain", b"script exhausted", {})
                )
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/sparql"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "StubEndpoint":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def results(rows: list[tuple[str, str, str]]) -> tuple[int, str, bytes, dict]:
    bindings = [
        {
            "s": {"type": "uri", "value": s},
            "p": {"type": "uri", "value": p},
            "o": {"type": "literal", "value": o[1:], "xml:lang": "en"}
            if o.startswith("@")
            else {"type": "uri", "value": o},
        }
        for s, p, o in rows
    ]
    document = {"head": {"vars": ["s", "p", "o"]}, "results": {"bindings": bindings}}
    return 200, "application/sparql-results+json", json.dumps(document).encode(), {}


ROWS = [("http://x/a", "http://x/r", "http://x/b"), ("http://x/a", "http://www.w3.org/2000/01/rdf-schema#label", "@A")]


def test_transient_errors_are_retried(tmp_path: Path) -> None:
    unavailable = (503, "text/plain", b"busy", {"Retry-After": "0"})
    with StubEndpoint(
        [unavailable, results(ROWS[:1]), (502, "text/plain", b"", {}), results(ROWS[1:]), results([])]
    ) as stub:
        store = KGStore.from_sparql(stub.url, page_size=1, retries=2, backoff=0.01, show_progress=False)
    assert store.num_triples == 1 and store.entity_name(store.entity_id("http://x/a")) == "A"
    assert len(stub.requests) == 5 and {path for _, path, _ in stub.requests} == {"/sparql"}
    assert all(method == "POST" for method, _, _ in stub.requests)
    pages = [urllib.parse.parse_qs(body.decode())["query"][0] for _, _, body in stub.requests]
    assert "ORDER BY ?s ?p ?o LIMIT 1 OFFSET 0" in pages[0] and "OFFSET 1" in pages[2] and "OFFSET 2" in pages[4]
    # a file with the same triples gives the same store
    path = tmp_path / "same.nt"
    path.write_text(
        "<http://x/a> <http://x/r> <http://x/b> .\n"
        '<http://x/a> <http://www.w3.org/2000/01/rdf-schema#label> "A"@en .\n',
        encoding="utf-8",
    )
    assert canonical(store) == canonical(KGStore.from_rdf(path, show_progress=False))


def test_retries_are_bounded() -> None:
    with StubEndpoint([(503, "text/plain", b"busy", {})] * 3) as stub:
        with pytest.raises(EndpointError, match="3 attempts.*HTTP 503"):
            KGStore.from_sparql(stub.url, retries=2, backoff=0.01, show_progress=False)
    assert len(stub.requests) == 3


def test_refused_query_malformed_answers_and_redirects() -> None:
    with StubEndpoint([(400, "text/plain", b"Parse error: unexpected token", {})]) as stub:
        with pytest.raises(EndpointError, match="HTTP 400.*Parse error"):
            KGStore.from_sparql(stub.url, show_progress=False)
    assert len(stub.requests) == 1  # not retried
    malformed = [
        ((200, "application/sparql-results+json", b"<html>oops</html>", {}), "not JSON"),
        ((200, "application/sparql-results+json", b'{"head": {}}', {}), "head.vars"),
        (
            (
                200,
                "application/sparql-results+json",
                json.dumps({"head": {"vars": ["x"]}, "results": {"bindings": []}}).encode(),
                {},
            ),
            r"\?s \?p \?o",
        ),
        (
            (
                200,
                "application/sparql-results+json",
                json.dumps(
                    {
                        "head": {"vars": ["s", "p", "o"]},
                        "results": {
                            "bindings": [
                                {
                                    "s": {"type": "uri", "value": "http://x/a"},
                                    "p": {"type": "uri", "value": "http://x/p"},
                                }
                            ]
                        },
                    }
                ).encode(),
                {},
            ),
            "row 0",
        ),
    ]
    for answer, message in malformed:
        with StubEndpoint([answer]) as stub:
            with pytest.raises(DataFormatError, match=message) as caught:
                KGStore.from_sparql(stub.url, show_progress=False)
            assert stub.url in str(caught.value)
    with StubEndpoint([(302, "text/plain", b"", {"Location": "http://elsewhere.example/sparql"})]) as stub:
        with pytest.raises(EndpointError, match="redirects.*elsewhere.example"):
            KGStore.from_sparql(stub.url, show_progress=False)
    with StubEndpoint([(200, "text/html", b"<html/>", {})]) as stub:
        with pytest.raises(DataFormatError, match="text/html"):
            KGStore.from_sparql(stub.url, "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }", show_progress=False)


def test_unreachable_endpoint_and_bad_arguments() -> None:
    url = f"http://127.0.0.1:{free_port()}/sparql"  # nothing listens there
    with pytest.raises(EndpointError, match="cannot reach the SPARQL endpoint"):
        KGStore.from_sparql(url, retries=1, backoff=0.01, timeout=2, show_progress=False)
    with pytest.raises(ConfigurationError, match="http"):
        KGStore.from_sparql("ftp://example.org/sparql")
    with pytest.raises(ConfigurationError, match="ASK"):
        KGStore.from_sparql(url, "ASK { ?s ?p ?o }")
    with pytest.raises(ConfigurationError, match="page_size"):
        KGStore.from_sparql(url, page_size=0)
