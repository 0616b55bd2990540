"""A compact, memory-mappable table of strings (UTF-8 blob plus offsets)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

__all__ = ["StringTable"]


class StringTable(Sequence[str]):
    """Immutable sequence of strings stored as one UTF-8 byte array and int64 offsets.

    Saved as two ``.npy`` files, so a loaded table is memory-mapped and decodes a string only
    when it is read: loading a store with millions of names costs no parsing time.
    """

    __slots__ = ("_blob", "_offsets")

    def __init__(self, blob: np.ndarray, offsets: np.ndarray) -> None:
        if offsets.ndim != 1 or len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(blob):
            raise ValueError("offsets must start at 0 and end at the blob length")
        self._blob = blob
        self._offsets = offsets

    @classmethod
    def from_strings(cls, strings: Iterable[str]) -> "StringTable":
        """Pack ``strings`` in order; one pass, holding only the growing blob (no list of encoded strings)."""
        blob = bytearray()
        ends = array("q")
        for text in strings:
            blob += text.encode("utf-8")
            ends.append(len(blob))
        offsets = np.zeros(len(ends) + 1, dtype=np.int64)
        if ends:
            offsets[1:] = np.frombuffer(ends, dtype=np.int64)
        return cls(np.frombuffer(bytes(blob), dtype=np.uint8), offsets)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = int(index)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"string index {index} out of range for a table of {len(self)}")
        start, end = self._offsets[index], self._offsets[index + 1]
        return self._blob[start:end].tobytes().decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        data = self._blob.tobytes()
        offsets = self._offsets.tolist()
        for start, end in zip(offsets[:-1], offsets[1:]):
            yield data[start:end].decode("utf-8")

    def buffers(self) -> tuple[np.ndarray, np.ndarray]:
        """``(blob, offsets)``: string ``i`` is ``blob[offsets[i]:offsets[i + 1]]`` in UTF-8 (read-only views)."""
        return self._blob, self._offsets

    def to_list(self) -> list[str]:
        return list(self)

    def save(self, directory: Path, stem: str) -> None:
        np.save(directory / f"{stem}.blob.npy", np.ascontiguousarray(self._blob))
        np.save(directory / f"{stem}.offsets.npy", self._offsets)

    @classmethod
    def load(cls, directory: Path, stem: str, mmap: bool = True) -> "StringTable":
        from kgplm._io import load_array

        blob = load_array(directory / f"{stem}.blob.npy", mmap=mmap, what=f"string table {stem!r}")
        offsets = load_array(directory / f"{stem}.offsets.npy", mmap=mmap, what=f"string table {stem!r}")
        if len(offsets) == 0 or int(offsets[-1]) != len(blob):
            from kgplm.exceptions import ArtifactError

            raise ArtifactError(
                f"{directory / f'{stem}.offsets.npy'}: its last offset does not end the "
                f"{len(blob)}-byte {stem}.blob.npy; the string table is damaged: rebuild it"
            )
        return cls(blob, offsets)
