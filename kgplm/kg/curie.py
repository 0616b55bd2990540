"""Compact ids (CURIEs) and ontology ids → the IRIs a :class:`~kgplm.kg.store.KGStore` holds.

``store.entity_id`` accepts, besides IRIs, names and aliases:

* ``PREFIX:LOCAL`` (``HP:0001250``, ``obo:HP_0001250``, ``umls:C0011849``): ``PREFIX`` looked up
  first in the store's own prefix map (``store.prefixes``: the ``@prefix`` / ``PREFIX``
  declarations of the RDF files, the prefixes an importer chose), then in :data:`DEFAULT_PREFIXES`;
  an unknown ``PREFIX`` made of letters, digits and ``_`` follows the OBO Foundry rule
  ``http://purl.obolibrary.org/obo/PREFIX_LOCAL``;
* ``PREFIX_LOCAL`` (``HP_0001250``, ``MONDO_0005148``): the OBO PURL's local name;
* a UMLS CUI (``C`` and seven digits, ``C0011849``): the concept IRI ``kgplm.kg.umls`` mints.

Each form yields candidate IRIs, tried in order; the first one that is an entity of the store
wins. Prefixes match case-sensitively first, then case-insensitively (``hp:0001250``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kgplm.kg.vocabulary import KGPLM_NAMESPACE

__all__ = ["DEFAULT_PREFIXES", "OBO_PURL", "curie_candidates"]

OBO_PURL = "http://purl.obolibrary.org/obo/"
#: the prefix map used after the store's own; OBO Foundry prefixes need no entry (see the module docstring)
DEFAULT_PREFIXES: dict[str, str] = {
    "obo": OBO_PURL,
    "umls": KGPLM_NAMESPACE + "umls/concept/",  # the concept IRIs kgplm.kg.umls mints
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "owl": "http://www.w3.org/2002/07/owl#",
    "skos": "http://www.w3.org/2004/02/skos/core#",
    "oboInOwl": "http://www.geneontology.org/formats/oboInOwl#",
    "schema": "http://schema.org/",
    "wd": "http://www.wikidata.org/entity/",
    "mesh": "http://id.nlm.nih.gov/mesh/",
}
_CURIE = re.compile(r"([A-Za-z][A-Za-z0-9_.\-]*):([^\s/:][^\s]*)")
_OBO_LOCAL = re.compile(r"([A-Za-z][A-Za-z0-9]*)_([A-Za-z0-9_]+)")
_CUI = re.compile(r"C\d{7}")
_OBO_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def curie_candidates(text: str, prefixes: Mapping[str, str] = ()) -> list[str]:
    """The IRIs ``text`` may abbreviate, most specific first (empty when it is no CURIE or id)."""
    text = text.strip()
    maps = [dict(prefixes), DEFAULT_PREFIXES]
    found: list[str] = []
    match = _CURIE.fullmatch(text)
    if match is not None and "//" not in text:
        prefix, local = match.groups()
        for mapping in maps:
            if prefix in mapping:
                found.append(mapping[prefix] + local)
        folded = prefix.casefold()
        for mapping in maps:
            found.extend(
                namespace + local for key, namespace in mapping.items() if key.casefold() == folded and key != prefix
            )
        if _OBO_PREFIX.fullmatch(prefix):
            found.append(f"{OBO_PURL}{prefix}_{local}")
            if prefix != prefix.upper():
                found.append(f"{OBO_PURL}{prefix.upper()}_{local}")
    elif _OBO_LOCAL.fullmatch(text):
        found.append(OBO_PURL + text)
    elif _CUI.fullmatch(text):
        for mapping in maps:
            if "umls" in mapping:
                found.append(mapping["umls"] + text)
    return list(dict.fromkeys(found))
