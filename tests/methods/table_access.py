"""A dispatch mode that records every new tensor with one row per entity (issue 30.5): a step of a
knowledge model over a large entity table must read the batch's rows, not make table-sized tensors."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class TableSizedAllocations(TorchDispatchMode):
    """Records every op that makes a new dense tensor whose first dimension is ``num_entities`` (a
    dense gradient, a mask or a copy of the table); views of the table (slices, detach), whose
    storage is an input's, are not new tensors."""

    def __init__(self, num_entities: int) -> None:
        super().__init__()
        self.num_entities, self.seen = num_entities, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor) and not a.is_sparse]
        for tensor in tree_leaves(out):
            if (
                isinstance(tensor, torch.Tensor)
                and tensor.ndim
                and tensor.shape[0] == self.num_entities
                and not tensor.is_sparse
                and all(tensor.untyped_storage().data_ptr() != a.untyped_storage().data_ptr() for a in inputs)
            ):
                self.seen.append(str(func))
        return out
