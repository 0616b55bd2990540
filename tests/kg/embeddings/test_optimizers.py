"""The row-wise optimisers: numba kernels against torch index operations and torch.optim.SparseAdam."""

from __future__ import annotations

import pytest
import torch

from kgplm.kg.embeddings import kernels
from kgplm.kg.embeddings.optimizers import RowTable


@pytest.mark.parametrize("optimizer", ["sparse_adam", "adagrad", "sgd"])
@pytest.mark.parametrize(
    "constraint", [kernels.CONSTRAINT_NONE, kernels.CONSTRAINT_UNIT_SPHERE, kernels.CONSTRAINT_UNIT_BALL]
)
def test_numba_row_updates_equal_the_torch_reference(optimizer, constraint):
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(30, 5, generator=generator)
    tables = [
        RowTable(weight.clone(), optimizer=optimizer, learning_rate=0.05, constraint=constraint, use_kernels=flag)
        for flag in (True, False)
    ]
    touched = torch.zeros(30, dtype=torch.bool)
    for step in range(4):
        ids = torch.randint(0, 25, (12,), generator=generator)  # rows 25..29 are never used
        touched[ids] = True
        target = torch.randn(12, 5, generator=generator)
        for table in tables:
            rows, inverse = table.gather(ids)
            ((rows[inverse] - target) ** 2).sum().backward()
            table.step()
    torch.testing.assert_close(tables[0].weight, tables[1].weight, rtol=1e-5, atol=1e-6)
    # lazy updates: rows no batch used are exactly as they started
    assert torch.equal(tables[0].weight[~touched], weight[~touched])
    assert not torch.allclose(tables[0].weight[touched], weight[touched])


def test_lazy_adam_matches_torch_sparse_adam_on_touched_rows():
    weight = torch.randn(20, 4, generator=torch.Generator().manual_seed(0))
    embedding = torch.nn.Embedding.from_pretrained(weight.clone(), freeze=False, sparse=True)
    reference = torch.optim.SparseAdam(embedding.parameters(), lr=0.1)
    table = RowTable(weight.clone(), optimizer="sparse_adam", learning_rate=0.1, constraint=kernels.CONSTRAINT_NONE)
    for ids in ([1, 2, 2, 5], [5, 7], [1, 19, 0]):
        ids = torch.tensor(ids)
        reference.zero_grad()
        embedding(ids).pow(2).sum().backward()
        reference.step()
        rows, inverse = table.gather(ids)
        rows[inverse].pow(2).sum().backward()
        table.step()
    torch.testing.assert_close(table.weight, embedding.weight.detach(), rtol=1e-5, atol=1e-6)
