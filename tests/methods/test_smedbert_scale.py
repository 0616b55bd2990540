"""SMedBERT with a large entity table (issue 30.5): a step reads the batch's rows of the frozen KG
tables and makes no tensor with a row per entity."""

from __future__ import annotations

import pytest
import torch

from kgplm.methods.smedbert import SmedbertForPreTraining
from tests.methods.conftest import tiny_config, toy_batch
from tests.methods.table_access import TableSizedAllocations

NUM_ENTITIES = 4000


@pytest.mark.parametrize("relational_encoder", [None, "rgcn"])
def test_a_pre_training_step_reads_only_the_batch_rows_of_the_entity_table(relational_encoder):
    """Default (frozen TransR tables, as the paper): forward and backward make no table-sized tensor,
    the table gets no gradient, and rows the batch does not name can be NaN without changing a loss."""
    torch.manual_seed(0)
    model = SmedbertForPreTraining(
        tiny_config(
            num_entities=NUM_ENTITIES,
            relational_encoder=relational_encoder,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
    )
    batch = toy_batch()
    recorder = TableSizedAllocations(NUM_ENTITIES)
    with recorder:
        output = model(**batch)
        output.loss.backward()
    assert recorder.seen == []
    assert model.kg.entities.grad is None
    named = torch.cat([batch["neighbor_entity_ids"], batch["mnem_entity_ids"], batch["mnem_negative_ids"].flatten()])
    with torch.no_grad():
        unread = torch.ones(NUM_ENTITIES, dtype=torch.bool)
        unread[named] = False
        model.kg.entities[unread] = float("nan")
        poisoned = model(**batch)
    for name, value in output.losses.items():
        assert torch.isfinite(poisoned.losses[name])
        torch.testing.assert_close(poisoned.losses[name], value.detach())
