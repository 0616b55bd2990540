"""RDF format names and file extensions, shared by the reader, the writer and the importer registry."""

from __future__ import annotations

import os
from pathlib import Path

from kgplm.exceptions import ConfigurationError

__all__ = ["rdf_format", "oxigraph_format", "FORMAT_ALIASES", "EXTENSION_FORMATS", "DATASET_FORMATS"]

#: every accepted spelling → the canonical name (rdflib's names)
FORMAT_ALIASES = {
    "turtle": "turtle",
    "ttl": "turtle",
    "nt": "nt",
    "ntriples": "nt",
    "n-triples": "nt",
    "nt11": "nt",
    "nquads": "nquads",
    "nq": "nquads",
    "n-quads": "nquads",
    "trig": "trig",
    "xml": "xml",
    "rdf": "xml",
    "rdfxml": "xml",
    "rdf/xml": "xml",
    "owl": "xml",
    "application/rdf+xml": "xml",
    "json-ld": "json-ld",
    "jsonld": "json-ld",
    "json": "json-ld",
    "n3": "n3",
}
#: file extension (after removing ``.gz``) → canonical format
EXTENSION_FORMATS = {
    ".ttl": "turtle",
    ".turtle": "turtle",
    ".nt": "nt",
    ".ntriples": "nt",
    ".nq": "nquads",
    ".nquads": "nquads",
    ".trig": "trig",
    ".rdf": "xml",
    ".xml": "xml",
    ".owl": "xml",
    ".jsonld": "json-ld",
    ".json": "json-ld",
    ".n3": "n3",
}
#: formats that hold named graphs (a store is written into their default graph)
DATASET_FORMATS = ("nquads", "trig")


def rdf_format(path: str | os.PathLike, format: str | None = None) -> str:
    """Canonical format name (``turtle``, ``nt``, ``nquads``, ``trig``, ``xml``, ``json-ld``, ``n3``):
    ``format`` when given, else from the extension of ``path`` (``.gz`` removed first)."""
    if format is not None:
        canonical = FORMAT_ALIASES.get(format.lower())
        if canonical is None:
            raise ConfigurationError(
                f"unknown RDF format {format!r}; expected one of {', '.join(sorted(set(FORMAT_ALIASES)))}"
            )
        return canonical
    path = Path(path)
    suffix = Path(path.stem).suffix if path.suffix.lower() == ".gz" else path.suffix
    canonical = EXTENSION_FORMATS.get(suffix.lower())
    if canonical is None:
        raise ConfigurationError(
            f"cannot tell the RDF format of {path} from its extension {suffix!r}; pass format= "
            f"(one of {', '.join(sorted(set(EXTENSION_FORMATS.values())))}) or use one of the extensions "
            f"{' '.join(EXTENSION_FORMATS)}"
        )
    return canonical


def oxigraph_format(canonical: str):
    """pyoxigraph's ``RdfFormat`` for a canonical format name."""
    import pyoxigraph

    return {
        "turtle": pyoxigraph.RdfFormat.TURTLE,
        "nt": pyoxigraph.RdfFormat.N_TRIPLES,
        "nquads": pyoxigraph.RdfFormat.N_QUADS,
        "trig": pyoxigraph.RdfFormat.TRIG,
        "xml": pyoxigraph.RdfFormat.RDF_XML,
        "json-ld": pyoxigraph.RdfFormat.JSON_LD,
        "n3": pyoxigraph.RdfFormat.N3,
    }[canonical]
