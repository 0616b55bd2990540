"""``KGStore``: a medical knowledge graph with a compiled integer view and an rdflib view.

The compiled form holds, as numpy arrays:

* vocabularies of entities (IRIs), relations and types, each with a display name;
* ``triples``: an ``(num_triples, 3)`` int32 array of ``(head, relation, tail)`` rows, sorted and
  free of duplicates (duplicates are counted in ``describe()["duplicate_triples"]``);
* CSR adjacency for out-edges and in-edges with the relation id of each edge;
* labels (names and aliases with their language tags and role) and literal attributes.

Every importer (RDF, CMeKG, TSV triples, OBO, UMLS RRF, SPARQL; registered by format in
:mod:`kgplm.kg.importers`) fills a :class:`~kgplm.kg.collector.GraphCollector`, which compiles
into a store. ``save(directory)`` writes ``.npy`` arrays and a JSON manifest (never a
pickle); ``KGStore.load(directory)`` memory-maps the arrays, so loading is near-instant and strings
are decoded only when read.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from kgplm._io import atomic_directory, load_array
from kgplm.exceptions import (
    AmbiguousEntityError,
    ArtifactError,
    ConfigurationError,
    EmptyGraphError,
    KgplmError,
    MissingFileError,
    UnknownEntityError,
)
from kgplm.kg import importers
from kgplm.kg.adjacency import compile_adjacency, unique_rows
from kgplm.kg.curie import curie_candidates
from kgplm.kg.name_index import IriIndex, NameIndex
from kgplm.kg.strings import StringTable
from kgplm.kg.vocabulary import LABEL_ROLES, NAME_ROLES, local_name

if TYPE_CHECKING:  # pragma: no cover
    import rdflib
    import scipy.sparse

__all__ = ["KGStore", "STORE_FORMAT_VERSION", "ARRAY_NAMES", "open_store"]

logger = logging.getLogger(__name__)

STORE_FORMAT_VERSION = 1
DEFAULT_PREFERRED_LANGUAGES = ("zh", "", "en")
_DIRECTION_NAMES = ("out", "in")

#: Arrays of a compiled store, saved one .npy each (``KGStore.arrays`` holds them by these names).
ARRAY_NAMES = (
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


def _load_array(path: Path, mmap: bool) -> np.ndarray:
    return load_array(path, mmap=mmap, what="store directory")


class KGStore:
    """A knowledge graph: entities, typed relations between them, names, aliases and attributes.

    Build one with an importer (:meth:`from_rdf`, :meth:`from_cmekg`, :meth:`from_triples`,
    :meth:`from_obo`, :meth:`from_umls_rrf`) or :meth:`load` a saved one. Entities, relations and
    types are numbered from 0 in order of first appearance in the source.
    """

    def __init__(
        self, *, manifest: dict[str, Any], arrays: dict[str, np.ndarray], entity_iris: StringTable, strings: StringTable
    ) -> None:
        self._manifest = manifest
        self._arrays = arrays
        self._entity_iris = entity_iris
        self._strings = strings
        self._iri_index: IriIndex | None = None
        self._name_lookup: NameIndex | None = None
        self._name_index: dict[str, list[int]] | None = None  # name_index()'s dict, built only when asked for
        self._relation_lookup: dict[str, int] | None = None
        self._graph = None
        self._neighbor_tables: dict[str, Any] = {}
        for compiled in arrays.values():  # shared through ``arrays``: nobody may write into them
            if isinstance(compiled, np.ndarray) and compiled.flags.writeable:
                compiled.flags.writeable = False

    # -- importers (each dispatches through the format registry, kgplm.kg.importers) --------
    @classmethod
    def from_rdf(cls, path_or_paths, format: str | None = None, **options) -> "KGStore":
        """Load RDF files (Turtle, N-Triples, N-Quads, TriG, RDF/XML, JSON-LD, N3); see :mod:`kgplm.kg.rdf`.

        Options include ``base_iri=`` (resolves relative IRIs), ``merge_same_as=True`` (one entity per
        ``owl:sameAs`` / ``skos:exactMatch`` class) and ``parser="rdflib"``.
        """
        return importers.get("rdf").load(path_or_paths, format=format, **options)

    @classmethod
    def from_cmekg(cls, path: str | os.PathLike | None = None, **options) -> "KGStore":
        """Load CMeKG from a TSV(.gz) dump, or from the installed ``pycmekg`` package when ``path`` is None."""
        return importers.get("cmekg").load(path, **options)

    @classmethod
    def from_triples(cls, path: str | os.PathLike, **options) -> "KGStore":
        """Load head–relation–tail rows from a TSV/CSV file; see :func:`kgplm.kg.tabular.read_triples`."""
        return importers.get("triples").load(path, **options)

    @classmethod
    def from_obo(cls, path: str | os.PathLike, **options) -> "KGStore":
        """Load an OBO ontology (HPO, Disease Ontology, ...); see :mod:`kgplm.kg.obo`."""
        return importers.get("obo").load(path, **options)

    @classmethod
    def from_umls_rrf(cls, directory: str | os.PathLike, **options) -> "KGStore":
        """Load UMLS Metathesaurus RRF files (MRCONSO, MRREL, MRSTY); see :mod:`kgplm.kg.umls`."""
        return importers.get("umls_rrf").load(directory, **options)

    @classmethod
    def from_sparql(cls, endpoint_url: str, query: str | None = None, **options) -> "KGStore":
        """Load a graph held in a SPARQL 1.1 endpoint (paged), or the result of a CONSTRUCT ``query``;
        see :func:`kgplm.kg.sparql.read_sparql` (``graph=``, ``page_size=``, ``timeout=``, ``retries=``)."""
        return importers.get("sparql").load(endpoint_url, query=query, **options)

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

    @property
    def attribute_predicate_iris(self) -> list[str]:
        return list(self._manifest["attribute_predicate_iris"])

    @property
    def attribute_predicate_names(self) -> list[str]:
        return list(self._manifest["attribute_predicate_names"])

    @property
    def languages(self) -> list[str]:
        """Language tags by id, as ``arrays["label_languages"]`` and ``arrays["attribute_languages"]`` use them."""
        return list(self._manifest["languages"])

    @property
    def datatypes(self) -> list[str]:
        """Datatype IRIs by id (``""``: a plain string), as ``arrays["attribute_datatypes"]`` uses them."""
        return list(self._manifest["datatypes"])

    @property
    def prefixes(self) -> dict[str, str]:
        """Namespace prefixes the source declared or the importer chose, for writing RDF."""
        return dict(self._manifest.get("prefixes", {}))

    @property
    def arrays(self) -> Mapping[str, np.ndarray]:
        """The compiled arrays by name (see ``ARRAY_NAMES`` and the module docstring), read-only."""
        return MappingProxyType(self._arrays)

    @property
    def entity_iris(self) -> Sequence[str]:
        """Entity IRIs in id order (blank nodes as ``"_:…"``), decoded one by one when read."""
        return self._entity_iris

    @property
    def strings(self) -> Sequence[str]:
        """The strings of labels and attribute values; ``arrays["label_strings"]`` and
        ``arrays["attribute_values"]`` index into it."""
        return self._strings

    def merged_iris(self) -> dict[str, int]:
        """IRIs of the nodes an importer merged into an entity (``merge_same_as``) → that entity's id."""
        return dict(self._manifest.get("merged_iris", {}))

    def require_links(self, purpose: str) -> None:
        """Raise :class:`EmptyGraphError` when the store has no triple: ``purpose`` walks links."""
        if self.num_triples == 0:
            raise EmptyGraphError(
                f"{purpose} needs entity-to-entity links, but the store from {self.location or self.source} has "
                f"none ({self.num_entities:,} entities with names, types and attributes only); load a graph "
                "with triples between entities"
            )

    @property
    def location(self) -> str | None:
        """Where the store was read from (file, directory or endpoint), as the importer recorded it."""
        return self._manifest.get("location")

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
                self._arrays["attribute_predicates"][start:end],
                self._arrays["attribute_values"][start:end],
                self._arrays["attribute_languages"][start:end],
                self._arrays["attribute_datatypes"][start:end],
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
    def _names(self) -> NameIndex:
        """The compact name index (:mod:`kgplm.kg.name_index`), built on first use."""
        if self._name_lookup is None:
            label_indptr = np.asarray(self._arrays["label_indptr"])
            unlabelled = np.flatnonzero(np.asarray(self._arrays["name_label"]) < 0)
            self._name_lookup = NameIndex.build(
                self._strings,
                label_indptr,
                np.asarray(self._arrays["label_strings"]),
                unlabelled,
                [local_name(self._entity_iris[entity]) for entity in unlabelled.tolist()],
            )
            logger.debug(
                "name index of %r: %d names, %.1f MB", self, len(self._name_lookup), self._name_lookup.nbytes / 1e6
            )
        return self._name_lookup

    def name_index(self) -> dict[str, list[int]]:
        """Every name and alias (any language) → the ids of the entities that carry it.

        Entities without a label appear under their IRI's local name. Built once, then cached.
        """
        if self._name_index is None:
            self._name_index = self._names().to_dict()
        return self._name_index

    def name_lookup(self) -> NameIndex:
        """The compact index behind :meth:`entity_ids` (names and aliases in integer arrays; no object per
        name): what readers of millions of names (the entity linker) use instead of :meth:`name_index`."""
        return self._names()

    def entity_ids(self, name_or_iri: str) -> list[int]:
        """Every entity whose IRI, compact id (a CURIE such as ``HP:0001250``, an OBO id ``HP_0001250``,
        a UMLS CUI: :mod:`kgplm.kg.curie`), name or alias is ``name_or_iri`` (exact, then case-insensitive)."""
        if self._iri_index is None:
            self._iri_index = IriIndex(self._entity_iris, self._manifest.get("merged_iris", {}))
        entity = self._iri_index.get(name_or_iri)
        if entity is not None:
            return [entity]
        for iri in curie_candidates(name_or_iri, self.prefixes):  # HP:0001250, MONDO_0005148, C0011849
            entity = self._iri_index.get(iri)
            if entity is not None:
                return [entity]
        names = self._names()
        found = names.exact(name_or_iri)
        if found is None:
            found = names.casefolded(name_or_iri)
        # entities whose display name matches come first
        return sorted(found, key=lambda e: (self.entity_name(e) != name_or_iri, e))

    def entity_id(self, name_or_iri: str | int) -> int:
        """Resolve an IRI, a CURIE or ontology id (``HP:0001250``, ``MONDO_0005148``, ``C0011849``), a name
        or an alias to an entity id.

        Raises :class:`UnknownEntityError` (with the closest names) when nothing matches and
        :class:`AmbiguousEntityError` when an alias names several entities and none of them
        has it as its display name.
        """
        if isinstance(name_or_iri, (int, np.integer)):
            return self._check_entity(name_or_iri)
        found = self.entity_ids(name_or_iri)
        if not found:
            raise UnknownEntityError.with_suggestions(name_or_iri, self._names().keys())
        if len(found) > 1:
            exact = [e for e in found if self.entity_name(e) == name_or_iri]
            if len(exact) == 1:
                return exact[0]
            raise AmbiguousEntityError(
                name_or_iri, [f"{e} ({self.entity_name(e)}, {self.entity_iri(e)})" for e in found[:10]]
            )
        return found[0]

    def triple_ids(self, triples) -> np.ndarray:
        """Labelled triples — rows of (head, relation, tail) as PyKEEN reads them from a TSV — as an
        ``(n, 3)`` int64 id array. Heads and tails resolve with :meth:`entity_id` (IRI, name or alias),
        relations with :meth:`relation_id` (IRI or name); integers pass through. A label that names
        nothing or several entities raises :class:`ConfigurationError` naming it and its row."""
        rows = np.asarray(triples, dtype=object)
        if rows.ndim != 2 or rows.shape[1] != 3:
            raise ConfigurationError(f"triples must be rows of (head, relation, tail); got shape {rows.shape}")
        resolved: tuple[dict, dict, dict] = ({}, {}, {})
        resolvers = (self.entity_id, self.relation_id, self.entity_id)
        result = np.empty(rows.shape, dtype=np.int64)
        for index, row in enumerate(rows.tolist()):
            for column, label in enumerate(row):
                if isinstance(label, (int, np.integer)):
                    result[index, column] = int(label)
                    continue
                label = str(label).strip()
                cache = resolved[column if column != 2 else 0]
                if label not in cache:
                    try:
                        cache[label] = resolvers[column](label)
                    except KgplmError as error:
                        raise ConfigurationError(f"row {index} {tuple(row)} of the labelled triples: {error}") from None
                result[index, column] = cache[label]
        return result

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

    def with_triples(self, triples, *, derived_from: dict | None = None) -> "KGStore":
        """A copy with the same entities, relations, names, aliases, types and attributes, linked by
        ``triples`` instead of this store's links.

        ``triples`` is an ``(n, 3)`` integer array of ``(head, relation, tail)`` ids of this store;
        duplicate rows are dropped and the rest sorted, as an importer leaves them. Text still links
        to the same ids, while PEPR neighbours and KG embeddings computed from the copy follow the new
        links: a pruned graph, a graph with held-out facts removed, or a control that attaches the
        links to other entities. ``derived_from`` (JSON-safe) says how the triples were made; it is
        kept in the copy's manifest (:attr:`derived_from`) and saved with it.

        Raises :class:`~kgplm.exceptions.ConfigurationError` for an array of the wrong shape or with an
        id outside this store's entities or relations.
        """
        rows = np.asarray(triples)
        if rows.ndim != 2 or rows.shape[1] != 3 or (rows.size and not np.issubdtype(rows.dtype, np.integer)):
            raise ConfigurationError(
                f"with_triples expects an (n, 3) integer array of (head, relation, tail) ids, "
                f"got shape {rows.shape} of {rows.dtype}"
            )
        rows = rows.astype(np.int64, copy=False)
        for column, name, bound in (
            (0, "head", self.num_entities),
            (1, "relation", self.num_relations),
            (2, "tail", self.num_entities),
        ):
            bad = np.flatnonzero((rows[:, column] < 0) | (rows[:, column] >= bound))
            if len(bad):
                raise ConfigurationError(
                    f"with_triples: row {int(bad[0])} has {name} id {int(rows[bad[0], column])}, "
                    f"outside 0…{bound - 1} of this store"
                )
        rows = unique_rows(rows.reshape(-1, 3), (self.num_entities, self.num_relations, self.num_entities))
        arrays = {**self._arrays, **compile_adjacency(rows, self.num_entities)}
        manifest = {**self._manifest, "num_triples": int(len(rows))}
        if derived_from is not None:
            manifest["derived_from"] = json.loads(json.dumps(derived_from))
        return KGStore(manifest=manifest, arrays=arrays, entity_iris=self._entity_iris, strings=self._strings)

    @property
    def derived_from(self) -> dict | None:
        """How a store made by :meth:`with_triples` got its links (what the caller recorded), else None."""
        return self._manifest.get("derived_from")

    def one_hop(self, entity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(neighbors, relations, directions)`` over both directions; direction 0 = out, 1 = in."""
        out_neighbors, out_relations = self.out_edges(entity)
        in_neighbors, in_relations = self.in_edges(entity)
        directions = np.concatenate([np.zeros(len(out_neighbors), np.int8), np.ones(len(in_neighbors), np.int8)])
        return (
            np.concatenate([out_neighbors, in_neighbors]),
            np.concatenate([out_relations, in_relations]),
            directions,
        )

    def neighbors(
        self,
        entity: int | str,
        *,
        direction: str = "both",
        ranked_by: str | None = None,
        k: int | None = None,
        **ranking_options,
    ) -> pd.DataFrame:
        """The entity's one-hop neighbours as a DataFrame.

        Columns: ``relation``, ``direction`` (``out`` when the entity is the head, ``in`` when it
        is the tail), ``neighbor`` (display name), ``neighbor_id``, ``neighbor_type``; one row per
        triple, cut to ``k`` rows when given.

        With ``ranked_by="pepr"`` each distinct neighbour is one row, ranked as
        :func:`kgplm.kg.pepr.top_k_neighbors` ranks it (same neighbours, same order: the first ``k``
        of its row for this entity; every linked neighbour when ``k`` is None). ``relation`` and
        ``direction`` are the link the neighbour table records (lowest relation id, out before in),
        ``relations`` lists every ``(relation, direction)`` that links the two, and ``score`` is the
        neighbour's personalised entity PageRank. ``ranking_options`` go to ``top_k_neighbors``
        (``mode`` defaults to ``"auto"`` there, as everywhere); with ``direction="out"`` or ``"in"``
        the ranking keeps the neighbours linked in that direction.
        """
        entity = self._resolve(entity)
        if direction not in ("both", "out", "in"):
            raise ConfigurationError(f"direction must be 'both', 'out' or 'in', got {direction!r}")
        if ranked_by is not None and ranked_by != "pepr":
            raise ConfigurationError(f"ranked_by must be None or 'pepr', got {ranked_by!r}")
        if k is not None and k < 1:
            raise ConfigurationError(f"k must be at least 1, got {k}")
        neighbors, relations, directions = self.one_hop(entity)
        if direction != "both":
            keep = directions == (0 if direction == "out" else 1)
            neighbors, relations, directions = neighbors[keep], relations[keep], directions[keep]
        if ranked_by == "pepr":
            return self._neighbors_by_pepr(
                entity, neighbors, relations, directions, k=k, every_direction=direction == "both", **ranking_options
            )
        if ranking_options:
            raise ConfigurationError(f"ranking options {sorted(ranking_options)} need ranked_by='pepr'")
        frame = pd.DataFrame(
            {
                "relation": [self.relation_name(r) for r in relations.tolist()],
                "direction": [_DIRECTION_NAMES[d] for d in directions.tolist()],
                "neighbor": [self.entity_name(n) for n in neighbors.tolist()],
                "neighbor_id": neighbors.astype(np.int64),
                "neighbor_type": [self.entity_type(n) for n in neighbors.tolist()],
            }
        )
        if k is not None:
            frame = frame.head(k)
        return frame

    def _neighbors_by_pepr(
        self,
        entity: int,
        neighbors: np.ndarray,
        relations: np.ndarray,
        directions: np.ndarray,
        *,
        k: int | None,
        every_direction: bool,
        **ranking_options,
    ) -> pd.DataFrame:
        """One row per distinct neighbour, in the order of the entity's row of a PEPR neighbour table."""
        from kgplm.kg.pepr import top_k_neighbors

        # every link to each neighbour, out before in, lowest relation id first (the neighbour table's choice)
        links: dict[int, list[tuple[str, str]]] = {}
        for way, relation, node in sorted(zip(directions.tolist(), relations.tolist(), neighbors.tolist())):
            if node != entity:
                links.setdefault(node, []).append((self.relation_name(relation), _DIRECTION_NAMES[way]))
        columns = ("relation", "direction", "neighbor", "neighbor_id", "neighbor_type", "score", "relations")
        if not links:
            return pd.DataFrame({name: [] for name in columns}).astype({"neighbor_id": np.int64, "score": np.float32})
        ranking_options.setdefault("show_progress", False)
        if ranking_options.get("candidates", "one_hop") != "one_hop":
            raise ConfigurationError(
                "store.neighbors ranks linked neighbours (candidates='one_hop'); use "
                "kgplm.kg.pepr.top_k_neighbors for candidates='any'"
            )
        # with one direction only, rank every linked neighbour and keep those linked that way
        table_k = k if every_direction and k is not None else len(np.unique(self.one_hop(entity)[0]))
        table = top_k_neighbors(self, [entity], k=max(int(table_k), 1), **ranking_options)
        rows = [j for j, node in enumerate(table.neighbors[0].tolist()) if node in links]
        if k is not None:
            rows = rows[:k]
        ids = table.neighbors[0][rows].astype(np.int64)
        return pd.DataFrame(
            {
                "relation": [links[n][0][0] for n in ids.tolist()],
                "direction": [links[n][0][1] for n in ids.tolist()],
                "neighbor": [self.entity_name(n) for n in ids.tolist()],
                "neighbor_id": ids,
                "neighbor_type": [self.entity_type(n) for n in ids.tolist()],
                "score": table.scores[0][rows],
                "relations": [links[n] for n in ids.tolist()],
            }
        )

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
        """Counts: entities, relations, triples, types, labels, attributes; per type and per relation.

        ``merged_entities`` counts the nodes the importer merged into another entity (CMeKG synonyms
        that were link objects, ``merge_same_as`` classes in RDF).
        """
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
            "merged_entities": int(self._manifest.get("merged_entities", 0)),
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
            f"{info['num_attributes']:,}, duplicate triples removed {info['duplicate_triples']:,}, "
            f"equivalent entities merged {info['merged_entities']:,}",
            "  entities per type: "
            + ", ".join(f"{t or '(untyped)'} {c:,}" for t, c in list(info["entities_per_type"].items())[:top]),
            "  triples per relation: "
            + ", ".join(f"{r} {c:,}" for r, c in list(info["triples_per_relation"].items())[:top]),
        ]
        return "\n".join(lines)

    # -- RDF views ------------------------------------------------------------------------
    def iter_rdf(self, *, include_schema: bool = True) -> Iterator[tuple]:
        """Yield the store as RDF statements; see :func:`kgplm.kg.rdf_export.iter_store_statements`."""
        from kgplm.kg.rdf_export import iter_store_statements

        return iter_store_statements(self, include_schema=include_schema)

    @property
    def graph(self) -> "rdflib.Graph":
        """The store as an ``rdflib.Graph`` (built on first access, then cached)."""
        if self._graph is None:
            from kgplm.kg.rdf_export import to_rdflib_graph

            self._graph = to_rdflib_graph(self)
        return self._graph

    def to_rdf(self, path: str | os.PathLike, format: str | None = None) -> Path:
        """Export as RDF in the format the extension of ``path`` names (``.ttl``, ``.nt``, ``.nq``,
        ``.trig``, ``.rdf``/``.xml``, ``.jsonld``, ``.n3``; ``.gz`` compresses) or that ``format``
        names; written atomically. See :mod:`kgplm.kg.rdf_export`."""
        from kgplm.kg.rdf_export import write_rdf

        return write_rdf(self, path, format=format)

    # -- persistence ----------------------------------------------------------------------
    def save(self, directory: str | os.PathLike) -> Path:
        """Write the compiled store as ``.npy`` arrays and ``manifest.json`` (atomic: temp dir + rename)."""
        directory = Path(directory)
        with atomic_directory(directory) as temporary:
            for name in ARRAY_NAMES:
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
            raise ArtifactError(f"{manifest_path}: store format version {version!r}, expected {STORE_FORMAT_VERSION}")
        arrays = {name: _load_array(directory / f"{name}.npy", mmap) for name in ARRAY_NAMES}
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
        return all(np.array_equal(self._arrays[n], other._arrays[n]) for n in ARRAY_NAMES)


def open_store(spec, *, format: str | None = None, show_progress: bool = True, **options) -> "KGStore":
    """A store from a loose description, as the CLI and ``kgplm.train(graph=...)`` accept it.

    ``spec`` may be a :class:`KGStore` (returned as is), ``"cmekg"`` (the embedded default from
    the ``pycmekg`` package), a directory written by :meth:`KGStore.save`, a directory of UMLS RRF
    files, a SPARQL endpoint URL, or a file whose suffix names its format (see
    :mod:`kgplm.kg.importers`). ``format`` names the importer instead of guessing; ``options`` go to it.
    """
    if isinstance(spec, KGStore):
        return spec
    importer = importers.get(format) if format is not None else importers.guess(spec)
    logger.info("opening %s with the %s importer", spec, importer.name)
    return importer.load(spec, show_progress=show_progress, **options)
