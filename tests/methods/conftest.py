"""Tiny SMedBERT configurations and hand-made batches (hidden 32, 2 layers)."""

from __future__ import annotations

import pytest
import torch

from kgplm.methods.smedbert import SmedbertConfig
from kgplm.models import TINY_TEXT_ENCODER


def tiny_config(**overrides) -> SmedbertConfig:
    fields = dict(
        vocab_size=60,
        num_entities=24,
        num_relations=3,
        num_entity_types=2,
        entity_dim=16,
        relation_dim=8,
        mnem_num_negatives=4,
        neighbor_candidates="any",
        **TINY_TEXT_ENCODER,
    )
    fields.update(overrides)
    return SmedbertConfig(**fields)


def knowledge_batch(seed: int = 0) -> dict[str, torch.Tensor]:
    """The encoder's inputs: two sequences of 10 tokens; three knowledge mentions, six neighbour edges
    (one with no direct relation), as at fine-tuning."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, 60, (2, 10), generator=generator)
    return dict(
        input_ids=input_ids,
        attention_mask=torch.tensor([[1] * 10, [1] * 8 + [0] * 2]),
        token_type_ids=torch.zeros(2, 10, dtype=torch.long),
        mention_batch=torch.tensor([0, 0, 1]),
        mention_spans=torch.tensor([[1, 3], [4, 5], [2, 5]]),
        neighbor_mention=torch.tensor([0, 0, 0, 1, 2, 2]),
        neighbor_entity_ids=torch.tensor([4, 5, 6, 7, 8, 9]),
        neighbor_relation_ids=torch.tensor([0, 1, -1, 2, 0, 1]),
        neighbor_directions=torch.tensor([0, 1, -1, 0, 1, 0]),
        neighbor_type_ids=torch.tensor([0, 1, -1, 0, 0, 1]),
    )


def toy_batch(seed: int = 0) -> dict[str, torch.Tensor]:
    """A pre-training batch: mention (0, [1, 3)) is masked — a knowledge mention with three neighbour
    edges (one "related") — and mentions (0, [4, 5)) and (1, [2, 5)) are MNeM targets with three edges."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, 60, (2, 10), generator=generator)
    labels = torch.full((2, 10), -100)
    labels[0, 1:3] = input_ids[0, 1:3]  # the knowledge mention is wholly masked
    labels[1, 7] = input_ids[1, 7]
    input_ids[0, 1:3] = 4
    return dict(
        input_ids=input_ids,
        attention_mask=torch.tensor([[1] * 10, [1] * 8 + [0] * 2]),
        token_type_ids=torch.zeros(2, 10, dtype=torch.long),
        labels=labels,
        sentence_order_label=torch.tensor([0, 1]),
        mention_batch=torch.tensor([0]),
        mention_spans=torch.tensor([[1, 3]]),
        mention_masked=torch.tensor([True]),
        neighbor_mention=torch.tensor([0, 0, 0]),
        neighbor_entity_ids=torch.tensor([4, 5, 6]),
        neighbor_relation_ids=torch.tensor([0, 1, -1]),
        neighbor_directions=torch.tensor([0, 1, -1]),
        neighbor_type_ids=torch.tensor([0, 1, -1]),
        mnem_mention_batch=torch.tensor([0, 1]),
        mnem_mention_spans=torch.tensor([[4, 5], [2, 5]]),
        mnem_edge_mention=torch.tensor([0, 1, 1]),
        mnem_entity_ids=torch.tensor([7, 8, 9]),
        mnem_relation_ids=torch.tensor([2, 0, -1]),
        mnem_directions=torch.tensor([0, 1, -1]),
        mnem_negative_ids=torch.randint(0, 24, (3, 4), generator=generator),
        mnem_log_q=-torch.rand(3, 5, generator=generator),
    )


@pytest.fixture()
def batch() -> dict[str, torch.Tensor]:
    return toy_batch()
