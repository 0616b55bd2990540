"""EP-PLM's batches: RTD text batches, and at PAP steps product-attribute groups with sampled negatives.

Which steps are PAP steps (:func:`is_pap_step`) depends on (seed, step) only, so every micro-batch
and process of a step agrees and a resumed run repeats the schedule. Step s is a PAP step when
⌊(s + 1)·ρ + u⌋ > ⌊s·ρ + u⌋, with a phase u ∈ [0, 1) drawn from the seed: the first n steps hold
⌊n·ρ⌋ or ⌈n·ρ⌉ PAP steps for every n and every ρ (ρ = 0.15 gives 300 of 2,000 steps, not the
1/round(1/ρ) = 1/7 of blocks of round(1/ρ) steps), each step is a PAP step with probability ρ
over the phase, and PAP steps are evenly spread, ⌊1/ρ⌋ or ⌈1/ρ⌉ steps apart (with independent
draws, a given stretch of 60 steps would hold none with probability 0.95⁶⁰ ≈ 5% at ρ = 5%).

At a PAP step, the example at position i of the step draws from its own generator (seed, step,
i, PAP stream) one (title, attribute) group uniformly, up to ``pap_max_values`` of its values
(a random subset when it has more) as positives P, and k = ``pap_negative_ratio`` · |P| negatives
with replacement from the attribute's other values (the values any title has for that attribute,
minus all of this group's and its withheld ones: a negative is never true of the title, see
:class:`~kgplm.methods.epplm.attributes.ProductAttributes`). Groups are drawn among those whose
attribute has a value they lack (the others cannot have negatives). How negatives are drawn
(``pap_negatives``):

* ``"frequency"`` (the default): the value of a random triple of the same attribute — each
  value with probability ∝ how many titles have it, the same law the positives follow (a
  positive is a value of a random group, so a popular value is a positive of many groups).
* ``"uniform"``: uniform over the attribute's distinct values, as the paper's example and the
  authors' code (``random.choice`` over the distinct attribute values) do. Most distinct values
  belong to one title while positives are dominated by values many titles share, so a scorer
  that ignores the title — "how many titles have v" — separates positives from negatives (AUC
  0.92 on CMeKG's training batches, length alone 0.80) and PAP can be won without the title.
  :func:`kgplm.methods.epplm.evaluation.title_agnostic_baseline_loss` gives the loss such a
  scorer reaches under either law: PAP training has learnt something about titles only below it.

Tensors (flat, one row per candidate, PyG style):

    pap_query_ids / _mask / _type_ids     (groups, Lq)   [CLS] t [SEP] n [SEP]
    pap_value_ids / _mask                 (values, Lv)   each distinct value of the micro-batch once
    pap_candidate_group / _value / _label (candidates,)  group row, value row, 1 positive / 0 negative
"""

from __future__ import annotations

import logging
import math

import numpy as np
import torch

from kgplm.exceptions import ConfigurationError
from kgplm.methods.epplm.attributes import ProductAttributes
from kgplm.methods.epplm.configuration import PAP_NEGATIVES
from kgplm.models.electra_batching import ElectraCollator
from kgplm.training.collator import Batch

__all__ = ["EpplmCollator", "is_pap_step", "negative_weights", "own_in_pool", "PAP_STREAM", "PAP_NEGATIVES"]

logger = logging.getLogger(__name__)

#: Appended to an example's (seed, step, position) to seed its PAP draws apart from its masking.
PAP_STREAM = 0x5041


def is_pap_step(seed: int, step: int, probability: float) -> bool:
    """Whether ``step`` is a PAP step: a share ``probability`` of steps, evenly spread (module docstring)."""
    if probability <= 0:
        return False
    phase = float(np.random.default_rng([seed, PAP_STREAM]).random())
    return math.floor((step + 1) * probability + phase) > math.floor(step * probability + phase)


def negative_weights(attributes: ProductAttributes, group: int, negatives: str) -> tuple[np.ndarray, np.ndarray]:
    """(value ids, unnormalised probabilities) of the group's PAP negatives under law ``negatives`` (module
    docstring): the attribute's values minus the group's own and withheld ones."""
    attribute = attributes.groups[group].attribute
    pool = attributes.pool(attribute)
    keep = ~np.isin(pool, attributes.own_value_ids(group))
    if negatives == "frequency":
        weights = attributes.pool_counts(attribute)[keep].astype(np.float64)
    else:
        weights = np.ones(int(keep.sum()))
    return pool[keep], weights


def own_in_pool(attributes: ProductAttributes, group: int) -> int:
    """How many of the group's own and withheld values are in its attribute's pool."""
    pool, own = attributes.pool(attributes.groups[group].attribute), attributes.own_value_ids(group)
    at = np.searchsorted(pool, own)
    return int((pool[np.minimum(at, len(pool) - 1)] == own).sum()) if len(pool) else 0


class EpplmCollator(ElectraCollator):
    """:class:`~kgplm.models.electra_batching.ElectraCollator` plus PAP groups at PAP steps."""

    def __init__(
        self,
        *,
        attributes: ProductAttributes,
        tokenizer,
        probability: float,
        schedule: str,
        max_values: int,
        negative_ratio: int,
        query_length: int,
        value_length: int,
        negatives: str = "frequency",
        **options,
    ) -> None:
        super().__init__(**options)
        if negatives not in PAP_NEGATIVES:
            raise ConfigurationError(f"pap_negatives must be one of {PAP_NEGATIVES}, got {negatives!r}")
        self.negatives = negatives
        self.attributes = attributes
        self.tokenizer = tokenizer
        self.probability = probability
        self.schedule = schedule
        self.max_values = max_values
        self.negative_ratio = negative_ratio
        self.query_length = query_length
        self.value_length = value_length
        # groups whose attribute has a value they lack: the only ones that can have negatives
        self.eligible = np.array(
            [
                index
                for index, group in enumerate(attributes.groups)
                if len(attributes.pool(group.attribute)) > own_in_pool(attributes, index)
            ],
            dtype=np.int64,
        )
        if len(attributes) and not len(self.eligible):
            logger.warning(
                "no (title, attribute) group has a negative value (every attribute has a single group's "
                "values): product attribute prediction will not run"
            )

    def __call__(self, rows, example_seeds: np.ndarray) -> Batch:
        keys = np.asarray(example_seeds, dtype=np.int64).reshape(len(example_seeds), -1)
        if keys.shape[1] < 2:
            raise ConfigurationError("EP-PLM's collator needs (seed, step, position) seeds per example")
        pap = len(self.eligible) > 0 and is_pap_step(int(keys[0, 0]), int(keys[0, 1]), self.probability)
        if pap and self.schedule == "alternate":
            batch = Batch()
        else:
            batch = super().__call__(rows, example_seeds)
        if pap:
            self.add_attribute_groups(batch, keys)
        return batch

    def sample_group(self, rng: np.random.Generator) -> tuple[int, np.ndarray, np.ndarray]:
        """(group, positive value ids, negative value ids) of one example (module docstring)."""
        group = int(self.eligible[rng.integers(len(self.eligible))])
        positives = self.attributes.value_ids(group)
        pool, weights = negative_weights(self.attributes, group, self.negatives)
        if len(positives) > self.max_values:
            positives = np.sort(rng.choice(positives, size=self.max_values, replace=False))
        cumulative = np.cumsum(weights)
        drawn = np.searchsorted(
            cumulative, rng.random(self.negative_ratio * len(positives)) * cumulative[-1], side="right"
        )
        return group, positives, pool[np.minimum(drawn, len(pool) - 1)]

    def add_attribute_groups(self, batch: Batch, keys: np.ndarray) -> None:
        drawn = [self.sample_group(np.random.default_rng([*key.tolist(), PAP_STREAM])) for key in keys]
        value_ids = np.unique(np.concatenate([np.concatenate([pos, neg]) for _, pos, neg in drawn]))
        groups = [self.attributes.groups[group] for group, _, _ in drawn]
        queries = self.tokenizer(
            [g.title for g in groups],
            [g.attribute for g in groups],
            truncation="longest_first",
            max_length=self.query_length,
            padding=True,
            return_tensors="pt",
        )
        values = self.tokenizer(
            [self.attributes.values[i] for i in value_ids.tolist()],
            truncation=True,
            max_length=self.value_length,
            padding=True,
            return_tensors="pt",
        )
        candidate_group, candidate_value, candidate_label = [], [], []
        for row, (_, positives, negatives) in enumerate(drawn):
            both = np.concatenate([positives, negatives])
            candidate_group.append(np.full(len(both), row))
            candidate_value.append(np.searchsorted(value_ids, both))
            candidate_label.append(np.concatenate([np.ones(len(positives)), np.zeros(len(negatives))]))
        batch["pap_query_ids"] = queries["input_ids"]
        batch["pap_query_mask"] = queries["attention_mask"]
        batch["pap_query_type_ids"] = queries["token_type_ids"]
        batch["pap_value_ids"] = values["input_ids"]
        batch["pap_value_mask"] = values["attention_mask"]
        batch["pap_candidate_group"] = torch.from_numpy(np.concatenate(candidate_group).astype(np.int64))
        batch["pap_candidate_value"] = torch.from_numpy(np.concatenate(candidate_value).astype(np.int64))
        batch["pap_candidate_label"] = torch.from_numpy(np.concatenate(candidate_label).astype(np.int64))
        batch.target_counts["pap"] = len(drawn)
