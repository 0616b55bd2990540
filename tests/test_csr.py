"""kgplm._csr.row_subset against rows picked by hand from a small CSR table."""

from __future__ import annotations

import numpy as np

from kgplm._csr import row_subset


def test_row_subset_by_hand() -> None:
    indptr = np.array([0, 2, 2, 5, 6])  # rows: [10, 11], [], [12, 13, 14], [15]
    values = np.arange(10, 16)
    sub_indptr, positions = row_subset(indptr, np.array([2, 1, 0, 2, 3]))
    assert sub_indptr.tolist() == [0, 3, 3, 5, 8, 9]
    assert values[positions].tolist() == [12, 13, 14, 10, 11, 12, 13, 14, 15]
    empty_indptr, empty_positions = row_subset(indptr, np.zeros(0, dtype=np.int64))
    assert empty_indptr.tolist() == [0] and empty_positions.tolist() == []
