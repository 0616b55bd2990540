"""README.md is a front page: short, and its generated tables are those the code and results give."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_is_a_front_page() -> None:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for heading in (
        "## Installation",
        "## Three examples",
        "## Methods",
        "## Does the knowledge help?",
        "## Documentation",
        "## Citation and licence",
    ):
        assert heading in text, heading


def test_the_generated_tables_are_current() -> None:
    from tools.readme import stale_files

    assert stale_files() == [], "run python -m tools.readme"


def test_a_stale_table_is_detected(tmp_path, monkeypatch) -> None:
    """The check can fail: a README whose methods table lost a row is reported."""
    import tools.readme as readme

    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `smedbert` |"))
    (tmp_path / "README.md").write_text(text.replace(row + "\n", ""), encoding="utf-8")
    monkeypatch.setattr(readme, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(readme, "BLOCKS", {"README.md": readme.BLOCKS["README.md"]})
    assert readme.stale_files() == ["README.md"]


def test_every_registered_method_has_a_documentation_page(tmp_path) -> None:
    from kgplm.methods import available
    from tools.docs_pages import write_method_pages

    pages = write_method_pages(tmp_path)
    assert sorted(p.stem for p in pages) == sorted(available())
    smedbert = (tmp_path / "smedbert.md").read_text(encoding="utf-8")
    assert ".. automodule:: kgplm.methods.smedbert.modeling" in smedbert and "Zhang et al. (2021)" in smedbert
