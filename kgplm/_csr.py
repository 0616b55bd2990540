"""Selecting rows of CSR-laid-out arrays (``indptr`` over flat entries): shared by PEPR's candidate lists
and the entity linker's candidate table."""

from __future__ import annotations

import numpy as np

__all__ = ["row_subset"]


def row_subset(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR pointers over ``rows`` (in the order given, repeats allowed) and the positions of their entries
    in the full arrays. Reads ``indptr`` only at ``rows`` and ``rows + 1``, so it costs the rows selected,
    not the table (``indptr`` may be a memory-mapped array of millions of rows)."""
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    starts = np.asarray(indptr[rows], dtype=np.int64)
    counts = np.asarray(indptr[rows + 1], dtype=np.int64) - starts
    sub_indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(counts, out=sub_indptr[1:])
    # (entries,): row start in the full arrays + offset inside the row
    positions = np.repeat(starts - sub_indptr[:-1], counts) + np.arange(sub_indptr[-1])
    return sub_indptr, positions
