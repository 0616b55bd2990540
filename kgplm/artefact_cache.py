"""A content-addressed cache of the KG artefacts ``kgplm.train`` computes per graph.

PEPR neighbour tables and TransE / TransR embeddings depend on the graph and on a few settings, not
on the method, the output directory or (for PEPR) the seed; computed once, they serve every later run
on the same graph. Each entry is a directory named by its *key*, the SHA-256 of a canonical JSON
record of everything that changes the artefact:

* the graph's content hash (:func:`graph_content_hash`: its entity and relation IRIs in id order and
  its triples), so a graph that changed in any link gets new entries;
* for the entity linker, also the hash of the names it indexes (:func:`graph_names_hash`: every
  label and alias of every entity, the display names, the entity types) and, when its build reads
  the corpus (``linking={"common_word_share": …}`` drops the names common in it), the hash of the
  corpus texts as the run reads them;
* the artefact's kind (``neighbor_table``, ``transe``, ``transr``, ``linker``) and its format version;
* every setting the artefact was computed with, defaults included (for PEPR: ``k``, the mode asked
  for and its budget, the corpus' mention counts it starts from; for the embeddings: dimension,
  epochs, seed, the TransE table TransR starts from, the held-out triples left out …; for the linker:
  every linking option, defaults included, and the versions of its saved format and of jieba, whose
  dictionary the ``jieba`` word boundaries read).

A run takes an entry by hard-linking its files into the run directory (copying them where the cache
lies on another file system), so a run directory stays complete on its own while the data exist once
on disk; an entry is written to a temporary directory and renamed, so a half-written entry is never
read.

Location: the ``KGPLM_CACHE`` environment variable when set (``KGPLM_CACHE=off`` turns the cache off),
else ``$XDG_CACHE_HOME/kgplm`` or ``~/.cache/kgplm``, as Hugging Face keeps ``~/.cache/huggingface``.
``kgplm cache ls`` lists the entries, ``kgplm cache prune`` removes them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgplm._io import atomic_directory
from kgplm.exceptions import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = [
    "ArtefactCache",
    "CacheEntry",
    "cache_dir",
    "default_cache",
    "graph_content_hash",
    "graph_names_hash",
    "texts_hash",
    "CACHE_ENVIRONMENT",
]

logger = logging.getLogger(__name__)

#: The environment variable naming the cache directory (``off``, ``0``, ``none`` or ``false``: no cache).
CACHE_ENVIRONMENT = "KGPLM_CACHE"
_OFF = {"off", "0", "none", "false", "no"}

#: The version of an entry's layout (``entry.json`` beside ``artefact/``); part of every key.
CACHE_FORMAT_VERSION = 1


def cache_dir() -> Path | None:
    """The cache directory: ``$KGPLM_CACHE``, else ``$XDG_CACHE_HOME/kgplm``, else ``~/.cache/kgplm``; None when
    ``KGPLM_CACHE`` turns the cache off."""
    value = os.environ.get(CACHE_ENVIRONMENT)
    if value is not None and value.strip():
        return None if value.strip().lower() in _OFF else Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "kgplm"


def default_cache() -> "ArtefactCache | None":
    """The cache at :func:`cache_dir` (None when it is turned off)."""
    directory = cache_dir()
    return None if directory is None else ArtefactCache(directory)


def graph_content_hash(store: "KGStore") -> str:
    """SHA-256 of what the KG artefacts read of a graph: its entity and relation IRIs in id order and its
    (head, relation, tail) id triples."""
    import numpy as np

    from kgplm.kg.embeddings import store_fingerprint

    digest = hashlib.sha256(store_fingerprint(store).encode("ascii"))
    triples = np.ascontiguousarray(np.asarray(store.triples), dtype=np.int64)
    digest.update(f"{store.num_entities} {store.num_relations} {triples.shape}".encode("ascii"))
    digest.update(triples.tobytes())
    return digest.hexdigest()


def graph_names_hash(store: "KGStore") -> str:
    """SHA-256 of what an entity linker reads of a graph besides :func:`graph_content_hash`: every label and
    alias of every entity (their strings, in entity order), which of them is the display name, the
    entities' types and type names, the relation names (``roots`` follows ``is_a`` edges by name) and the
    IRIs merged into entities (``roots`` may name one)."""
    import numpy as np

    from kgplm._csr import row_subset

    arrays = store.arrays
    digest = hashlib.sha256()

    def add(name: str, array) -> None:
        array = np.ascontiguousarray(np.asarray(array))
        digest.update(f"{name} {array.dtype.str} {array.shape}\n".encode("ascii"))
        digest.update(array.tobytes())

    label_strings = np.asarray(arrays["label_strings"], dtype=np.int64)
    blob, offsets = store.strings.buffers()
    bounds, positions = row_subset(offsets, label_strings)  # the labels' UTF-8 bytes, in label order
    add("label_indptr", np.asarray(arrays["label_indptr"], dtype=np.int64))
    add("label_lengths", np.diff(bounds))
    add("label_bytes", np.asarray(blob)[positions])
    add("name_label", np.asarray(arrays["name_label"], dtype=np.int64))
    add("type_indptr", np.asarray(arrays["type_indptr"], dtype=np.int64))
    add("type_ids", np.asarray(arrays["type_ids"], dtype=np.int64))
    names = {"types": store.type_names, "relations": store.relation_names, "merged": store.merged_iris()}
    digest.update(_canonical(names).encode("utf-8"))
    return digest.hexdigest()


def texts_hash(texts) -> str:
    """SHA-256 of a sequence of texts (each one's UTF-8 length and bytes, in order): a corpus as a run read it."""
    digest = hashlib.sha256()
    count = 0
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(f"{len(data)}:".encode("ascii"))
        digest.update(data)
        count += 1
    digest.update(f"#{count}".encode("ascii"))
    return digest.hexdigest()


def _canonical(record: Mapping[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class CacheEntry:
    """One cached artefact: its directory, ``kind``, ``key`` and the record the key hashes."""

    path: Path
    kind: str
    key: str
    record: dict[str, Any]

    @property
    def artefact(self) -> Path:
        """The artefact itself (a file or a directory, as the run holds it)."""
        return self.path / "artefact"

    @property
    def size(self) -> int:
        """Bytes of the artefact's files."""
        target = self.artefact
        if target.is_file():
            return target.stat().st_size
        return sum(path.stat().st_size for path in target.rglob("*") if path.is_file())

    @property
    def last_used(self) -> float:
        """When a run last took or wrote the entry (the modification time of its ``used`` file)."""
        used = self.path / "used"
        return (used if used.exists() else self.path).stat().st_mtime


class ArtefactCache:
    """The entries under ``root``: ``root/<kind>/<key>/`` holding ``artefact`` and ``entry.json``."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"ArtefactCache({str(self.root)!r})"

    # -- keys ------------------------------------------------------------------------------------
    @staticmethod
    def key(kind: str, settings: Mapping[str, Any]) -> str:
        """The entry's name: SHA-256 of the canonical JSON of ``kind``, the cache format and ``settings``."""
        record = {"kind": kind, "cache_format": CACHE_FORMAT_VERSION, "settings": dict(settings)}
        return hashlib.sha256(_canonical(record).encode("utf-8")).hexdigest()

    def entry_path(self, kind: str, settings: Mapping[str, Any]) -> Path:
        return self.root / kind / self.key(kind, settings)

    # -- taking and giving -------------------------------------------------------------------------
    def fetch(self, kind: str, settings: Mapping[str, Any], target: str | os.PathLike) -> bool:
        """Put the cached artefact at ``target`` (hard links, or a copy) and return True; False when the
        cache holds none for these settings. ``target`` appears whole or not at all."""
        entry = self.entry_path(kind, settings)
        source = entry / "artefact"
        if not (entry / "entry.json").is_file() or not source.exists():
            return False
        _link_into(source, Path(target))
        _touch(entry / "used")
        logger.info("%s: taken from the cache (%s)", kind, entry)
        return True

    def put(self, kind: str, settings: Mapping[str, Any], source: str | os.PathLike) -> Path:
        """Add the artefact at ``source`` (a file or directory a run wrote) under these settings; returns the
        entry's directory. An entry that exists already is kept as it is."""
        entry = self.entry_path(kind, settings)
        if (entry / "entry.json").is_file():
            return entry
        source = Path(source)
        with atomic_directory(entry) as temporary:
            _link_into(source, temporary / "artefact")
            record = {
                "kind": kind,
                "key": entry.name,
                "cache_format": CACHE_FORMAT_VERSION,
                "settings": json.loads(_canonical(settings)),
            }
            (temporary / "entry.json").write_text(json.dumps(record, indent=1, ensure_ascii=False), encoding="utf-8")
            (temporary / "used").touch()
        logger.info("%s: added to the cache (%s)", kind, entry)
        return entry

    # -- listing and pruning -----------------------------------------------------------------------
    def entries(self, kind: str | None = None) -> list[CacheEntry]:
        """The complete entries, by kind and key."""
        if not self.root.is_dir():
            return []
        found = []
        for directory in sorted(self.root.glob("*/*")):
            record_path = directory / "entry.json"
            if directory.name.startswith(".") or not record_path.is_file():
                continue
            record = json.loads(record_path.read_text(encoding="utf-8"))
            if kind is None or record.get("kind") == kind:
                found.append(CacheEntry(directory, record.get("kind", directory.parent.name), directory.name, record))
        return found

    def prune(
        self, *, kind: str | None = None, older_than_days: float | None = None, everything: bool = False
    ) -> list[CacheEntry]:
        """Remove entries: those of ``kind`` (any kind when None) not used for ``older_than_days`` days, or all
        of them with ``everything=True``; also what an interrupted write left. Returns the removed entries.
        Runs that took an entry keep their hard-linked (or copied) files."""
        if older_than_days is None and not everything:
            raise ConfigurationError(
                "prune needs older_than_days (entries unused for that many days) or everything=True"
            )
        if older_than_days is not None and not older_than_days >= 0:
            raise ConfigurationError(f"older_than_days must be ≥ 0, got {older_than_days!r}")
        now = time.time()
        removed = [
            entry for entry in self.entries(kind) if everything or now - entry.last_used >= older_than_days * 86400.0
        ]
        for entry in removed:
            shutil.rmtree(entry.path, ignore_errors=True)
        if self.root.is_dir():  # temporary directories of writes that did not finish
            for directory in self.root.glob("*/.*.tmp-*"):
                shutil.rmtree(directory, ignore_errors=True)
        return removed


def _link_into(source: Path, target: Path) -> None:
    """Hard-link (or, across file systems, copy) the file or directory ``source`` to ``target``, atomically."""
    if source.is_dir():
        with atomic_directory(target) as temporary:
            for path in sorted(source.rglob("*")):
                destination = temporary / path.relative_to(source)
                if path.is_dir():
                    destination.mkdir(parents=True, exist_ok=True)
                else:
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    _link_file(path, destination)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.tmp-link-{os.getpid()}")
    temporary.unlink(missing_ok=True)
    try:
        _link_file(source, temporary)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _link_file(source: Path, destination: Path) -> None:
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


def _touch(path: Path) -> None:
    try:
        path.touch()
    except OSError:  # a read-only cache still serves its entries
        pass
