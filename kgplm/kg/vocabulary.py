"""IRIs and naming rules shared by every importer and exporter.

Names that are not IRIs (CMeKG strings, UMLS CUIs, relation names from a TSV file) get IRIs
under a namespace so that every store can be exported as RDF and read back unchanged.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = [
    "writable_iri",
    "KGPLM_NAMESPACE",
    "RDF_TYPE",
    "RDFS_LABEL",
    "SKOS_PREF_LABEL",
    "SKOS_ALT_LABEL",
    "OBO_EXACT_SYNONYM",
    "OWL_SAME_AS",
    "SKOS_EXACT_MATCH",
    "RDFS_SUBCLASS_OF",
    "XSD_STRING",
    "LABEL_ROLES",
    "NAME_ROLES",
    "mint_iri",
    "local_name",
]

KGPLM_NAMESPACE = "https://w3id.org/kgplm/"

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
RDFS_SUBCLASS_OF = "http://www.w3.org/2000/01/rdf-schema#subClassOf"
SKOS_PREF_LABEL = "http://www.w3.org/2004/02/skos/core#prefLabel"
SKOS_ALT_LABEL = "http://www.w3.org/2004/02/skos/core#altLabel"
OBO_EXACT_SYNONYM = "http://www.geneontology.org/formats/oboInOwl#hasExactSynonym"
OWL_SAME_AS = "http://www.w3.org/2002/07/owl#sameAs"
SKOS_EXACT_MATCH = "http://www.w3.org/2004/02/skos/core#exactMatch"
XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"

#: Label roles in the order they are stored. ``derived`` marks aliases that kgplm inferred
#: (names copied across ``owl:sameAs``); they are not exported because re-import re-derives them.
LABEL_ROLES = ("prefLabel", "label", "altLabel", "exactSynonym", "derived")
#: Roles whose labels may be an entity's display name; the others are aliases.
NAME_ROLES = frozenset({0, 1})
LABEL_ROLE_PREDICATES = {
    SKOS_PREF_LABEL: 0,
    RDFS_LABEL: 1,
    SKOS_ALT_LABEL: 2,
    OBO_EXACT_SYNONYM: 3,
}
ROLE_PREDICATE = {role: predicate for predicate, role in LABEL_ROLE_PREDICATES.items()}

#: Classes whose instances are schema terms (properties, ontologies), never entities.
SCHEMA_CLASSES = frozenset(
    {
        "http://www.w3.org/1999/02/22-rdf-syntax-ns#Property",
        "http://www.w3.org/2002/07/owl#ObjectProperty",
        "http://www.w3.org/2002/07/owl#DatatypeProperty",
        "http://www.w3.org/2002/07/owl#AnnotationProperty",
        "http://www.w3.org/2002/07/owl#TransitiveProperty",
        "http://www.w3.org/2002/07/owl#SymmetricProperty",
        "http://www.w3.org/2002/07/owl#FunctionalProperty",
        "http://www.w3.org/2002/07/owl#Ontology",
    }
)

# Characters that may not stand inside an IRI path segment (RFC 3987), '%' itself, and the
# delimiters that would change the IRI's structure ('/', '?', '#', '[', ']').
_IRI_UNSAFE = re.compile(r'[\x00-\x20<>"{}|\\^`%\x7f/?#\[\]]')


def mint_iri(namespace: str, kind: str, name: str) -> str:
    """An IRI for ``name`` under ``namespace``: ``{namespace}{kind}/{name}`` with unsafe characters
    percent-encoded (Chinese and other non-ASCII letters stay readable: IRIs allow them)."""
    encoded = _IRI_UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), name)
    return writable_iri(f"{namespace}{kind}/{encoded}")


def writable_iri(iri: str) -> str:
    """``iri`` with each code point an IRI may not hold (outside RFC 3987's ``ucschar``) percent-encoded as UTF-8.

    Turtle's prefixed names admit more code points than IRIs do (``PN_CHARS_BASE`` runs to U+EFFFF, so
    ``p:x\U000e01ef`` parses), and such an IRI could be neither written nor read back as N-Triples.
    Encoded, it is a valid IRI that every syntax writes and reads, and its local name
    (:func:`local_name`, percent-decoded) is unchanged. Blank nodes, ASCII and valid
    IRIs are returned as they are."""
    if iri.isascii() or iri.startswith("_:"):
        return iri
    import pyoxigraph

    prefix = "Invalid IRI code point '"
    while True:
        try:
            pyoxigraph.NamedNode(iri)
            return iri
        except ValueError as error:
            message = str(error)
            character = message[len(prefix)] if message.startswith(prefix) and len(message) > len(prefix) else ""
            if not character or character not in iri or character.isascii():
                return iri  # invalid for another reason: the writer names it
            iri = iri.replace(character, "".join(f"%{byte:02X}" for byte in character.encode("utf-8")))


def local_name(iri: str) -> str:
    """The readable tail of an IRI (after the last ``#`` or ``/``), percent-decoded."""
    for separator in ("#", "/", ":"):
        position = iri.rfind(separator)
        if 0 <= position < len(iri) - 1:
            return unquote(iri[position + 1 :])
    return iri
