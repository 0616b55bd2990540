"""Writing a :class:`~kgplm.kg.store.KGStore` as RDF, and its rdflib view.

* The format follows the file's extension unless ``format=`` names it: ``.ttl``, ``.nt``,
  ``.nq``, ``.trig``, ``.rdf``/``.xml``/``.owl``, ``.jsonld``/``.json``, ``.n3`` — every format the
  reader parses — and ``.gz`` on top of any of them compresses the output. N-Quads and TriG
  files hold the store in their default graph.
* Blank nodes keep their identity: each gets a label that is an injective function of its key
  (letters and digits kept, every other byte written ``_XX`` in hex, ``_`` itself included), so
  ``_:a-b`` and ``_:a_b`` stay two nodes in every syntax.
* An IRI or language tag that was loaded (rdflib's parser accepts some that RDF forbids) but that
  no syntax can write raises :class:`DataFormatError` naming it; nothing is written.
* Derived aliases (names copied across ``owl:sameAs``) are not written: reading the output back
  derives them again. Nodes merged into an entity (``merge_same_as``) are written as
  ``owl:sameAs`` links from the entity, so reading back with ``merge_same_as=True`` gives the same store.
"""

from __future__ import annotations

import gzip
import logging
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from kgplm._io import atomic_file
from kgplm.exceptions import DataFormatError, EmptyGraphError
from kgplm.kg.rdf_formats import oxigraph_format, rdf_format
from kgplm.kg.vocabulary import LABEL_ROLES, OWL_SAME_AS, RDF_TYPE, RDFS_LABEL, ROLE_PREDICATE, local_name

if TYPE_CHECKING:  # pragma: no cover
    import rdflib

    from kgplm.kg.store import KGStore

__all__ = ["write_rdf", "iter_store_statements", "to_rdflib_graph", "blank_node_label"]

logger = logging.getLogger(__name__)

_BLANK_SAFE = re.compile(r"[A-Za-z0-9]")
_STANDARD_PREFIXES = {
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "skos": "http://www.w3.org/2004/02/skos/core#",
    "owl": "http://www.w3.org/2002/07/owl#",
    "oboInOwl": "http://www.geneontology.org/formats/oboInOwl#",
}


def blank_node_label(key: str) -> str:
    """The label written for the blank node ``key`` (``"_:…"``): ASCII letters and digits stay, every
    other UTF-8 byte becomes ``_`` + two hex digits. Injective, and valid in every RDF syntax
    (it starts with a letter or ``_`` and holds only letters, digits and ``_``)."""
    body = key[2:] if key.startswith("_:") else key
    return (
        "".join(c if _BLANK_SAFE.fullmatch(c) else "".join(f"_{b:02X}" for b in c.encode("utf-8")) for c in body) or "_"
    )


def iter_store_statements(store: "KGStore", *, include_schema: bool = True) -> Iterator[tuple]:
    """Yield ``(subject, predicate, object)`` with IRIs as ``str`` (blank nodes as ``"_:id"``) and
    literals as ``("literal", value, language, datatype)`` tuples.

    With ``include_schema`` the names of relations, types and attribute predicates are written as
    ``rdfs:label`` of their IRIs so that they survive a round trip.
    """
    arrays, strings = store.arrays, store.strings
    languages, datatypes = store.languages, store.datatypes
    relation_iris, type_iris = store.relation_iris, store.type_iris
    attribute_iris = store.attribute_predicate_iris
    if include_schema:
        for iris, names in (
            (relation_iris, store.relation_names),
            (type_iris, store.type_names),
            (attribute_iris, store.attribute_predicate_names),
        ):
            for iri, name in zip(iris, names):
                if name != local_name(iri):
                    yield iri, RDFS_LABEL, ("literal", name, "", "")
    derived = LABEL_ROLES.index("derived")
    entity_iris = store.entity_iris
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
            yield (
                iri,
                ROLE_PREDICATE[role],
                ("literal", strings[int(label_strings[position])], languages[int(label_languages[position])], ""),
            )
        for position in range(attribute_indptr[entity], attribute_indptr[entity + 1]):
            yield (
                iri,
                attribute_iris[int(attribute_predicates[position])],
                (
                    "literal",
                    strings[int(attribute_values[position])],
                    languages[int(attribute_languages[position])],
                    datatypes[int(attribute_datatypes[position])],
                ),
            )
    for head, relation, tail in np.asarray(store.triples).tolist():
        yield entity_iris[head], relation_iris[relation], entity_iris[tail]
    for merged_iri, entity in store.merged_iris().items():
        yield entity_iris[entity], OWL_SAME_AS, merged_iri


def _to_oxigraph(statements: Iterable[tuple], path: Path, canonical: str, location: str | None):
    import pyoxigraph

    cache: dict[str, object] = {}

    def unwritable(what: str, value: str, error: ValueError) -> DataFormatError:
        return DataFormatError(
            f"cannot write the {what} {value!r} as {canonical} RDF ({error}); it was loaded from "
            f"{location or 'the source'}, whose parser accepted it",
            path=path,
            expected="absolute IRIs (RFC 3987) and BCP 47 language tags",
        )

    def node(key: str):
        term = cache.get(key)
        if term is None:
            if key.startswith("_:"):
                term = pyoxigraph.BlankNode(blank_node_label(key))
            else:
                try:
                    term = pyoxigraph.NamedNode(key)
                except ValueError as error:
                    raise unwritable("IRI", key, error) from None
            if len(cache) < 1_000_000:
                cache[key] = term
        return term

    for subject, predicate, obj in statements:
        if isinstance(obj, tuple):
            _, value, language, datatype = obj
            try:
                if language:
                    term = pyoxigraph.Literal(value, language=language)
                elif datatype:
                    term = pyoxigraph.Literal(value, datatype=node(datatype))
                else:
                    term = pyoxigraph.Literal(value)
            except ValueError as error:
                raise unwritable("literal", f"{value}@{language}" if language else value, error) from None
        else:
            term = node(obj)
        yield pyoxigraph.Triple(node(subject), node(predicate), term)


def write_rdf(store: "KGStore", path: str | os.PathLike, *, format: str | None = None) -> Path:
    """Write the store as RDF in ``format``, or in the format the extension of ``path`` names
    (``.ttl``, ``.nt``, ``.nq``, ``.trig``, ``.rdf``, ``.xml``, ``.owl``, ``.jsonld``, ``.n3``; ``.gz``
    compresses). Written to a temporary file and renamed, so a failed export leaves nothing.

    A store without entities (e.g. read from a file whose statements all describe predicates or
    classes) is refused with :class:`EmptyGraphError` before anything is written: its RDF would hold
    no statement, which :meth:`KGStore.from_rdf` does not read."""
    path = Path(path)
    canonical = rdf_format(path, format)
    if store.num_entities == 0:
        raise EmptyGraphError(
            f"{store.location or 'the store'} has no entity; {path} would hold no RDF statement, "
            f"which from_rdf refuses to read; nothing was written"
        )
    with atomic_file(path, "wb") as handle:
        if path.suffix.lower() == ".gz":
            with gzip.GzipFile(fileobj=handle, mode="wb", filename="", mtime=0) as compressed:
                _serialize(store, compressed, path, canonical)
        else:
            _serialize(store, handle, path, canonical)
    logger.info("wrote %r as %s to %s", store, canonical, path)
    return path


def _serialize(store: "KGStore", output, path: Path, canonical: str) -> None:
    import pyoxigraph

    prefixes = dict(_STANDARD_PREFIXES)
    prefixes.update(store.prefixes)
    pyoxigraph.serialize(
        _to_oxigraph(iter_store_statements(store), path, canonical, store.location),
        output,
        oxigraph_format(canonical),
        prefixes=prefixes if canonical in ("turtle", "trig", "n3") else None,
    )


def to_rdflib_graph(store: "KGStore") -> "rdflib.Graph":
    """Build an ``rdflib.Graph`` holding every statement of the store."""
    import rdflib

    graph = rdflib.Graph()
    cache: dict[str, rdflib.term.Node] = {}

    def node(key: str):
        term = cache.get(key)
        if term is None:
            term = cache[key] = rdflib.BNode(blank_node_label(key)) if key.startswith("_:") else rdflib.URIRef(key)
        return term

    add = graph.add
    for subject, predicate, obj in tqdm(
        iter_store_statements(store), desc="building rdflib graph", unit=" statements", unit_scale=True, leave=False
    ):
        if isinstance(obj, tuple):
            _, value, language, datatype = obj
            term = rdflib.Literal(value, lang=language or None, datatype=rdflib.URIRef(datatype) if datatype else None)
        else:
            term = node(obj)
        add((node(subject), node(predicate), term))
    for prefix, namespace in store.prefixes.items():
        graph.bind(prefix, namespace)
    return graph
