"""README.md, the documentation and the library's docstrings speak of the library as it is.

No issue numbers, commit hashes, load averages, "this machine", sessions, stories of what was
tried and not kept, or paths outside the repository. The benchmark pages record the commit and the
hardware a measurement ran on, so commit hashes and load averages are allowed there alone.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

#: name -> pattern of a lab-log phrase
PATTERNS = {
    "issue number": re.compile(r"\bissues?\s+#?\d+|\(#\d+\)|\bissue\s+notes?\b", re.IGNORECASE),
    "commit hash": re.compile(
        r"(?<![0-9A-Za-z_.:/-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])(?:[0-9a-f]{7,12}|[0-9a-f]{40})"
        r"(?![0-9A-Za-z_/-])"
    ),
    "load average": re.compile(r"\bload averages?\b|\bat load\b|\(load \d|\bload \d+(\.\d+)?\s*[–-]", re.IGNORECASE),
    "this machine": re.compile(r"\bthis(\s+[\w-]+){0,2}\s+machine\b|\bour machine\b", re.IGNORECASE),
    "path outside the repository": re.compile(r"\.\./shared|\bshared/data\b"),
    "story of what was tried": re.compile(r"\btried and not kept\b|\bnot kept\b", re.IGNORECASE),
    "session": re.compile(r"\bsessions?\b(?!\s*=)(?!\.\w)(?!\()", re.IGNORECASE),
}
#: what a benchmark page may state: the commit and the conditions a table was measured at
ALLOWED = {"docs/benchmarks/": {"commit hash", "load average"}}
#: the library's code talks about HTTP sessions
NOT_IN_CODE = {"session"}


def _files() -> list[Path]:
    files = [REPO_ROOT / "README.md"]
    files += sorted(
        p
        for p in (REPO_ROOT / "docs").rglob("*")
        if p.suffix in (".md", ".rst", ".py")
        and "_build" not in p.parts
        and "generated" not in p.parts
        and not p.is_symlink()
        and "notebooks" not in p.relative_to(REPO_ROOT / "docs").parts
    )
    files += sorted((REPO_ROOT / "kgplm").rglob("*.py"))
    return files


def lab_log_phrases(path: Path, text: str) -> list[str]:
    """``file:line: kind: the phrase`` for every lab-log phrase in ``text`` (the contents of ``path``)."""
    relative = path.relative_to(REPO_ROOT).as_posix()
    allowed = set().union(*(kinds for prefix, kinds in ALLOWED.items() if relative.startswith(prefix)))
    if relative.startswith("kgplm/"):
        allowed |= NOT_IN_CODE
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for kind, pattern in PATTERNS.items():
            if kind in allowed:
                continue
            for match in pattern.finditer(line):
                found.append(f"{relative}:{number}: {kind}: {match.group(0)!r}")
    return found


@pytest.mark.parametrize(
    "kind, text",
    [
        ("issue number", "the linker (issue 30.6) is fast"),
        ("issue number", "see the issue notes"),
        ("commit hash", "measured at c3cd9fc"),
        ("commit hash", "commit `fd5b0e618793`"),
        ("load average", "with load average 7–15"),
        ("load average", "at load 3–4"),
        ("this machine", "on this 2-core machine"),
        ("path outside the repository", "`../shared/data/tasks`"),
        ("story of what was tried", "Tried and not kept: one block"),
        ("session", "stopped by a session's end"),
    ],
)
def test_each_pattern_finds_its_phrase(kind: str, text: str) -> None:
    assert [f for f in lab_log_phrases(REPO_ROOT / "README.md", text) if f": {kind}: " in f], (kind, text)


@pytest.mark.parametrize(
    "text",
    [
        "SHA-256 3f2a9c1e7b5d4f60a8e2c4b6d8f0a1c3e5b7d9f1a3c5e7b9d1f3a5c7e9b1d3f5",
        "decade 1e-6",
        "FNV-1a offset 0xcbf29ce484222325",
        "seed 20260101",
        "the default 5e-4",
        "session=requests.Session()",
        "load 2 arrays",
    ],
)
def test_plain_text_is_not_flagged(text: str) -> None:
    assert lab_log_phrases(REPO_ROOT / "README.md", text) == []


def test_readme_docs_and_docstrings_hold_no_lab_log() -> None:
    found = [f for path in _files() for f in lab_log_phrases(path, path.read_text(encoding="utf-8"))]
    assert not found, "lab-log phrases in user-facing text:\n" + "\n".join(found)
