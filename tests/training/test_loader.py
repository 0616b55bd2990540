"""Steps → examples → processes → micro-batches, and collation in DataLoader workers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kgplm.training.collator import Batch
from kgplm.training.loader import StepBatches, step_loader
from kgplm.training.trainer import TrainerSettings, train_loop
from tests.methods.test_smedbert_batching import _collator as smedbert_collator
from tests.methods.test_smedbert_batching import _rows as smedbert_rows
from tests.training.test_trainer import Rows, _collator, _model


class ColumnRows:
    """A column dict indexed like a ``datasets.Dataset`` (``rows[indices]`` → column dict)."""

    def __init__(self, columns: dict[str, list]) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def __getitem__(self, indices):
        return {name: [values[i] for i in np.asarray(indices).tolist()] for name, values in self.columns.items()}


def _steps(dataset, collator, **options) -> StepBatches:
    return StepBatches(
        dataset, collator, **{"batch_size": 6, "micro_batch_size": 3, "seed": 0, "max_steps": 5, **options}
    )


def _assert_same(first: list[Batch], second: list[Batch]) -> None:
    assert len(first) == len(second)
    for a, b in zip(first, second):
        assert a.target_counts == b.target_counts
        assert set(a) == set(b)
        for name in a:
            assert a[name].dtype == b[name].dtype and torch.equal(a[name], b[name]), name


@pytest.mark.parametrize("method", ["mlm", "smedbert"])
def test_workers_give_the_same_batches_as_the_main_process(method):
    if method == "mlm":
        dataset, collator = Rows(), _collator()
    else:
        dataset, collator = ColumnRows(smedbert_rows()), smedbert_collator(num_entity_types=2, relational=True)
    steps = _steps(dataset, collator)
    in_process = list(step_loader(steps, 1, num_workers=0))
    in_workers = list(step_loader(steps, 1, num_workers=2))
    assert len(in_process) == len(in_workers) == 4  # steps 1 … 4, in order
    for a, b in zip(in_process, in_workers):
        _assert_same(a, b)
    _assert_same(in_process[0], steps[1])


def test_each_rank_takes_its_positions_of_the_global_batch():
    """The examples of two ranks, in rank order, are the examples of one process (same masks, same SOP)."""
    dataset, collator = Rows(), _collator()
    whole = _steps(dataset, collator, micro_batch_size=6)[2][0]
    parts = [_steps(dataset, collator, rank=rank, world_size=2)[2] for rank in range(2)]
    rows = [(micro, row) for part in parts for micro in part for row in range(len(micro["input_ids"]))]
    assert len(rows) == len(whole["input_ids"])
    for position, (micro, row) in enumerate(rows):
        length = int(micro["attention_mask"][row].sum())
        assert int(whole["attention_mask"][position].sum()) == length
        for name in ("input_ids", "labels", "token_type_ids"):
            assert torch.equal(micro[name][row, :length], whole[name][position, :length]), name
        assert micro["sentence_order_label"][row] == whole["sentence_order_label"][position]
    assert sum(micro.target_counts["mlm"] for part in parts for micro in part) == whole.target_counts["mlm"]


def test_the_loop_with_workers_logs_what_the_loop_without_them_logs(tmp_path):
    runs = []
    for workers in (0, 2):
        settings = TrainerSettings(
            max_steps=3,
            batch_size=4,
            gradient_accumulation_steps=2,
            learning_rate=1e-3,
            log_every=1,
            checkpoint_every=3,
            num_workers=workers,
        )
        runs.append(
            train_loop(
                _model(), Rows(), _collator(), output_dir=tmp_path / str(workers), settings=settings, progress=False
            )
        )
    assert runs[0] == runs[1]
