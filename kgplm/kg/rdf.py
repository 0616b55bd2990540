"""Reading RDF files into a :class:`~kgplm.kg.store.KGStore`.

How statements become entities, relations, types, names, aliases and attributes (and what
``merge_same_as`` does) is documented in :mod:`kgplm.kg.rdf_mapping`; writing a store as RDF is
:mod:`kgplm.kg.rdf_export` (``write_rdf``, ``iter_store_statements`` and ``to_rdflib_graph`` are
re-exported here).

Parsing uses pyoxigraph's streaming parser for every format (about 10× faster than rdflib and
never fetches remote JSON-LD contexts); ``parser="rdflib"`` uses rdflib instead. Relative IRIs
are resolved against ``base_iri`` (without one they are an error that says so). pyoxigraph reports
no line for RDF/XML errors: the failing file is then parsed again with rdflib, whose XML parser
locates most errors, to name the line. The rdflib view ``store.graph`` is built only when asked for.
"""

from __future__ import annotations

import gzip
import io
import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from tqdm.auto import tqdm

from kgplm._io import require_file
from kgplm.exceptions import ConfigurationError, DataFormatError, EncodingError
from kgplm.kg.collector import DEFAULT_PREFERRED_LANGUAGES
from kgplm.kg.rdf_export import iter_store_statements, to_rdflib_graph, write_rdf
from kgplm.kg.rdf_formats import oxigraph_format, rdf_format
from kgplm.kg.rdf_mapping import PLAIN_DATATYPES, SCHEMA_PREDICATES, RawGraph, build_store, label_roles
from kgplm.kg.vocabulary import RDF_TYPE

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["read_rdf", "write_rdf", "iter_store_statements", "to_rdflib_graph", "rdf_format", "parse_rdf_stream"]

logger = logging.getLogger(__name__)

#: what pyoxigraph says about an IRI that is relative (no scheme) when no base IRI is given
_RELATIVE_IRI_MESSAGES = ("No scheme found in an absolute IRI", "relative IRI")
_BASE_IRI_HINT = (
    "; relative IRIs need a base IRI to resolve against: pass base_iri='http://example.org/…/' (CLI: --base-iri)"
)


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


def parse_rdf_stream(
    raw: RawGraph,
    handle: BinaryIO,
    canonical: str,
    *,
    blank_prefix: str,
    base_iri: str | None = None,
    progress: tqdm | None = None,
) -> None:
    """Parse an RDF byte stream with pyoxigraph into ``raw``; pyoxigraph's ``SyntaxError`` propagates.

    Blank nodes get the key ``"_:" + blank_prefix + label`` so that the blank nodes of different
    inputs stay apart.
    """
    import pyoxigraph

    NamedNode, BlankNode, Literal = pyoxigraph.NamedNode, pyoxigraph.BlankNode, pyoxigraph.Literal
    nodes, predicates = raw.nodes, raw.predicates
    edge_s, edge_p, edge_o = raw.edge_subjects.append, raw.edge_predicates.append, raw.edge_objects.append
    type_s, type_c = raw.type_subjects.append, raw.type_classes.append
    lit_s, lit_p = raw.literal_subjects.append, raw.literal_predicates.append
    lit_v, lit_l, lit_d = raw.literal_values.append, raw.literal_languages.append, raw.literal_datatypes.append
    blank_prefix = "_:" + blank_prefix
    schema_predicates = SCHEMA_PREDICATES
    plain_datatypes = PLAIN_DATATYPES
    nodes_get = nodes.get
    predicates_get = predicates.get
    count = 0
    # The loop is the hot path of loading big graphs: node interning is inlined on purpose
    # (RawGraph.add_statement is the readable version of the same rules).
    try:
        parser = pyoxigraph.parse(handle, oxigraph_format(canonical), base_iri=base_iri)
        for statement in parser:
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
                lit_d("" if datatype in plain_datatypes else datatype)
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
        for prefix, namespace in parser.prefixes.items():  # the file's @prefix / PREFIX declarations
            raw.prefixes.setdefault(prefix, namespace)
    finally:
        raw.statements += count
        if progress is not None:
            progress.update(count & 0xFFFF)


def _parse_with_oxigraph(
    raw: RawGraph,
    path: Path,
    canonical: str,
    file_index: int,
    base_iri: str | None,
    progress: tqdm | None,
    byte_range: tuple[int, int] | None = None,
) -> None:
    """Parse ``path`` (or bytes ``byte_range`` of it, for line-based formats) into ``raw``."""
    if byte_range is not None:
        handle = _RangeReader(path, *byte_range)
    else:
        handle = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    try:
        with handle:
            parse_rdf_stream(
                raw, handle, canonical, blank_prefix=f"f{file_index}-", base_iri=base_iri, progress=progress
            )
    except SyntaxError as error:
        message = str(error.msg if hasattr(error, "msg") else error)
        line, column = error.lineno, error.offset
        if line is not None and byte_range is not None:
            line += _count_lines_before(path, byte_range[0])
        if line is None and byte_range is None:
            line, column = _locate_error(path, canonical, base_iri)
        if base_iri is None and any(text in message for text in _RELATIVE_IRI_MESSAGES):
            message += _BASE_IRI_HINT
        cls = EncodingError if "utf-8" in message.lower() else DataFormatError
        raise cls(
            f"malformed {canonical} RDF: {message}", path=path, line=line, column=column, expected=f"valid {canonical}"
        ) from None
    except OSError as error:  # gzip errors, unreadable files
        raise DataFormatError(f"cannot read RDF: {error}", path=path) from None


def _locate_error(path: Path, canonical: str, base_iri: str | None) -> tuple[int | None, int | None]:
    """``(line, column)`` of the first error in ``path`` as rdflib (RDF/XML) or json (JSON-LD) finds it."""
    import json

    with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as handle:
        data = handle.read()
    if canonical == "json-ld":
        try:
            json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            return getattr(error, "lineno", None), getattr(error, "colno", None)
        return None, None
    if canonical != "xml":
        return None, None
    import xml.sax

    import rdflib

    try:
        rdflib.Graph().parse(data=data, format="xml", publicID=base_iri or path.resolve().as_uri())
    except xml.sax.SAXParseException as error:
        return error.getLineNumber(), error.getColumnNumber()
    except Exception as error:  # rdflib's RDF/XML errors say "<document>:line:column: message"
        match = re.search(r":(\d+):(\d+):", str(error))
        if match:
            return int(match.group(1)), int(match.group(2))
    return None, None


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


def _split_point(path: Path) -> int:
    """Byte offset of the first line start at or after the middle of the file."""
    with open(path, "rb") as handle:
        handle.seek(path.stat().st_size // 2)
        handle.readline()
        return handle.tell()


def _parse_in_two_processes(
    raw: RawGraph, path: Path, canonical: str, file_index: int, base_iri: str | None, progress: tqdm | None
) -> None:
    """Parse the second half of a line-based file in a worker process while this one parses the first."""
    import json
    import subprocess
    import sys
    import tempfile

    middle, size = _split_point(path), path.stat().st_size
    with tempfile.TemporaryDirectory(prefix="kgplm-rdf-") as scratch:
        command = [
            sys.executable,
            "-m",
            "kgplm.kg.rdf",
            str(path),
            canonical,
            str(file_index),
            str(middle),
            str(size),
            scratch,
            base_iri or "",
        ]
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
            raise cls(
                error["message"], path=path, line=error["line"], column=error["column"], expected=f"valid {canonical}"
            )
        if worker.returncode != 0:
            raise RuntimeError(f"RDF worker failed ({worker.returncode}): {stderr.decode(errors='replace')[-2000:]}")
        raw.extend_from(Path(scratch))


def _worker_main(argv: list[str]) -> int:
    """``python -m kgplm.kg.rdf PATH FORMAT FILE_INDEX START END OUT_DIR BASE_IRI``: parse one part."""
    import json

    path, canonical, file_index, start, end, out_directory, base_iri = argv
    raw = RawGraph()
    try:
        _parse_with_oxigraph(
            raw, Path(path), canonical, int(file_index), base_iri or None, None, byte_range=(int(start), int(end))
        )
    except DataFormatError as error:
        with open(Path(out_directory) / "error.json", "w", encoding="utf-8") as handle:
            message = str(error).split(": ", 1)[1] if ": " in str(error) else str(error)
            message = message.rsplit(" (expected", 1)[0]
            json.dump(
                {
                    "message": message,
                    "line": error.line,
                    "column": error.column,
                    "encoding": isinstance(error, EncodingError),
                },
                handle,
            )
        return 1
    raw.save(Path(out_directory))
    return 0


def _parse_with_rdflib(raw: RawGraph, path: Path, canonical: str, file_index: int, base_iri: str | None) -> None:
    import rdflib

    if canonical == "json-ld":
        _reject_remote_jsonld_contexts(path)
    graph = rdflib.Dataset() if canonical in ("nquads", "trig") else rdflib.Graph()
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as handle:
                graph.parse(handle, format=canonical, publicID=base_iri)
        else:
            graph.parse(str(path), format=canonical, publicID=base_iri)
    except UnicodeDecodeError as error:
        from kgplm._io import utf8_conversion_hint

        raise EncodingError(
            f"not valid UTF-8: {error.reason}",
            path=path,
            expected=f"UTF-8 RDF; {utf8_conversion_hint(path, error.object[error.start : error.end + 64])}",
        ) from None
    except Exception as error:  # rdflib raises many types; all mean malformed input here
        line = getattr(error, "lineno", None) or getattr(error, "line", None)
        raise DataFormatError(
            f"malformed {canonical} RDF: {error}", path=path, line=line if isinstance(line, int) else None
        ) from None
    statements = graph.quads() if isinstance(graph, rdflib.Dataset) else graph
    bound_by_default = set(rdflib.Graph().namespaces())
    for prefix, namespace in graph.namespaces():  # the file's declarations, not rdflib's own bindings
        if prefix and (prefix, namespace) not in bound_by_default:
            raw.prefixes.setdefault(str(prefix), str(namespace))
    blank_prefix = f"_:f{file_index}-"

    def key(term) -> str | None:
        if isinstance(term, rdflib.URIRef):
            return str(term)
        if isinstance(term, rdflib.BNode):
            return blank_prefix + str(term)
        return None  # a quoted triple (RDF-star)

    for statement in statements:
        subject, predicate, obj = statement[:3]
        subject_key = key(subject)
        if isinstance(obj, rdflib.Literal):
            object_key = (str(obj), obj.language or "", str(obj.datatype) if obj.datatype is not None else "")
        else:
            object_key = key(obj)
        if subject_key is None or object_key is None:
            raw.statements += 1
            raw.skipped_quoted += 1
            continue
        raw.add_statement(subject_key, str(predicate), object_key)


def _reject_remote_jsonld_contexts(path: Path) -> None:
    import json

    with open(path, encoding="utf-8") as handle:
        try:
            document = json.load(handle)
        except json.JSONDecodeError as error:
            raise DataFormatError(
                f"malformed JSON-LD: {error.msg}", path=path, line=error.lineno, column=error.colno
            ) from None

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
            path=path,
            expected="an inline @context object",
        )


def read_rdf(
    path_or_paths: str | os.PathLike | Sequence[str | os.PathLike],
    format: str | None = None,
    *,
    parser: str = "oxigraph",
    base_iri: str | None = None,
    merge_same_as: bool = False,
    name_predicates: Iterable[str] = (),
    alias_predicates: Iterable[str] = (),
    preferred_languages: Sequence[str] = DEFAULT_PREFERRED_LANGUAGES,
    workers: int = 2,
    show_progress: bool = True,
) -> "KGStore":
    """Load one or several RDF files into a :class:`KGStore` (mapping rules in :mod:`kgplm.kg.rdf_mapping`).

    Args:
        path_or_paths: a file or a list of files; ``.gz`` files are decompressed on the fly.
        format: rdflib-style format name; guessed from each file's extension when None.
        parser: ``"oxigraph"`` (streaming, fast) or ``"rdflib"``.
        base_iri: base for relative IRIs (``<a>``, ``<../b>``); without it they are an error.
        merge_same_as: make each class of nodes linked by ``owl:sameAs`` / ``skos:exactMatch`` one entity.
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
    raw = RawGraph()
    for file_index, path in enumerate(paths):
        path = require_file(path, "RDF file")
        canonical = rdf_format(path, format)
        logger.info("parsing %s as %s with %s", path, canonical, parser)
        if parser == "oxigraph":
            parallel = (
                workers > 1
                and canonical in _SPLITTABLE_FORMATS
                and path.suffix != ".gz"
                and path.stat().st_size >= PARALLEL_MIN_BYTES
            )
            with tqdm(
                desc=f"parsing {path.name}" + (" (first half)" if parallel else ""),
                unit=" statements",
                unit_scale=True,
                disable=not show_progress,
                leave=False,
            ) as progress:
                if parallel:
                    _parse_in_two_processes(raw, path, canonical, file_index, base_iri, progress)
                else:
                    _parse_with_oxigraph(raw, path, canonical, file_index, base_iri, progress)
        else:
            _parse_with_rdflib(raw, path, canonical, file_index, base_iri)
    return build_store(
        raw,
        ", ".join(str(p) for p in paths),
        label_roles(name_predicates, alias_predicates),
        preferred_languages=preferred_languages,
        merge_same_as=merge_same_as,
        extra_manifest={"prefixes": dict(raw.prefixes)},
    )


if __name__ == "__main__":  # the worker process of _parse_in_two_processes
    import sys

    sys.exit(_worker_main(sys.argv[1:]))
