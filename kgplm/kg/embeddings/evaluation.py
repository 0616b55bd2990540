"""Link prediction with KG embeddings: filtered ranks and the metrics over them.

Evaluation uses filtered ranks (Bordes et al., NeurIPS 2013, "Translating Embeddings for Modeling
Multi-relational Data"): the other known true answers of a query are removed before ranking. Ties
get the *realistic* rank, the mean of the optimistic and the pessimistic rank (PyKEEN's default),
so that a model that scores every entity the same does not look perfect.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch
from tqdm.auto import tqdm

from kgplm.exceptions import ConfigurationError
from kgplm.kg.embeddings.triples import id_triples, triples_to_ids

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.embeddings.models import KGEmbeddings
    from kgplm.kg.store import KGStore

__all__ = ["rank_triples", "link_prediction_metrics", "evaluate_link_prediction"]


class _AnswerIndex:
    """The known answers of (anchor, relation, ?) queries, for filtering."""

    def __init__(self, triples: np.ndarray, side: str, num_relations: int) -> None:
        anchors = triples[:, 2] if side == "head" else triples[:, 0]
        answers = triples[:, 0] if side == "head" else triples[:, 2]
        keys = anchors.astype(np.int64) * num_relations + triples[:, 1]
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.answers = answers[order].astype(np.int64)
        self.num_relations = num_relations

    def lookup(self, anchors: np.ndarray, relations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(query_rows, answers)`` pairs: every known answer of each query."""
        keys = anchors.astype(np.int64) * self.num_relations + relations
        starts = np.searchsorted(self.keys, keys, side="left")
        ends = np.searchsorted(self.keys, keys, side="right")
        lengths = ends - starts
        rows = np.repeat(np.arange(len(keys)), lengths)
        offsets = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        return rows, self.answers[np.repeat(starts, lengths) + offsets]


def rank_triples(
    embeddings: KGEmbeddings,
    triples,
    *,
    side: Literal["head", "tail"] = "tail",
    filter_triples=None,
    batch_size: int = 256,
    progress: bool = False,
) -> np.ndarray:
    """The (filtered, realistic) rank of each triple's ``side`` among all entities; float array.

    realistic rank = (optimistic + pessimistic) / 2 with optimistic = 1 + #{strictly lower
    energy} and pessimistic = #{lower or equal energy}, counting candidates that are not
    filtered. Queries are grouped by relation so that TransR projects all entities once per relation.
    """
    if side not in ("head", "tail"):
        raise ConfigurationError(f"side must be 'head' or 'tail', got {side!r}")
    triples = id_triples(triples, embeddings.num_entities, embeddings.num_relations).numpy()
    index = None
    if filter_triples is not None:
        index = _AnswerIndex(np.asarray(filter_triples, dtype=np.int64), side, embeddings.num_relations)
    ranks = np.empty(len(triples), dtype=np.float64)
    order = np.argsort(triples[:, 1], kind="stable")
    relation_starts = np.flatnonzero(np.r_[True, np.diff(triples[order, 1]) != 0, True])
    bar = tqdm(total=len(triples), desc=f"ranking {side}s", unit="triple", disable=not progress, leave=False)
    with torch.no_grad():
        for group_start, group_end in zip(relation_starts[:-1], relation_starts[1:]):
            group = order[group_start:group_end]
            relation = int(triples[group[0], 1])
            candidates = embeddings.projected_entities(relation)  # (E, d)
            relation_vector = embeddings.relation_embeddings[relation]  # (d,)
            for batch_start in range(0, len(group), batch_size):
                rows = group[batch_start : batch_start + batch_size]
                batch = triples[rows]
                anchors = batch[:, 2] if side == "head" else batch[:, 0]
                truths = batch[:, 0] if side == "head" else batch[:, 2]
                anchor_vectors = candidates[torch.from_numpy(anchors)]  # (b, d)
                # tail query: ‖h_r + r − t_r‖ → targets h_r + r; head query: ‖h_r − (t_r − r)‖
                targets = anchor_vectors + relation_vector if side == "tail" else anchor_vectors - relation_vector
                energies = torch.cdist(
                    targets.unsqueeze(0),
                    candidates.unsqueeze(0),
                    p=float(embeddings.norm),
                    compute_mode="donot_use_mm_for_euclid_dist",
                ).squeeze(0)  # (b, E)
                truth_energies = energies[torch.arange(len(rows)), torch.from_numpy(truths)].clone()
                if index is not None:
                    query_rows, answers = index.lookup(anchors, batch[:, 1])
                    keep = answers != truths[query_rows]
                    energies[torch.from_numpy(query_rows[keep]), torch.from_numpy(answers[keep])] = math.inf
                better = (energies < truth_energies.unsqueeze(1)).sum(dim=1)
                better_or_equal = (energies <= truth_energies.unsqueeze(1)).sum(dim=1)
                ranks[rows] = ((1 + better) + better_or_equal).double().numpy() / 2.0
                bar.update(len(rows))
    bar.close()
    return ranks


def link_prediction_metrics(ranks: np.ndarray) -> dict[str, float]:
    """``{"mrr", "hits@1", "hits@3", "hits@10", "mean_rank", "num_ranks"}`` of the ranks."""
    return {
        "mrr": float(np.mean(1.0 / ranks)),
        "hits@1": float(np.mean(ranks <= 1)),
        "hits@3": float(np.mean(ranks <= 3)),
        "hits@10": float(np.mean(ranks <= 10)),
        "mean_rank": float(np.mean(ranks)),
        "num_ranks": int(len(ranks)),
    }


def evaluate_link_prediction(
    embeddings: KGEmbeddings,
    test_triples,
    *,
    filter_triples=None,
    store: "KGStore | None" = None,
    sides: tuple[str, ...] = ("head", "tail"),
    batch_size: int = 256,
    progress: bool = True,
) -> dict[str, float]:
    """Filtered link prediction: rank every test triple's head and tail against all entities.

    ``test_triples`` (and ``filter_triples``) are ``(n, 3)`` id arrays, or labelled triples — rows
    of (head, relation, tail) strings as PyKEEN users read them from a TSV: IRIs, names or aliases
    of entities and IRIs or names of relations, mapped through ``store`` (required for labels;
    an unknown or ambiguous label raises a :class:`KgplmError` naming it).
    ``filter_triples`` are the known true triples (usually train + valid + test); the other
    true answers of a query are removed before ranking. Without it the ranks are *raw*.
    Returns :func:`link_prediction_metrics` over the ranks of all ``sides``.
    """
    test_triples = triples_to_ids(test_triples, store)
    if filter_triples is not None:
        filter_triples = triples_to_ids(filter_triples, store)
    ranks = np.concatenate(
        [
            rank_triples(
                embeddings,
                test_triples,
                side=side,
                filter_triples=filter_triples,
                batch_size=batch_size,
                progress=progress,
            )
            for side in sides
        ]
    )
    return link_prediction_metrics(ranks)
