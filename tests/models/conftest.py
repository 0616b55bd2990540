"""A tiny SMedBERT configuration (hidden 32, 2 layers) and a hand-made batch with mentions and neighbours."""

from __future__ import annotations

import pytest
import torch

from kgplm.models import TINY_TEXT_ENCODER, KgplmConfig


def tiny_config(**overrides) -> KgplmConfig:
    fields = dict(method="smedbert", vocab_size=60, num_entities=24, num_relations=3, num_entity_types=2,
                  entity_dim=16, relation_dim=8, mnem_num_negatives=4, **TINY_TEXT_ENCODER)
    fields.update(overrides)
    return KgplmConfig(**fields)


def toy_batch(seed: int = 0) -> dict[str, torch.Tensor]:
    """Two sequences of 10 tokens; three mentions; six neighbour edges (one with no direct relation)."""
    generator = torch.Generator().manual_seed(seed)
    batch, length = 2, 10
    input_ids = torch.randint(5, 60, (batch, length), generator=generator)
    labels = torch.full((batch, length), -100)
    labels[0, 1:3] = input_ids[0, 1:3]  # mention 0 is wholly masked
    labels[1, 7] = input_ids[1, 7]
    input_ids[0, 1:3] = 4
    return dict(
        input_ids=input_ids,
        attention_mask=torch.tensor([[1] * 10, [1] * 8 + [0] * 2]),
        token_type_ids=torch.zeros(batch, length, dtype=torch.long),
        labels=labels,
        sentence_order_label=torch.tensor([0, 1]),
        mention_batch=torch.tensor([0, 0, 1]),
        mention_spans=torch.tensor([[1, 3], [4, 5], [2, 5]]),
        mention_entity_ids=torch.tensor([1, 2, 3]),
        mention_masked=torch.tensor([True, False, False]),
        neighbor_mention=torch.tensor([0, 0, 0, 1, 2, 2]),
        neighbor_entity_ids=torch.tensor([4, 5, 6, 7, 8, 9]),
        neighbor_relation_ids=torch.tensor([0, 1, -1, 2, 0, 1]),
        neighbor_directions=torch.tensor([0, 1, -1, 0, 1, 0]),
        neighbor_type_ids=torch.tensor([0, 1, -1, 0, 0, 1]),
        negative_entity_ids=torch.randint(0, 24, (6, 4), generator=generator),
        candidate_log_q=-torch.rand(6, 5, generator=generator),
    )


@pytest.fixture()
def batch() -> dict[str, torch.Tensor]:
    return toy_batch()
