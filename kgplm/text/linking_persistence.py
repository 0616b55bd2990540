"""How an :class:`~kgplm.text.linking.EntityLinker` is held and saved: integer arrays, memory-mapped on load.

A linker over UMLS holds millions of dictionary entries. Each entry's ranked candidates are one CSR
table (``indptr`` + entity ids, :class:`CandidateTable`) rather than a tuple per entry, the patterns
one UTF-8 :class:`~kgplm.kg.strings.StringTable`, and the trie the kernels walk a few flat arrays.
``save`` writes them as ``.npy`` files and a JSON manifest (no pickle) to a temporary directory
renamed when complete; ``load`` memory-maps them, so loading reads no array: the pages a text's
matching touches are read from disk when touched.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kgplm._csr import row_subset
from kgplm._io import atomic_directory, load_array
from kgplm.exceptions import ArtifactError, MissingFileError
from kgplm.kg.strings import StringTable

__all__ = ["CandidateTable", "LINKER_FORMAT_VERSION", "save_linker_arrays", "load_linker_arrays"]

#: 2: 8-byte trie node rows; capitals-only entries and the segmentation words' weights in their own arrays
LINKER_FORMAT_VERSION = 2


class CandidateTable(Sequence[tuple[int, ...]]):
    """Entry ``i``'s candidate entities, best first: ``entities[indptr[i]:indptr[i + 1]]`` (read as a tuple)."""

    __slots__ = ("indptr", "entities")

    def __init__(self, indptr: np.ndarray, entities: np.ndarray) -> None:
        self.indptr = indptr
        self.entities = entities

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[int]]) -> "CandidateTable":
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        entities = np.fromiter((entity for row in rows for entity in row), dtype=np.int64, count=int(indptr[-1]))
        return cls(indptr, entities)

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return tuple(self.entities[self.indptr[index] : self.indptr[index + 1]].tolist())

    def rows(self, indices: np.ndarray) -> list[tuple[int, ...]]:
        """``[self[i] for i in indices]`` in a few numpy calls: one gather of every row's entities, then one
        list slice per row (indexing the arrays once per mention took a fifth to a third of ``link()`` at 4M
        UMLS-shaped concepts)."""
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        if len(indices) <= 4:  # a short document's few mentions: the numpy calls below would cost more
            return [self[index] for index in indices.tolist()]
        bounds, positions = row_subset(self.indptr, indices)
        flat = self.entities[positions].tolist()
        edges = bounds.tolist()
        return [tuple(flat[begin:end]) for begin, end in zip(edges, edges[1:])]

    def best(self) -> np.ndarray:
        """The first (best) candidate of every entry."""
        return np.asarray(self.entities[self.indptr[:-1]], dtype=np.int64)


def save_linker_arrays(
    directory: str | Path,
    manifest: dict,
    patterns: StringTable,
    candidates: CandidateTable,
    best_entity: np.ndarray,
    automaton: tuple[np.ndarray, ...],
) -> Path:
    """Write a linker's arrays and ``manifest.json`` atomically (temp directory + rename)."""
    directory = Path(directory)
    with atomic_directory(directory) as temporary:
        patterns.save(temporary, "patterns")
        np.save(temporary / "candidate_indptr.npy", np.ascontiguousarray(candidates.indptr))
        np.save(temporary / "candidate_entities.npy", np.ascontiguousarray(candidates.entities))
        np.save(temporary / "best_entity.npy", np.ascontiguousarray(best_entity))
        for index, array_ in enumerate(automaton):
            np.save(temporary / f"automaton_{index}.npy", np.ascontiguousarray(array_))
        record = {**manifest, "format_version": LINKER_FORMAT_VERSION, "automaton_arrays": len(automaton)}
        with open(temporary / "manifest.json", "w", encoding="utf-8") as handle:
            json.dump(record, handle, ensure_ascii=False, indent=1)
    return directory


def load_linker_arrays(directory: str | Path, mmap: bool = True):
    """``(manifest, patterns, candidates, best_entity, automaton)`` of a saved linker, memory-mapped unless
    ``mmap=False``."""
    directory = Path(directory)
    if not directory.is_dir():
        raise MissingFileError(directory, "saved entity linker directory")
    manifest_path = directory / "manifest.json"
    if not manifest_path.is_file():
        raise ArtifactError(f"{directory} is not a saved EntityLinker: manifest.json is missing")
    with open(manifest_path, encoding="utf-8") as handle:
        manifest = json.load(handle)
    if manifest.get("format_version") != LINKER_FORMAT_VERSION:
        raise ArtifactError(
            f"{manifest_path}: linker format version {manifest.get('format_version')!r}, "
            f"expected {LINKER_FORMAT_VERSION}"
        )
    mode = "r" if mmap else None

    def array(name: str) -> np.ndarray:
        return load_array(directory / f"{name}.npy", mmap=mode is not None, what="saved EntityLinker")

    patterns = StringTable.load(directory, "patterns", mmap)
    candidates = CandidateTable(array("candidate_indptr"), array("candidate_entities"))
    automaton = tuple(array(f"automaton_{index}") for index in range(int(manifest["automaton_arrays"])))
    if len(candidates) != len(patterns):
        raise ArtifactError(
            f"saved EntityLinker at {directory}: {len(patterns)} patterns but {len(candidates)} candidate rows"
        )
    return manifest, patterns, candidates, array("best_entity"), automaton
