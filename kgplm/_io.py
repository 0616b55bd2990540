"""Shared file helpers: UTF-8 text reading with located errors, atomic writes."""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from kgplm.exceptions import ArtifactError, DiskFullError, EncodingError, MissingFileError

__all__ = [
    "require_file",
    "open_text",
    "iter_lines",
    "atomic_directory",
    "atomic_file",
    "AppendFile",
    "unfinished_directories",
    "load_array",
    "file_sha256",
]


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes as hex, read in blocks of 1 MiB."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def require_file(path: str | os.PathLike, what: str = "file") -> Path:
    """Return ``path`` as a Path, or raise :class:`MissingFileError` if it is not an existing file."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(path, what)
    return path


def open_text(path: str | os.PathLike) -> io.TextIOBase:
    """Open a UTF-8 text file (``.gz`` transparently) in strict decoding mode."""
    path = require_file(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="strict", newline="")
    return open(path, encoding="utf-8", errors="strict", newline="")


def utf8_conversion_hint(path: str | os.PathLike, sample: bytes) -> str:
    """How to convert a file that is not UTF-8: ``iconv`` from GBK when ``sample`` reads as GBK/GB18030
    (the usual encoding of Chinese text that is not UTF-8), else from the file's own encoding."""
    target = f"{path}.utf8"
    try:
        sample.decode("gb18030")
    except UnicodeDecodeError:
        return f"convert it from its encoding, e.g. iconv -f latin1 -t utf-8 {path} > {target}"
    return f"it reads as GBK/GB18030; convert it with iconv -f gbk -t utf-8 {path} > {target}"


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line_without_newline)`` from a UTF-8 text file, numbering from 1.

    Lines are decoded one at a time, so a byte sequence that is not UTF-8 raises
    :class:`EncodingError` naming the exact file and line. ``.gz`` files are read transparently;
    a UTF-8 byte-order mark at the start is dropped.
    """
    path = require_file(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise EncodingError(
                    f"not valid UTF-8 ({error.reason} at byte {error.start} of the line)",
                    path=path,
                    line=line_number,
                    expected=f"a UTF-8 text file; {utf8_conversion_hint(path, raw)}",
                ) from None
            if line_number == 1 and line.startswith("\ufeff"):
                line = line[1:]
            yield line_number, line.rstrip("\r\n")


@contextlib.contextmanager
def atomic_directory(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary directory beside ``target``; on success it replaces ``target``.

    Nothing is half-written: a failure leaves any previous ``target`` untouched and removes the
    temporary directory.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        yield temporary
        if target.exists():
            backup = target.with_name(f".{target.name}.old-{os.getpid()}")
            os.replace(target, backup)
            os.replace(temporary, target)
            shutil.rmtree(backup, ignore_errors=True)
        else:
            os.replace(temporary, target)
    except BaseException as error:
        written = _size(temporary) if _disk_full(error) else None
        shutil.rmtree(temporary, ignore_errors=True)
        if written is not None:
            raise _disk_full_error(target, written) from error
        raise


def unfinished_directories(parent: str | os.PathLike, prefix: str = "") -> list[Path]:
    """The temporary directories :func:`atomic_directory` left in ``parent`` for targets named ``prefix…``
    (a process killed before the rename), sorted; they were never renamed, so nothing reads them."""
    parent = Path(parent)
    if not parent.is_dir():
        return []
    return sorted(p for p in parent.iterdir() if p.is_dir() and p.name.startswith(f".{prefix}") and ".tmp-" in p.name)


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike, mode: str = "w", **open_kwargs) -> Iterator[io.IOBase]:
    """Open a temporary file beside ``target`` and rename it onto ``target`` on success."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.tmp-", dir=target.parent)
    os.close(descriptor)
    try:
        with open(temporary, mode, **open_kwargs) as handle:
            yield handle
        os.replace(temporary, target)
    except BaseException as error:
        written = _size(Path(temporary)) if _disk_full(error) else None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        if written is not None:
            raise _disk_full_error(target, written) from error
        raise


class AppendFile:
    """A log that grows by whole records (``metrics.jsonl``): :meth:`append` writes one record unbuffered, and
    when the disk fills part-way cuts the file back to what it held before and raises :class:`DiskFullError`
    naming the path and the record's size, so the file never ends in half a record."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._handle = open(self.path, "ab", buffering=0)

    def append(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        descriptor = self._handle.fileno()
        before = os.fstat(descriptor).st_size
        written = 0
        try:
            while written < len(data):  # an unbuffered write may take part of the bytes
                written += self._handle.write(data[written:])
        except OSError as error:
            if not _disk_full(error):
                raise
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, before)
            try:
                free = shutil.disk_usage(self.path.parent).free
            except OSError:
                free = None
            raise DiskFullError(self.path, needed=len(data), written=written, free=free) from error

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> "AppendFile":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _disk_full(error: BaseException) -> bool:
    """Whether ``error`` says the file system is full (an ``OSError`` with ENOSPC/EDQUOT, or a writer library's
    error carrying the OS message, as safetensors' does)."""
    if isinstance(error, DiskFullError):
        return False  # already explained by an inner write
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return "No space left on device" in str(error) or "Disk quota exceeded" in str(error)


def _size(path: Path) -> int:
    """Bytes in a file, or in the files below a directory (0 when it is gone)."""
    try:
        if path.is_dir():
            return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        return path.stat().st_size
    except OSError:
        return 0


def _disk_full_error(target: Path, written: int) -> DiskFullError:
    """The error for ``target`` whose temporary copy filled the disk after ``written`` bytes: what it needs at least
    (that, or the previous version's size when larger) and what is free once the temporary copy is gone."""
    try:
        free = shutil.disk_usage(target.parent).free
    except OSError:
        free = None
    return DiskFullError(target, needed=max(written, _size(target)), written=written, free=free)


def load_array(path: str | os.PathLike, *, mmap: bool = False, what: str = "saved artefact"):
    """A ``.npy`` array (memory-mapped when ``mmap``), or :class:`ArtifactError` naming the file when it is missing
    or cut short (what numpy reports as a ``ValueError``/``EOFError`` about its header or length)."""
    import numpy as np

    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{what} at {path.parent} is missing {path.name}")
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, EOFError, OSError) as error:
        raise ArtifactError(
            f"{path}: not a complete .npy array ({error}); the {what} is damaged (cut short or overwritten): rebuild it"
        ) from None


def json_safe(value):
    """``value`` with paths as strings and tuples as lists (what ``json.dump`` writes), recursively."""
    if isinstance(value, os.PathLike):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
