"""``GraphCollector``: what every importer fills, statement by statement, and compiles into a store.

Importers (RDF, CMeKG, TSV triples, OBO, UMLS RRF, SPARQL, third-party ones) get integer ids for
entities, relations, types and attribute predicates from the collector, add triples, types, labels
and attributes, and call :meth:`GraphCollector.build`, which deduplicates, sorts and compiles
everything into the arrays of a :class:`~kgplm.kg.store.KGStore`. Importers depend on this module
and on the store; the store depends on neither.
"""

from __future__ import annotations

import logging
from array import array
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from kgplm.exceptions import EmptyGraphError
from kgplm.kg.adjacency import compile_adjacency, csr_from_rows, row_keys, unique_rows
from kgplm.kg.store import DEFAULT_PREFERRED_LANGUAGES, STORE_FORMAT_VERSION, KGStore
from kgplm.kg.strings import StringTable
from kgplm.kg.vocabulary import LABEL_ROLES, NAME_ROLES, OWL_SAME_AS, local_name

__all__ = ["GraphCollector", "compile_labels", "compile_types", "compile_adjacency", "unique_rows", "empty_attributes"]

logger = logging.getLogger(__name__)


def _int32(values: array) -> np.ndarray:
    """A collector column as an int32 array (a view; empty columns included)."""
    return np.frombuffer(values, dtype=np.int32) if len(values) else np.zeros(0, dtype=np.int32)


def _int_array(values: np.ndarray) -> array:
    """An int32 numpy array as a collector column."""
    return array("i", np.ascontiguousarray(values, dtype=np.int32).tobytes())


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
        #: entities merged into another one (by :meth:`merge_entities` or by the importer's own rules)
        self.merged_entities = 0
        #: IRI of each node merged away → IRI of the entity it became part of
        self.merged_iris: dict[str, str] = {}

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
        allow_empty: bool = False,
    ) -> "KGStore":
        """Deduplicate, sort and compile everything collected into a :class:`KGStore`.

        A store without triples is valid (entities with names, types and attributes only); a
        collector that received no entity at all raises :class:`EmptyGraphError` unless
        ``allow_empty`` (the importer saw statements, but none about an entity).
        """
        num_entities = len(self.entity_index)
        if num_entities == 0 and not allow_empty:
            where = f" in {self.location}" if self.location else ""
            raise EmptyGraphError(
                f"the {self.source} source{where} has no statement (no entity, triple, name or attribute); "
                "expected at least one statement about an entity"
            )
        if len(self.heads) == 0 and num_entities > 0:  # an empty store (a method that reads no graph) says nothing
            logger.warning(
                "%s%s has no entity-to-entity triple: %d entities with names, types and attributes only "
                "(PEPR and KG embeddings need links)",
                self.source,
                f" in {self.location}" if self.location else "",
                num_entities,
            )
        triples = np.stack([_int32(self.heads), _int32(self.relations), _int32(self.tails)], axis=1)
        raw_count = len(triples)
        triples = unique_rows(triples, (num_entities, len(self.relation_index), num_entities))
        duplicates = raw_count - len(triples)
        if duplicates:
            logger.info("%s: removed %d duplicate triples", self.source, duplicates)

        if copy_names_across_same_as and OWL_SAME_AS in self.relation_index:
            self._copy_names_across_same_as(triples, self.relation_index[OWL_SAME_AS])

        type_indptr, type_ids = self._compile_types(num_entities)
        (
            label_indptr,
            label_strings,
            label_languages,
            label_roles,
            name_label,
            strings,
            languages,
            string_index,
            language_index,
        ) = self._compile_labels(num_entities, preferred_languages)
        attribute_arrays, datatypes = self._compile_attributes(
            num_entities, strings, string_index, languages, language_index
        )

        arrays = compile_adjacency(triples, num_entities)
        arrays.update(
            type_indptr=type_indptr,
            type_ids=type_ids,
            label_indptr=label_indptr,
            label_strings=label_strings,
            label_languages=label_languages,
            label_roles=label_roles,
            name_label=name_label,
            **attribute_arrays,
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
            "merged_entities": int(self.merged_entities),
            **(extra_manifest or {}),
        }
        if self.merged_iris:
            manifest["merged_iris"] = self._resolve_merged_iris()
        entity_iris = StringTable.from_strings(self.entity_index)
        return KGStore(
            manifest=manifest, arrays=arrays, entity_iris=entity_iris, strings=StringTable.from_strings(strings)
        )

    # -- merging equivalent nodes ---------------------------------------------------------
    def merge_linked(self, relation_iris: Sequence[str]) -> int:
        """Merge the entities that triples of ``relation_iris`` link (``owl:sameAs``, ``skos:exactMatch``):
        see :meth:`merge_entities`. Those relations disappear when no triple of theirs is left."""
        relation_ids = [self.relation_index[iri] for iri in relation_iris if iri in self.relation_index]
        if not relation_ids:
            return 0
        heads, relations, tails = _int32(self.heads), _int32(self.relations), _int32(self.tails)
        linking = np.isin(relations, relation_ids)
        merged = self.merge_entities(heads[linking], tails[linking])
        self._drop_unused_relations(relation_ids)
        return merged

    def merge_entities(self, left: np.ndarray, right: np.ndarray) -> int:
        """Make each connected class of the pairs ``(left[i], right[i])`` one entity; returns how many
        entities were merged away.

        The class keeps its first-seen member (lowest id) with its IRI; ids are renumbered in order.
        Triples, types, labels and attributes of the other members move to it; triples that only the
        merge turned into self-loops (the equivalence links themselves) are dropped. Names of merged
        members become aliases (``altLabel``) when the kept entity has a name of its own, so its
        display name does not change; they stay names otherwise. The merged IRIs are remembered
        (``KGStore.entity_id`` resolves them; RDF export writes them back as ``owl:sameAs``).
        """
        import scipy.sparse
        from scipy.sparse.csgraph import connected_components

        num_entities = len(self.entity_index)
        left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
        if num_entities == 0 or len(left) == 0:
            return 0
        links = scipy.sparse.coo_array((np.ones(len(left), np.int8), (left, right)), shape=(num_entities,) * 2)
        num_classes, class_of = connected_components(links, directed=False)
        first_member = np.full(num_classes, num_entities, dtype=np.int64)
        np.minimum.at(first_member, class_of, np.arange(num_entities))
        target = first_member[class_of]  # (num_entities,) old id → old id of the entity it joins
        merged = target != np.arange(num_entities)
        count = int(merged.sum())
        if count == 0:
            return 0
        kept = np.flatnonzero(~merged)
        new_id = np.full(num_entities, -1, dtype=np.int64)
        new_id[kept] = np.arange(len(kept))
        old_to_new = new_id[target]

        iris = list(self.entity_index)
        for old in np.flatnonzero(merged).tolist():
            self.merged_iris[iris[old]] = iris[int(target[old])]
        self.entity_index = {iris[old]: new for new, old in enumerate(kept.tolist())}

        heads, relations, tails = _int32(self.heads), _int32(self.relations), _int32(self.tails)
        new_heads, new_tails = old_to_new[heads], old_to_new[tails]
        keep = (new_heads != new_tails) | (heads == tails)  # a self-loop of the source stays one
        self.heads, self.relations, self.tails = (
            _int_array(new_heads[keep]),
            _int_array(relations[keep]),
            _int_array(new_tails[keep]),
        )
        self.typed_entities = _int_array(old_to_new[_int32(self.typed_entities)])
        self.attribute_entities = _int_array(old_to_new[_int32(self.attribute_entities)])

        label_entities = _int32(self.label_entities)
        roles = np.frombuffer(self.label_roles, dtype=np.int8).copy() if len(self.label_roles) else np.zeros(0, np.int8)
        is_name = np.isin(roles, list(NAME_ROLES))
        has_own_name = np.zeros(num_entities, dtype=bool)
        has_own_name[label_entities[is_name & ~merged[label_entities]]] = True
        demote = is_name & merged[label_entities] & has_own_name[target[label_entities]]
        roles[demote] = LABEL_ROLES.index("altLabel")
        self.label_roles = array("b", roles.tobytes())
        self.label_entities = _int_array(old_to_new[label_entities])
        self.merged_entities += count
        logger.info("%s: merged %d entities into %d others", self.source, count, len(np.unique(target[merged])))
        return count

    def _drop_unused_relations(self, relation_ids: Sequence[int]) -> None:
        """Remove relations of ``relation_ids`` that no triple uses any more, renumbering the rest."""
        relations = _int32(self.relations)
        used = np.bincount(relations, minlength=len(self.relation_index)) > 0
        unused = [r for r in relation_ids if not used[r]]
        if not unused:
            return
        keep = np.ones(len(self.relation_index), dtype=bool)
        keep[unused] = False
        new_id = np.cumsum(keep) - 1
        iris = list(self.relation_index)
        self.relation_index = {iris[r]: int(new_id[r]) for r in np.flatnonzero(keep).tolist()}
        self.relation_names = [self.relation_names[r] for r in np.flatnonzero(keep).tolist()]
        self.relations = _int_array(new_id[relations])

    def _resolve_merged_iris(self) -> dict[str, int]:
        """Merged IRI → id of the entity it is part of (following merges of merges)."""
        resolved = {}
        for iri, target in self.merged_iris.items():
            while target not in self.entity_index:
                target = self.merged_iris[target]
            resolved[iri] = self.entity_index[target]
        return resolved

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
        return compile_types(
            np.frombuffer(self.typed_entities, dtype=np.int32),
            np.frombuffer(self.typed_types, dtype=np.int32),
            num_entities,
            len(self.type_index),
        )

    def _compile_labels(self, num_entities: int, preferred_languages: Sequence[str]):
        strings: list[str] = []
        string_index: dict[str, int] = {}
        languages: list[str] = [""]
        language_index: dict[str, int] = {"": 0}
        seen: set[tuple[int, int, int, int]] = set()
        rows: list[tuple[int, int, int, int]] = []
        for entity, text, language, role in zip(
            self.label_entities, self.label_texts, self.label_languages, self.label_roles
        ):
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
        label_indptr = csr_from_rows(table[:, 0], num_entities)

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
            self.attribute_entities,
            self.attribute_predicates,
            self.attribute_values,
            self.attribute_languages,
            self.attribute_datatypes,
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
            "attribute_indptr": csr_from_rows(table[:, 0], num_entities),
            "attribute_predicates": table[:, 1].astype(np.int32),
            "attribute_values": table[:, 2].astype(np.int32),
            "attribute_languages": table[:, 3].astype(np.int16),
            "attribute_datatypes": table[:, 4].astype(np.int16),
        }
        return arrays, datatypes


def compile_types(
    entities: np.ndarray, types: np.ndarray, num_entities: int, num_types: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(type_indptr, type_ids)`` from (entity, type) pairs, duplicates removed.

    The primary type of a multi-typed entity (listed first) is its most specific one: the type
    with the fewest members (ties: the lower type id, i.e. the first seen).
    """
    pairs = (
        np.stack([entities.astype(np.int32), types.astype(np.int32)], axis=1)
        if len(entities)
        else np.zeros((0, 2), dtype=np.int32)
    )
    pairs = unique_rows(pairs, (num_entities, num_types))
    members = np.bincount(pairs[:, 1], minlength=num_types) if len(pairs) else np.zeros(0, np.int64)
    order = np.lexsort((pairs[:, 1], members[pairs[:, 1]] if len(pairs) else pairs[:, 1], pairs[:, 0]))
    pairs = pairs[order]
    return csr_from_rows(pairs[:, 0], num_entities), pairs[:, 1].astype(np.int32)


def compile_labels(
    entities: np.ndarray,
    strings: np.ndarray,
    languages: np.ndarray,
    roles: np.ndarray,
    *,
    num_entities: int,
    num_strings: int,
    language_tags: Sequence[str],
    preferred_languages: Sequence[str],
) -> dict[str, np.ndarray]:
    """The label arrays of a store from label rows given as ids, with numpy sorts only.

    Gives what :meth:`GraphCollector.build` gives for the same rows (its per-row Python loop,
    kept there as the reference, holds a tuple per label: too much at UMLS scale): repeated
    ``(entity, string, language, role)`` rows keep their first occurrence, rows are grouped by
    entity in input order, and the display name is the name-role label of the best language in
    ``preferred_languages`` (others after), then prefLabel over label, then the first row.
    """
    key = row_keys(
        [entities, strings, languages, roles], [num_entities, num_strings, len(language_tags), len(LABEL_ROLES)]
    )
    if key is None:  # pragma: no cover - more than 2**62 distinct rows cannot be held anyway
        raise OverflowError("too many labels to compile")
    first = np.unique(key, return_index=True)[1]
    del key
    first.sort()
    order = first[np.argsort(entities[first], kind="stable")]
    del first
    label_entities = entities[order]
    label_strings = strings[order].astype(np.int32)
    label_languages = languages[order].astype(np.int16)
    label_roles = roles[order].astype(np.int8)
    del order
    rank = np.full(max(len(language_tags), 1), len(preferred_languages), dtype=np.int64)
    for position, tag in enumerate(preferred_languages):  # a repeated tag keeps its last rank, as the collector
        if tag in language_tags:
            rank[list(language_tags).index(tag)] = position
    names = np.flatnonzero(np.isin(label_roles, sorted(NAME_ROLES)))
    best = names[np.lexsort((names, label_roles[names], rank[label_languages[names]], label_entities[names]))]
    owners = label_entities[best]
    leading = np.ones(len(best), dtype=bool)
    leading[1:] = owners[1:] != owners[:-1]
    name_label = np.full(num_entities, -1, dtype=np.int64)
    name_label[owners[leading]] = best[leading]
    return {
        "label_indptr": csr_from_rows(label_entities, num_entities),
        "label_strings": label_strings,
        "label_languages": label_languages,
        "label_roles": label_roles,
        "name_label": name_label,
    }


def empty_attributes(num_entities: int) -> dict[str, np.ndarray]:
    """The attribute arrays of a store whose entities have no literal attribute."""
    return {
        "attribute_indptr": np.zeros(num_entities + 1, dtype=np.int64),
        "attribute_predicates": np.zeros(0, dtype=np.int32),
        "attribute_values": np.zeros(0, dtype=np.int32),
        "attribute_languages": np.zeros(0, dtype=np.int16),
        "attribute_datatypes": np.zeros(0, dtype=np.int16),
    }
