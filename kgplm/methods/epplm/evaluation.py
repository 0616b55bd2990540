"""What EP-PLM's product attribute prediction has learnt about drugs: a PAP AUC that only drug knowledge can raise.

The held-out split (:func:`pap_held_out_pairs`, ``kgplm.train(method_data={"pap_held_out": n})``):
one 适应症 (indication) value of each of n drugs that have at least two, chosen with seed 0 from
the graph, among values another drug keeps in training (a value the model never saw as an
indication cannot be judged). Each held-out drug also loses every triple of its other attributes
(:func:`held_out_triples`: 不良反应, 功能主治 text …, which often restate the indication) from the
PAP triples, and :func:`drop_leaking_text` drops from the pre-training text every line naming a
held-out drug together with any of its values. Removed triples are *withheld*: never drawn as a
negative of their own drug, in training (:mod:`kgplm.methods.epplm.batching`) or here.

The evaluation set (:func:`build_evaluation_set`): each held-out pair (d, v) is a positive, scored
against ``per_pair`` negatives (d, v′) with v′ an indication d does not have (trained or
withheld), matched to v in *popularity* — how many drugs have the value in the training triples —
and in *length* (characters): the same popularity and length where such values exist, else the
nearest tolerance of :data:`MATCHING_STEPS` that has one, drawn within it ∝ popularity (as the
positives are). Without matching, a positive is a value many drugs share and a
negative mostly a value of one drug, so scorers that ignore the drug reach AUC 0.90 (popularity)
and 0.82 (shorter wins) and every model's AUC is at chance once negatives are as common as the
positives. With it, the two drug-ignoring scorers (:func:`popularity_scores`,
:func:`length_scores`) sit at 0.5 and are printed beside the models as baselines.

The drug-shuffle control: every positive and its negatives scored against another held-out drug
d′ (none of whose true values they are). A scorer that reads the drug falls to chance there; one
that reads only the value keeps its AUC. :func:`chance_interval` is the AUC's 95% interval
under "scores independent of the label" (Mann–Whitney's null variance, no ties).

:func:`pap_auc` is the ``PAP AUC`` evaluation of the ``epplm`` record (``experiments/replicate.py``
reports it for EP-PLM, its control and its ablations): the same probe for every encoder — D
frozen, a fresh pooler + f trained with the PAP loss on the run's training 适应症 triples (popularity
-matched negatives) — scored on the matched set; ``PAP AUC, drug-shuffled`` is the same probe on
the shuffle control.

:func:`title_agnostic_baseline_loss`: the PAP training loss the best scorer that sees the attribute
and the value but not the title reaches, exactly, under a negative law; PAP training has learnt
something about titles only below it.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kgplm.exceptions import ArtifactError, ConfigurationError
from kgplm.methods.epplm.attributes import ProductAttributes

__all__ = [
    "ATTRIBUTE",
    "pap_held_out_pairs",
    "held_out_triples",
    "leaking_lines",
    "drop_leaking_text",
    "EvaluationSet",
    "build_evaluation_set",
    "popularity_scores",
    "length_scores",
    "auc",
    "chance_interval",
    "title_agnostic_baseline_loss",
    "title_agnostic_auc",
    "pap_auc",
    "pap_auc_shuffled",
    "probe_scorer",
]

logger = logging.getLogger(__name__)

#: The attribute whose values are held out and scored.
ATTRIBUTE = "适应症"
HELD_OUT_STREAM = 0x4844


# -- the held-out split ----------------------------------------------------------------------------------------
def pap_held_out_pairs(
    attributes: ProductAttributes, count: int, seed: int = 0, attribute: str = ATTRIBUTE
) -> list[tuple[str, str, str]]:
    """(drug, ``attribute``, value): one value of each of ``count`` drugs with at least two, each value kept in
    training by another drug (module docstring); sorted."""
    popularity = Counter(v for g in attributes.groups if g.attribute == attribute for v in g.values)
    candidates = [g for g in attributes.groups if g.attribute == attribute and len(g.values) >= 2]
    rng = np.random.default_rng([seed, HELD_OUT_STREAM])
    pairs = []
    for index in rng.permutation(len(candidates)).tolist():
        if len(pairs) == count:
            break
        group = candidates[index]
        shared = [v for v in group.values if popularity[v] >= 2]  # another drug keeps it after this removal
        if not shared:
            continue
        value = shared[int(rng.integers(len(shared)))]
        popularity[value] -= 1
        pairs.append((group.title, attribute, value))
    if len(pairs) < count:
        logger.warning("only %d drugs can hold out a shared %s value (asked for %d)", len(pairs), attribute, count)
    return sorted(pairs)


def held_out_triples(attributes: ProductAttributes, pairs: Iterable[Sequence[str]]) -> list[tuple[str, str, str]]:
    """The triples training must not see: the held-out pairs and every triple of their drugs' other attributes."""
    pairs = [tuple(pair) for pair in pairs]
    by_title: dict[str, set[str]] = {}
    for title, attribute, _ in pairs:
        by_title.setdefault(title, set()).add(attribute)
    removed = set(pairs)
    for group in attributes.groups:
        if group.title in by_title and group.attribute not in by_title[group.title]:
            removed.update((group.title, group.attribute, value) for value in group.values)
    return sorted(removed)


def leaking_lines(lines: Sequence[str], attributes: ProductAttributes) -> list[int]:
    """Indices of the lines naming a held-out drug of ``attributes`` together with any of its values (trained or
    withheld, any attribute)."""
    titles = sorted({title for title, _, _ in attributes.held_out})
    values = {title: {v for a in attributes.attributes for v in attributes.true_values(title, a)} for title in titles}
    leaking = []
    for number, line in enumerate(lines):
        if any(title in line and any(value in line for value in values[title]) for title in titles):
            leaking.append(number)
    return leaking


def drop_leaking_text(lines: Sequence[str], attributes: ProductAttributes) -> list[str]:
    """``lines`` without :func:`leaking_lines`."""
    leaking = set(leaking_lines(lines, attributes))
    if leaking:
        logger.info(
            "dropped %d of %d text lines naming a held-out drug with one of its attribute values",
            len(leaking),
            len(lines),
        )
    return [line for number, line in enumerate(lines) if number not in leaking]


# -- the evaluation set -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EvaluationSet:
    """Scored pairs (title, value): ``positives`` and their matched ``negatives``; the drug-shuffle control
    ``shuffled_positives``/``shuffled_negatives`` (the same values against another held-out drug)."""

    positives: list[tuple[str, str]]
    negatives: list[tuple[str, str]]
    shuffled_positives: list[tuple[str, str]]
    shuffled_negatives: list[tuple[str, str]]


#: (|log popularity ratio|, |length difference|) tolerances tried in turn when matching a negative to a positive.
MATCHING_STEPS = (
    (0.0, 0),
    (0.1, 0),
    (0.1, 1),
    (0.25, 1),
    (0.25, 2),
    (0.5, 2),
    (1.0, 3),
    (2.0, 4),
    (math.inf, math.inf),
)


def training_popularity(attributes: ProductAttributes, attribute: str = ATTRIBUTE) -> dict[str, int]:
    """Value → how many titles have it for ``attribute`` in the training groups."""
    pool = attributes.pool(attribute)
    return {attributes.values[i]: int(c) for i, c in zip(pool.tolist(), attributes.pool_counts(attribute).tolist())}


def build_evaluation_set(
    attributes: ProductAttributes, per_pair: int = 4, seed: int = 0, attribute: str = ATTRIBUTE
) -> EvaluationSet:
    """Popularity- and length-matched negatives and the drug-shuffle control of ``attributes.held_out`` (module
    docstring)."""
    held_out = [(title, value) for title, name, value in attributes.held_out if name == attribute]
    if not held_out:
        raise ArtifactError(
            f"the product attributes hold no held-out {attribute} pair: pre-train with "
            f"method_data={{'pap_held_out': n}}"
        )
    popularity = training_popularity(attributes, attribute)
    names = sorted(popularity)
    counts = np.array([popularity[v] for v in names], dtype=np.float64)
    lengths = np.array([len(v) for v in names])
    rng = np.random.default_rng([seed, HELD_OUT_STREAM, 1])

    def draw(title: str, value: str) -> list[str] | None:
        true = attributes.true_values(title, attribute)
        allowed = np.array([v not in true for v in names])
        target_count, target_length = max(1, popularity.get(value, 0)), len(value)
        ratio = np.abs(np.log(counts / target_count))
        distance = np.abs(lengths - target_length)
        for count_slack, length_slack in MATCHING_STEPS:  # widened until a candidate exists
            options = np.flatnonzero(allowed & (ratio <= count_slack + 1e-9) & (distance <= length_slack))
            if len(options):
                weights = counts[options]
                chosen = options[rng.choice(len(options), size=per_pair, p=weights / weights.sum())]
                return [names[i] for i in chosen.tolist()]
        return None

    positives, negatives, drawn = [], [], []
    for title, value in held_out:
        values = draw(title, value)
        if values is None:
            continue
        positives.append((title, value))
        negatives += [(title, v) for v in values]
        drawn.append(values)
    shuffled_positives, shuffled_negatives = [], []
    order = rng.permutation(len(positives)).tolist()
    for rank, index in enumerate(order):
        value, values = positives[index][1], drawn[index]
        for offset in range(1, min(len(order), 20)):
            other = positives[order[(rank + offset) % len(order)]][0]
            true = attributes.true_values(other, attribute)
            if other != positives[index][0] and value not in true and not true & set(values):
                shuffled_positives.append((other, value))
                shuffled_negatives += [(other, v) for v in values]
                break
    return EvaluationSet(positives, negatives, shuffled_positives, shuffled_negatives)


# -- scorers and the AUC ------------------------------------------------------------------------------------------
def popularity_scores(
    attributes: ProductAttributes, pairs: Sequence[tuple[str, str]], attribute: str = ATTRIBUTE
) -> np.ndarray:
    """A drug-ignoring scorer: how many training titles have the value (higher = more likely true)."""
    popularity = training_popularity(attributes, attribute)
    return np.array([popularity.get(value, 0) for _, value in pairs], dtype=np.float64)


def length_scores(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """A drug-ignoring scorer: shorter values score higher."""
    return -np.array([len(value) for _, value in pairs], dtype=np.float64)


def auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """P(a positive scores above a negative), ties counting ½ (Mann–Whitney U / (n₊ n₋))."""
    from scipy.stats import rankdata

    positive, negative = np.asarray(positive, dtype=np.float64), np.asarray(negative, dtype=np.float64)
    if not len(positive) or not len(negative):
        raise ConfigurationError(f"an AUC needs positives and negatives, got {len(positive)} and {len(negative)}")
    ranks = rankdata(np.concatenate([positive, negative]))
    u = ranks[: len(positive)].sum() - len(positive) * (len(positive) + 1) / 2
    return float(u / (len(positive) * len(negative)))


def chance_interval(num_positive: int, num_negative: int, z: float = 1.96) -> tuple[float, float]:
    """The AUC's interval under scores independent of the label: 0.5 ± z·√((n₊ + n₋ + 1) / (12 n₊ n₋))."""
    half = z * math.sqrt((num_positive + num_negative + 1) / (12 * num_positive * num_negative))
    return 0.5 - half, 0.5 + half


# -- what a title-agnostic scorer reaches on PAP training ------------------------------------------------------
def _candidate_weights(attributes: ProductAttributes, negatives: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Attribute → (W₊, W₋) over its pool: the expected weight of each value among one drawn group's positive
    terms (1/|P| each) and negative terms (the law's probability), the group drawn uniformly among eligible ones."""
    from kgplm.methods.epplm.batching import own_in_pool

    eligible = [
        i for i, g in enumerate(attributes.groups) if len(attributes.pool(g.attribute)) > own_in_pool(attributes, i)
    ]
    share = 1.0 / len(eligible) if eligible else 0.0
    weights = {}
    for attribute in attributes.attributes:
        pool = attributes.pool(attribute)
        mass = attributes.pool_counts(attribute).astype(np.float64) if negatives == "frequency" else np.ones(len(pool))
        weights[attribute] = (np.zeros(len(pool)), np.zeros(len(pool)), mass)
    totals = {attribute: 0.0 for attribute in attributes.attributes}  # Σ share / Z_g per attribute
    for index in eligible:
        attribute = attributes.groups[index].attribute
        positive, negative, mass = weights[attribute]
        pool = attributes.pool(attribute)
        positives = np.searchsorted(pool, attributes.value_ids(index))
        positive[positives] += share / len(positives)
        own = attributes.own_value_ids(index)
        at = np.searchsorted(pool, own)
        own_in_pool = at[(at < len(pool)) & (pool[np.minimum(at, len(pool) - 1)] == own)]
        normaliser = mass.sum() - mass[own_in_pool].sum()
        totals[attribute] += share / normaliser
        negative[own_in_pool] -= share / normaliser  # this group never draws its own values
    return {
        attribute: (positive, mass * (totals[attribute] + negative))
        for attribute, (positive, negative, mass) in weights.items()
    }


def title_agnostic_baseline_loss(
    attributes: ProductAttributes, negatives: str = "frequency", margin: float = 4.0
) -> float:
    """The expected PAP loss (Eq. 3, averaged over groups) of the best scorer of (attribute, value) alone.

    Per value the loss −W₊ log q − W₋ log(1 − q), q = σ(γ − d) ∈ (0, σ(γ)] (d ≥ 0), is least at
    q = min(W₊ / (W₊ + W₋), σ(γ)). Exact for the collator's laws (``max_values`` subsets keep each
    positive's expected weight 1/|P|); a constant scorer gives 2 ln 2.
    """
    ceiling = 1.0 / (1.0 + math.exp(-margin))
    total = 0.0
    for positive, negative in _candidate_weights(attributes, negatives).values():
        both = positive + negative
        used = both > 0
        q = np.minimum(positive[used] / both[used], ceiling)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = -np.where(positive[used] > 0, positive[used] * np.log(q), 0.0) - np.where(
                negative[used] > 0, negative[used] * np.log1p(-q), 0.0
            )
        total += float(terms.sum())
    return total


def title_agnostic_auc(attributes: ProductAttributes, negatives: str = "frequency", score: str = "popularity") -> float:
    """The AUC of a title-agnostic scorer between PAP training positives and negatives (weighted as the loss
    weighs them): ``popularity`` (titles sharing the value) or ``length`` (shorter wins)."""
    scores, positive_mass, negative_mass = [], [], []
    for attribute, (positive, negative) in _candidate_weights(attributes, negatives).items():
        pool = attributes.pool(attribute)
        if score == "popularity":
            scores.append(attributes.pool_counts(attribute).astype(np.float64))
        else:
            scores.append(-np.array([len(attributes.values[i]) for i in pool.tolist()], dtype=np.float64))
        positive_mass.append(positive)
        negative_mass.append(negative)
    scores, positive, negative = (np.concatenate(parts) for parts in (scores, positive_mass, negative_mass))
    positive, negative = positive / positive.sum(), negative / negative.sum()
    order = np.argsort(scores, kind="stable")
    scores, positive, negative = scores[order], positive[order], negative[order]
    unique, starts = np.unique(scores, return_index=True)
    positive_at = np.add.reduceat(positive, starts)
    negative_at = np.add.reduceat(negative, starts)
    negative_below = np.cumsum(negative_at) - negative_at
    return float((positive_at * (negative_below + 0.5 * negative_at)).sum())


# -- the model's scores: a probe on frozen D, or the PAP head --------------------------------------------------
def _encode(model, tokenizer, first: list[str], second: list[str] | None, device, batch_size: int = 256):
    import torch

    parts = []
    with torch.no_grad():
        for start in range(0, len(first), batch_size):
            encoded = tokenizer(
                first[start : start + batch_size],
                second[start : start + batch_size] if second is not None else None,
                truncation=True,
                max_length=64 if second is not None else 20,
                padding=True,
                return_tensors="pt",
            ).to(device)
            parts.append(
                model.discriminate(encoded["input_ids"], encoded["attention_mask"], encoded.get("token_type_ids"))[:, 0]
            )
    return torch.cat(parts) if parts else torch.zeros(0)


def probe_scorer(
    model,
    tokenizer,
    attributes: ProductAttributes,
    steps: int = 300,
    groups_per_step: int = 16,
    seed: int = 0,
    device="cpu",
    attribute: str = ATTRIBUTE,
) -> Callable[[list], np.ndarray]:
    """A scorer of (title, value) pairs: D frozen, a fresh pooler + f trained with the PAP loss for ``steps``
    steps on the training ``attribute`` groups (popularity-matched negatives, never a withheld value)."""
    import torch

    from kgplm.methods.epplm.batching import negative_weights
    from kgplm.methods.epplm.modeling import attribute_distances, product_attribute_objective

    if not hasattr(model, "discriminate"):
        raise ConfigurationError(f"the PAP probe reads an ELECTRA discriminator; {type(model).__name__} has none")
    model.eval().to(device)
    groups = [
        i
        for i, g in enumerate(attributes.groups)
        if g.attribute == attribute and len(negative_weights(attributes, i, "frequency")[0])
    ]
    titles = [attributes.groups[i].title for i in groups]
    query_states = _encode(model, tokenizer, titles, [attribute] * len(groups), device)
    pool = attributes.pool(attribute)  # value ids of the attribute's values: only these are scored
    value_states = _encode(model, tokenizer, [attributes.values[i] for i in pool.tolist()], None, device)
    hidden = query_states.shape[1]
    torch.manual_seed(seed)
    probe = torch.nn.Sequential(
        torch.nn.Linear(hidden, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, hidden), torch.nn.GELU()
    ).to(device)
    optimizer = torch.optim.Adam(probe.parameters(), lr=1e-3)
    rng = np.random.default_rng([seed, HELD_OUT_STREAM, 2])
    laws = {}
    for _ in range(steps):
        rows, values, labels, members = [], [], [], []
        for row, choice in enumerate(rng.integers(len(groups), size=groups_per_step).tolist()):
            group = groups[choice]
            positives = attributes.value_ids(group)
            if len(positives) > 20:
                positives = rng.choice(positives, size=20, replace=False)
            if group not in laws:
                laws[group] = negative_weights(attributes, group, "frequency")
            pool, weights = laws[group]
            negatives = pool[rng.choice(len(pool), size=2 * len(positives), p=weights / weights.sum())]
            both = np.concatenate([positives, negatives])
            rows.append(choice)
            members.append(np.full(len(both), row))
            values.append(both)
            labels.append(np.concatenate([np.ones(len(positives)), np.zeros(len(negatives))]))
        value_ids = torch.from_numpy(np.searchsorted(pool, np.concatenate(values))).to(device)
        member = torch.from_numpy(np.concatenate(members)).to(device)
        distances = attribute_distances(
            probe(query_states[rows]),
            probe(value_states[value_ids]),
            member,
            torch.arange(len(value_ids), device=device),
        )
        loss = product_attribute_objective(
            distances, member, torch.from_numpy(np.concatenate(labels)).to(device), 4.0
        ).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def score(pairs: list[tuple[str, str]]) -> np.ndarray:
        with torch.no_grad():
            query = probe(_encode(model, tokenizer, [t for t, _ in pairs], [attribute] * len(pairs), device))
            value = probe(_encode(model, tokenizer, [v for _, v in pairs], None, device))
            return (-(query - value).abs().sum(-1)).cpu().numpy()

    return score


def evaluate_scorer(score: Callable[[list], np.ndarray], evaluation: EvaluationSet) -> dict[str, float]:
    """``auc`` on the matched set and ``shuffled`` on the drug-shuffle control of one scorer."""
    return {
        "auc": auc(score(evaluation.positives), score(evaluation.negatives)),
        "shuffled": auc(score(evaluation.shuffled_positives), score(evaluation.shuffled_negatives)),
    }


_PROBE_CACHE: dict[tuple[str, str], dict[str, float]] = {}


def _probe_result(model_dir, method_run, device) -> dict[str, float]:
    from kgplm.models import load_pretrained
    from kgplm.text.tokenization import load_tokenizer
    from kgplm.training.run import locate_model

    key = (str(Path(model_dir).resolve()), str(Path(method_run.path).resolve()))
    if key not in _PROBE_CACHE:
        path = method_run.kg_dir / "product_attributes.json"
        if not path.is_file():
            raise ArtifactError(f"{path} is missing: the PAP AUC needs an EP-PLM run's product attributes")
        attributes = ProductAttributes.load(path)
        evaluation = build_evaluation_set(attributes)
        model_path, tokenizer_dir, _ = locate_model(model_dir)
        model, tokenizer = load_pretrained(model_path), load_tokenizer(tokenizer_dir)
        _PROBE_CACHE[key] = evaluate_scorer(probe_scorer(model, tokenizer, attributes, device=device), evaluation)
    return _PROBE_CACHE[key]


def pap_auc(model_dir, method_run, *, device="cpu", progress: bool = False) -> float:
    """The ``PAP AUC`` evaluation (module docstring): the probe's AUC on the popularity- and length-matched set."""
    return _probe_result(model_dir, method_run, device)["auc"]


def pap_auc_shuffled(model_dir, method_run, *, device="cpu", progress: bool = False) -> float:
    """The drug-shuffle control of :func:`pap_auc`: at chance for a scorer that reads the drug or ignores it."""
    return _probe_result(model_dir, method_run, device)["shuffled"]
