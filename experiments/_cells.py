"""The replication table's cells: one small JSON per (row, pre-training seed, task, fine-tuning seed).

A cell holds one fine-tuned run's per-example test outcomes, its dev score beside the best constant
predictor's, every setting it depends on (its ``key``), the commit that computed it and the results
version of each method it involves (``study.MethodStudy.results_version``). Cells live under
``<cells>/<run key>/<row>/s<seed>-<task>-f<fine-tuning seed>-<hash of the key>.json``: the run key
hashes the settings every cell of a run shares, the file name the cell's own key, so a changed
setting (or a bumped results version, which is part of the key) names a new file and never reuses
an old one.

:func:`run_cells` computes the cells a plan lacks — in this process or in ``workers`` processes —
and writes each atomically (a temporary name renamed) the moment it is finished, so a killed run
loses only the cells in flight and the next run resumes where it stopped. :func:`check_versions`
refuses a set of cells whose results versions differ (for one method, or from the study's).

:func:`file_sha256` and :func:`tree_sha256` digest the data a cell reads (task files, the corpus and
graph sources, the base encoder's weights), so a cell key that holds them changes when a file's
content does, not only when a setting does.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from kgplm.exceptions import ArtifactError, ConfigurationError

__all__ = [
    "CELL_FORMAT",
    "CellJob",
    "key_hash",
    "file_sha256",
    "tree_sha256",
    "write_cell",
    "read_cell",
    "run_cells",
    "check_versions",
    "load_cells",
]

logger = logging.getLogger("replicate")
CELL_FORMAT = 1


def key_hash(key: dict) -> str:
    return hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]


_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's content (remembered per path, size and modification time in this process)."""
    path = Path(path)
    stat = path.stat()
    signature = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if signature not in _DIGESTS:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _DIGESTS[signature] = digest.hexdigest()
    return _DIGESTS[signature]


def tree_sha256(directory: Path) -> str:
    """One SHA-256 over every file under ``directory``: each file's path relative to it and content digest,
    in sorted order (a renamed, added, removed or edited file changes it)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ArtifactError(f"{directory}: not a directory to digest")
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(directory).as_posix()}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name)[:80]


@dataclass(frozen=True, eq=False)
class CellJob:
    """One cell to compute. ``key``: every setting its numbers depend on (the results versions
    included); ``results_versions``: method name → version; ``inputs``: what computing it needs
    beyond the key (paths), not part of its identity."""

    row: str
    seed: int
    task: str
    finetune_seed: int
    key: dict
    results_versions: dict
    inputs: dict = field(default_factory=dict)

    def path(self, root: Path) -> Path:
        return (
            Path(root) / _slug(self.row) / f"s{self.seed}-{self.task}-f{self.finetune_seed}-{key_hash(self.key)}.json"
        )

    def header(self) -> dict:
        return {
            "format": CELL_FORMAT,
            "row": self.row,
            "seed": self.seed,
            "task": self.task,
            "finetune_seed": self.finetune_seed,
            "key": self.key,
            "results_versions": self.results_versions,
        }


def write_cell(path: Path, record: dict) -> None:
    """Write ``record`` to ``path`` atomically (a reader sees the old file or the whole new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(record, handle, ensure_ascii=False)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def read_cell(path: Path) -> dict:
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ArtifactError(f"{path}: not a readable cell ({error})") from None
    missing = {"format", "row", "seed", "task", "finetune_seed", "key", "results_versions", "commit"} - set(record)
    if record.get("format") != CELL_FORMAT or missing:
        raise ArtifactError(
            f"{path}: not a cell of format {CELL_FORMAT} (format {record.get('format')!r}, missing {sorted(missing)})"
        )
    record["path"] = str(path)
    return record


def _compute_and_write(compute: Callable[[CellJob], dict], job: CellJob, path: Path, commit: str) -> dict:
    record = {**job.header(), "commit": commit, **compute(job)}
    write_cell(path, record)
    record["path"] = str(path)
    return record


def run_cells(
    jobs: Sequence[CellJob],
    compute: Callable[[CellJob], dict],
    root: Path,
    *,
    commit: str,
    workers: int = 1,
    max_new: int | None = None,
    initializer: Callable | None = None,
    initargs: tuple = (),
) -> list[dict]:
    """The record of every job, in order: read where its file exists, else ``compute(job)`` (a dict of
    the cell's measurements) written at once. ``workers`` > 1 computes in that many processes
    (``compute``, ``initializer`` and the jobs must then be picklable: module-level functions).
    ``max_new``: compute at most this many cells, then stop with :class:`RuntimeError` (a budget for
    a partial run; the finished cells stay)."""
    if workers < 1:
        raise ConfigurationError(f"workers must be at least 1, got {workers}")
    records: list[dict | None] = [None] * len(jobs)
    pending = []
    for index, job in enumerate(jobs):
        path = job.path(root)
        if path.is_file():
            records[index] = read_cell(path)
        else:
            pending.append(index)
    logger.info(
        "%d cells: %d found under %s, %d to compute with %d worker(s)",
        len(jobs),
        len(jobs) - len(pending),
        root,
        len(pending),
        workers,
    )
    budget_left = len(pending) if max_new is None else max_new
    todo, stopped = pending[:budget_left], len(pending) > budget_left
    if workers == 1 or len(todo) <= 1:
        if initializer is not None and todo:
            initializer(*initargs)
        for index in todo:
            records[index] = _compute_and_write(compute, jobs[index], jobs[index].path(root), commit)
    else:
        import multiprocessing

        context = multiprocessing.get_context("spawn")  # torch is not fork-safe once its threads exist
        with ProcessPoolExecutor(workers, mp_context=context, initializer=initializer, initargs=initargs) as pool:
            futures = {
                pool.submit(_compute_and_write, compute, jobs[index], jobs[index].path(root), commit): index
                for index in todo
            }
            for future in as_completed(futures):
                records[futures[future]] = future.result()
    if stopped:
        raise RuntimeError(
            f"stopped after {len(todo)} new cells (max_new); {len(pending) - len(todo)} remain: run again to resume"
        )
    return records


def load_cells(root: Path) -> list[dict]:
    """Every cell under ``root`` (e.g. to build a table from cells computed on several machines)."""
    return [read_cell(path) for path in sorted(Path(root).rglob("*.json"))]


def check_versions(records: Sequence[dict], current: dict[str, int] | None = None) -> None:
    """Refuse cells of different results versions: for one method across cells, or (given ``current``,
    method → the study's version) a cell computed at another version than the current one. The
    error names the cells."""
    seen: dict[str, dict[int, list[str]]] = {}
    for record in records:
        for method, version in record["results_versions"].items():
            seen.setdefault(method, {}).setdefault(version, []).append(record.get("path", record["row"]))
    problems = []
    for method, versions in seen.items():
        expected = None if current is None else current.get(method)
        if len(versions) > 1 or (expected is not None and set(versions) != {expected}):
            listing = "; ".join(
                f"version {version}: {len(paths)} cells, e.g. {', '.join(paths[:3])}"
                for version, paths in sorted(versions.items())
            )
            problems.append(f"{method} (study: {expected if expected is not None else 'not given'}) — {listing}")
    if problems:
        raise ArtifactError(
            "cells of different results versions cannot make one table: "
            + " | ".join(problems)
            + "; recompute the stale cells (their keys hold the version) or remove them"
        )
