"""``KGStore``: a medical knowledge graph with a compiled integer view and an rdflib view.

The compiled form holds, as numpy arrays:

* vocabularies of entities (IRIs), relations and types, each with a display name;
* ``triples``: an ``(num_triples, 3)`` int32 array of ``(head, relation, tail)`` rows, sorted and
  free of duplicates (duplicates are counted in ``describe()["duplicate_triples"]``);
* CSR adjacency for out-edges and in-edges with the relation id of each edge;
* labels (names and aliases with their language tags and role) and literal attributes.

Every importer (RDF, CMeKG, TSV triples, OBO, UMLS RRF) fills a :class:`GraphCollector`, which
compiles into a store. ``save(directory)`` writes ``.npy`` arrays and a JSON manifest (never a
pickle); ``KGStore.load(directory)`` memory-maps the arrays, so loading is near-instant and strings
are decoded only when read.
"""

from __future__ import annotations

import json
import logging
import os
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from kgplm._io import atomic_directory
from kgplm.exceptions import (
    AmbiguousEntityError,
    ArtifactError,
    ConfigurationError,
    EmptyGraphError,
    MissingFileError,
    UnknownEntityError,
)
from kgplm.kg.strings import StringTable
from kgplm.kg.vocabulary import LABEL_ROLES, NAME_ROLES, OWL_SAME_AS, local_name

if TYPE_CHECKING:  # pragma: no cover
    import rdflib
    import scipy.sparse

__all__ = ["KGStore", "GraphCollector", "STORE_FORMAT_VERSION"]

logger = logging.getLogger(__name__)

STORE_FORMAT_VERSION = 1
DEFAULT_PREFERRED_LANGUAGES = ("zh", "", "en")
_DIRECTION_NAMES = ("out", "in")

# Arrays of a compiled store, saved one .npy each.
_ARRAY_NAMES = (
    "triples",
    "out_indptr",
    "out_neighbors",
    "out_relations",
    "in_indptr",
    "in_neighbors",
    "in_relations",
    "type_indptr",
    "type_ids",
    "label_indptr",
    "label_strings",
    "label_languages",
    "label_roles",
    "name_label",
    "attribute_indptr",
    "attribute_predicates",
    "attribute_values",
    "attribute_languages",
    "attribute_datatypes",
)


def _csr_from_rows(rows: np.ndarray, num_rows: int) -> np.ndarray:
    """indptr for rows already sorted by ``rows``."""
    indptr = np.zeros(num_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=num_rows), out=indptr[1:])
    return indptr


def _load_array(path: Path, mmap: bool) -> np.ndarray:
    if not path.is_file():
        raise ArtifactError(f"store directory is missing {path.name} (at {path.parent})")
    array_ = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    return array_


class GraphCollector:
    """Accumulates entities, triples, types, labels and attributes, then compiles a :class:`KGStore`.

    Importers call the ``add_*`` methods with ids they got from :meth:`entity`,
    :meth:`relation` and :meth:`type`; ids are assigned in order of first appearance, so the
    same input always gives the same ids.
    """

    def __init__(self, *, source: str, location: str | None = None) -> None:
        self.source = source
        self.location = location
        self.entity_index: dict[str, int] = {}
        self.relation_index: dict[str, int] = {}
        self.relation_names: list[str | None] = []
        self.type_index: dict[str, int] = {}
        self.type_names: list[str | None] = []
        self.attribute_predicate_index: dict[str, int] = {}
        self.attribute_predicate_names: list[str | None] = []
        self.heads = array("i")
        self.relations = array("i")
        self.tails = array("i")
        self.typed_entities = array("i")
        self.typed_types = array("i")
        self.label_entities = array("i")
        self.label_texts: list[str] = []
        self.label_languages: list[str] = []
        self.label_roles = array("b")
        self.attribute_entities = array("i")
        self.attribute_predicates = array("i")
        self.attribute_values: list[str] = []
        self.attribute_languages: list[str] = []
        self.attribute_datatypes: list[str] = []

    # -- vocabularies ---------------------------------------------------------------------
    def entity(self, iri: str) -> int:
        index = self.entity_index.get(iri)
        if index is None:
            index = self.entity_index[iri] = len(self.entity_index)
        return index

    def relation(self, iri: str, name: str | None = None) -> int:
        index = self.relation_index.get(iri)
        if index is None:
            index = self.relation_index[iri] = len(self.relation_index)
            self.relation_names.append(name)
        elif name is not None and self.relation_names[index] is None:
            self.relation_names[index] = name
        return index

    def type(self, iri: str, name: str | None = None) -> int:
        index = self.type_index.get(iri)
        if index is None:
            index = self.type_index[iri] = len(self.type_index)
            self.type_names.append(name)
        elif name is not None and self.type_names[index] is None:
            self.type_names[index] = name
        return index

    def attribute_predicate(self, iri: str, name: str | None = None) -> int:
        index = self.attribute_predicate_index.get(iri)
        if index is None:
            index = self.attribute_predicate_index[iri] = len(self.attribute_predicate_index)
            self.attribute_predicate_names.append(name)
        return index

    # -- statements -----------------------------------------------------------------------
    def add_triple(self, head: int, relation: int, tail: int) -> None:
        self.heads.append(head)
        self.relations.append(relation)
        self.tails.append(tail)

    def add_type(self, entity: int, type_id: int) -> None:
        self.typed_entities.append(entity)
        self.typed_types.append(type_id)

    def add_label(self, entity: int, text: str, language: str = "", role: int = 1) -> None:
        """Add a name (roles 0, 1) or alias (roles 2, 3, 4) of ``entity``; see ``LABEL_ROLES``."""
        self.label_entities.append(entity)
        self.label_texts.append(text)
        self.label_languages.append(language)
        self.label_roles.append(role)

    def add_attribute(self, entity: int, predicate: int, value: str, language: str = "", datatype: str = "") -> None:
        self.attribute_entities.append(entity)
        self.attribute_predicates.append(predicate)
        self.attribute_values.append(value)
        self.attribute_languages.append(language)
        self.attribute_datatypes.append(datatype)

    # -- compilation ----------------------------------------------------------------------
    def build(
        self,
        *,
        preferred_languages: Sequence[str] = DEFAULT_PREFERRED_LANGUAGES,
        copy_names_across_same_as: bool = True,
        extra_manifest: dict[str, Any] | None = None,
    ) -> "KGStore":
        """Deduplicate, sort and compile everything collected into a :class:`KGStore`."""
        num_entities = len(self.entity_index)
        if len(self.heads) == 0:
            where = f" in {self.location}" if self.location else ""
            raise EmptyGraphError(
                f"the {self.source} source{where} has no entity-to-entity triple "
                f"({num_entities} entities, {len(self.attribute_values)} literal attributes); "
                "expected at least one triple linking two entities"
            )
        triples = np.stack(
            [np.frombuffer(self.heads, dtype=np.int32), np.frombuffer(self.relations, dtype=np.int32),
             np.frombuffer(self.tails, dtype=np.int32)],
            axis=1,
        )
        raw_count = len(triples)
        triples = _unique_rows(triples, (num_entities, len(self.relation_index), num_entities))
        duplicates = raw_count - len(triples)
        if duplicates:
            logger.info("%s: removed %d duplicate triples", self.source, duplicates)

        if copy_names_across_same_as and OWL_SAME_AS in self.relation_index:
            self._copy_names_across_same_as(triples, self.relation_index[OWL_SAME_AS])

        type_indptr, type_ids = self._compile_types(num_entities)
        (label_indptr, label_strings, label_languages, label_roles, name_label,
         strings, languages, string_index, language_index) = self._compile_labels(num_entities, preferred_languages)
        attribute_arrays, datatypes = self._compile_attributes(num_entities, strings, string_index, languages, language_index)

        arrays = _compile_adjacency(triples, num_entities)
        arrays.update(
            type_indptr=type_indptr, type_ids=type_ids, label_indptr=label_indptr,
            label_strings=label_strings, label_languages=label_languages, label_roles=label_roles,
            name_label=name_label, **attribute_arrays,
        )
        manifest = {
            "format_version": STORE_FORMAT_VERSION,
            "source": self.source,
            "location": self.location,
            "num_entities": num_entities,
            "num_relations": len(self.relation_index),
            "num_triples": int(len(triples)),
            "duplicate_triples": int(duplicates),
            "relation_iris": list(self.relation_index),
            "relation_names": [n or local_name(i) for i, n in zip(self.relation_index, self.relation_names)],
            "type_iris": list(self.type_index),
            "type_names": [n or local_name(i) for i, n in zip(self.type_index, self.type_names)],
            "attribute_predicate_iris": list(self.attribute_predicate_index),
            "attribute_predicate_names": [
                n or local_name(i) for i, n in zip(self.attribute_predicate_index, self.attribute_predicate_names)
            ],
            "languages": languages,
            "datatypes": datatypes,
            "preferred_languages": list(preferred_languages),
            **(extra_manifest or {}),
        }
        entity_iris = StringTable.from_strings(self.entity_index)
        return KGStore(manifest=manifest, arrays=arrays, entity_iris=entity_iris, strings=StringTable.from_strings(strings))

    def _copy_names_across_same_as(self, triples: np.ndarray, same_as: int) -> None:
        """Each side of an ``owl:sameAs`` link gets the other side's names as derived aliases."""
        pairs = triples[triples[:, 1] == same_as][:, [0, 2]]
        by_entity: dict[int, list[tuple[str, str]]] = defaultdict(list)
        roles = self.label_roles
        for entity, text, language, role in zip(self.label_entities, self.label_texts, self.label_languages, roles):
            if role in NAME_ROLES:
                by_entity[entity].append((text, language))
        derived = LABEL_ROLES.index("derived")
        for left, right in pairs.tolist():
            for source, target in ((left, right), (right, left)):
                for text, language in by_entity.get(source, ()):
                    self.add_label(target, text, language, derived)

    def _compile_types(self, num_entities: int) -> tuple[np.ndarray, np.ndarray]:
        pairs = np.stack(
            [np.frombuffer(self.typed_entities, dtype=np.int32), np.frombuffer(self.typed_types, dtype=np.int32)], axis=1
        ) if len(self.typed_entities) else np.zeros((0, 2), dtype=np.int32)
        pairs = _unique_rows(pairs, (num_entities, len(self.type_index)))
        # The primary type of a multi-typed entity is its most specific one: the type with the
        # fewest members (ties: the lower type id, i.e. the first seen).
        members = np.bincount(pairs[:, 1], minlength=len(self.type_index)) if len(pairs) else np.zeros(0, np.int64)
        order = np.lexsort((pairs[:, 1], members[pairs[:, 1]] if len(pairs) else pairs[:, 1], pairs[:, 0]))
        pairs = pairs[order]
        return _csr_from_rows(pairs[:, 0], num_entities), pairs[:, 1].astype(np.int32)

    def _compile_labels(self, num_entities: int, preferred_languages: Sequence[str]):
        strings: list[str] = []
        string_index: dict[str, int] = {}
        languages: list[str] = [""]
        language_index: dict[str, int] = {"": 0}
        seen: set[tuple[int, int, int, int]] = set()
        rows: list[tuple[int, int, int, int]] = []
        for entity, text, language, role in zip(self.label_entities, self.label_texts, self.label_languages, self.label_roles):
            s = string_index.get(text)
            if s is None:
                s = string_index[text] = len(strings)
                strings.append(text)
            lang = language_index.get(language)
            if lang is None:
                lang = language_index[language] = len(languages)
                languages.append(language)
            key = (entity, s, lang, role)
            if key in seen:
                continue
            # a derived alias that repeats an own label of the entity adds nothing
            seen.add(key)
            rows.append(key)
        if rows:
            table = np.array(rows, dtype=np.int64)
        else:
            table = np.zeros((0, 4), dtype=np.int64)
        table = table[np.argsort(table[:, 0], kind="stable")]
        label_indptr = _csr_from_rows(table[:, 0], num_entities)

        # Display name: best language (in preferred order, then any), then prefLabel over label.
        language_rank = {language_index[l]: r for r, l in enumerate(preferred_languages) if l in language_index}
        fallback_rank = len(preferred_languages)
        name_label = np.full(num_entities, -1, dtype=np.int64)
        best_key = {}
        for position, (entity, _, lang, role) in enumerate(table.tolist()):
            if role not in NAME_ROLES:
                continue
            key = (language_rank.get(lang, fallback_rank), role, position)
            if entity not in best_key or key < best_key[entity]:
                best_key[entity] = key
                name_label[entity] = position
        return (
            label_indptr,
            table[:, 1].astype(np.int32),
            table[:, 2].astype(np.int16),
            table[:, 3].astype(np.int8),
            name_label,
            strings,
            languages,
            string_index,
            language_index,
        )

    def _compile_attributes(self, num_entities, strings, string_index, languages, language_index):
        datatypes: list[str] = [""]
        datatype_index = {"": 0}
        rows = []
        seen = set()
        for entity, predicate, value, language, datatype in zip(
            self.attribute_entities, self.attribute_predicates, self.attribute_values,
            self.attribute_languages, self.attribute_datatypes,
        ):
            s = string_index.get(value)
            if s is None:
                s = string_index[value] = len(strings)
                strings.append(value)
            lang = language_index.get(language)
            if lang is None:
                lang = language_index[language] = len(languages)
                languages.append(language)
            dt = datatype_index.get(datatype)
            if dt is None:
                dt = datatype_index[datatype] = len(datatypes)
                datatypes.append(datatype)
            key = (entity, predicate, s, lang, dt)
            if key not in seen:
                seen.add(key)
                rows.append(key)
        table = np.array(rows, dtype=np.int64) if rows else np.zeros((0, 5), dtype=np.int64)
        table = table[np.argsort(table[:, 0], kind="stable")]
        arrays = {
            "attribute_indptr": _csr_from_rows(table[:, 0], num_entities),
            "attribute_predicates": table[:, 1].astype(np.int32),
            "attribute_values": table[:, 2].astype(np.int32),
            "attribute_languages": table[:, 3].astype(np.int16),
            "attribute_datatypes": table[:, 4].astype(np.int16),
        }
        return arrays, datatypes


def _row_keys(columns: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray | None:
    """One int64 per row that sorts like the rows (mixed radix), or None if it would overflow."""
    if np.prod([float(max(s, 1)) for s in sizes]) >= 2.0**62:
        return None
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for column, size in zip(columns, sizes):
        key = key * max(int(size), 1) + column.astype(np.int64)
    return key


def _unique_rows(rows: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Sorted unique rows of a small-int matrix; a 1-D sort of packed keys is ~20x faster than axis=0."""
    key = _row_keys([rows[:, i] for i in range(rows.shape[1])], sizes)
    if key is None:
        return np.unique(rows, axis=0)
    _, first = np.unique(key, return_index=True)
    return rows[first]


def _compile_adjacency(triples: np.ndarray, num_entities: int) -> dict[str, np.ndarray]:
    """CSR out- and in-adjacency with relation ids; ``triples`` sorted by (head, relation, tail)."""
    heads, relations, tails = triples[:, 0], triples[:, 1], triples[:, 2]
    num_relations = int(relations.max()) + 1 if len(relations) else 1
    key = _row_keys([tails, relations, heads], [num_entities, num_relations, num_entities])
    in_order = np.argsort(key, kind="stable") if key is not None else np.lexsort((heads, relations, tails))
    return {
        "triples": np.ascontiguousarray(triples, dtype=np.int32),
        "out_indptr": _csr_from_rows(heads, num_entities),
        "out_neighbors": np.ascontiguousarray(tails, dtype=np.int32),
        "out_relations": np.ascontiguousarray(relations, dtype=np.int32),
        "in_indptr": _csr_from_rows(tails[in_order], num_entities),
        "in_neighbors": np.ascontiguousarray(heads[in_order], dtype=np.int32),
        "in_relations": np.ascontiguousarray(relations[in_order], dtype=np.int32),
    }


class KGStore:
    """A knowledge graph: entities, typed relations between them, names, aliases and attributes.

    Build one with an importer (:meth:`from_rdf`, :meth:`from_cmekg`, :meth:`from_triples`,
    :meth:`from_obo`, :meth:`from_umls_rrf`) or :meth:`load` a saved one. Entities, relations and
    types are numbered from 0 in order of first appearance in the source.
    """

    def __init__(self, *, manifest: dict[str, Any], arrays: dict[str, np.ndarray], entity_iris: StringTable,
                 strings: StringTable) -> None:
        self._manifest = manifest
        self._arrays = arrays
        self._entity_iris = entity_iris
        self._strings = strings
        self._iri_index: dict[str, int] | None = None
        self._name_index: dict[str, list[int]] | None = None
        self._casefold_index: dict[str, list[int]] | None = None
        self._relation_lookup: dict[str, int] | None = None
        self._graph = None
        self._neighbor_tables: dict[str, Any] = {}

    # -- importers ------------------------------------------------------------------------
    @classmethod
    def from_rdf(cls, path_or_paths, format: str | None = None, **options) -> "KGStore":
        """Load RDF files (Turtle, N-Triples, N-Quads, TriG, RDF/XML, JSON-LD); see :mod:`kgplm.kg.rdf`."""
        from kgplm.kg.rdf import read_rdf

        return read_rdf(path_or_paths, format=format, **options)

    @classmethod
    def from_cmekg(cls, path: str | os.PathLike | None = None, **options) -> "KGStore":
        """Load CMeKG from a TSV(.gz) dump, or from the installed ``pycmekg`` package when ``path`` is None."""
        from kgplm.kg.cmekg import read_cmekg

        return read_cmekg(path, **options)

    @classmethod
    def from_triples(cls, path: str | os.PathLike, **options) -> "KGStore":
        """Load head–relation–tail rows from a TSV/CSV file; see :func:`kgplm.kg.tabular.read_triples`."""
        from kgplm.kg.tabular import read_triples

        return read_triples(path, **options)

    @classmethod
    def from_obo(cls, path: str | os.PathLike, **options) -> "KGStore":
        """Load an OBO ontology (HPO, Disease Ontology, ...); see :mod:`kgplm.kg.obo`."""
        from kgplm.kg.obo import read_obo

        return read_obo(path, **options)

    @classmethod
    def from_umls_rrf(cls, directory: str | os.PathLike, **options) -> "KGStore":
        """Load UMLS Metathesaurus RRF files (MRCONSO, MRREL, MRSTY); see :mod:`kgplm.kg.umls`."""
        from kgplm.kg.umls import read_umls_rrf

        return read_umls_rrf(directory, **options)

    # -- counts ---------------------------------------------------------------------------
    @property
    def num_entities(self) -> int:
        return int(self._manifest["num_entities"])

    @property
    def num_relations(self) -> int:
        return int(self._manifest["num_relations"])

    @property
    def num_triples(self) -> int:
        return int(self._manifest["num_triples"])

    @property
    def num_types(self) -> int:
        return len(self._manifest["type_iris"])

    @property
    def source(self) -> str:
        return self._manifest["source"]

    @property
    def triples(self) -> np.ndarray:
        """``(num_triples, 3)`` int32 array of (head, relation, tail), sorted, without duplicates."""
        return self._arrays["triples"]

    @property
    def relation_names(self) -> list[str]:
        return list(self._manifest["relation_names"])

    @property
    def relation_iris(self) -> list[str]:
        return list(self._manifest["relation_iris"])

    @property
    def type_names(self) -> list[str]:
        return list(self._manifest["type_names"])

    @property
    def type_iris(self) -> list[str]:
        return list(self._manifest["type_iris"])

    def __len__(self) -> int:
        return self.num_entities

    def __repr__(self) -> str:
        return (
            f"KGStore(source={self.source!r}, num_entities={self.num_entities:,}, "
            f"num_relations={self.num_relations:,}, num_triples={self.num_triples:,}, num_types={self.num_types:,})"
        )

    # -- entities -------------------------------------------------------------------------
    def _check_entity(self, entity: int) -> int:
        entity = int(entity)
        if not 0 <= entity < self.num_entities:
            raise UnknownEntityError(f"entity id {entity} (the store has ids 0..{self.num_entities - 1})")
        return entity

    def _resolve(self, entity: int | str) -> int:
        if isinstance(entity, (int, np.integer)):
            return self._check_entity(entity)
        return self.entity_id(entity)

    def entity_iri(self, entity: int) -> str:
        return self._entity_iris[self._check_entity(entity)]

    def entity_name(self, entity: int) -> str:
        """The display name: the best label by ``preferred_languages``, else the IRI's local name."""
        entity = self._check_entity(entity)
        position = int(self._arrays["name_label"][entity])
        if position < 0:
            return local_name(self._entity_iris[entity])
        return self._strings[int(self._arrays["label_strings"][position])]

    def entity_names(self) -> list[str]:
        """Display names of all entities, in id order."""
        return [self.entity_name(i) for i in range(self.num_entities)]

    def entity_type(self, entity: int) -> str | None:
        """The primary type's name (the most specific of the entity's types), or None."""
        entity = self._check_entity(entity)
        start = int(self._arrays["type_indptr"][entity])
        if start == int(self._arrays["type_indptr"][entity + 1]):
            return None
        return self._manifest["type_names"][int(self._arrays["type_ids"][start])]

    def entity_types(self, entity: int) -> list[str]:
        """All type names of the entity, primary first."""
        entity = self._check_entity(entity)
        start, end = self._arrays["type_indptr"][entity : entity + 2]
        return [self._manifest["type_names"][int(t)] for t in self._arrays["type_ids"][start:end]]

    def primary_type_ids(self) -> np.ndarray:
        """``(num_entities,)`` int32 array of primary type ids, -1 where an entity has no type."""
        indptr = np.asarray(self._arrays["type_indptr"])
        result = np.full(self.num_entities, -1, dtype=np.int32)
        has_type = indptr[1:] > indptr[:-1]
        result[has_type] = np.asarray(self._arrays["type_ids"])[indptr[:-1][has_type]]
        return result

    def labels(self, entity: int) -> list[tuple[str, str, str]]:
        """All names and aliases as ``(text, language, role)`` with role in ``LABEL_ROLES``."""
        entity = self._check_entity(entity)
        start, end = (int(x) for x in self._arrays["label_indptr"][entity : entity + 2])
        languages = self._manifest["languages"]
        return [
            (self._strings[int(s)], languages[int(l)], LABEL_ROLES[int(r)])
            for s, l, r in zip(
                self._arrays["label_strings"][start:end],
                self._arrays["label_languages"][start:end],
                self._arrays["label_roles"][start:end],
            )
        ]

    def aliases(self, entity: int) -> list[str]:
        """Every distinct name of the entity other than its display name (other languages included)."""
        name = self.entity_name(entity)
        seen = {name}
        result = []
        for text, _, _ in self.labels(entity):
            if text not in seen:
                seen.add(text)
                result.append(text)
        return result

    def attributes(self, entity: int | str) -> pd.DataFrame:
        """Literal-valued statements of the entity: columns ``predicate``, ``value``, ``language``, ``datatype``."""
        entity = self._resolve(entity)
        start, end = (int(x) for x in self._arrays["attribute_indptr"][entity : entity + 2])
        names = self._manifest["attribute_predicate_names"]
        languages, datatypes = self._manifest["languages"], self._manifest["datatypes"]
        rows = [
            (names[int(p)], self._strings[int(v)], languages[int(l)], datatypes[int(d)])
            for p, v, l, d in zip(
                self._arrays["attribute_predicates"][start:end], self._arrays["attribute_values"][start:end],
                self._arrays["attribute_languages"][start:end], self._arrays["attribute_datatypes"][start:end],
            )
        ]
        return pd.DataFrame(rows, columns=["predicate", "value", "language", "datatype"])

    def iter_attributes(self) -> Iterator[tuple[int, str, str]]:
        """Yield ``(entity, predicate_name, value)`` for every literal attribute, entity by entity."""
        indptr = np.asarray(self._arrays["attribute_indptr"])
        names = self._manifest["attribute_predicate_names"]
        predicates = np.asarray(self._arrays["attribute_predicates"])
        values = np.asarray(self._arrays["attribute_values"])
        entities = np.repeat(np.arange(self.num_entities), np.diff(indptr))
        for entity, predicate, value in zip(entities.tolist(), predicates.tolist(), values.tolist()):
            yield entity, names[predicate], self._strings[value]

    # -- lookup ---------------------------------------------------------------------------
    def _build_name_indexes(self) -> None:
        names: dict[str, list[int]] = defaultdict(list)
        indptr = np.asarray(self._arrays["label_indptr"])
        owners = np.repeat(np.arange(self.num_entities, dtype=np.int64), np.diff(indptr))
        strings = self._strings
        string_ids = np.asarray(self._arrays["label_strings"])
        for owner, string_id in zip(owners.tolist(), string_ids.tolist()):
            bucket = names[strings[string_id]]
            if not bucket or bucket[-1] != owner:
                bucket.append(owner)
        for entity in np.flatnonzero(np.asarray(self._arrays["name_label"]) < 0).tolist():
            names[local_name(self._entity_iris[entity])].append(entity)
        casefolded: dict[str, list[int]] = defaultdict(list)
        for text, owners_ in names.items():
            for owner in owners_:
                bucket = casefolded[text.casefold()]
                if owner not in bucket:
                    bucket.append(owner)
        self._name_index = dict(names)
        self._casefold_index = dict(casefolded)

    def name_index(self) -> dict[str, list[int]]:
        """Every name and alias (any language) → the ids of the entities that carry it.

        Entities without a label appear under their IRI's local name. Built once, then cached.
        """
        if self._name_index is None:
            self._build_name_indexes()
        return self._name_index

    def entity_ids(self, name_or_iri: str) -> list[int]:
        """Every entity whose IRI, name or alias is ``name_or_iri`` (exact, then case-insensitive)."""
        if self._iri_index is None:
            self._iri_index = {iri: i for i, iri in enumerate(self._entity_iris)}
        if name_or_iri in self._iri_index:
            return [self._iri_index[name_or_iri]]
        if self._name_index is None:
            self._build_name_indexes()
        found = self._name_index.get(name_or_iri)
        if found is None:
            found = self._casefold_index.get(name_or_iri.casefold(), [])
        # entities whose display name matches come first
        return sorted(found, key=lambda e: (self.entity_name(e) != name_or_iri, e))

    def entity_id(self, name_or_iri: str | int) -> int:
        """Resolve an IRI, a name or an alias to an entity id.

        Raises :class:`UnknownEntityError` (with the closest names) when nothing matches and
        :class:`AmbiguousEntityError` when an alias names several entities and none of them
        has it as its display name.
        """
        if isinstance(name_or_iri, (int, np.integer)):
            return self._check_entity(name_or_iri)
        found = self.entity_ids(name_or_iri)
        if not found:
            raise UnknownEntityError.with_suggestions(name_or_iri, self._name_index.keys())
        if len(found) > 1:
            exact = [e for e in found if self.entity_name(e) == name_or_iri]
            if len(exact) == 1:
                return exact[0]
            raise AmbiguousEntityError(
                name_or_iri, [f"{e} ({self.entity_name(e)}, {self.entity_iri(e)})" for e in found[:10]]
            )
        return found[0]

    def relation_id(self, name_or_iri: str) -> int:
        if self._relation_lookup is None:
            lookup = {}
            for index, (iri, name) in enumerate(zip(self._manifest["relation_iris"], self._manifest["relation_names"])):
                lookup.setdefault(name, index)
                lookup[iri] = index
            self._relation_lookup = lookup
        try:
            return self._relation_lookup[name_or_iri]
        except KeyError:
            raise ConfigurationError(
                f"unknown relation {name_or_iri!r}; the store has {self.num_relations} relations, e.g. "
                + ", ".join(self._manifest["relation_names"][:10])
            ) from None

    def relation_name(self, relation: int) -> str:
        return self._manifest["relation_names"][int(relation)]

    def type_id(self, name_or_iri: str) -> int:
        for index, (iri, name) in enumerate(zip(self._manifest["type_iris"], self._manifest["type_names"])):
            if name_or_iri in (iri, name):
                return index
        raise ConfigurationError(f"unknown type {name_or_iri!r}; known types: {', '.join(self.type_names[:30])}")

    # -- structure ------------------------------------------------------------------------
    def out_edges(self, entity: int) -> tuple[np.ndarray, np.ndarray]:
        """``(neighbors, relations)`` of the entity's outgoing triples."""
        entity = self._check_entity(entity)
        start, end = self._arrays["out_indptr"][entity : entity + 2]
        return self._arrays["out_neighbors"][start:end], self._arrays["out_relations"][start:end]

    def in_edges(self, entity: int) -> tuple[np.ndarray, np.ndarray]:
        """``(neighbors, relations)`` of the entity's incoming triples."""
        entity = self._check_entity(entity)
        start, end = self._arrays["in_indptr"][entity : entity + 2]
        return self._arrays["in_neighbors"][start:end], self._arrays["in_relations"][start:end]

    def degrees(self) -> tuple[np.ndarray, np.ndarray]:
        """``(out_degree, in_degree)`` arrays counting triples."""
        return np.diff(np.asarray(self._arrays["out_indptr"])), np.diff(np.asarray(self._arrays["in_indptr"]))

    def one_hop(self, entity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(neighbors, relations, directions)`` over both directions; direction 0 = out, 1 = in."""
        out_neighbors, out_relations = self.out_edges(entity)
        in_neighbors, in_relations = self.in_edges(entity)
        directions = np.concatenate([np.zeros(len(out_neighbors), np.int8), np.ones(len(in_neighbors), np.int8)])
        return (np.concatenate([out_neighbors, in_neighbors]), np.concatenate([out_relations, in_relations]), directions)

    def neighbors(self, entity: int | str, *, direction: str = "both", ranked_by: str | None = None,
                  k: int | None = None, **ranking_options) -> pd.DataFrame:
        """The entity's one-hop neighbours as a DataFrame.

        Columns: ``relation``, ``direction`` (``out`` when the entity is the head, ``in`` when it
        is the tail), ``neighbor`` (display name), ``neighbor_id``, ``neighbor_type``. With
        ``ranked_by="pepr"`` rows are sorted by the neighbour's personalised entity PageRank
        score (column ``score``) and cut to ``k`` when given.
        """
        entity = self._resolve(entity)
        if direction not in ("both", "out", "in"):
            raise ConfigurationError(f"direction must be 'both', 'out' or 'in', got {direction!r}")
        neighbors, relations, directions = self.one_hop(entity)
        if direction != "both":
            keep = directions == (0 if direction == "out" else 1)
            neighbors, relations, directions = neighbors[keep], relations[keep], directions[keep]
        frame = pd.DataFrame(
            {
                "relation": [self.relation_name(r) for r in relations.tolist()],
                "direction": [_DIRECTION_NAMES[d] for d in directions.tolist()],
                "neighbor": [self.entity_name(n) for n in neighbors.tolist()],
                "neighbor_id": neighbors.astype(np.int64),
                "neighbor_type": [self.entity_type(n) for n in neighbors.tolist()],
            }
        )
        if ranked_by is not None:
            if ranked_by != "pepr":
                raise ConfigurationError(f"ranked_by must be None or 'pepr', got {ranked_by!r}")
            from kgplm.kg.pepr import personalized_pagerank

            scores = personalized_pagerank(self, [entity], **ranking_options)[0]
            frame["score"] = scores[neighbors] if len(neighbors) else np.zeros(0)
            frame = frame.sort_values(["score", "neighbor_id"], ascending=[False, True], kind="stable")
            frame = frame.reset_index(drop=True)
        if k is not None:
            frame = frame.head(k)
        return frame

    def adjacency(self, *, symmetric: bool = False, dtype=np.float64) -> "scipy.sparse.csr_array":
        """``(num_entities, num_entities)`` CSR array; entry (h, t) counts the triples from h to t.

        ``symmetric=True`` adds the transpose (each triple counts in both directions).
        """
        import scipy.sparse

        triples = np.asarray(self.triples)
        n = self.num_entities
        matrix = scipy.sparse.csr_array(
            (np.ones(len(triples), dtype=dtype), (triples[:, 0], triples[:, 2])), shape=(n, n)
        )
        if symmetric:
            matrix = (matrix + matrix.T).tocsr()
        matrix.sum_duplicates()
        return matrix

    def to_pyg(self, *, hetero: bool = False):
        """A PyG graph.

        ``hetero=False`` (default): ``Data`` with ``edge_index`` (2, num_triples), ``edge_type``
        (relation ids), ``node_type`` (primary type id, -1 for untyped) and ``num_nodes`` — the
        input that ``RGCNConv`` takes. ``hetero=True``: ``HeteroData`` with one node type per
        entity type (``"entity"`` for untyped entities) and one edge type per
        (head type, relation, tail type); each node store keeps ``entity_id`` to map back.
        """
        import torch
        from torch_geometric.data import Data, HeteroData

        triples = torch.from_numpy(np.asarray(self.triples, dtype=np.int64))
        node_type = torch.from_numpy(self.primary_type_ids().astype(np.int64))
        if not hetero:
            return Data(
                edge_index=triples[:, [0, 2]].t().contiguous(),
                edge_type=triples[:, 1].contiguous(),
                node_type=node_type,
                num_nodes=self.num_entities,
            )
        type_names = [*self.type_names, "entity"]
        node_type = torch.where(node_type < 0, torch.tensor(len(type_names) - 1), node_type)
        local_index = torch.empty_like(node_type)
        data = HeteroData()
        for t, name in enumerate(type_names):
            members = torch.nonzero(node_type == t).flatten()
            if len(members) == 0:
                continue
            local_index[members] = torch.arange(len(members))
            data[name].entity_id = members
            data[name].num_nodes = len(members)
        head_type, tail_type = node_type[triples[:, 0]], node_type[triples[:, 2]]
        groups = torch.stack([head_type, triples[:, 1], tail_type], dim=1)
        unique_groups, group_of_edge = torch.unique(groups, dim=0, return_inverse=True)
        for g, (h, r, t) in enumerate(unique_groups.tolist()):
            edges = triples[group_of_edge == g]
            edge_index = torch.stack([local_index[edges[:, 0]], local_index[edges[:, 2]]])
            data[type_names[h], self.relation_name(r), type_names[t]].edge_index = edge_index
        return data

    # -- summaries ------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """Counts: entities, relations, triples, types, labels, attributes; per type and per relation."""
        type_counts = Counter(self.primary_type_ids().tolist())
        relation_counts = np.bincount(np.asarray(self.triples)[:, 1], minlength=self.num_relations)
        roles = np.asarray(self._arrays["label_roles"])
        return {
            "source": self.source,
            "num_entities": self.num_entities,
            "num_relations": self.num_relations,
            "num_triples": self.num_triples,
            "num_types": self.num_types,
            "duplicate_triples": int(self._manifest.get("duplicate_triples", 0)),
            "num_names": int(np.isin(roles, list(NAME_ROLES)).sum()),
            "num_aliases": int((~np.isin(roles, list(NAME_ROLES))).sum()),
            "num_attributes": int(len(self._arrays["attribute_values"])),
            "entities_per_type": {
                (self.type_names[t] if t >= 0 else None): int(c) for t, c in type_counts.most_common()
            },
            "triples_per_relation": {
                self.relation_name(r): int(relation_counts[r]) for r in np.argsort(-relation_counts, kind="stable")
            },
        }

    def summary(self, top: int = 10) -> str:
        """A human-readable summary (counts, the biggest types and relations)."""
        info = self.describe()
        lines = [
            f"KGStore from {info['source']}: {info['num_entities']:,} entities, {info['num_relations']:,} relations, "
            f"{info['num_triples']:,} triples, {info['num_types']:,} types",
            f"  names {info['num_names']:,}, aliases {info['num_aliases']:,}, literal attributes "
            f"{info['num_attributes']:,}, duplicate triples removed {info['duplicate_triples']:,}",
            "  entities per type: " + ", ".join(
                f"{t or '(untyped)'} {c:,}" for t, c in list(info["entities_per_type"].items())[:top]
            ),
            "  triples per relation: " + ", ".join(
                f"{r} {c:,}" for r, c in list(info["triples_per_relation"].items())[:top]
            ),
        ]
        return "\n".join(lines)

    # -- RDF views ------------------------------------------------------------------------
    def iter_rdf(self, *, include_schema: bool = True) -> Iterator[tuple]:
        """Yield the store as RDF statements; see :func:`kgplm.kg.rdf.iter_store_statements`."""
        from kgplm.kg.rdf import iter_store_statements

        return iter_store_statements(self, include_schema=include_schema)

    @property
    def graph(self) -> "rdflib.Graph":
        """The store as an ``rdflib.Graph`` (built on first access, then cached)."""
        if self._graph is None:
            from kgplm.kg.rdf import to_rdflib_graph

            self._graph = to_rdflib_graph(self)
        return self._graph

    def to_rdf(self, path: str | os.PathLike, format: str = "turtle") -> Path:
        """Export as Turtle (``format="turtle"``) or N-Triples (``"nt"``); written atomically."""
        from kgplm.kg.rdf import write_rdf

        return write_rdf(self, path, format=format)

    # -- persistence ----------------------------------------------------------------------
    def save(self, directory: str | os.PathLike) -> Path:
        """Write the compiled store as ``.npy`` arrays and ``manifest.json`` (atomic: temp dir + rename)."""
        directory = Path(directory)
        with atomic_directory(directory) as temporary:
            for name in _ARRAY_NAMES:
                np.save(temporary / f"{name}.npy", np.ascontiguousarray(self._arrays[name]))
            self._entity_iris.save(temporary, "entity_iris")
            self._strings.save(temporary, "strings")
            with open(temporary / "manifest.json", "w", encoding="utf-8") as handle:
                json.dump(self._manifest, handle, ensure_ascii=False, indent=1)
        logger.info("saved %r to %s", self, directory)
        return directory

    @classmethod
    def load(cls, directory: str | os.PathLike, *, mmap: bool = True) -> "KGStore":
        """Load a store written by :meth:`save`; arrays are memory-mapped unless ``mmap=False``."""
        directory = Path(directory)
        manifest_path = directory / "manifest.json"
        if not directory.is_dir():
            raise MissingFileError(directory, "store directory")
        if not manifest_path.is_file():
            raise ArtifactError(f"{directory} is not a saved KGStore: manifest.json is missing")
        with open(manifest_path, encoding="utf-8") as handle:
            manifest = json.load(handle)
        version = manifest.get("format_version")
        if version != STORE_FORMAT_VERSION:
            raise ArtifactError(
                f"{manifest_path}: store format version {version!r}, expected {STORE_FORMAT_VERSION}"
            )
        arrays = {name: _load_array(directory / f"{name}.npy", mmap) for name in _ARRAY_NAMES}
        if len(arrays["triples"]) != manifest["num_triples"]:
            raise ArtifactError(
                f"{directory}: triples.npy has {len(arrays['triples'])} rows but the manifest says {manifest['num_triples']}"
            )
        return cls(
            manifest=manifest,
            arrays=arrays,
            entity_iris=StringTable.load(directory, "entity_iris", mmap),
            strings=StringTable.load(directory, "strings", mmap),
        )

    def equals(self, other: "KGStore") -> bool:
        """True when both stores hold the same entities, relations, triples, types, labels and attributes."""
        if self._manifest != other._manifest:
            return False
        if list(self._entity_iris) != list(other._entity_iris) or list(self._strings) != list(other._strings):
            return False
        return all(np.array_equal(self._arrays[n], other._arrays[n]) for n in _ARRAY_NAMES)
