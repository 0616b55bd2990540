"""Unsupervised semantic similarity (SMedBERT, Zhang et al. ACL 2021, Table 1 and Appendix C), from any KG.

Each query is a pair (query name, positive name) that the graph says mean the same thing, plus
19 hard negatives; a model ranks the 20 candidates by cosine similarity to the query and scores
Acc@1 (the positive ranked first).

* **D1** — alias pairs: the display name of an entity and one of its aliases (``KGStore.aliases``,
  which includes names copied across ``owl:sameAs``/equivalence links). With ``same_script`` the
  alias must be written in the same script as the name (CJK or not), so a Chinese query is not
  paired with an English one.
* **D2** — neighbourhood pairs: two distinct entities whose one-hop neighbour sets (both
  directions, relation ignored) have Jaccard ≥ 0.75 and at least 3 common neighbours.
* **D3** — the D1 queries whose query name is a low-frequency mention of the pre-training
  corpus: it occurs at least once and at most ``rare_max_count`` times. The paper gives no
  absolute threshold for its corpus; ``rare_max_count`` defaults to max(2, round(5 · characters
  / 10⁶)) — five per million characters, scaled to the corpus given.

Negatives: for each pair, 19 entities of the positive's primary type (not the query's or the
positive's entity) whose Jaro–Winkler similarity to the positive name exceeds 0.6, the most
similar first (ties by entity id), drawn from a seeded sample of at most ``pool_size`` same-type
entities. A pair with fewer than 19 such negatives is dropped (counted in the log).

Representation of a name: the mean of the last-layer token states of ``[CLS] name [SEP]``
without ``[CLS]`` and ``[SEP]``. The positive must score strictly above every negative (a tie,
as from a constant model, is a miss). Deviation: names are encoded as plain text, so a
knowledge-enhanced model's knowledge module gets no linked mention here; every model is compared
on its text encoder alone.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from kgplm.exceptions import ConfigurationError

__all__ = [
    "jaro_winkler",
    "SimilarityQuery",
    "build_similarity_sets",
    "evaluate_similarity",
    "similarity_hits",
    "name_vectors",
]

logger = logging.getLogger(__name__)

_CJK = re.compile(r"[\u4e00-\u9fff]")


def jaro_winkler(first: str, second: str, prefix_scale: float = 0.1) -> float:
    """Jaro–Winkler similarity (Winkler 1990): Jaro plus a bonus for a common prefix of up to 4."""
    if first == second:
        return 1.0
    if not first or not second:
        return 0.0
    window = max(max(len(first), len(second)) // 2 - 1, 0)
    first_matched = [False] * len(first)
    second_matched = [False] * len(second)
    matches = 0
    for i, character in enumerate(first):
        for j in range(max(0, i - window), min(len(second), i + window + 1)):
            if not second_matched[j] and second[j] == character:
                first_matched[i] = second_matched[j] = True
                matches += 1
                break
    if not matches:
        return 0.0
    first_sequence = [c for c, m in zip(first, first_matched) if m]
    second_sequence = [c for c, m in zip(second, second_matched) if m]
    transpositions = sum(a != b for a, b in zip(first_sequence, second_sequence)) / 2
    jaro = (matches / len(first) + matches / len(second) + (matches - transpositions) / matches) / 3
    prefix = 0
    for a, b in zip(first[:4], second[:4]):
        if a != b:
            break
        prefix += 1
    return jaro + prefix * prefix_scale * (1 - jaro)


@dataclass(frozen=True)
class SimilarityQuery:
    """``candidates[0]`` is the positive; the other 19 are the hard negatives."""

    query: str
    candidates: tuple[str, ...]
    query_entity: int
    positive_entity: int


def _same_script(a: str, b: str) -> bool:
    return bool(_CJK.search(a)) == bool(_CJK.search(b))


def _neighbor_sets(store) -> list[set[int]]:
    triples = np.asarray(store.triples)
    neighbors: list[set[int]] = [set() for _ in range(store.num_entities)]
    for head, tail in zip(triples[:, 0].tolist(), triples[:, 2].tolist()):
        if head != tail:
            neighbors[head].add(tail)
            neighbors[tail].add(head)
    return neighbors


def _neighborhood_pairs(neighbors: list[set[int]], min_jaccard: float, min_common: int) -> list[tuple[int, int]]:
    """Pairs (a < b) with Jaccard ≥ min_jaccard and ≥ min_common shared neighbours.

    Prefix filtering (Bayardo et al. 2007, "All-pairs"): with each set's neighbours ordered rarest
    first, two sets with Jaccard ≥ t share an element among the first |A| − ⌈t·|A|⌉ + 1 of each, so
    only pairs meeting in those prefixes are verified, and hub neighbours (last in the order) are
    seldom indexed.
    """
    frequency: dict[int, int] = {}
    for entity_neighbors in neighbors:
        for neighbor in entity_neighbors:
            frequency[neighbor] = frequency.get(neighbor, 0) + 1
    index: dict[int, list[int]] = {}
    pairs = set()
    for entity in sorted(range(len(neighbors)), key=lambda e: len(neighbors[e])):
        entity_neighbors = neighbors[entity]
        size = len(entity_neighbors)
        if size < min_common:
            continue
        ordered = sorted(entity_neighbors, key=lambda n: (frequency[n], n))
        prefix = ordered[: size - math.ceil(min_jaccard * size) + 1]
        candidates = set()
        for neighbor in prefix:
            candidates.update(index.get(neighbor, ()))
            index.setdefault(neighbor, []).append(entity)
        for other in candidates:
            other_neighbors = neighbors[other]
            if len(other_neighbors) < min_jaccard * size:  # sizes too different for the threshold
                continue
            common = len(entity_neighbors & other_neighbors)
            if common >= min_common and common >= min_jaccard * len(entity_neighbors | other_neighbors):
                pairs.add((min(entity, other), max(entity, other)))
    return sorted(pairs)


def _negatives(
    store,
    positive: int,
    excluded: set[int],
    by_type: dict[int, np.ndarray],
    primary: np.ndarray,
    rng: np.random.Generator,
    pool_size: int,
    count: int,
    threshold: float,
) -> list[str] | None:
    kind = int(primary[positive])
    pool = by_type.get(kind, np.zeros(0, np.int64))
    if len(pool) > pool_size:
        pool = np.sort(rng.choice(pool, pool_size, replace=False))
    name = store.entity_name(positive)
    seen_names = {name} | {store.entity_name(e) for e in excluded}
    scored = []
    for entity in pool.tolist():
        if entity in excluded:
            continue
        candidate = store.entity_name(entity)
        if candidate in seen_names:
            continue
        similarity = jaro_winkler(name, candidate)
        if similarity > threshold:
            scored.append((-similarity, entity, candidate))
    if len(scored) < count:
        return None
    scored.sort()
    chosen, names = [], set()
    for _, _, candidate in scored:
        if candidate not in names:
            names.add(candidate)
            chosen.append(candidate)
        if len(chosen) == count:
            return chosen
    return None


def build_similarity_sets(
    store,
    *,
    corpus_texts: Iterable[str] | None = None,
    max_queries: int = 500,
    num_negatives: int = 19,
    similarity_threshold: float = 0.6,
    min_jaccard: float = 0.75,
    min_common_neighbors: int = 3,
    rare_max_count: int | None = None,
    same_script: bool = True,
    pool_size: int = 5000,
    seed: int = 0,
) -> dict[str, list[SimilarityQuery]]:
    """D1, D2 and (given ``corpus_texts``) D3 as lists of :class:`SimilarityQuery`; see the module docstring."""
    if num_negatives < 1 or max_queries < 1:
        raise ConfigurationError("num_negatives and max_queries must be positive")
    rng = np.random.default_rng(seed)
    primary = np.asarray(store.primary_type_ids())
    by_type = {int(kind): np.flatnonzero(primary == kind) for kind in np.unique(primary) if kind >= 0}

    def make(pairs: Sequence[tuple[int, str, int, str]], limit: int) -> list[SimilarityQuery]:
        queries, dropped = [], 0
        order = rng.permutation(len(pairs))
        for index in order.tolist():
            query_entity, query, positive_entity, positive = pairs[index]
            negatives = _negatives(
                store,
                positive_entity,
                {query_entity, positive_entity},
                by_type,
                primary,
                rng,
                pool_size,
                num_negatives,
                similarity_threshold,
            )
            if negatives is None or query in negatives:
                dropped += 1
                continue
            queries.append(SimilarityQuery(query, (positive, *negatives), query_entity, positive_entity))
            if len(queries) == limit:
                break
        logger.info(
            "similarity: %d queries kept, %d dropped for want of %d hard negatives",
            len(queries),
            dropped,
            num_negatives,
        )
        return queries

    alias_pairs = []
    for entity in range(store.num_entities):
        if primary[entity] < 0:
            continue
        name = store.entity_name(entity)
        for alias in store.aliases(entity):
            if alias != name and (not same_script or _same_script(name, alias)):
                alias_pairs.append((entity, alias, entity, name))  # query: the alias; positive: the name
    sets = {"D1": make(alias_pairs, max_queries)}

    neighbors = _neighbor_sets(store)
    neighborhood = [
        (a, store.entity_name(a), b, store.entity_name(b))
        for a, b in _neighborhood_pairs(neighbors, min_jaccard, min_common_neighbors)
        if primary[a] >= 0 and primary[b] >= 0 and store.entity_name(a) != store.entity_name(b)
    ]
    sets["D2"] = make(neighborhood, max_queries)

    if corpus_texts is not None:
        texts = list(corpus_texts)
        characters = sum(len(t) for t in texts)
        threshold = rare_max_count if rare_max_count is not None else max(2, round(5 * characters / 1e6))
        counts = _count_occurrences([pair[1] for pair in alias_pairs], texts)
        rare = [pair for pair in alias_pairs if 1 <= counts[pair[1]] <= threshold]
        logger.info(
            "similarity D3: %d of %d alias pairs have a query seen 1–%d times in the corpus",
            len(rare),
            len(alias_pairs),
            threshold,
        )
        sets["D3"] = make(rare, max_queries)
    return sets


def _count_occurrences(names: Sequence[str], texts: Sequence[str]) -> dict[str, int]:
    """Occurrences of each name in the texts (overlapping allowed): a set lookup per text position and name length."""
    wanted = {name for name in names if name}
    by_length: dict[int, set[str]] = {}
    for name in wanted:
        by_length.setdefault(len(name), set()).add(name)
    counts = dict.fromkeys(wanted, 0)
    for text in texts:
        for length, group in by_length.items():
            for start in range(len(text) - length + 1):
                piece = text[start : start + length]
                if piece in group:
                    counts[piece] += 1
    return counts


def name_vectors(model, tokenizer, names: Sequence[str], *, batch_size: int = 128, device: str = "cpu"):
    """(len(names), d1) mean last-layer states of each name's tokens, [CLS]/[SEP] excluded."""
    import torch

    model.eval().to(device)
    vectors = []
    with torch.no_grad():
        for start in range(0, len(names), batch_size):
            encoding = tokenizer(
                list(names[start : start + batch_size]),
                padding=True,
                truncation=True,
                max_length=64,
                return_tensors="pt",
                return_special_tokens_mask=True,
            )
            special = encoding.pop("special_tokens_mask")
            encoding = {k: v.to(device) for k, v in encoding.items()}
            output = model(**encoding)
            hidden = output.last_hidden_state  # (batch, length, d1)
            keep = (encoding["attention_mask"].bool() & ~special.bool().to(device)).unsqueeze(-1)
            summed = (hidden * keep).sum(1)
            vectors.append((summed / keep.sum(1).clamp(min=1)).float().cpu())
    return torch.cat(vectors) if vectors else torch.zeros(0)


def similarity_hits(
    model, tokenizer, sets: dict[str, list[SimilarityQuery]], *, device: str = "cpu"
) -> dict[str, np.ndarray]:
    """Per query of each set, whether the positive ranked strictly first ((queries,) bool); the
    per-example outcomes a paired test needs. ``model``/``tokenizer``: objects or directories."""
    import torch

    if not hasattr(model, "forward"):
        from kgplm.models import load_pretrained

        model = load_pretrained(model)
    if not hasattr(tokenizer, "encode"):
        from kgplm.text.tokenization import load_tokenizer

        tokenizer = load_tokenizer(tokenizer)
    results = {}
    for name, queries in sets.items():
        if not queries:
            continue
        strings = sorted({s for q in queries for s in (q.query, *q.candidates)})
        index = {s: i for i, s in enumerate(strings)}
        vectors = torch.nn.functional.normalize(name_vectors(model, tokenizer, strings, device=device), dim=-1)
        hits = np.zeros(len(queries), dtype=bool)
        for row, query in enumerate(queries):
            candidates = vectors[[index[c] for c in query.candidates]]  # (20, d1)
            scores = candidates @ vectors[index[query.query]]  # (20,)
            hits[row] = bool(scores[0] > scores[1:].max())  # strictly first: ties (a constant model) are misses
        results[name] = hits
    return results


def evaluate_similarity(
    model, tokenizer, sets: dict[str, list[SimilarityQuery]], *, device: str = "cpu"
) -> dict[str, float]:
    """Acc@1 per set (the mean of :func:`similarity_hits`). ``model``/``tokenizer`` may be objects or
    directories (``load_pretrained``)."""
    return {name: float(hits.mean()) for name, hits in similarity_hits(model, tokenizer, sets, device=device).items()}
