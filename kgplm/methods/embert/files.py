"""How EMBERT's artefacts lie on disk: arrays in ``<stem>.npz``, the rest in a ``<stem>.json`` manifest."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from kgplm._io import atomic_directory
from kgplm.exceptions import ArtifactError, MissingFileError

__all__ = ["write_artefact", "read_artefact"]


def write_artefact(
    directory: str | os.PathLike, stem: str, format: str, arrays: dict[str, np.ndarray], manifest: dict
) -> Path:
    """Write ``arrays`` and ``manifest`` (JSON-safe) into ``directory``, atomically."""
    directory = Path(directory)
    with atomic_directory(directory) as temporary:
        np.savez(temporary / f"{stem}.npz", **arrays)
        document = {"format": format, "version": 1, **manifest}
        (temporary / f"{stem}.json").write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return directory


def read_artefact(
    directory: str | os.PathLike, stem: str, format: str, what: str
) -> tuple[dict, dict[str, np.ndarray]]:
    """``(manifest, arrays)`` of an artefact :func:`write_artefact` wrote; ``what`` names it in errors."""
    directory = Path(directory)
    manifest_path = directory / f"{stem}.json"
    if not manifest_path.is_file():
        raise MissingFileError(manifest_path, what)
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if manifest.get("format") != format:
        raise ArtifactError(f"{manifest_path} is not a {what} (format {manifest.get('format')!r}, expected {format!r})")
    with np.load(directory / f"{stem}.npz", allow_pickle=False) as arrays:
        return manifest, {name: arrays[name] for name in arrays.files}
