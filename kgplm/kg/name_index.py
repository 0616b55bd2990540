"""Name → entity ids over compact arrays: what :meth:`KGStore.entity_id` looks names and IRIs up in.

A dict of every name and alias costs one Python string, one list and one dict slot per name:
about 250 bytes each, 4 GB for UMLS's 16 million strings. Here the names stay in the store's UTF-8
:class:`~kgplm.kg.strings.StringTable` and the index is a handful of integer arrays (about 50
bytes a name):

* **keys**: the distinct texts, in the order a dict filled label by label would hold them (the
  label strings in order of first use, then the local names of entities without a label); each
  key refers to its text by a string id of the store (or of ``extra``, the local names);
* **owners**: CSR by key of the entities carrying the text, in the old dict's order (labelled
  entities ascending, then unlabelled ones ascending);
* **exact lookup**: the keys sorted by a 64-bit FNV-1a hash of their UTF-8 bytes; a query is
  hashed, the keys with its hash found by binary search and compared by text, so a hash
  collision never returns a wrong entity;
* **case-insensitive lookup**: the same over the hash of ``text.casefold()``; every key whose
  case fold equals the query's contributes its owners, in key order, each entity once.

Lookups therefore return exactly what the dicts returned (tested against them on CMeKG and on a
generated UMLS set), and :meth:`KGStore.name_index` still builds the dict on request for the small
graphs whose callers want one.
"""

from __future__ import annotations

from collections.abc import Iterator

import numba
import numpy as np

from kgplm.kg.strings import StringTable

__all__ = ["NameIndex", "IriIndex", "fnv1a_hash", "hash_strings"]

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_CHUNK = 1 << 16  # keys case-folded per pass


@numba.njit(cache=True, nogil=True)
def _hash_slices(blob, starts, ends):  # pragma: no cover - compiled
    """64-bit FNV-1a of ``blob[starts[i]:ends[i]]`` for every i."""
    hashes = np.empty(starts.shape[0], dtype=np.uint64)
    for i in range(starts.shape[0]):
        value = _FNV_OFFSET
        for position in range(starts[i], ends[i]):
            value = (value ^ np.uint64(blob[position])) * _FNV_PRIME
        hashes[i] = value
    return hashes


@numba.njit(cache=True, nogil=True)
def _gather_separated(blob, starts, ends):  # pragma: no cover - compiled
    """``blob[starts[0]:ends[0]] + NUL + blob[starts[1]:ends[1]] + NUL + …`` (no NUL after the last)."""
    total = 0
    for i in range(starts.shape[0]):
        total += ends[i] - starts[i] + 1
    out = np.empty(max(total - 1, 0), dtype=np.uint8)
    cursor = 0
    for i in range(starts.shape[0]):
        if i:
            out[cursor] = 0
            cursor += 1
        for position in range(starts[i], ends[i]):
            out[cursor] = blob[position]
            cursor += 1
    return out


def hash_strings(blob: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """FNV-1a hashes of the byte slices ``blob[starts[i]:ends[i]]`` (uint64)."""
    if not len(starts):
        return np.zeros(0, dtype=np.uint64)
    return _hash_slices(
        np.asarray(blob, dtype=np.uint8), np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    )


def fnv1a_hash(text: str) -> np.uint64:
    """The hash :func:`hash_strings` gives the UTF-8 bytes of ``text`` (lone surrogates kept, so they match nothing)."""
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    return hash_strings(data, np.zeros(1, np.int64), np.full(1, len(data), np.int64))[0]


def _table_slices(table: StringTable, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    blob, offsets = table.buffers()
    ids = np.asarray(ids, dtype=np.int64)
    return blob, np.asarray(offsets[ids]), np.asarray(offsets[ids + 1])


def _casefold_hashes(table: StringTable, ids: np.ndarray) -> np.ndarray:
    """Hashes of ``table[i].casefold()`` for ``i`` in ``ids``, a chunk of texts per pass (no string per text held)."""
    blob, offsets = table.buffers()
    blob = np.asarray(blob, dtype=np.uint8)
    hashes = np.empty(len(ids), dtype=np.uint64)
    for first in range(0, len(ids), _CHUNK):
        chunk = np.asarray(ids[first : first + _CHUNK], dtype=np.int64)
        starts, ends = np.asarray(offsets[chunk]), np.asarray(offsets[chunk + 1])
        separated = _gather_separated(blob, starts, ends) if len(chunk) else np.zeros(0, np.uint8)
        if np.count_nonzero(separated == 0) != len(chunk) - 1:  # a text holds a NUL, the separator: one by one
            folded = [
                bytes(blob[s:e]).decode("utf-8").casefold().encode("utf-8")
                for s, e in zip(starts.tolist(), ends.tolist())
            ]
            data = np.frombuffer(b"".join(folded), dtype=np.uint8)
            lengths = np.fromiter(map(len, folded), dtype=np.int64, count=len(folded))
            folded_ends = np.cumsum(lengths)
            hashes[first : first + len(chunk)] = hash_strings(data, folded_ends - lengths, folded_ends)
            continue
        # casefold never makes or removes a NUL, so the folded texts stay NUL-separated
        data = np.frombuffer(separated.tobytes().decode("utf-8").casefold().encode("utf-8"), dtype=np.uint8)
        folded_ends = np.concatenate([np.flatnonzero(data == 0), [len(data)]]).astype(np.int64)
        folded_starts = np.concatenate([[0], folded_ends[:-1] + 1]).astype(np.int64)
        hashes[first : first + len(chunk)] = hash_strings(data, folded_starts, folded_ends)
    return hashes


class _SortedHashes:
    """Positions of a uint64 hash in a sorted copy: ``candidates(h)`` are the keys carrying hash h."""

    __slots__ = ("_hashes", "_keys")

    def __init__(self, hashes: np.ndarray) -> None:
        order = np.argsort(hashes, kind="stable")
        self._hashes = hashes[order]
        self._keys = order.astype(np.int64)

    def candidates(self, value: np.uint64) -> np.ndarray:
        low = int(np.searchsorted(self._hashes, value, side="left"))
        high = int(np.searchsorted(self._hashes, value, side="right"))
        return self._keys[low:high]

    @property
    def nbytes(self) -> int:
        return self._hashes.nbytes + self._keys.nbytes


class NameIndex:
    """Every name and alias of a store → the ids of the entities that carry it (see the module docstring).

    Built by :meth:`build` from the store's label arrays; read by :meth:`exact` and :meth:`casefolded`.
    """

    def __init__(
        self,
        strings: StringTable,
        extra: StringTable,
        key_refs: np.ndarray,
        num_string_keys: int,
        owner_indptr: np.ndarray,
        owners: np.ndarray,
    ) -> None:
        self._strings = strings
        self._extra = extra
        self._key_refs = key_refs  # key k: strings[key_refs[k]] when k < num_string_keys, else extra[key_refs[k]]
        self._num_string_keys = num_string_keys
        self._owner_indptr = owner_indptr
        self._owners = owners
        # the hash tables are built on the first lookup: readers of every key (the entity linker) need neither,
        # and the case-folded one costs a pass of Python strings over every name
        self._exact_table: _SortedHashes | None = None
        self._folded_table: _SortedHashes | None = None

    @classmethod
    def build(
        cls,
        strings: StringTable,
        label_indptr: np.ndarray,
        label_strings: np.ndarray,
        unlabelled: np.ndarray,
        local_names: list[str],
    ) -> "NameIndex":
        """The index of the labels (CSR ``label_indptr`` by entity over string ids ``label_strings``) and of
        ``local_names[i]``, the name of the label-less entity ``unlabelled[i]`` (ascending ids)."""
        label_strings = np.asarray(label_strings, dtype=np.int64)
        label_owners = np.repeat(np.arange(len(label_indptr) - 1, dtype=np.int64), np.diff(np.asarray(label_indptr)))
        used, first_use = np.unique(label_strings, return_index=True)
        string_keys = used[np.argsort(first_use, kind="stable")]  # distinct string ids by first use
        extra = StringTable.from_strings(local_names)
        # entries: the string keys, then the local names; equal texts (a local name equal to a label, or a
        # string table holding a text twice) merge into the first entry
        entry_hashes = np.concatenate(
            [
                hash_strings(*_table_slices(strings, string_keys)),
                hash_strings(*_table_slices(extra, np.arange(len(extra)))),
            ]
        )
        num_entries = len(entry_hashes)
        canonical = np.arange(num_entries, dtype=np.int64)
        order = np.argsort(entry_hashes, kind="stable")
        sorted_hashes = entry_hashes[order]
        same = np.flatnonzero(sorted_hashes[1:] == sorted_hashes[:-1])
        if len(same):

            def text(entry: int) -> str:
                return strings[int(string_keys[entry])] if entry < len(string_keys) else extra[entry - len(string_keys)]

            for run_start in np.unique(np.searchsorted(sorted_hashes, sorted_hashes[same], side="left")).tolist():
                run_end = int(np.searchsorted(sorted_hashes, sorted_hashes[run_start], side="right"))
                seen: dict[str, int] = {}
                for entry in sorted(order[run_start:run_end].tolist()):
                    canonical[entry] = seen.setdefault(text(entry), entry)
        keys = np.flatnonzero(canonical == np.arange(num_entries))  # ascending: the dict's insertion order
        key_of_entry = np.searchsorted(keys, canonical)
        key_of_string = np.full(len(strings), -1, dtype=np.int64)
        key_of_string[string_keys] = key_of_entry[: len(string_keys)]
        pair_keys = np.concatenate([key_of_string[label_strings], key_of_entry[len(string_keys) :]])
        pair_owners = np.concatenate([label_owners, np.asarray(unlabelled, dtype=np.int64)])
        phase = np.concatenate([np.zeros(len(label_owners), np.int8), np.ones(len(unlabelled), np.int8)])
        pair_order = np.lexsort((pair_owners, phase, pair_keys))
        pair_keys, pair_owners = pair_keys[pair_order], pair_owners[pair_order]
        keep = np.ones(len(pair_keys), dtype=bool)
        keep[1:] = (pair_keys[1:] != pair_keys[:-1]) | (pair_owners[1:] != pair_owners[:-1])
        pair_keys, pair_owners = pair_keys[keep], pair_owners[keep]
        owner_indptr = np.zeros(len(keys) + 1, dtype=np.int64)
        np.cumsum(np.bincount(pair_keys, minlength=len(keys)), out=owner_indptr[1:])
        is_string = keys < len(string_keys)
        key_refs = np.where(
            is_string,
            string_keys[np.minimum(keys, max(len(string_keys) - 1, 0))] if len(string_keys) else 0,
            keys - len(string_keys),
        )
        return cls(
            strings, extra, key_refs.astype(np.int64), int(is_string.sum()), owner_indptr, pair_owners.astype(np.int32)
        )

    @property
    def _exact(self) -> _SortedHashes:
        if self._exact_table is None:
            self._exact_table = _SortedHashes(self._key_hashes(casefold=False))
        return self._exact_table

    @property
    def _folded(self) -> _SortedHashes:
        if self._folded_table is None:
            self._folded_table = _SortedHashes(self._key_hashes(casefold=True))
        return self._folded_table

    def _key_hashes(self, casefold: bool) -> np.ndarray:
        parts = []
        for table, refs in (
            (self._strings, self._key_refs[: self._num_string_keys]),
            (self._extra, self._key_refs[self._num_string_keys :]),
        ):
            parts.append(_casefold_hashes(table, refs) if casefold else hash_strings(*_table_slices(table, refs)))
        return np.concatenate(parts)

    def __len__(self) -> int:
        return len(self._key_refs)

    def key(self, index: int) -> str:
        """The text of key ``index``."""
        ref = int(self._key_refs[index])
        return self._strings[ref] if index < self._num_string_keys else self._extra[ref]

    def keys(self) -> Iterator[str]:
        """Every distinct name, in the order of :meth:`KGStore.name_index`'s dict."""
        return (self.key(index) for index in range(len(self)))

    def owners(self, index: int) -> list[int]:
        """The entities carrying key ``index``'s text (labelled ones ascending, then label-less ones)."""
        return self._owners[self._owner_indptr[index] : self._owner_indptr[index + 1]].tolist()

    def find(self, text: str) -> int:
        """The key whose text is ``text``, or -1."""
        for key in self._exact.candidates(fnv1a_hash(text)).tolist():
            if self.key(key) == text:
                return key
        return -1

    def exact(self, text: str) -> list[int] | None:
        """The owners of ``text`` (None when no name or alias is exactly ``text``)."""
        key = self.find(text)
        return None if key < 0 else self.owners(key)

    def casefolded(self, text: str) -> list[int]:
        """The owners of every name whose case fold equals ``text.casefold()``, in key order, each once."""
        folded = text.casefold()
        found: list[int] = []
        for key in sorted(self._folded.candidates(fnv1a_hash(folded)).tolist()):
            if self.key(key).casefold() == folded:
                found.extend(owner for owner in self.owners(key) if owner not in found)
        return found

    def to_dict(self) -> dict[str, list[int]]:
        """The index as the ``{name: [entity ids]}`` dict (one Python object per name: small graphs only)."""
        return {self.key(index): self.owners(index) for index in range(len(self))}

    def key_texts(self) -> tuple[StringTable, np.ndarray, StringTable, int]:
        """``(strings, key_refs, extra, num_string_keys)``: where each key's text lives, for bulk readers
        (the entity linker normalises the names chunk by chunk from these)."""
        return self._strings, self._key_refs, self._extra, self._num_string_keys

    def owner_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """``(owner_indptr, owners)``: key ``k``'s entities are ``owners[owner_indptr[k]:owner_indptr[k + 1]]``."""
        return self._owner_indptr, self._owners

    @property
    def nbytes(self) -> int:
        """Bytes of the index's own arrays (the store's strings excluded), counting the hash tables built so far:
        asking the size builds none (the store logs it after every build)."""
        tables = [table for table in (self._exact_table, self._folded_table) if table is not None]
        return (
            self._key_refs.nbytes
            + self._owner_indptr.nbytes
            + self._owners.nbytes
            + sum(table.nbytes for table in tables)
            + sum(part.nbytes for part in self._extra.buffers())
        )


class IriIndex:
    """Entity IRI → id over the store's IRI table (hashes sorted, verified by text), plus merged IRIs."""

    def __init__(self, iris: StringTable, merged: dict[str, int]) -> None:
        self._iris = iris
        self._merged = merged
        self._sorted = _SortedHashes(hash_strings(*_table_slices(iris, np.arange(len(iris)))))

    def get(self, iri: str) -> int | None:
        if iri in self._merged:  # merged nodes resolve to their entity
            return self._merged[iri]
        matches = [entity for entity in self._sorted.candidates(fnv1a_hash(iri)).tolist() if self._iris[entity] == iri]
        return max(matches) if matches else None  # as {iri: i for i, iri in ...}: a repeated IRI keeps its last id

    @property
    def nbytes(self) -> int:
        return self._sorted.nbytes
