"""Mutation check: put each fixed defect back and see its tests fail.

Run: ``make mutations`` or ``python tests/mutations/runner.py [--jobs N] [--only NAME ...] [--list]``

Each ``tests/mutations/<name>.patch`` is a unified diff (as ``git diff`` prints it) that, applied to
the fixed tree, re-introduces one defect. Before the first ``diff --git`` line it carries a header
of ``# key: value`` lines::

    # test: tests/methods/test_registry.py::test_...[kebiolm]     (one or more: the tests that must fail)
    # issue: 27.9                                                   (issue number.item)
    # what: the fusion writes the bf16 entity delta into the fp32 residual stream

For every patch the runner extracts the **committed** tree (``git archive HEAD``, so the caller's
working tree, index and worktree list are never touched; uncommitted edits are not seen) into a
scratch directory, ``git apply``-s the patch there, and runs the patch's tests with this
interpreter's pytest, ``PYTHONPATH`` set to the scratch copy and one BLAS/OpenMP thread. The outcome:

* ``caught``: pytest exited 1 (a test failed), as it must;
* ``SURVIVED``: pytest exited 0, every named test passed (or skipped) with the defect back;
* ``does-not-apply``: ``git apply`` refused the patch (the code moved: delete the patch; the defect's
  regression test stays in the suite);
* ``no-tests``: pytest collected none of the named tests (renamed or removed);
* ``error``: any other pytest exit (collection error, usage error, interrupted).

Prints a Markdown table with the commit and exits 1 when any mutation is not ``caught``. The real
data the tests read is found as the caller's checkout would find it (``KGPLM_SHARED_DATA``, else
``../shared/data`` next to the repository); a test that skips because it is absent survives.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
MUTATIONS_DIR = REPO_ROOT / "tests" / "mutations"
#: header keys; ``test`` may repeat, the others appear exactly once
HEADER_KEYS = ("test", "issue", "what")
_HEADER_LINE = re.compile(r"^# (?P<key>[a-z]+): (?P<value>\S.*)$")
_ISSUE = re.compile(r"^\d+\.[A-Za-z0-9-]+$")


class MutationFormatError(ValueError):
    """A patch whose header or body is not in the shared format (names the file and line)."""


@dataclass(frozen=True)
class Mutation:
    name: str
    path: Path
    tests: tuple[str, ...]
    issue: str
    what: str
    diff: str
    #: the files the diff changes (``diff --git a/X b/X``)
    files: tuple[str, ...] = field(default=())


def parse_mutation(path: Path) -> Mutation:
    """Read one patch file; raise :class:`MutationFormatError` naming the file and line on a bad header."""
    text = Path(path).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    values: dict[str, list[str]] = {key: [] for key in HEADER_KEYS}
    body_start = None
    for number, line in enumerate(lines, 1):
        if line.startswith("diff --git "):
            body_start = number - 1
            break
        match = _HEADER_LINE.match(line.rstrip("\n"))
        if match is None or match["key"] not in HEADER_KEYS:
            raise MutationFormatError(
                f"{path}:{number}: expected a header line '# test|issue|what: value' "
                f"before the first 'diff --git', got {line.rstrip()!r}"
            )
        values[match["key"]].append(match["value"].strip())
    if body_start is None:
        raise MutationFormatError(f"{path}: no 'diff --git' line; a mutation is a diff as `git diff` prints it")
    if not values["test"]:
        raise MutationFormatError(f"{path}: no '# test: <pytest node id>' line")
    for key in ("issue", "what"):
        if len(values[key]) != 1:
            raise MutationFormatError(f"{path}: expected exactly one '# {key}:' line, got {len(values[key])}")
    if not _ISSUE.match(values["issue"][0]):
        raise MutationFormatError(f"{path}: '# issue: {values['issue'][0]}' is not 'number.item' (e.g. 27.9)")
    for test in values["test"]:
        if "::" not in test or not test.split("::", 1)[0].endswith(".py"):
            raise MutationFormatError(f"{path}: '# test: {test}' is not a pytest node id (file.py::name)")
    diff = "".join(lines[body_start:])
    files = tuple(re.findall(r"^diff --git a/(\S+) b/", diff, flags=re.MULTILINE))
    return Mutation(
        Path(path).stem, Path(path), tuple(values["test"]), values["issue"][0], values["what"][0], diff, files
    )


def discover(directory: Path = MUTATIONS_DIR) -> list[Mutation]:
    return [parse_mutation(path) for path in sorted(Path(directory).glob("*.patch"))]


def apply_check(mutation: Mutation, tree: Path) -> tuple[bool, str]:
    """Whether ``git apply --check`` accepts the patch's diff in ``tree`` (and git's message)."""
    result = subprocess.run(
        ["git", "apply", "--check", "-"], input=mutation.diff, text=True, cwd=tree, capture_output=True
    )
    return result.returncode == 0, result.stderr.strip()


def commit(repo: Path = REPO_ROOT) -> str:
    """HEAD's hash, with ``+dirty`` when tracked files differ from it (the runner tests HEAD regardless)."""
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=repo).returncode != 0
    return head + ("+dirty" if dirty else "")


def extract_head(repo: Path, target: Path) -> None:
    """The committed tree of ``repo`` (HEAD) into ``target``, through ``git archive`` (the repo is not changed)."""
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=repo, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)


def pytest_environment(copy: Path) -> dict[str, str]:
    environment = dict(
        os.environ, PYTHONPATH=str(copy), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1"
    )
    # the real data as the caller's checkout finds it (the scratch copy has no ../shared next to it)
    environment.setdefault("KGPLM_SHARED_DATA", str(REPO_ROOT.parent / "shared" / "data"))
    return environment


def outcome_of_pytest(returncode: int) -> str:
    return {0: "SURVIVED", 1: "caught", 5: "no-tests"}.get(returncode, "error")


def run_mutation(mutation: Mutation, repo: Path = REPO_ROOT, timeout: float = 1800) -> dict:
    """Apply one mutation in a scratch copy of HEAD, run its tests; a row of the table."""
    started = time.monotonic()
    row = {"mutation": mutation.name, "issue": mutation.issue, "tests": len(mutation.tests), "detail": ""}
    scratch = Path(tempfile.mkdtemp(prefix=f"kgplm-mutation-{mutation.name}-"))
    try:
        copy = scratch / "tree"
        extract_head(repo, copy)
        applies, message = apply_check(mutation, copy)
        if not applies:
            row.update(outcome="does-not-apply", detail=message.splitlines()[0] if message else "")
            return row
        subprocess.run(["git", "apply", "-"], input=mutation.diff, text=True, cwd=copy, check=True, capture_output=True)
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *mutation.tests]
        try:
            result = subprocess.run(
                command, cwd=copy, env=pytest_environment(copy), capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            row.update(outcome="error", detail=f"timed out after {timeout:.0f} s")
            return row
        row["outcome"] = outcome_of_pytest(result.returncode)
        summary = [line for line in result.stdout.splitlines() if line.strip()]
        row["detail"] = summary[-1].strip("= ") if summary else result.stderr.strip()[-200:]
        return row
    finally:
        row["seconds"] = round(time.monotonic() - started, 1)
        shutil.rmtree(scratch, ignore_errors=True)


def render(rows: list[dict], head: str) -> str:
    lines = [
        f"mutation check at commit {head}",
        "",
        "| mutation | issue | tests | outcome | pytest says | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['mutation']} | {row['issue']} | {row['tests']} | {row['outcome']} | "
            f"{row['detail'].replace('|', '/')} | {row.get('seconds', '')} |"
        )
    bad = [row for row in rows if row["outcome"] != "caught"]
    lines += [
        "",
        f"{len(rows) - len(bad)} of {len(rows)} mutations caught"
        + (f"; NOT caught: {', '.join(r['mutation'] + ' (' + r['outcome'] + ')' for r in bad)}" if bad else ""),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1, help="mutations run at once (each runs its own pytest)")
    parser.add_argument("--only", nargs="+", default=None, metavar="NAME", help="patch names (file stem)")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds one mutation's tests may take")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    mutations = discover()
    if args.only:
        unknown = sorted(set(args.only) - {m.name for m in mutations})
        if unknown:
            parser.error(f"no mutation named {unknown}; known: {[m.name for m in mutations]}")
        mutations = [m for m in mutations if m.name in args.only]
    if args.list:
        for mutation in mutations:
            print(f"{mutation.name}\t{mutation.issue}\t{mutation.what}\t{' '.join(mutation.tests)}")
        return 0
    head = commit()
    print(f"commit {head}; {len(mutations)} mutations, {args.jobs} at a time", flush=True)
    rows = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_mutation, mutation, timeout=args.timeout) for mutation in mutations]
        for future in as_completed(futures):
            row = future.result()
            rows.append(row)
            print(
                f"[{len(rows)}/{len(mutations)}] {row['mutation']}: {row['outcome']} ({row['seconds']} s)", flush=True
            )
    rows.sort(key=lambda row: row["mutation"])
    print(render(rows, head))
    return 0 if all(row["outcome"] == "caught" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
