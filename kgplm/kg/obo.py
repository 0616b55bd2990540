"""OBO flat-file ontologies (HPO, Disease Ontology, GO ...) as a :class:`KGStore`.

Rules:

* each ``[Term]`` is an entity with IRI ``http://purl.obolibrary.org/obo/PREFIX_LOCAL`` (the OBO
  Foundry convention for ``PREFIX:LOCAL`` ids); its ``name`` is the display name (language
  untagged unless ``language=`` is given);
* ``is_a: X`` becomes the relation ``is_a`` (IRI ``rdfs:subClassOf``); ``relationship: REL X``
  becomes relation ``REL`` named by its ``[Typedef]`` when one is given;
* ``synonym: "text" SCOPE ...`` gives aliases: ``EXACT`` synonyms as ``exactSynonym``, the scopes
  in ``alias_synonym_scopes`` (default EXACT and RELATED) as aliases; other scopes (BROAD,
  NARROW) are kept as attributes, because linking text by them would be wrong;
* ``xref``, ``def``, ``comment``, ``alt_id``, ``subset`` ... are text attributes;
* terms with ``is_obsolete: true`` are dropped, with every edge that touches them;
* the entity type is the term's ``namespace`` tag, else the header's ``default-namespace``,
  else the id prefix (``HP``, ``DOID``);
* the store's ``prefixes`` map each id prefix to its PURL namespace (``HP`` →
  ``http://purl.obolibrary.org/obo/HP_``), so ``store.entity_id("HP:0001250")`` resolves.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
import re

from tqdm.auto import tqdm

from kgplm._io import iter_lines, require_file
from kgplm.exceptions import DataFormatError
from kgplm.kg.collector import GraphCollector
from kgplm.kg.curie import OBO_PURL
from kgplm.kg.vocabulary import KGPLM_NAMESPACE, LABEL_ROLES, RDFS_SUBCLASS_OF, mint_iri

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["read_obo", "obo_iri"]

_SYNONYM = re.compile(r'^"((?:[^"\\]|\\.)*)"\s*(EXACT|RELATED|BROAD|NARROW)?')
_TRAILING_COMMENT = re.compile(r"\s+!\s.*$")
_QUALIFIERS = re.compile(r"\s*\{[^}]*\}\s*$")


def obo_iri(identifier: str) -> str:
    """``HP:0000118`` → ``http://purl.obolibrary.org/obo/HP_0000118``; ids without a prefix are minted."""
    if ":" in identifier and not identifier.startswith("http"):
        prefix, local = identifier.split(":", 1)
        return f"{OBO_PURL}{prefix}_{local}"
    if identifier.startswith("http"):
        return identifier
    return mint_iri(KGPLM_NAMESPACE + "obo/", "relation", identifier)


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def read_obo(
    path: str | os.PathLike,
    *,
    alias_synonym_scopes: tuple[str, ...] = ("EXACT", "RELATED"),
    language: str = "",
    show_progress: bool = True,
) -> KGStore:
    """Read an OBO 1.2/1.4 file with the rules of this module's docstring."""
    path = require_file(path, "OBO file")
    header: dict[str, str] = {}
    stanzas: list[tuple[str, int, list[tuple[int, str, str]]]] = []
    current: list[tuple[int, str, str]] | None = None
    for line_number, line in tqdm(
        iter_lines(path),
        desc=f"reading {path.name}",
        unit=" lines",
        unit_scale=True,
        disable=not show_progress,
        leave=False,
    ):
        stripped = line.strip()
        if not stripped or stripped.startswith("!"):
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            current = []
            stanzas.append((stripped[1:-1], line_number, current))
            continue
        if ":" not in stripped:
            raise DataFormatError(
                f"line {stripped[:60]!r} has no 'tag: value' form",
                path=path,
                line=line_number,
                expected="'tag: value' or a [Stanza] header",
            )
        tag, value = stripped.split(":", 1)
        value = value.strip()
        if current is None:
            header[tag.strip()] = value
        else:
            current.append((line_number, tag.strip(), value))

    default_namespace = header.get("default-namespace")
    typedef_names: dict[str, str] = {}
    terms: list[tuple[int, dict[str, list[tuple[int, str]]]]] = []
    for kind, line_number, tags in stanzas:
        grouped: dict[str, list[tuple[int, str]]] = {}
        for tag_line, tag, value in tags:
            grouped.setdefault(tag, []).append((tag_line, value))
        if "id" not in grouped:
            raise DataFormatError(
                f"[{kind}] stanza without an id", path=path, line=line_number, expected="an 'id:' tag in every stanza"
            )
        identifier = grouped["id"][0][1]
        if kind == "Typedef":
            if "name" in grouped:
                typedef_names[identifier] = grouped["name"][0][1]
        elif kind == "Term":
            terms.append((line_number, grouped))

    obsolete = {g["id"][0][1] for _, g in terms if g.get("is_obsolete", [(0, "false")])[0][1].lower() == "true"}
    collector = GraphCollector(source="obo", location=str(path))
    name_role, exact_role, alias_role = (LABEL_ROLES.index(r) for r in ("label", "exactSynonym", "altLabel"))
    live_terms = [(n, g) for n, g in terms if g["id"][0][1] not in obsolete]
    for _, grouped in live_terms:  # ids in file order
        collector.entity(obo_iri(grouped["id"][0][1]))
    is_a = collector.relation(RDFS_SUBCLASS_OF, "is_a")

    for _, grouped in live_terms:
        identifier = grouped["id"][0][1]
        entity = collector.entity(obo_iri(identifier))
        type_name = grouped.get("namespace", [(0, default_namespace)])[0][1] or identifier.split(":")[0]
        collector.add_type(entity, collector.type(mint_iri(KGPLM_NAMESPACE + "obo/", "type", type_name), type_name))
        for _, name in grouped.get("name", []):
            collector.add_label(entity, name, language, name_role)
        for tag_line, value in grouped.get("synonym", []):
            match = _SYNONYM.match(value)
            if match is None:
                raise DataFormatError(
                    f"malformed synonym {value[:60]!r}",
                    path=path,
                    line=tag_line,
                    expected='synonym: "text" SCOPE [xrefs]',
                )
            text, scope = _unescape(match.group(1)), match.group(2) or "RELATED"
            if scope in alias_synonym_scopes:
                collector.add_label(entity, text, language, exact_role if scope == "EXACT" else alias_role)
            else:
                predicate = collector.attribute_predicate(
                    obo_iri(f"oboInOwl:has{scope.title()}Synonym"), f"{scope.lower()}_synonym"
                )
                collector.add_attribute(entity, predicate, text, language)
        for tag_line, value in grouped.get("is_a", []):
            target = _QUALIFIERS.sub("", _TRAILING_COMMENT.sub("", value)).strip()
            if target not in obsolete:
                collector.add_triple(entity, is_a, collector.entity(obo_iri(target)))
        for tag_line, value in grouped.get("relationship", []):
            parts = _QUALIFIERS.sub("", _TRAILING_COMMENT.sub("", value)).split()
            if len(parts) < 2:
                raise DataFormatError(
                    f"malformed relationship {value[:60]!r}",
                    path=path,
                    line=tag_line,
                    expected="relationship: RELATION TARGET",
                )
            relation_id, target = parts[0], parts[1]
            if target in obsolete:
                continue
            relation = collector.relation(obo_iri(relation_id), typedef_names.get(relation_id, relation_id))
            collector.add_triple(entity, relation, collector.entity(obo_iri(target)))
        for tag, values in grouped.items():
            if tag in ("id", "name", "synonym", "is_a", "relationship", "namespace", "is_obsolete"):
                continue
            predicate = collector.attribute_predicate(obo_iri(f"oboInOwl:{tag}"), tag)
            for _, value in values:
                if tag == "def":
                    match = _SYNONYM.match(value)
                    value = _unescape(match.group(1)) if match else value
                collector.add_attribute(entity, predicate, value)
    # each id prefix's namespace, so that store.entity_id("HP:0001250") resolves (kgplm.kg.curie)
    prefixes = {
        identifier.split(":", 1)[0]: f"{OBO_PURL}{identifier.split(':', 1)[0]}_"
        for identifier in (g["id"][0][1] for _, g in live_terms)
        if ":" in identifier
    }
    return collector.build(extra_manifest={"obo_header": header, "prefixes": prefixes})
