"""A knowledge graph held in a SPARQL 1.1 endpoint (Virtuoso, QLever, Oxigraph, GraphDB, Fuseki ...) as a store.

``read_sparql(endpoint_url)`` pulls every triple of the default graph (or of ``graph=<IRI>``) in
pages of ``page_size`` rows::

    SELECT ?s ?p ?o WHERE { ?s ?p ?o } ORDER BY ?s ?p ?o LIMIT page_size OFFSET k

The ``ORDER BY`` makes the pages a partition of one fixed order (without it SPARQL does not promise
that two queries return rows in the same order, so pages could overlap or miss rows). The offset
advances by the rows actually received and the download ends at the first empty page, so an
endpoint that caps its answers below ``page_size`` (Virtuoso's ``ResultSetMaxRows``) still yields
every triple. A user ``query`` may be:

* a ``SELECT`` that binds ``?s ?p ?o``: paged the same way, as a sub-query;
* a ``CONSTRUCT`` or ``DESCRIBE``: sent once, unpaged (paging would need its variables), its
  result read as N-Triples, Turtle, RDF/XML or JSON-LD, whichever the endpoint answers.

The statements go through the same mapping as RDF files (:mod:`kgplm.kg.rdf_mapping`), so the
store equals ``KGStore.from_rdf`` of a file holding the same triples, up to entity ids (here they
follow the ``ORDER BY`` order, there the file's order). Blank nodes keep the labels the endpoint
gives; SPARQL scopes those to one answer, so a blank node seen on two pages is one node only where
the endpoint keeps its labels stable (Oxigraph does).

Requests are HTTP POSTs (form-encoded ``query=``, as the SPARQL 1.1 Protocol allows) to
``endpoint_url`` and nowhere else: redirects are refused (the error names the target) and proxy
settings of the environment are not used. Transient failures — connection errors, timeouts, HTTP
408, 429, 500, 502, 503, 504 — are retried ``retries`` times with exponential backoff (``Retry-After``
is honoured up to 60 s); an endpoint that stays unreachable raises :class:`EndpointError`, a refused
query (HTTP 400 ...) raises it at once with the endpoint's message, and an answer that is not
valid SPARQL results raises :class:`DataFormatError`.
"""

from __future__ import annotations

import http.client
import io
import json
import logging
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from kgplm.exceptions import ConfigurationError, DataFormatError, EndpointError
from kgplm.kg.collector import DEFAULT_PREFERRED_LANGUAGES
from kgplm.kg.rdf_mapping import RawGraph, build_store, label_roles

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["read_sparql", "SparqlClient"]

logger = logging.getLogger(__name__)

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_GRAPH_ACCEPT = "application/n-triples, text/turtle;q=0.9, application/rdf+xml;q=0.8, application/ld+json;q=0.7"
#: media type of a CONSTRUCT/DESCRIBE answer → the reader's format name
_GRAPH_MEDIA_TYPES = {
    "application/n-triples": "nt",
    "text/plain": "nt",
    "text/turtle": "turtle",
    "application/x-turtle": "turtle",
    "application/rdf+xml": "xml",
    "application/xml": "xml",
    "text/xml": "xml",
    "application/ld+json": "json-ld",
    "application/n-quads": "nquads",
    "application/trig": "trig",
    "text/n3": "n3",
}
_PROLOGUE = re.compile(r"\A(?:\s+|#[^\n]*\n|(?:PREFIX\s+[^\s:]*:\s*<[^>]*>)|(?:BASE\s+<[^>]*>))*", re.IGNORECASE)
_QUERY_FORM = re.compile(r"(SELECT|CONSTRUCT|DESCRIBE|ASK)\b", re.IGNORECASE)


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect would send the next request elsewhere than the URL the user gave: do not follow it
    (the 3xx answer then surfaces as an ``HTTPError``)."""

    def redirect_request(self, request, fp, code, message, headers, new_url):  # noqa: D401
        return None


class SparqlClient:
    """POSTs queries to one endpoint URL, with bounded retries of transient failures."""

    def __init__(
        self,
        endpoint_url: str,
        *,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 1.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        parsed = urllib.parse.urlsplit(endpoint_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigurationError(
                f"a SPARQL endpoint URL must be http:// or https:// with a host, got {endpoint_url!r}"
            )
        if timeout <= 0 or retries < 0 or backoff < 0:
            raise ConfigurationError(
                f"timeout must be > 0, retries and backoff >= 0; got timeout={timeout}, "
                f"retries={retries}, backoff={backoff}"
            )
        self.endpoint_url = endpoint_url
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.headers = dict(headers or {})
        # no ProxyHandler entries: requests go straight to endpoint_url, never to a proxy of the environment
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _RefuseRedirects())

    def post(self, query: str, accept: str) -> tuple[bytes, str]:
        """``(body, media type)`` of the endpoint's answer to ``query``."""
        data = urllib.parse.urlencode({"query": query}).encode("utf-8")
        headers = {
            "Accept": accept,
            "Content-Type": "application/x-www-form-urlencoded; charset=utf-8",
            "User-Agent": "kgplm",
            **self.headers,
        }
        last_error = ""
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.endpoint_url, data=data, headers=headers, method="POST")
            wait = self.backoff * 2**attempt
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    media_type = response.headers.get_content_type()
                    return response.read(), media_type
            except urllib.error.HTTPError as error:
                if 300 <= error.code < 400:
                    raise EndpointError(
                        f"the SPARQL endpoint {self.endpoint_url} redirects (HTTP {error.code}) to "
                        f"{error.headers.get('Location')}; kgplm sends requests only to the URL it is given: "
                        "pass that URL instead"
                    ) from None
                detail = error.read()[:500].decode("utf-8", errors="replace").strip()
                if error.code not in TRANSIENT_STATUS:
                    raise EndpointError(
                        f"the SPARQL endpoint {self.endpoint_url} refused the query: HTTP {error.code} "
                        f"{error.reason}: {detail or '(no message)'}"
                    ) from None
                last_error = f"HTTP {error.code} {error.reason}"
                retry_after = error.headers.get("Retry-After", "") if error.headers else ""
                if retry_after.isdigit():
                    wait = min(float(retry_after), 60.0)
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as error:
                reason = getattr(error, "reason", error)
                last_error = f"{type(reason).__name__}: {reason}"
            if attempt < self.retries:
                logger.warning(
                    "SPARQL endpoint %s: %s; retrying in %.1f s (%d of %d)",
                    self.endpoint_url,
                    last_error,
                    wait,
                    attempt + 1,
                    self.retries,
                )
                time.sleep(wait)
        raise EndpointError(
            f"cannot reach the SPARQL endpoint {self.endpoint_url} ({self.retries + 1} attempts, "
            f"timeout {self.timeout:g} s): {last_error}"
        )


def _split_prologue(query: str) -> tuple[str, str, str]:
    """``(prologue, form, body)``: PREFIX/BASE declarations, the query form keyword, and the rest."""
    prologue = _PROLOGUE.match(query).group(0)
    rest = query[len(prologue) :]
    form = _QUERY_FORM.match(rest)
    if form is None:
        raise ConfigurationError(
            f"cannot tell the form of the SPARQL query {query[:80]!r}...; expected SELECT ?s ?p ?o, "
            "CONSTRUCT or DESCRIBE after the PREFIX/BASE declarations"
        )
    return prologue, form.group(1).upper(), rest


def _check_iri(iri: str, what: str) -> str:
    if not iri or re.search(r'[\s<>"{}|^`\\]', iri):
        raise ConfigurationError(f'{what} must be an absolute IRI without spaces or <>"{{}}|^`\\, got {iri!r}')
    return iri


def _node_key(term: dict, row: int, variable: str, where: str) -> str | tuple[str, str, str] | None:
    """A binding as a RawGraph key: IRI, ``_:sparql-`` blank key or ``(value, language, datatype)``; None for RDF-star."""
    kind = term.get("type")
    value = term.get("value")
    if not isinstance(value, str):
        raise DataFormatError(
            f"row {row}: ?{variable} has no string value", path=where, expected="SPARQL 1.1 JSON results"
        )
    if kind == "uri":
        return value
    if kind == "bnode":
        return "_:sparql-" + value
    if kind in ("literal", "typed-literal"):
        return value, term.get("xml:lang", "") or "", term.get("datatype", "") or ""
    if kind == "triple":
        return None
    raise DataFormatError(
        f"row {row}: ?{variable} has the term type {kind!r}", path=where, expected="uri, bnode or literal terms"
    )


def _add_json_page(raw: RawGraph, body: bytes, where: str) -> int:
    """Add the ``?s ?p ?o`` rows of a SPARQL JSON results document to ``raw``; returns the row count."""
    try:
        document = json.loads(body)
        variables = document["head"]["vars"]
        bindings = document["results"]["bindings"]
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DataFormatError(
            f"the answer is not JSON ({error}); it starts {body[:80]!r}",
            path=where,
            expected="SPARQL 1.1 JSON results (application/sparql-results+json)",
        ) from None
    except (KeyError, TypeError):
        raise DataFormatError(
            f"the JSON answer lacks head.vars or results.bindings; it starts {body[:80]!r}",
            path=where,
            expected="SPARQL 1.1 JSON results",
        ) from None
    if not {"s", "p", "o"} <= set(variables) or not isinstance(bindings, list):
        raise DataFormatError(
            f"the results bind {variables}", path=where, expected="the variables ?s ?p ?o (one triple per row)"
        )
    for row, binding in enumerate(bindings):
        try:
            subject, predicate, obj = binding["s"], binding["p"], binding["o"]
        except (KeyError, TypeError):
            raise DataFormatError(
                f"row {row} does not bind all of ?s ?p ?o: {str(binding)[:200]}",
                path=where,
                expected="every row binding ?s, ?p and ?o",
            ) from None
        subject_key = _node_key(subject, row, "s", where)
        predicate_key = _node_key(predicate, row, "p", where)
        object_key = _node_key(obj, row, "o", where)
        if subject_key is None or object_key is None:
            raw.statements += 1
            raw.skipped_quoted += 1
            continue
        if not isinstance(predicate_key, str) or predicate_key.startswith("_:") or isinstance(subject_key, tuple):
            raise DataFormatError(
                f"row {row} is no RDF triple: ?s {subject} ?p {predicate}",
                path=where,
                expected="an IRI or blank node subject and an IRI predicate",
            )
        raw.add_statement(subject_key, predicate_key, object_key)
    return len(bindings)


def _add_graph_answer(raw: RawGraph, body: bytes, media_type: str, where: str) -> None:
    """Parse a CONSTRUCT/DESCRIBE answer into ``raw`` in the syntax its media type names."""
    from kgplm.kg.rdf import parse_rdf_stream

    canonical = _GRAPH_MEDIA_TYPES.get(media_type)
    if canonical is None:
        raise DataFormatError(
            f"the endpoint answered the CONSTRUCT query as {media_type!r}",
            path=where,
            expected=f"an RDF syntax ({_GRAPH_ACCEPT})",
        )
    try:
        parse_rdf_stream(raw, io.BytesIO(body), canonical, blank_prefix="sparql-")
    except SyntaxError as error:
        raise DataFormatError(
            f"malformed {canonical} in the endpoint's answer: {error.msg}",
            path=where,
            line=error.lineno,
            expected=f"valid {canonical}",
        ) from None


def read_sparql(
    endpoint_url: str,
    query: str | None = None,
    *,
    graph: str | None = None,
    page_size: int = 10_000,
    timeout: float = 60.0,
    retries: int = 3,
    backoff: float = 1.0,
    headers: dict[str, str] | None = None,
    merge_same_as: bool = False,
    name_predicates: Iterable[str] = (),
    alias_predicates: Iterable[str] = (),
    preferred_languages: Sequence[str] = DEFAULT_PREFERRED_LANGUAGES,
    show_progress: bool = True,
) -> "KGStore":
    """Load the triples of a SPARQL 1.1 endpoint into a :class:`KGStore` (see the module docstring).

    Args:
        endpoint_url: the query endpoint, e.g. ``http://localhost:7878/query``.
        query: None (every triple of ``graph`` or of the default graph), a ``SELECT`` binding
            ``?s ?p ?o`` (paged) or a ``CONSTRUCT``/``DESCRIBE`` query (one request).
        graph: a named graph IRI to read instead of the default graph (only with ``query=None``).
        page_size: rows per request (``LIMIT``).
        timeout: seconds to wait for each answer.
        retries / backoff: transient failures are retried ``retries`` times after ``backoff · 2^attempt`` s.
        headers: extra HTTP headers (e.g. ``Authorization``).
        merge_same_as, name_predicates, alias_predicates, preferred_languages: as in :func:`kgplm.kg.rdf.read_rdf`.
    """
    if not isinstance(page_size, int) or page_size < 1:
        raise ConfigurationError(f"page_size must be a positive integer, got {page_size!r}")
    client = SparqlClient(endpoint_url, timeout=timeout, retries=retries, backoff=backoff, headers=headers)
    raw = RawGraph()
    location = endpoint_url + (f" (graph <{graph}>)" if graph else "")
    if query is None:
        pattern = f"GRAPH <{_check_iri(graph, 'graph')}> {{ ?s ?p ?o }}" if graph else "?s ?p ?o"
        prologue, paged = "", f"SELECT ?s ?p ?o WHERE {{ {pattern} }}"
    else:
        if graph is not None:
            raise ConfigurationError("graph= selects what query=None reads; name the graph inside your query instead")
        prologue, form, body = _split_prologue(query)
        if form in ("CONSTRUCT", "DESCRIBE"):
            logger.info("sending the %s query to %s (one request, not paged)", form, endpoint_url)
            answer, media_type = client.post(query, _GRAPH_ACCEPT)
            _add_graph_answer(raw, answer, media_type, endpoint_url)
            return _build(raw, location, merge_same_as, name_predicates, alias_predicates, preferred_languages)
        if form != "SELECT":
            raise ConfigurationError(f"a {form} query returns no triples; pass SELECT ?s ?p ?o, CONSTRUCT or DESCRIBE")
        paged = f"SELECT ?s ?p ?o WHERE {{ {body} }}"
    offset = 0
    with tqdm(
        desc=f"SPARQL {urllib.parse.urlsplit(endpoint_url).netloc}",
        unit=" triples",
        unit_scale=True,
        disable=not show_progress,
        leave=False,
    ) as progress:
        while True:
            page_query = f"{prologue}{paged} ORDER BY ?s ?p ?o LIMIT {page_size} OFFSET {offset}"
            answer, media_type = client.post(page_query, "application/sparql-results+json")
            rows = _add_json_page(raw, answer, f"{endpoint_url} (rows {offset}..)")
            if rows == 0:
                break
            if rows < page_size:  # the end, or an endpoint that caps its answers: the next page tells
                logger.debug("SPARQL endpoint %s returned %d rows for LIMIT %d", endpoint_url, rows, page_size)
            offset += rows
            progress.update(rows)
    logger.info("read %d statements from %s", raw.statements, location)
    return _build(raw, location, merge_same_as, name_predicates, alias_predicates, preferred_languages)


def _build(
    raw: RawGraph, location: str, merge_same_as: bool, name_predicates, alias_predicates, preferred_languages
) -> "KGStore":
    return build_store(
        raw,
        location,
        label_roles(name_predicates, alias_predicates),
        preferred_languages=preferred_languages,
        merge_same_as=merge_same_as,
        source="sparql",
    )
