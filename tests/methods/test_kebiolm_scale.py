"""KeBioLM with large entity tables (issue 30.5): the sampled linking softmax against the full one,
its sampling correction, chunked exactness in bf16, and sparse row-wise updates of the table."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kgplm.methods.kebiolm import KebiolmForPreTraining
from kgplm.methods.kebiolm.retrieval import chunked_logsumexp, linking_loss, top_k_by_dot_product
from kgplm.training.trainer import TrainerSettings, build_optimizer, optimizer_step
from tests.methods.table_access import TableSizedAllocations
from tests.methods.test_kebiolm import tiny_batch, tiny_config


def _problem(seed: int, mentions: int = 6, entities: int = 40, dim: int = 8):
    generator = torch.Generator().manual_seed(seed)
    queries = torch.randn(mentions, dim, generator=generator, dtype=torch.float64, requires_grad=True)
    table = torch.randn(entities, dim, generator=generator, dtype=torch.float64, requires_grad=True)
    gold = torch.randint(0, entities, (mentions,), generator=generator)
    return queries, table, gold


def test_sampled_loss_equals_the_full_softmax_when_the_candidates_cover_every_entity():
    queries, table, gold = _problem(0)
    retrieved = top_k_by_dot_product(queries, table, table.shape[0], 16)[1]  # k = every entity
    torch.manual_seed(0)
    sampled = linking_loss(queries, table, gold, softmax="sampled", retrieved=retrieved, num_negatives=64)
    reference = (torch.logsumexp(queries @ table.T, 1) - (queries * table[gold]).sum(1)).mean()
    torch.testing.assert_close(sampled, reference)
    torch.testing.assert_close(
        torch.autograd.grad(sampled, (queries, table)), torch.autograd.grad(reference, (queries, table))
    )


def test_sampled_normaliser_is_unbiased_for_the_full_one():
    """E[Ẑ_m] = Z_m: the mean of exp(L̂_m + s_gold) over many draws of the negatives approaches the full
    normaliser (without the log-Q correction the tail would be underestimated by |E| / R)."""
    queries, table, gold = _problem(1, mentions=1, entities=300)
    queries, table = queries.detach() * 0.5, table.detach()
    retrieved = top_k_by_dot_product(queries, table, 5, 64)[1]
    gold_score = (queries * table[gold]).sum()
    torch.manual_seed(0)
    estimates = torch.stack(
        [
            torch.exp(
                linking_loss(queries, table, gold, softmax="sampled", retrieved=retrieved, num_negatives=30)
                + gold_score
            )
            for _ in range(3000)
        ]
    )
    full = torch.exp(torch.logsumexp(queries @ table.T, 1))[0]
    assert estimates.mean().item() == pytest.approx(full.item(), rel=0.02)


def test_sampled_loss_removes_accidental_hits_and_counts_each_exact_entity_once():
    """Draws that hit D_m (here all of them: D_m = the retrieved 3 and the golds) add nothing; an entity
    both retrieved and gold is counted once."""
    queries, table, gold = _problem(2, mentions=2, entities=4)
    retrieved = torch.tensor([[0, 1, 2], [3, 2, 1]])
    gold = torch.tensor([3, 0])  # D_0 = {0,1,2,3}, D_1 = {0,1,2,3}
    torch.manual_seed(0)
    sampled = linking_loss(queries, table, gold, softmax="sampled", retrieved=retrieved, num_negatives=7)
    torch.testing.assert_close(sampled, F.cross_entropy(queries @ table.T, gold))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_chunked_exact_softmax_equals_the_unchunked_one_under_autocast(dtype):
    """The default Eq. 10 under mixed precision: chunked (no mentions × entities matrix) and computed in
    fp32 from the low-precision queries, values and gradients equal to the unchunked fp32 reference."""
    generator = torch.Generator().manual_seed(3)
    queries = torch.randn(5, 8, generator=generator).to(dtype).requires_grad_()
    table = torch.randn(37, 8, generator=generator, requires_grad=True)
    gold = torch.randint(0, 37, (5,), generator=generator)
    with torch.autocast("cpu", dtype=dtype):
        chunked = linking_loss(queries, table, gold, softmax="full", chunk_size=4)
    reference = F.cross_entropy(queries.float() @ table.T, gold)
    torch.testing.assert_close(chunked, reference)
    for ours, theirs in zip(
        torch.autograd.grad(chunked, (queries, table)), torch.autograd.grad(reference, (queries, table))
    ):
        torch.testing.assert_close(ours.float(), theirs.float(), rtol=1e-2, atol=1e-3)
    torch.testing.assert_close(chunked_logsumexp(queries, table, 4), chunked_logsumexp(queries, table, 37))


def _labels(batch):
    labels = torch.full((2, 8), -100)
    labels[0, 1:3] = batch["input_ids"][0, 1:3]
    detection = torch.tensor([[-100, 1, 2, 0, 0, 1, 2, -100], [-100, 0, 0, -100, -100, -100, -100, -100]])
    return labels, detection


def test_sampled_pre_training_step_touches_only_the_rows_it_reads():
    """linking_softmax="sampled": forward and backward make no tensor with a row per entity, the table's
    gradient is sparse, and the trainer's optimiser step changes exactly the rows read (retrieved,
    golds, draws), leaving every other row and its moments as they were."""
    num_entities = 3000
    torch.manual_seed(0)
    model = KebiolmForPreTraining(
        tiny_config(
            num_entities=num_entities, linking_softmax="sampled", linking_negatives=16, retrieval_chunk_size=512
        )
    )
    batch = tiny_batch()
    labels, detection = _labels(batch)
    settings = TrainerSettings(learning_rate=1e-2, weight_decay=0.01)
    optimizer = build_optimizer(model, settings)
    before = model.entity_memory.weight.detach().clone()
    recorder = TableSizedAllocations(num_entities)
    torch.manual_seed(1)
    with recorder:
        output = model(**batch, labels=labels, detection_labels=detection)
        output.loss.backward()
    assert recorder.seen == []
    gradient = model.entity_memory.weight.grad
    assert gradient.is_sparse
    read = torch.unique(gradient.coalesce().indices()[0])
    # the rows read: 2 mentions × 5 retrieved, 2 golds, ≤ 16 draws; a few dozen of 3000
    assert 2 <= len(read) <= 2 * 5 + 2 + 16
    assert set(batch["mention_entity_ids"].tolist()) <= set(read.tolist())
    optimizer_step(optimizer, [p for p in model.parameters() if p.requires_grad], 1.0, None, 0)
    after = model.entity_memory.weight.detach()
    changed = torch.nonzero((after != before).any(1)).flatten()
    assert torch.equal(changed, read)
    state = optimizer.state[model.entity_memory.weight]
    untouched = torch.ones(num_entities, dtype=torch.bool)
    untouched[read] = False
    assert not state["exp_avg"][untouched].any()


def test_exact_softmax_keeps_dense_gradients_and_adamw():
    """The default (exact Eq. 10): the table's gradient is dense and every row moves (AdamW's decay)."""
    torch.manual_seed(0)
    model = KebiolmForPreTraining(tiny_config(num_entities=50))
    assert model.entity_memory.sparse_gradients is False
    batch = tiny_batch()
    labels, detection = _labels(batch)
    model(**batch, labels=labels, detection_labels=detection).loss.backward()
    assert not model.entity_memory.weight.grad.is_sparse


def test_the_approximate_softmax_logs_the_exact_linking_loss():
    """``el_exact_loss`` under the sampled softmax is the exact model's L_EL for the same weights."""
    torch.manual_seed(0)
    sampled = KebiolmForPreTraining(tiny_config(num_entities=200, linking_softmax="sampled", linking_negatives=8))
    exact = KebiolmForPreTraining(tiny_config(num_entities=200))
    exact.load_state_dict(sampled.state_dict())
    batch = tiny_batch()
    labels, detection = _labels(batch)
    torch.manual_seed(1)
    approximate = sampled(**batch, labels=labels, detection_labels=detection)
    reference = exact(**batch, labels=labels, detection_labels=detection)
    torch.testing.assert_close(approximate.metrics["el_exact_loss"], reference.losses["el"].detach())
    assert "el_exact_loss" not in reference.metrics
