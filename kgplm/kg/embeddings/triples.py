"""Triples as the embeddings read them: id arrays, labelled rows mapped to ids, and a seeded split.

A triple is a ``(head, relation, tail)`` row of ids into a :class:`~kgplm.kg.store.KGStore`, or of
labels (IRIs, names or aliases) that the store maps to ids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from kgplm.exceptions import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["is_labelled", "triples_to_ids", "id_triples", "split_triples"]


def is_labelled(triples) -> bool:
    """True for triples of strings (labels), False for id arrays and tensors."""
    if isinstance(triples, torch.Tensor):
        return False
    values = triples if isinstance(triples, np.ndarray) else np.asarray(triples, dtype=object)
    if values.dtype.kind in "iub":
        return False
    return any(isinstance(value, str) for value in values.ravel()[:1000].tolist())


def triples_to_ids(triples, store: "KGStore | None" = None) -> np.ndarray | torch.Tensor:
    """Labelled triples (rows of head, relation, tail strings) as an ``(n, 3)`` id array through
    :meth:`KGStore.triple_ids`; id triples are returned unchanged."""
    if not is_labelled(triples):
        return triples
    if store is None:
        raise ConfigurationError("the triples hold labels (strings); pass store= to map them to the store's ids")
    return store.triple_ids(triples)


def id_triples(triples, num_entities: int, num_relations: int) -> torch.Tensor:
    """``triples`` as an ``(n, 3)`` int64 tensor of ids, checked against the table sizes; labelled
    triples raise :class:`~kgplm.exceptions.ConfigurationError` (map them with :func:`triples_to_ids`)."""
    if is_labelled(triples):
        raise ConfigurationError(
            "the triples hold labels (strings), not ids; map them with "
            "triples_to_ids(triples, store) or pass store= to evaluate()"
        )
    tensor = torch.as_tensor(
        np.array(triples, dtype=np.int64) if not isinstance(triples, torch.Tensor) else triples, dtype=torch.long
    )
    if tensor.ndim != 2 or tensor.shape[1] != 3:
        raise ConfigurationError(
            f"triples must have shape (n, 3) of (head, relation, tail) ids; got {tuple(tensor.shape)}"
        )
    if len(tensor):
        if int(tensor[:, [0, 2]].min()) < 0 or int(tensor[:, [0, 2]].max()) >= num_entities:
            raise ConfigurationError(f"triples hold entity ids outside 0..{num_entities - 1}")
        if int(tensor[:, 1].min()) < 0 or int(tensor[:, 1].max()) >= num_relations:
            raise ConfigurationError(f"triples hold relation ids outside 0..{num_relations - 1}")
    return tensor


def split_triples(
    triples: np.ndarray, *, test_fraction: float = 0.05, seed: int = 0, keep_entities_in_train: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """A seeded train/test split of ``triples`` (n, 3).

    With ``keep_entities_in_train`` a triple goes to test only if its head, tail and relation
    still occur in the remaining training triples (otherwise no embedding model could rank it),
    so the test share can come out slightly below ``test_fraction``.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ConfigurationError(f"test_fraction must be in (0, 1), got {test_fraction}")
    triples = np.asarray(triples, dtype=np.int64)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(triples))
    wanted = int(round(test_fraction * len(triples)))
    if not keep_entities_in_train:
        return triples[np.sort(order[wanted:])], triples[np.sort(order[:wanted])]
    entity_counts = np.bincount(triples[:, [0, 2]].ravel(), minlength=int(triples[:, [0, 2]].max()) + 1)
    relation_counts = np.bincount(triples[:, 1])
    is_test = np.zeros(len(triples), dtype=bool)
    taken = 0
    for index in order:
        if taken == wanted:
            break
        head, relation, tail = triples[index]
        if head == tail:
            if entity_counts[head] <= 2:
                continue
        elif entity_counts[head] <= 1 or entity_counts[tail] <= 1:
            continue
        if relation_counts[relation] <= 1:
            continue
        entity_counts[head] -= 1
        entity_counts[tail] -= 1
        relation_counts[relation] -= 1
        is_test[index] = True
        taken += 1
    return triples[~is_test], triples[is_test]
