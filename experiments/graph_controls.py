"""Graph controls of the study: the same graph with its links attached to the wrong entities.

:func:`shuffle_links` relabels the entity ids in every triple by a seeded derangement π,
(h, r, t) → (π(h), r, π(t)), through :meth:`kgplm.KGStore.with_triples`. Names, aliases, types and
attributes stay on their ids, so text links to the same ids as before, but the links, PEPR
neighbours and KG embeddings of id π(e) are those of e: the same graph (degree sequence, relations,
shape) attached to the wrong entities. ``kgplm.train(knowledge_graph=shuffle_links(store, seed))``
builds a run's KG artefacts from it while linking and fine-tuning use the real store.
"""

from __future__ import annotations

import numpy as np

__all__ = ["derangement", "shuffle_links"]


def derangement(num_entities: int, seed: int) -> np.ndarray:
    """π: a seeded permutation of ``0 … num_entities − 1`` with no fixed point (every entity gets another's
    links; a cyclic shift of a random order, so it is a derangement)."""
    order = np.random.default_rng(seed).permutation(num_entities)
    permutation = np.empty(num_entities, dtype=np.int64)
    permutation[order] = np.roll(order, 1)
    return permutation


def shuffle_links(store, seed: int):
    """A copy of ``store`` whose triples are relabelled by :func:`derangement` (module docstring); the
    copy's ``derived_from`` records ``{"shuffled_links": {"seed": seed}}``."""
    permutation = derangement(store.num_entities, seed)
    triples = np.asarray(store.triples, dtype=np.int64)
    moved = np.stack([permutation[triples[:, 0]], triples[:, 1], permutation[triples[:, 2]]], 1)
    return store.with_triples(moved, derived_from={"shuffled_links": {"seed": int(seed)}})
