"""Run directories keyed by every setting and the code that made them (issue 27.11).

A benchmark that caches its stages (``kgplm.train`` resumes whatever run its ``output_dir`` holds)
must never hand back a run made with other settings or by other code. :func:`run_directory` names the
directory by a hash of the settings *and* :func:`code_version`, and writes them into the directory's
``benchmark_key.json``; a directory whose stored key differs is refused. Resuming is therefore only
ever resuming the same code on the same settings (after a kill, say).

:func:`code_version` is the git commit, plus, when tracked files differ from it or untracked files
exist, ``+dirty-`` and a hash of ``git status --porcelain`` and ``git diff HEAD``: two different sets of
uncommitted edits get two versions. Benchmarks print it beside their results.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from kgplm.exceptions import ConfigurationError

ROOT = Path(__file__).resolve().parents[1]
KEY_FILE = "benchmark_key.json"

__all__ = ["code_version", "run_directory", "settings_hash", "KEY_FILE"]


def code_version(root: Path = ROOT) -> str:
    """The commit of ``root`` (12 hex digits), with ``+dirty-<hash of the changes>`` when the tree differs."""

    def git(*args: str) -> str:
        result = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        if result.returncode != 0:
            raise ConfigurationError(
                f"git {' '.join(args)} failed in {root}: {result.stderr.strip()} (benchmark "
                "run directories are keyed by the commit: run them from a git checkout)"
            )
        return result.stdout

    head = git("rev-parse", "--short=12", "HEAD").strip()
    status = git("status", "--porcelain")
    if not status:
        return head
    changes = hashlib.sha1((status + git("diff", "HEAD")).encode()).hexdigest()[:12]
    return f"{head}+dirty-{changes}"


def settings_hash(settings: dict) -> str:
    return hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]


def run_directory(parent: Path, name: str, settings: dict, *, version: str | None = None) -> Path:
    """``parent/<name>-<hash of settings and code version>``, created, with its key written (or checked)."""
    key = {
        "settings": json.loads(json.dumps(settings, sort_keys=True, default=str)),
        "code_version": version or code_version(),
    }
    directory = Path(parent) / f"{name}-{settings_hash(key)}"
    marker = directory / KEY_FILE
    if marker.is_file():
        stored = json.loads(marker.read_text(encoding="utf-8"))
        if stored != key:
            raise ConfigurationError(
                f"{directory} holds a run made with other settings or code: {marker} records "
                f"{stored}, this run is {key}; remove the directory or use another --work"
            )
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    temporary = marker.with_suffix(".tmp")
    temporary.write_text(json.dumps(key, indent=1, ensure_ascii=False), encoding="utf-8")
    temporary.replace(marker)
    return directory
