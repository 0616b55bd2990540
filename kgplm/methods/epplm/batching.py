"""EP-PLM's batches: RTD text batches, and at PAP steps product-attribute groups with sampled negatives.

Which steps are PAP steps (:func:`is_pap_step`) depends on (seed, step) only, so every micro-batch
and process of a step agrees and a resumed run repeats the schedule. Steps are cut into blocks of
m = round(1/ρ) steps and each block holds exactly one PAP step, at a position drawn from (seed,
block): every step is a PAP step with probability 1/m (ρ for ρ = 5%), and PAP steps are evenly
spread (with independent draws, a given stretch of 60 steps would hold none with probability
0.95⁶⁰ ≈ 5%).

At a PAP step, the example at position i of the step draws from its own generator (seed, step,
i, PAP stream) one (title, attribute) group uniformly, up to ``pap_max_values`` of its values
(a random subset when it has more) as positives P, and k = ``pap_negative_ratio`` · |P| negatives
uniformly with replacement from the attribute's other values (the values any title has for that
attribute, minus all of this group's: a negative never equals a positive). Groups are drawn among
those whose attribute has a value they lack (the others cannot have negatives). Tensors (flat,
one row per candidate, PyG style):

    pap_query_ids / _mask / _type_ids     (groups, Lq)   [CLS] t [SEP] n [SEP]
    pap_value_ids / _mask                 (values, Lv)   each distinct value of the micro-batch once
    pap_candidate_group / _value / _label (candidates,)  group row, value row, 1 positive / 0 negative
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from kgplm.exceptions import ConfigurationError
from kgplm.methods.epplm.attributes import ProductAttributes
from kgplm.models.electra_batching import ElectraCollator
from kgplm.training.collator import Batch

__all__ = ["EpplmCollator", "is_pap_step", "PAP_STREAM"]

logger = logging.getLogger(__name__)

#: Appended to an example's (seed, step, position) to seed its PAP draws apart from its masking.
PAP_STREAM = 0x5041


def is_pap_step(seed: int, step: int, probability: float) -> bool:
    """Whether ``step`` is a PAP step: one step per block of round(1/``probability``) steps (module docstring)."""
    if probability <= 0:
        return False
    period = max(1, round(1 / probability))
    slot = int(np.random.default_rng([seed, step // period, PAP_STREAM]).integers(period))
    return step % period == slot


class EpplmCollator(ElectraCollator):
    """:class:`~kgplm.models.electra_batching.ElectraCollator` plus PAP groups at PAP steps."""

    def __init__(self, *, attributes: ProductAttributes, tokenizer, probability: float, schedule: str,
                 max_values: int, negative_ratio: int, query_length: int, value_length: int, **options) -> None:
        super().__init__(**options)
        self.attributes = attributes
        self.tokenizer = tokenizer
        self.probability = probability
        self.schedule = schedule
        self.max_values = max_values
        self.negative_ratio = negative_ratio
        self.query_length = query_length
        self.value_length = value_length
        # groups whose attribute has a value they lack: the only ones that can have negatives
        self.eligible = np.array([index for index, group in enumerate(attributes.groups)
                                  if len(attributes.pool(group.attribute)) > len(group.values)], dtype=np.int64)
        if len(attributes) and not len(self.eligible):
            logger.warning("no (title, attribute) group has a negative value (every attribute has a single group's "
                           "values): product attribute prediction will not run")

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
        pool = np.setdiff1d(self.attributes.pool(self.attributes.groups[group].attribute), positives,
                            assume_unique=True)  # the attribute's values this title lacks
        if len(positives) > self.max_values:
            positives = np.sort(rng.choice(positives, size=self.max_values, replace=False))
        negatives = pool[rng.integers(len(pool), size=self.negative_ratio * len(positives))]
        return group, positives, negatives

    def add_attribute_groups(self, batch: Batch, keys: np.ndarray) -> None:
        drawn = [self.sample_group(np.random.default_rng([*key.tolist(), PAP_STREAM])) for key in keys]
        value_ids = np.unique(np.concatenate([np.concatenate([pos, neg]) for _, pos, neg in drawn]))
        groups = [self.attributes.groups[group] for group, _, _ in drawn]
        queries = self.tokenizer([g.title for g in groups], [g.attribute for g in groups], truncation="longest_first",
                                 max_length=self.query_length, padding=True, return_tensors="pt")
        values = self.tokenizer([self.attributes.values[i] for i in value_ids.tolist()], truncation=True,
                                max_length=self.value_length, padding=True, return_tensors="pt")
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
