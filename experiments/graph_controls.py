"""Graph controls of the study: the same graph with its links attached to the wrong entities.

:func:`shuffle_links` relabels the entity ids in every triple by a seeded derangement π,
(h, r, t) → (π(h), r, π(t)), through :meth:`kgplm.KGStore.with_triples`. Names, aliases, types and
attributes stay on their ids, so text links to the same ids as before, but the links, PEPR
neighbours and KG embeddings of id π(e) are those of e: the same graph (degree sequence, relations,
shape) attached to the wrong entities. ``kgplm.train(knowledge_graph=shuffle_links(store, seed))``
builds a run's KG artefacts from it while linking and fine-tuning use the real store.

:func:`shuffle_links_within_types` does the same with a derangement *within each entity type*
(:func:`derangement_within_types`): π(e) always has e's primary type, so every entity still
carries links typical of its own type while its relational knowledge belongs to another entity
of that type. It separates "the entity's type" from "the graph's knowledge about the entity".
Entities without a type form one group of their own. An entity whose group has one member has no
other entity to swap with: it keeps its own links (a fixed point of π); their number is logged
and recorded in the copy's ``derived_from``.
"""

from __future__ import annotations

import logging

import numpy as np

__all__ = ["derangement", "derangement_within_types", "shuffle_links", "shuffle_links_within_types"]

logger = logging.getLogger("replicate")


def derangement(num_entities: int, seed: int) -> np.ndarray:
    """π: a seeded permutation of ``0 … num_entities − 1`` with no fixed point (every entity gets another's
    links; a cyclic shift of a random order, so it is a derangement)."""
    order = np.random.default_rng(seed).permutation(num_entities)
    permutation = np.empty(num_entities, dtype=np.int64)
    permutation[order] = np.roll(order, 1)
    return permutation


def derangement_within_types(type_ids: np.ndarray, seed: int) -> np.ndarray:
    """π over entities with ``type_ids[π(e)] == type_ids[e]`` for every e (``-1``, no type, is a group too)
    and π(e) ≠ e for every e whose group has at least two members (a cyclic shift of a seeded random
    order within each group, groups in increasing type id); a group of one is a fixed point."""
    type_ids = np.asarray(type_ids)
    rng = np.random.default_rng(seed)
    permutation = np.arange(len(type_ids), dtype=np.int64)
    for type_id in np.unique(type_ids):
        members = np.flatnonzero(type_ids == type_id)
        if len(members) < 2:
            continue
        order = members[rng.permutation(len(members))]
        permutation[order] = np.roll(order, 1)
    return permutation


def _relabelled(store, permutation: np.ndarray, derived_from: dict):
    triples = np.asarray(store.triples, dtype=np.int64)
    moved = np.stack([permutation[triples[:, 0]], triples[:, 1], permutation[triples[:, 2]]], 1)
    return store.with_triples(moved, derived_from=derived_from)


def shuffle_links(store, seed: int):
    """A copy of ``store`` whose triples are relabelled by :func:`derangement` (module docstring); the
    copy's ``derived_from`` records ``{"shuffled_links": {"seed": seed}}``."""
    return _relabelled(store, derangement(store.num_entities, seed), {"shuffled_links": {"seed": int(seed)}})


def shuffle_links_within_types(store, seed: int):
    """A copy of ``store`` whose triples are relabelled by :func:`derangement_within_types` of its primary
    types (module docstring); ``derived_from`` records ``{"shuffled_links_within_types": {"seed": seed,
    "fixed_entities": k}}``, k the entities alone in their type, which keep their links."""
    type_ids = store.primary_type_ids()
    permutation = derangement_within_types(type_ids, seed)
    fixed = int(np.count_nonzero(permutation == np.arange(len(permutation))))
    if fixed:
        logger.info("type-preserving shuffle: %d entities are alone in their type and keep their links", fixed)
    return _relabelled(
        store, permutation, {"shuffled_links_within_types": {"seed": int(seed), "fixed_entities": fixed}}
    )
