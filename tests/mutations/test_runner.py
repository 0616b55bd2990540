"""The mutation runner (``make mutations``) parses patch headers and classifies outcomes right.

The runner is checked on a throw-away git repository with a mutation that is caught, one that survives
and one that no longer applies. The patches themselves are not run here (``make mutations`` runs them):
a refactor that stops a patch applying deletes the patch, while the defect keeps its named regression
test in the suite.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import runner as mutations  # noqa: E402


@pytest.mark.parametrize(
    "header, complaint",
    [
        ("# issue: 27.9\n# what: x\n", "no '# test:"),
        ("# test: tests/t.py::test_a\n# what: x\n", "exactly one '# issue:'"),
        ("# test: tests/t.py::test_a\n# issue: 27\n# what: x\n", "is not 'number.item'"),
        ("# test: test_a\n# issue: 27.9\n# what: x\n", "not a pytest node id"),
        ("# test: tests/t.py::test_a\n# issue: 27.9\n# what: x\nstray line\n", ":4: expected a header line"),
    ],
)
def test_a_malformed_header_is_refused_naming_the_file_and_line(tmp_path, header, complaint):
    path = tmp_path / "bad.patch"
    path.write_text(header + "diff --git a/m.py b/m.py\n", encoding="utf-8")
    with pytest.raises(mutations.MutationFormatError, match=complaint) as error:
        mutations.parse_mutation(path)
    assert str(path) in str(error.value)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def test_the_runner_reports_caught_survived_and_stale_mutations(tmp_path):
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "arith.py").write_text("def double(x):\n    return 2 * x\n\n\ndef unused(x):\n    return x\n")
    (repo / "tests" / "test_arith.py").write_text(
        "from arith import double\n\n\ndef test_double():\n    assert double(3) == 6\n"
    )
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "fixed")

    def mutation(name, old, new):
        source = (repo / "arith.py").read_text()
        (repo / "arith.py").write_text(source.replace(old, new))
        diff = _git(repo, "diff")
        _git(repo, "checkout", "--", "arith.py")
        path = tmp_path / f"{name}.patch"
        path.write_text(f"# test: tests/test_arith.py::test_double\n# issue: 1.1\n# what: {name}\n{diff}")
        return mutations.parse_mutation(path)

    caught = mutation("caught", "return 2 * x", "return 3 * x")
    survived = mutation("survived", "return x\n", "return -x\n")
    stale = mutation("stale", "return 2 * x", "return 4 * x")
    (repo / "arith.py").write_text("def double(x):\n    return x + x\n\n\ndef unused(x):\n    return x\n")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "moved")
    before = _git(repo, "status", "--porcelain") + _git(repo, "worktree", "list")
    outcomes = {m.name: mutations.run_mutation(m, repo=repo)["outcome"] for m in (caught, survived, stale)}
    assert outcomes == {"caught": "does-not-apply", "survived": "SURVIVED", "stale": "does-not-apply"}
    assert _git(repo, "status", "--porcelain") + _git(repo, "worktree", "list") == before  # caller's tree untouched
    # against the first commit the first mutation applies and its test fails; an uncommitted edit is not seen
    _git(repo, "reset", "-q", "--hard", "HEAD~1")
    (repo / "tests" / "test_arith.py").write_text("def test_double():\n    pass\n")
    assert mutations.run_mutation(caught, repo=repo)["outcome"] == "caught"
    assert _git(repo, "status", "--porcelain") == " M tests/test_arith.py\n"
