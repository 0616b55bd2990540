"""Reading RDF into a :class:`~kgplm.kg.store.KGStore` and writing a store back as RDF.

Mapping rules (``read_rdf``):

* **Entities** are the IRIs and blank nodes that stand as subject or object of a triple whose
  object is not a literal (other than ``rdf:type``), plus subjects of ``rdf:type`` (unless their
  class is a schema class such as ``owl:ObjectProperty``), plus labelled subjects that are neither
  used as a predicate nor as a class. Entity ids follow first appearance in the input.
* **Relations** are the predicates of entity-to-entity triples. Schema predicates
  (``rdfs:domain``, ``rdfs:range``, ``rdfs:subPropertyOf``, ``owl:inverseOf`` ...) are not edges.
* **Types**: ``rdf:type`` objects; an entity's primary type is its most specific (fewest members).
* **Names**: ``skos:prefLabel`` and ``rdfs:label`` with their language tags (zh and en both are
  kept); the display name is chosen by ``preferred_languages`` (default zh, untagged, en).
  **Aliases**: ``skos:altLabel`` and ``oboInOwl:hasExactSynonym``. ``owl:sameAs`` between two
  IRIs stays a relation and each side's names become the other's aliases.
* Every other literal-valued statement is a **text attribute** (predicate, value, language or
  datatype), not an edge. Labels of predicates and classes name the relations and types.
* Named graphs (N-Quads, TriG) are merged into one graph; RDF-star quoted triples are skipped
  with a warning.

Parsing uses pyoxigraph's streaming parser for every format (about 10× faster than rdflib and
never fetches remote JSON-LD contexts); ``parser="rdflib"`` uses rdflib instead. The rdflib view
``store.graph`` is built only when asked for.
"""

from __future__ import annotations

import gzip
import io
import logging
import os
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from kgplm._io import atomic_file, require_file
from kgplm.exceptions import ConfigurationError, DataFormatError, EncodingError
from kgplm.kg.store import DEFAULT_PREFERRED_LANGUAGES, GraphCollector
from kgplm.kg.vocabulary import (
    LABEL_ROLE_PREDICATES,
    LABEL_ROLES,
    RDF_LANG_STRING,
    RDF_TYPE,
    RDFS_LABEL,
    ROLE_PREDICATE,
    SCHEMA_CLASSES,
    XSD_STRING,
    local_name,
)

if TYPE_CHECKING:  # pragma: no cover
    import rdflib

    from kgplm.kg.store import KGStore

__all__ = ["read_rdf", "write_rdf", "iter_store_statements", "to_rdflib_graph", "rdf_format"]

logger = logging.getLogger(__name__)

SCHEMA_PREDICATES = frozenset(
    {
        "http://www.w3.org/2000/01/rdf-schema#domain",
        "http://www.w3.org/2000/01/rdf-schema#range",
        "http://www.w3.org/2000/01/rdf-schema#subPropertyOf",
        "http://www.w3.org/2002/07/owl#inverseOf",
        "http://www.w3.org/2002/07/owl#equivalentProperty",
        "http://www.w3.org/2002/07/owl#imports",
    }
)

_FORMAT_ALIASES = {
    "turtle": "turtle", "ttl": "turtle",
    "nt": "nt", "ntriples": "nt", "n-triples": "nt", "nt11": "nt",
    "nquads": "nquads", "nq": "nquads", "n-quads": "nquads",
    "trig": "trig",
    "xml": "xml", "rdf": "xml", "rdfxml": "xml", "rdf/xml": "xml", "owl": "xml", "application/rdf+xml": "xml",
    "json-ld": "json-ld", "jsonld": "json-ld", "json": "json-ld",
    "n3": "n3",
}
_EXTENSION_FORMATS = {
    ".ttl": "turtle", ".turtle": "turtle", ".nt": "nt", ".ntriples": "nt", ".nq": "nquads", ".nquads": "nquads",
    ".trig": "trig", ".rdf": "xml", ".xml": "xml", ".owl": "xml", ".jsonld": "json-ld", ".json": "json-ld",
    ".n3": "n3",
}


def rdf_format(path: str | os.PathLike, format: str | None = None) -> str:
    """Canonical format name (``turtle``, ``nt``, ``nquads``, ``trig``, ``xml``, ``json-ld``, ``n3``)."""
    if format is not None:
        canonical = _FORMAT_ALIASES.get(format.lower())
        if canonical is None:
            raise ConfigurationError(
                f"unknown RDF format {format!r}; expected one of {', '.join(sorted(set(_FORMAT_ALIASES)))}"
            )
        return canonical
    path = Path(path)
    suffix = Path(path.stem).suffix if path.suffix == ".gz" else path.suffix
    canonical = _EXTENSION_FORMATS.get(suffix.lower())
    if canonical is None:
        raise ConfigurationError(
            f"cannot tell the RDF format of {path} from its extension {suffix!r}; pass format= "
            f"(one of {', '.join(sorted(set(_EXTENSION_FORMATS.values())))})"
        )
    return canonical


def _oxigraph_format(canonical: str):
    import pyoxigraph

    return {
        "turtle": pyoxigraph.RdfFormat.TURTLE, "nt": pyoxigraph.RdfFormat.N_TRIPLES,
        "nquads": pyoxigraph.RdfFormat.N_QUADS, "trig": pyoxigraph.RdfFormat.TRIG,
        "xml": pyoxigraph.RdfFormat.RDF_XML, "json-ld": pyoxigraph.RdfFormat.JSON_LD,
        "n3": pyoxigraph.RdfFormat.N3,
    }[canonical]


class _RawGraph:
    """Statements interned to integers while parsing; classified into a store afterwards."""

    def __init__(self) -> None:
        self.nodes: dict[str, int] = {}
        self.predicates: dict[str, int] = {}
        self.edge_subjects = array("i")
        self.edge_predicates = array("i")
        self.edge_objects = array("i")
        self.type_subjects = array("i")
        self.type_classes = array("i")
        self.literal_subjects = array("i")
        self.literal_predicates = array("i")
        self.literal_values: list[str] = []
        self.literal_languages: list[str] = []
        self.literal_datatypes: list[str] = []
        self.skipped_quoted = 0
        self.skipped_schema = 0


class _RangeReader(io.RawIOBase):
    """Binary reader over bytes [start, end) of a file, for parsing one part of a line-based file."""

    def __init__(self, path: Path, start: int, end: int) -> None:
        self._handle = open(path, "rb")
        self._handle.seek(start)
        self._remaining = end - start

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._remaining <= 0:
            return 0
        view = memoryview(buffer)[: min(len(buffer), self._remaining)]
        count = self._handle.readinto(view)
        self._remaining -= count
        return count

    def close(self) -> None:
        self._handle.close()
        super().close()


def _parse_with_oxigraph(raw: _RawGraph, path: Path, canonical: str, file_index: int, base_iri: str | None,
                         progress: tqdm | None, byte_range: tuple[int, int] | None = None) -> None:
    """Parse ``path`` (or bytes ``byte_range`` of it, for line-based formats) into ``raw``."""
    import pyoxigraph

    NamedNode, BlankNode, Literal = pyoxigraph.NamedNode, pyoxigraph.BlankNode, pyoxigraph.Literal
    nodes, predicates = raw.nodes, raw.predicates
    edge_s, edge_p, edge_o = raw.edge_subjects.append, raw.edge_predicates.append, raw.edge_objects.append
    type_s, type_c = raw.type_subjects.append, raw.type_classes.append
    lit_s, lit_p = raw.literal_subjects.append, raw.literal_predicates.append
    lit_v, lit_l, lit_d = raw.literal_values.append, raw.literal_languages.append, raw.literal_datatypes.append
    blank_prefix = f"_:f{file_index}-"
    schema_predicates = SCHEMA_PREDICATES
    nodes_get = nodes.get
    predicates_get = predicates.get
    count = 0
    # The loop is the hot path of loading big graphs: node interning is inlined on purpose.
    if byte_range is not None:
        handle = _RangeReader(path, *byte_range)
    else:
        handle = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    try:
        with handle:
            for statement in pyoxigraph.parse(handle, _oxigraph_format(canonical), base_iri=base_iri):
                count += 1
                if progress is not None and not count & 0xFFFF:
                    progress.update(0x10000)
                predicate = statement.predicate.value
                p = predicates_get(predicate)
                if p is None:
                    p = predicates[predicate] = len(predicates)
                subject = statement.subject
                kind = type(subject)
                if kind is NamedNode:
                    key = subject.value
                elif kind is BlankNode:
                    key = blank_prefix + subject.value
                else:
                    raw.skipped_quoted += 1
                    continue
                s = nodes_get(key)
                if s is None:
                    s = nodes[key] = len(nodes)
                obj = statement.object
                kind = type(obj)
                if kind is NamedNode:
                    key = obj.value
                elif kind is Literal:
                    lit_s(s)
                    lit_p(p)
                    lit_v(obj.value)
                    lit_l(obj.language or "")
                    datatype = obj.datatype.value
                    lit_d("" if datatype in (XSD_STRING, RDF_LANG_STRING) else datatype)
                    continue
                elif kind is BlankNode:
                    key = blank_prefix + obj.value
                else:
                    raw.skipped_quoted += 1
                    continue
                o = nodes_get(key)
                if o is None:
                    o = nodes[key] = len(nodes)
                if predicate == RDF_TYPE:
                    type_s(s)
                    type_c(o)
                elif predicate in schema_predicates:
                    raw.skipped_schema += 1
                else:
                    edge_s(s)
                    edge_p(p)
                    edge_o(o)
    except SyntaxError as error:
        message = str(error.msg if hasattr(error, "msg") else error)
        line = error.lineno
        if line is not None and byte_range is not None:
            line += _count_lines_before(path, byte_range[0])
        cls = EncodingError if "utf-8" in message.lower() else DataFormatError
        raise cls(f"malformed {canonical} RDF: {message}", path=path, line=line, column=error.offset,
                  expected=f"valid {canonical}") from None
    except OSError as error:  # gzip errors, unreadable files
        raise DataFormatError(f"cannot read RDF: {error}", path=path) from None
    if progress is not None:
        progress.update(count & 0xFFFF)


def _count_lines_before(path: Path, offset: int) -> int:
    count, remaining = 0, offset
    with open(path, "rb") as handle:
        while remaining > 0:
            block = handle.read(min(remaining, 1 << 24))
            if not block:
                break
            count += block.count(b"\n")
            remaining -= len(block)
    return count


#: Line-based formats whose files can be cut at any line boundary and parsed in parts.
_SPLITTABLE_FORMATS = ("nt", "nquads")
#: Below this size a second process costs more than it saves.
PARALLEL_MIN_BYTES = 64 << 20

_RAW_ARRAYS = ("edge_subjects", "edge_predicates", "edge_objects", "type_subjects", "type_classes",
               "literal_subjects", "literal_predicates")
_RAW_LISTS = ("literal_values", "literal_languages", "literal_datatypes")


def _save_raw(raw: _RawGraph, directory: Path) -> None:
    """Write a parsed part as .npy arrays and JSON (the worker's reply; no pickle)."""
    import json

    for name in _RAW_ARRAYS:
        np.save(directory / f"{name}.npy", np.frombuffer(getattr(raw, name), dtype=np.int32))
    payload = {name: getattr(raw, name) for name in _RAW_LISTS}
    payload.update(nodes=list(raw.nodes), predicates=list(raw.predicates), skipped_quoted=raw.skipped_quoted,
                   skipped_schema=raw.skipped_schema)
    with open(directory / "part.json", "w", encoding="utf-8") as handle:
        json.dump(payload, handle, ensure_ascii=False)


def _merge_raw(raw: _RawGraph, directory: Path) -> None:
    """Append a part written by :func:`_save_raw` to ``raw``, re-numbering its nodes and predicates."""
    import json

    with open(directory / "part.json", encoding="utf-8") as handle:
        payload = json.load(handle)
    node_map = np.fromiter((raw.nodes.setdefault(k, len(raw.nodes)) for k in payload["nodes"]), dtype=np.int32,
                           count=len(payload["nodes"]))
    predicate_map = np.fromiter((raw.predicates.setdefault(k, len(raw.predicates)) for k in payload["predicates"]),
                                dtype=np.int32, count=len(payload["predicates"]))
    for name in _RAW_ARRAYS:
        local = np.load(directory / f"{name}.npy", allow_pickle=False)
        mapping = predicate_map if name.endswith("predicates") else node_map
        getattr(raw, name).frombytes(mapping[local].astype(np.int32).tobytes() if len(local) else b"")
    for name in _RAW_LISTS:
        getattr(raw, name).extend(payload[name])
    raw.skipped_quoted += payload["skipped_quoted"]
    raw.skipped_schema += payload["skipped_schema"]


def _split_point(path: Path) -> int:
    """Byte offset of the first line start at or after the middle of the file."""
    with open(path, "rb") as handle:
        handle.seek(path.stat().st_size // 2)
        handle.readline()
        return handle.tell()


def _parse_in_two_processes(raw: _RawGraph, path: Path, canonical: str, file_index: int, base_iri: str | None,
                            progress: tqdm | None) -> None:
    """Parse the second half of a line-based file in a worker process while this one parses the first."""
    import json
    import subprocess
    import sys
    import tempfile

    middle, size = _split_point(path), path.stat().st_size
    with tempfile.TemporaryDirectory(prefix="kgplm-rdf-") as scratch:
        command = [sys.executable, "-m", "kgplm.kg.rdf", str(path), canonical, str(file_index), str(middle),
                   str(size), scratch, base_iri or ""]
        worker = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _parse_with_oxigraph(raw, path, canonical, file_index, base_iri, progress, byte_range=(0, middle))
        except BaseException:
            worker.kill()
            worker.wait()
            raise
        _, stderr = worker.communicate()
        error_path = Path(scratch) / "error.json"
        if error_path.is_file():
            with open(error_path, encoding="utf-8") as handle:
                error = json.load(handle)
            cls = EncodingError if error["encoding"] else DataFormatError
            raise cls(error["message"], path=path, line=error["line"], column=error["column"],
                      expected=f"valid {canonical}")
        if worker.returncode != 0:
            raise RuntimeError(f"RDF worker failed ({worker.returncode}): {stderr.decode(errors='replace')[-2000:]}")
        _merge_raw(raw, Path(scratch))


def _worker_main(argv: list[str]) -> int:
    """``python -m kgplm.kg.rdf PATH FORMAT FILE_INDEX START END OUT_DIR BASE_IRI``: parse one part."""
    import json

    path, canonical, file_index, start, end, out_directory, base_iri = argv
    raw = _RawGraph()
    try:
        _parse_with_oxigraph(raw, Path(path), canonical, int(file_index), base_iri or None, None,
                             byte_range=(int(start), int(end)))
    except DataFormatError as error:
        with open(Path(out_directory) / "error.json", "w", encoding="utf-8") as handle:
            message = str(error).split(": ", 1)[1] if ": " in str(error) else str(error)
            message = message.rsplit(" (expected", 1)[0]
            json.dump({"message": message, "line": error.line, "column": error.column,
                       "encoding": isinstance(error, EncodingError)}, handle)
        return 1
    _save_raw(raw, Path(out_directory))
    return 0


def _parse_with_rdflib(raw: _RawGraph, path: Path, canonical: str, file_index: int, base_iri: str | None) -> None:
    import rdflib

    rdflib_format = {"nt": "nt", "nquads": "nquads", "trig": "trig", "turtle": "turtle", "xml": "xml",
                     "json-ld": "json-ld", "n3": "n3"}[canonical]
    if canonical == "json-ld":
        _reject_remote_jsonld_contexts(path)
    graph = rdflib.Dataset() if canonical in ("nquads", "trig") else rdflib.Graph()
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as handle:
                graph.parse(handle, format=rdflib_format, publicID=base_iri)
        else:
            graph.parse(str(path), format=rdflib_format, publicID=base_iri)
    except UnicodeDecodeError as error:
        raise EncodingError(f"not valid UTF-8: {error.reason}", path=path, expected="UTF-8 RDF") from None
    except Exception as error:  # rdflib raises many types; all mean malformed input here
        line = getattr(error, "lineno", None) or getattr(error, "line", None)
        raise DataFormatError(f"malformed {canonical} RDF: {error}", path=path,
                              line=line if isinstance(line, int) else None) from None
    statements = graph.quads() if isinstance(graph, rdflib.Dataset) else graph
    nodes, predicates = raw.nodes, raw.predicates
    blank_prefix = f"_:f{file_index}-"

    def node_id(term) -> int | None:
        if isinstance(term, rdflib.URIRef):
            key = str(term)
        elif isinstance(term, rdflib.BNode):
            key = blank_prefix + str(term)
        else:
            return None
        return nodes.setdefault(key, len(nodes))

    for statement in statements:
        subject, predicate, obj = statement[:3]
        p = predicates.setdefault(str(predicate), len(predicates))
        s = node_id(subject)
        if s is None:
            raw.skipped_quoted += 1
            continue
        if isinstance(obj, rdflib.Literal):
            raw.literal_subjects.append(s)
            raw.literal_predicates.append(p)
            raw.literal_values.append(str(obj))
            raw.literal_languages.append(obj.language or "")
            datatype = str(obj.datatype) if obj.datatype is not None else ""
            raw.literal_datatypes.append("" if datatype in (XSD_STRING, RDF_LANG_STRING) else datatype)
            continue
        o = node_id(obj)
        if o is None:
            raw.skipped_quoted += 1
        elif str(predicate) == RDF_TYPE:
            raw.type_subjects.append(s)
            raw.type_classes.append(o)
        elif str(predicate) in SCHEMA_PREDICATES:
            raw.skipped_schema += 1
        else:
            raw.edge_subjects.append(s)
            raw.edge_predicates.append(p)
            raw.edge_objects.append(o)


def _reject_remote_jsonld_contexts(path: Path) -> None:
    import json

    with open(path, encoding="utf-8") as handle:
        try:
            document = json.load(handle)
        except json.JSONDecodeError as error:
            raise DataFormatError(f"malformed JSON-LD: {error.msg}", path=path, line=error.lineno,
                                  column=error.colno) from None

    def contexts(value) -> Iterator:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "@context":
                    yield item
                yield from contexts(item)
        elif isinstance(value, list):
            for item in value:
                yield from contexts(item)

    def remote(context) -> bool:
        if isinstance(context, str):
            return True
        if isinstance(context, list):
            return any(remote(c) for c in context)
        return False

    if any(remote(c) for c in contexts(document)):
        raise DataFormatError(
            "JSON-LD refers to a remote @context; kgplm never fetches from the network",
            path=path, expected="an inline @context object",
        )


def read_rdf(
    path_or_paths: str | os.PathLike | Sequence[str | os.PathLike],
    format: str | None = None,
    *,
    parser: str = "oxigraph",
    base_iri: str | None = None,
    name_predicates: Iterable[str] = (),
    alias_predicates: Iterable[str] = (),
    preferred_languages: Sequence[str] = DEFAULT_PREFERRED_LANGUAGES,
    workers: int = 2,
    show_progress: bool = True,
) -> "KGStore":
    """Load one or several RDF files into a :class:`KGStore` (mapping rules in the module docstring).

    Args:
        path_or_paths: a file or a list of files; ``.gz`` files are decompressed on the fly.
        format: rdflib-style format name; guessed from each file's extension when None.
        parser: ``"oxigraph"`` (streaming, fast) or ``"rdflib"``.
        base_iri: base for relative IRIs.
        name_predicates / alias_predicates: extra predicate IRIs whose literals are names / aliases.
        preferred_languages: language tags in the order the display name is chosen.
        workers: with 2 (the default), an uncompressed N-Triples or N-Quads file of 64 MB or more
            is parsed in two halves, the second in a worker process (same result, ~1.7x faster).
    """
    paths = [path_or_paths] if isinstance(path_or_paths, (str, os.PathLike)) else list(path_or_paths)
    if not paths:
        raise ConfigurationError("read_rdf needs at least one path")
    if parser not in ("oxigraph", "rdflib"):
        raise ConfigurationError(f"parser must be 'oxigraph' or 'rdflib', got {parser!r}")
    raw = _RawGraph()
    for file_index, path in enumerate(paths):
        path = require_file(path, "RDF file")
        canonical = rdf_format(path, format)
        logger.info("parsing %s as %s with %s", path, canonical, parser)
        if parser == "oxigraph":
            parallel = (workers > 1 and canonical in _SPLITTABLE_FORMATS and path.suffix != ".gz"
                        and path.stat().st_size >= PARALLEL_MIN_BYTES)
            with tqdm(desc=f"parsing {path.name}" + (" (first half)" if parallel else ""), unit=" statements",
                      unit_scale=True, disable=not show_progress, leave=False) as progress:
                if parallel:
                    _parse_in_two_processes(raw, path, canonical, file_index, base_iri, progress)
                else:
                    _parse_with_oxigraph(raw, path, canonical, file_index, base_iri, progress)
        else:
            _parse_with_rdflib(raw, path, canonical, file_index, base_iri)
    if raw.skipped_quoted:
        logger.warning("skipped %d statements with RDF-star quoted triples", raw.skipped_quoted)
    location = ", ".join(str(p) for p in paths)
    roles = dict(LABEL_ROLE_PREDICATES)
    roles.update({iri: 1 for iri in name_predicates})
    roles.update({iri: 2 for iri in alias_predicates})
    return _classify(raw, location, roles, preferred_languages)


def _classify(raw: _RawGraph, location: str, label_roles: dict[str, int],
              preferred_languages: Sequence[str]) -> "KGStore":
    num_nodes = len(raw.nodes)
    node_keys = list(raw.nodes)
    predicate_iris = list(raw.predicates)
    as_array = lambda a: np.frombuffer(a, dtype=np.int32) if len(a) else np.zeros(0, np.int32)  # noqa: E731
    edge_s, edge_p, edge_o = as_array(raw.edge_subjects), as_array(raw.edge_predicates), as_array(raw.edge_objects)
    type_s, type_c = as_array(raw.type_subjects), as_array(raw.type_classes)
    lit_s, lit_p = as_array(raw.literal_subjects), as_array(raw.literal_predicates)

    role_of_predicate = np.full(len(predicate_iris), -1, dtype=np.int8)
    for index, iri in enumerate(predicate_iris):
        role_of_predicate[index] = label_roles.get(iri, -1)
    lit_roles = role_of_predicate[lit_p] if len(lit_p) else np.zeros(0, np.int8)

    schema_class_nodes = np.array([raw.nodes[c] for c in SCHEMA_CLASSES if c in raw.nodes], dtype=np.int32)
    schema_typed = np.isin(type_s, type_s[np.isin(type_c, schema_class_nodes)]) if len(type_s) else type_s.astype(bool)
    is_entity = np.zeros(num_nodes, dtype=bool)
    is_entity[edge_s] = True
    is_entity[edge_o] = True
    is_entity[type_s[~schema_typed]] = True
    # labelled subjects that are not predicates, classes or schema terms are entities too
    not_entity_candidates = np.zeros(num_nodes, dtype=bool)
    not_entity_candidates[type_c] = True
    not_entity_candidates[type_s[schema_typed]] = True
    for iri in predicate_iris:
        index = raw.nodes.get(iri)
        if index is not None:
            not_entity_candidates[index] = True
    labelled = np.zeros(num_nodes, dtype=bool)
    labelled[lit_s[np.isin(lit_roles, [0, 1])]] = True
    is_entity |= labelled & ~not_entity_candidates

    entity_of_node = np.full(num_nodes, -1, dtype=np.int64)
    entity_nodes = np.flatnonzero(is_entity)
    entity_of_node[entity_nodes] = np.arange(len(entity_nodes))

    collector = GraphCollector(source="rdf", location=location)
    for node in entity_nodes.tolist():
        collector.entity(node_keys[node])

    # names of relations and types come from the labels of predicate and class nodes
    best_label: dict[int, tuple[int, str]] = {}
    language_rank = {language: rank for rank, language in enumerate(preferred_languages)}
    for s, p, value, language in zip(lit_s.tolist(), lit_p.tolist(), raw.literal_values, raw.literal_languages):
        if role_of_predicate[p] in (0, 1) and entity_of_node[s] < 0:
            rank = language_rank.get(language, len(language_rank))
            if s not in best_label or rank < best_label[s][0]:
                best_label[s] = (rank, value)

    def label_of(iri: str) -> str | None:
        node = raw.nodes.get(iri)
        return best_label[node][1] if node is not None and node in best_label else None

    relation_of_predicate = np.full(len(predicate_iris), -1, dtype=np.int64)
    if len(edge_p):  # relation ids in order of first appearance
        unique_predicates, first_position = np.unique(edge_p, return_index=True)
        for p in unique_predicates[np.argsort(first_position)].tolist():
            relation_of_predicate[p] = collector.relation(predicate_iris[p], label_of(predicate_iris[p]))
    heads, tails = entity_of_node[edge_s], entity_of_node[edge_o]
    collector.heads.frombytes(heads.astype(np.int32).tobytes())
    collector.relations.frombytes(relation_of_predicate[edge_p].astype(np.int32).tobytes())
    collector.tails.frombytes(tails.astype(np.int32).tobytes())

    entity_typed = entity_of_node[type_s] >= 0 if len(type_s) else type_s.astype(bool)
    for s, c in zip(type_s[entity_typed].tolist(), type_c[entity_typed].tolist()):
        if node_keys[c] in SCHEMA_CLASSES:
            continue
        collector.add_type(int(entity_of_node[s]), collector.type(node_keys[c], label_of(node_keys[c])))

    dropped = 0
    for s, p, value, language, datatype in zip(
        lit_s.tolist(), lit_p.tolist(), raw.literal_values, raw.literal_languages, raw.literal_datatypes
    ):
        entity = int(entity_of_node[s])
        if entity < 0:
            dropped += 1
            continue
        role = int(role_of_predicate[p])
        if role >= 0:
            collector.add_label(entity, value, language, role)
        else:
            iri = predicate_iris[p]
            collector.add_attribute(entity, collector.attribute_predicate(iri, label_of(iri)), value, language, datatype)
    if dropped:
        logger.info("%d literal statements describe predicates or classes, not entities", dropped)
    if raw.skipped_schema:
        logger.info("%d schema statements (domain, range, subPropertyOf ...) are not edges", raw.skipped_schema)
    return collector.build(preferred_languages=preferred_languages)


# -- export --------------------------------------------------------------------------------
def iter_store_statements(store: "KGStore", *, include_schema: bool = True) -> Iterator[tuple]:
    """Yield ``(subject, predicate, object)`` with IRIs as ``str`` (blank nodes as ``"_:id"``) and
    literals as ``("literal", value, language, datatype)`` tuples.

    Derived aliases (names copied across ``owl:sameAs``) are not written: reading the output back
    derives them again. With ``include_schema`` the names of relations, types and attribute
    predicates are written as ``rdfs:label`` of their IRIs so that they survive a round trip.
    """
    manifest = store._manifest
    arrays = store._arrays
    strings = store._strings
    languages, datatypes = manifest["languages"], manifest["datatypes"]
    relation_iris, type_iris = manifest["relation_iris"], manifest["type_iris"]
    attribute_iris = manifest["attribute_predicate_iris"]
    if include_schema:
        for iris, names in ((relation_iris, manifest["relation_names"]), (type_iris, manifest["type_names"]),
                            (attribute_iris, manifest["attribute_predicate_names"])):
            for iri, name in zip(iris, names):
                if name != local_name(iri):
                    yield iri, RDFS_LABEL, ("literal", name, "", "")
    derived = LABEL_ROLES.index("derived")
    entity_iris = store._entity_iris
    type_indptr, type_ids = np.asarray(arrays["type_indptr"]), np.asarray(arrays["type_ids"])
    label_indptr = np.asarray(arrays["label_indptr"])
    label_strings, label_languages = np.asarray(arrays["label_strings"]), np.asarray(arrays["label_languages"])
    label_roles = np.asarray(arrays["label_roles"])
    attribute_indptr = np.asarray(arrays["attribute_indptr"])
    attribute_predicates = np.asarray(arrays["attribute_predicates"])
    attribute_values = np.asarray(arrays["attribute_values"])
    attribute_languages = np.asarray(arrays["attribute_languages"])
    attribute_datatypes = np.asarray(arrays["attribute_datatypes"])
    for entity, iri in enumerate(entity_iris):
        for t in type_ids[type_indptr[entity] : type_indptr[entity + 1]].tolist():
            yield iri, RDF_TYPE, type_iris[t]
        for position in range(label_indptr[entity], label_indptr[entity + 1]):
            role = int(label_roles[position])
            if role == derived:
                continue
            yield iri, ROLE_PREDICATE[role], (
                "literal", strings[int(label_strings[position])], languages[int(label_languages[position])], "")
        for position in range(attribute_indptr[entity], attribute_indptr[entity + 1]):
            yield iri, attribute_iris[int(attribute_predicates[position])], (
                "literal", strings[int(attribute_values[position])], languages[int(attribute_languages[position])],
                datatypes[int(attribute_datatypes[position])])
    for head, relation, tail in np.asarray(store.triples).tolist():
        yield entity_iris[head], relation_iris[relation], entity_iris[tail]


def _to_oxigraph(statements: Iterable[tuple]):
    import pyoxigraph

    cache: dict[str, object] = {}

    def node(key: str):
        term = cache.get(key)
        if term is None:
            term = pyoxigraph.BlankNode(key[2:].replace("-", "_")) if key.startswith("_:") else pyoxigraph.NamedNode(key)
            if len(cache) < 1_000_000:
                cache[key] = term
        return term

    for subject, predicate, obj in statements:
        if isinstance(obj, tuple):
            _, value, language, datatype = obj
            if language:
                term = pyoxigraph.Literal(value, language=language)
            elif datatype:
                term = pyoxigraph.Literal(value, datatype=pyoxigraph.NamedNode(datatype))
            else:
                term = pyoxigraph.Literal(value)
        else:
            term = node(obj)
        yield pyoxigraph.Triple(node(subject), node(predicate), term)


def write_rdf(store: "KGStore", path: str | os.PathLike, *, format: str = "turtle") -> Path:
    """Write the store as Turtle or N-Triples (any pyoxigraph graph format works), atomically."""
    import pyoxigraph

    canonical = rdf_format(path, format)
    if canonical in ("nquads", "trig"):
        raise ConfigurationError("write_rdf writes a single graph: use turtle, nt, xml, json-ld or n3")
    path = Path(path)
    prefixes = {
        "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
        "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
        "skos": "http://www.w3.org/2004/02/skos/core#",
        "owl": "http://www.w3.org/2002/07/owl#",
        "oboInOwl": "http://www.geneontology.org/formats/oboInOwl#",
    }
    prefixes.update(store._manifest.get("prefixes", {}))
    with atomic_file(path, "wb") as handle:
        pyoxigraph.serialize(
            _to_oxigraph(iter_store_statements(store)), handle, _oxigraph_format(canonical),
            prefixes=prefixes if canonical in ("turtle", "trig", "n3") else None,
        )
    logger.info("wrote %r as %s to %s", store, canonical, path)
    return path


def to_rdflib_graph(store: "KGStore") -> "rdflib.Graph":
    """Build an ``rdflib.Graph`` holding every statement of the store."""
    import rdflib

    graph = rdflib.Graph()
    cache: dict[str, rdflib.term.Node] = {}

    def node(key: str):
        term = cache.get(key)
        if term is None:
            term = cache[key] = rdflib.BNode(key[2:]) if key.startswith("_:") else rdflib.URIRef(key)
        return term

    add = graph.add
    for subject, predicate, obj in tqdm(iter_store_statements(store), desc="building rdflib graph",
                                        unit=" statements", unit_scale=True, leave=False):
        if isinstance(obj, tuple):
            _, value, language, datatype = obj
            term = rdflib.Literal(value, lang=language or None, datatype=rdflib.URIRef(datatype) if datatype else None)
        else:
            term = node(obj)
        add((node(subject), node(predicate), term))
    for prefix, namespace in store._manifest.get("prefixes", {}).items():
        graph.bind(prefix, namespace)
    return graph


if __name__ == "__main__":  # the worker process of _parse_in_two_processes
    import sys

    sys.exit(_worker_main(sys.argv[1:]))
