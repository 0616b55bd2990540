"""How RDF statements become a :class:`~kgplm.kg.store.KGStore` (used by files and SPARQL endpoints alike).

Mapping rules:

* **Entities** are the IRIs and blank nodes that stand as subject or object of a triple whose
  object is not a literal (other than ``rdf:type``), plus subjects of ``rdf:type`` (unless their
  class is a schema class such as ``owl:ObjectProperty``), plus subjects of literal statements
  (names, aliases, attributes) that are neither used as a predicate nor as a class. Entity ids
  follow first appearance in the input. A graph without any entity-to-entity triple is a valid
  store of entities with names and attributes (zero triples); only input without any statement is
  an error.
* **Relations** are the predicates of entity-to-entity triples. Schema predicates
  (``rdfs:domain``, ``rdfs:range``, ``rdfs:subPropertyOf``, ``owl:inverseOf`` ...) are not edges.
* **Types**: ``rdf:type`` objects; an entity's primary type is its most specific (fewest members).
* **Names**: ``skos:prefLabel`` and ``rdfs:label`` with their language tags (zh and en both are
  kept); the display name is chosen by ``preferred_languages`` (default zh, untagged, en).
  **Aliases**: ``skos:altLabel`` and ``oboInOwl:hasExactSynonym``.
* **Equivalence**: by default ``owl:sameAs`` between two IRIs stays a relation and each side's
  names become the other's (derived) aliases. With ``merge_same_as=True`` every class of nodes
  linked by ``owl:sameAs`` or ``skos:exactMatch`` becomes one entity (for Linked Open Data that
  links its nodes to UMLS or other vocabularies): the first-seen node keeps its IRI and display
  name, the others' links, types, attributes and names move to it (their names as aliases), the
  equivalence links themselves disappear, and their IRIs still resolve through
  ``store.entity_id``. ``describe()["merged_entities"]`` counts the nodes merged away.
* Every other literal-valued statement is a **text attribute** (predicate, value, language or
  datatype), not an edge. Labels of predicates and classes name the relations and types.
* Named graphs (N-Quads, TriG) are merged into one graph; RDF-star quoted triples are skipped
  with a warning.
"""

from __future__ import annotations

import json
import logging
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kgplm.exceptions import EmptyGraphError
from kgplm.kg.collector import DEFAULT_PREFERRED_LANGUAGES, GraphCollector
from kgplm.kg.vocabulary import (
    LABEL_ROLE_PREDICATES,
    LABEL_ROLES,
    OWL_SAME_AS,
    RDF_LANG_STRING,
    RDF_TYPE,
    SCHEMA_CLASSES,
    SKOS_EXACT_MATCH,
    XSD_STRING,
    writable_iri,
)

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = [
    "RawGraph",
    "build_store",
    "label_roles",
    "SCHEMA_PREDICATES",
    "EQUIVALENCE_PREDICATES",
    "plain_datatype",
    "PLAIN_DATATYPES",
]

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
#: predicates whose linked nodes ``merge_same_as=True`` makes one entity
EQUIVALENCE_PREDICATES = (OWL_SAME_AS, SKOS_EXACT_MATCH)


#: datatypes of plain and language-tagged strings, stored as ``""``
PLAIN_DATATYPES = frozenset({XSD_STRING, RDF_LANG_STRING})


def plain_datatype(datatype: str) -> str:
    """``""`` for the datatypes of plain and language-tagged strings, else the datatype IRI."""
    return "" if datatype in PLAIN_DATATYPES else datatype


class RawGraph:
    """Statements interned to integers while parsing; :func:`build_store` classifies them afterwards.

    Node keys are IRIs, or ``"_:"`` + a label unique within the whole input for blank nodes.
    The file parser fills the columns directly in its hot loop; slower sources call
    :meth:`add_statement`.
    """

    #: int columns, saved as .npy by :meth:`save`
    ARRAYS = (
        "edge_subjects",
        "edge_predicates",
        "edge_objects",
        "type_subjects",
        "type_classes",
        "literal_subjects",
        "literal_predicates",
    )
    #: string columns, saved as JSON
    LISTS = ("literal_values", "literal_languages", "literal_datatypes")

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
        self.prefixes: dict[str, str] = {}  # the files' prefix declarations (store.prefixes; CURIE lookup)
        self.statements = 0
        self.skipped_quoted = 0
        self.skipped_schema = 0

    def add_statement(self, subject: str, predicate: str, obj: str | tuple[str, str, str]) -> None:
        """Add one statement: ``subject`` a node key, ``obj`` a node key or a ``(value, language,
        datatype)`` literal (datatype ``""`` for plain strings)."""
        self.statements += 1
        p = self.predicates.setdefault(predicate, len(self.predicates))
        s = self.nodes.setdefault(subject, len(self.nodes))
        if isinstance(obj, tuple):
            value, language, datatype = obj
            self.literal_subjects.append(s)
            self.literal_predicates.append(p)
            self.literal_values.append(value)
            self.literal_languages.append(language)
            self.literal_datatypes.append(plain_datatype(datatype))
            return
        o = self.nodes.setdefault(obj, len(self.nodes))
        if predicate == RDF_TYPE:
            self.type_subjects.append(s)
            self.type_classes.append(o)
        elif predicate in SCHEMA_PREDICATES:
            self.skipped_schema += 1
        else:
            self.edge_subjects.append(s)
            self.edge_predicates.append(p)
            self.edge_objects.append(o)

    # -- a parsed part as files (the parallel parser's worker reply; no pickle) ------------
    def save(self, directory: Path) -> None:
        for name in self.ARRAYS:
            np.save(directory / f"{name}.npy", np.frombuffer(getattr(self, name), dtype=np.int32))
        payload = {name: getattr(self, name) for name in self.LISTS}
        payload.update(
            nodes=list(self.nodes),
            predicates=list(self.predicates),
            prefixes=self.prefixes,
            statements=self.statements,
            skipped_quoted=self.skipped_quoted,
            skipped_schema=self.skipped_schema,
        )
        with open(directory / "part.json", "w", encoding="utf-8") as handle:
            json.dump(payload, handle, ensure_ascii=False)

    def extend_from(self, directory: Path) -> None:
        """Append a part written by :meth:`save`, re-numbering its nodes and predicates."""
        with open(directory / "part.json", encoding="utf-8") as handle:
            payload = json.load(handle)
        node_map = np.fromiter(
            (self.nodes.setdefault(k, len(self.nodes)) for k in payload["nodes"]),
            dtype=np.int32,
            count=len(payload["nodes"]),
        )
        predicate_map = np.fromiter(
            (self.predicates.setdefault(k, len(self.predicates)) for k in payload["predicates"]),
            dtype=np.int32,
            count=len(payload["predicates"]),
        )
        for name in self.ARRAYS:
            local = np.load(directory / f"{name}.npy", allow_pickle=False)
            mapping = predicate_map if name.endswith("predicates") else node_map
            getattr(self, name).frombytes(mapping[local].astype(np.int32).tobytes() if len(local) else b"")
        for name in self.LISTS:
            getattr(self, name).extend(payload[name])
        for prefix, namespace in payload.get("prefixes", {}).items():
            self.prefixes.setdefault(prefix, namespace)
        self.statements += payload["statements"]
        self.skipped_quoted += payload["skipped_quoted"]
        self.skipped_schema += payload["skipped_schema"]


def label_roles(name_predicates: Iterable[str] = (), alias_predicates: Iterable[str] = ()) -> dict[str, int]:
    """Label predicate IRI → role in ``LABEL_ROLES``: the standard ones plus extra name and alias predicates."""
    roles = dict(LABEL_ROLE_PREDICATES)
    roles.update({iri: LABEL_ROLES.index("label") for iri in name_predicates})
    roles.update({iri: LABEL_ROLES.index("altLabel") for iri in alias_predicates})
    return roles


def build_store(
    raw: RawGraph,
    location: str,
    label_roles: dict[str, int],
    *,
    preferred_languages: Sequence[str] = DEFAULT_PREFERRED_LANGUAGES,
    merge_same_as: bool = False,
    source: str = "rdf",
    extra_manifest: dict | None = None,
) -> "KGStore":
    """Classify the statements of ``raw`` by the module's rules and compile the store.

    ``label_roles`` maps label predicates to their role in ``LABEL_ROLES``.
    """
    if raw.statements == 0:
        raise EmptyGraphError(f"{location} has no statement; expected at least one RDF statement about an entity")
    if raw.skipped_quoted:
        logger.warning("skipped %d statements with RDF-star quoted triples", raw.skipped_quoted)
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

    schema_class_nodes = np.array([raw.nodes[c] for c in SCHEMA_CLASSES if c in raw.nodes], dtype=np.int32)
    schema_typed = np.isin(type_s, type_s[np.isin(type_c, schema_class_nodes)]) if len(type_s) else type_s.astype(bool)
    is_entity = np.zeros(num_nodes, dtype=bool)
    is_entity[edge_s] = True
    is_entity[edge_o] = True
    is_entity[type_s[~schema_typed]] = True
    # subjects of literal statements that are not predicates, classes or schema terms are entities too
    not_entity_candidates = np.zeros(num_nodes, dtype=bool)
    not_entity_candidates[type_c] = True
    not_entity_candidates[type_s[schema_typed]] = True
    for iri in predicate_iris:
        index = raw.nodes.get(iri)
        if index is not None:
            not_entity_candidates[index] = True
    described = np.zeros(num_nodes, dtype=bool)
    described[lit_s] = True
    is_entity |= described & ~not_entity_candidates

    entity_of_node = np.full(num_nodes, -1, dtype=np.int64)
    entity_nodes = np.flatnonzero(is_entity)
    entity_of_node[entity_nodes] = np.arange(len(entity_nodes))

    collector = GraphCollector(source=source, location=location)
    for node in entity_nodes.tolist():
        collector.entity(writable_iri(node_keys[node]))

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
            iri = predicate_iris[p]
            relation_of_predicate[p] = collector.relation(writable_iri(iri), label_of(iri))
    heads, tails = entity_of_node[edge_s], entity_of_node[edge_o]
    collector.heads.frombytes(heads.astype(np.int32).tobytes())
    collector.relations.frombytes(relation_of_predicate[edge_p].astype(np.int32).tobytes())
    collector.tails.frombytes(tails.astype(np.int32).tobytes())

    entity_typed = entity_of_node[type_s] >= 0 if len(type_s) else type_s.astype(bool)
    for s, c in zip(type_s[entity_typed].tolist(), type_c[entity_typed].tolist()):
        if node_keys[c] in SCHEMA_CLASSES:
            continue
        type_iri = node_keys[c]
        collector.add_type(int(entity_of_node[s]), collector.type(writable_iri(type_iri), label_of(type_iri)))

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
            predicate = collector.attribute_predicate(writable_iri(iri), label_of(iri))
            collector.add_attribute(entity, predicate, value, language, writable_iri(datatype))
    if dropped:
        logger.info("%d literal statements describe predicates or classes, not entities", dropped)
    if raw.skipped_schema:
        logger.info("%d schema statements (domain, range, subPropertyOf ...) are not edges", raw.skipped_schema)
    if len(entity_nodes) == 0:
        logger.warning(
            "%s: %d statements, but all describe predicates or classes: the store has no entity",
            location,
            raw.statements,
        )
    if merge_same_as:
        collector.merge_linked(EQUIVALENCE_PREDICATES)
    return collector.build(preferred_languages=preferred_languages, allow_empty=True, extra_manifest=extra_manifest)
