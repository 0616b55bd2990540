"""EMBERT's thesaurus: the surface forms that name the same concept, from any knowledge graph.

Cai et al. (2021) build a thesaurus from the KG's "SameAs" relation and replace a mention with one
of its synonyms (context-entity consistency prediction, §3.1). Here the thesaurus is built from
:class:`~kgplm.kg.store.KGStore`'s public API only, so it is the same for every importer:

* an entity's own names: its display name and every label (``store.labels``) — what each importer
  files as names and aliases: ``rdfs:label``, ``skos:prefLabel``/``altLabel``,
  ``oboInOwl:hasExactSynonym`` (RDF); ``name`` and ``EXACT``/``RELATED`` synonyms (OBO); every
  MRCONSO string of a CUI (UMLS); CMeKG's alias predicates (别称, 又称, 同义词, 英文名, 通用名,
  商品名 …, :data:`kgplm.kg.cmekg.ALIAS_PREDICATES`), including the alias-only synonyms the CMeKG
  import merges into their subject (``脑溢血`` is a label of ``脑出血``) and the names copied across
  ``owl:sameAs`` (role ``derived``);
* the own names of the entities it is linked to by an *equivalence relation*, in either direction:
  ``owl:sameAs`` and ``skos:exactMatch`` (when the import did not merge them) and CMeKG's alias
  predicates that link two subjects (``美卡素 通用名 替米沙坦片``). One hop: equivalence is not
  closed transitively, because CMeKG's 通用名/商品名 chains join products of different makers.

Names shorter than ``min_length`` characters are left out (the linker does not match them). An
entity's surfaces keep this order: its display name, its other labels, then its equivalents'
names; duplicates are removed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from kgplm.kg.vocabulary import OWL_SAME_AS, SKOS_EXACT_MATCH
from kgplm.methods.embert.files import read_artefact, write_artefact

__all__ = ["Thesaurus", "build_thesaurus", "default_equivalence_relations"]

logger = logging.getLogger(__name__)

THESAURUS_FORMAT = "kgplm-thesaurus"


def default_equivalence_relations() -> list[str]:
    """``owl:sameAs``, ``skos:exactMatch`` and CMeKG's alias predicates (relation names)."""
    from kgplm.kg.cmekg import ALIAS_PREDICATES

    return [OWL_SAME_AS, SKOS_EXACT_MATCH, *ALIAS_PREDICATES]


class Thesaurus:
    """Per entity, the surfaces (strings) that name it: CSR arrays over a table of distinct surfaces.

    ``surfaces[k]`` is a string; entity ``e``'s surfaces are ``surfaces[i]`` for ``i`` in
    ``entity_surfaces[entity_ptr[e]:entity_ptr[e + 1]]``; ``num_own[e]`` of them are its own names
    (the rest come from its equivalents).
    """

    def __init__(
        self,
        surfaces: list[str],
        entity_ptr: np.ndarray,
        entity_surfaces: np.ndarray,
        num_own: np.ndarray,
        config: dict,
    ) -> None:
        self.surfaces = surfaces
        self.entity_ptr = np.asarray(entity_ptr, dtype=np.int64)
        self.entity_surfaces = np.asarray(entity_surfaces, dtype=np.int64)
        self.num_own = np.asarray(num_own, dtype=np.int64)
        self.config = config

    @property
    def num_entities(self) -> int:
        return len(self.entity_ptr) - 1

    def surface_ids(self, entity: int) -> np.ndarray:
        return self.entity_surfaces[self.entity_ptr[entity] : self.entity_ptr[entity + 1]]

    def synonyms(self, entity: int) -> list[str]:
        """Every surface of ``entity`` (display name first)."""
        return [self.surfaces[i] for i in self.surface_ids(entity).tolist()]

    def num_surfaces(self) -> np.ndarray:
        """(num_entities,) number of surfaces per entity."""
        return np.diff(self.entity_ptr)

    def describe(self) -> dict:
        counts = self.num_surfaces()
        return {
            "entities": self.num_entities,
            "surfaces": len(self.surfaces),
            "entities_with_synonyms": int((counts >= 2).sum()),
            "synonym_pairs": int((counts * (counts - 1)).sum()),
        }

    # -- files ---------------------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike) -> Path:
        return write_artefact(
            directory,
            "thesaurus",
            THESAURUS_FORMAT,
            {"entity_ptr": self.entity_ptr, "entity_surfaces": self.entity_surfaces, "num_own": self.num_own},
            {"config": self.config, "surfaces": self.surfaces},
        )

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "Thesaurus":
        manifest, arrays = read_artefact(
            directory, "thesaurus", THESAURUS_FORMAT, "kgplm thesaurus (EMBERT's synonyms)"
        )
        return cls(
            manifest["surfaces"], arrays["entity_ptr"], arrays["entity_surfaces"], arrays["num_own"], manifest["config"]
        )


def _equivalence_relation_ids(store, relations: Iterable[str]) -> list[int]:
    wanted = set(relations)
    return [
        index
        for index, (iri, name) in enumerate(zip(store.relation_iris, store.relation_names))
        if iri in wanted or name in wanted
    ]


def build_thesaurus(
    store, *, equivalence_relations: Iterable[str] | None = None, min_length: int = 2, progress: bool = False
) -> Thesaurus:
    """The thesaurus of ``store`` (see the module docstring).

    ``equivalence_relations``: relation IRIs or names whose links join synonyms (default
    :func:`default_equivalence_relations`).
    """
    relations = list(default_equivalence_relations() if equivalence_relations is None else equivalence_relations)
    relation_ids = _equivalence_relation_ids(store, relations)
    triples = np.asarray(store.triples)
    links = triples[np.isin(triples[:, 1], relation_ids)][:, [0, 2]] if len(triples) else np.zeros((0, 2), np.int64)
    links = np.concatenate([links, links[:, ::-1]])  # both directions
    links = links[links[:, 0] != links[:, 1]]
    links = links[np.lexsort((links[:, 1], links[:, 0]))]
    link_ptr = np.searchsorted(links[:, 0], np.arange(store.num_entities + 1))

    surface_index: dict[str, int] = {}
    surfaces: list[str] = []

    def surface_id(text: str) -> int:
        index = surface_index.get(text)
        if index is None:
            index = surface_index[text] = len(surfaces)
            surfaces.append(text)
        return index

    own: list[list[int]] = []
    for entity in tqdm(
        range(store.num_entities), desc="thesaurus", unit=" entities", disable=not progress, leave=False
    ):
        names = [store.entity_name(entity), *(text for text, _, _ in store.labels(entity))]
        ids: list[int] = []
        for name in names:
            name = name.strip()
            if len(name) >= min_length:
                index = surface_id(name)
                if index not in ids:
                    ids.append(index)
        own.append(ids)
    entity_ptr = [0]
    entity_surfaces: list[int] = []
    num_own = np.array([len(ids) for ids in own], dtype=np.int64)
    for entity in range(store.num_entities):
        merged = list(own[entity])
        for other in links[link_ptr[entity] : link_ptr[entity + 1], 1].tolist():
            merged.extend(index for index in own[other] if index not in merged)
        entity_surfaces.extend(merged)
        entity_ptr.append(len(entity_surfaces))
    config = {
        "equivalence_relations": relations,
        "equivalence_relations_found": [store.relation_names[r] for r in relation_ids],
        "equivalence_links": int(len(links) // 2),
        "min_length": min_length,
    }
    thesaurus = Thesaurus(
        surfaces, np.asarray(entity_ptr), np.asarray(entity_surfaces, dtype=np.int64), num_own, config
    )
    logger.info("thesaurus: %s", thesaurus.describe())
    return thesaurus
