"""Every notebook in notebooks/ runs top to bottom without error (headless), on small data."""

from __future__ import annotations

import re
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))

#: what each notebook must print (beyond running without error)
EXPECTED = {
    "01_explore_kg.ipynb": [
        "entities",
        "max degree",
        "top-5 is the head of the top-10: True",
        "drawn: 糖尿病 and its top 10",
        "drawn: 阿司匹林 and its top 8",
    ],
    "02_pretrain_and_watch.ipynb": [
        "objectives logged: ['mlm', 'ed', 'el']",
        "curves written to curves.png",
        "pretrain/loss",
        "tensorboard matches metrics.jsonl: True",
    ],
    "03_finetune_predict.ipynb": ["FineTuningResult(task='ncbi-disease'", "predicted spans", "spans inside a word: 0"],
    "04_does_knowledge_help.ipynb": ["replicate-smedbert-1seed.json", "plotted"],
}
#: what a notebook must not read: data beside the repository rather than in it or written by the notebook
OUTSIDE_THE_REPOSITORY = re.compile(r"shared/data|KGPLM_SHARED_DATA|\.\./shared")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("KGPLM_SHARED_DATA", raising=False)  # the kernel inherits the environment
    notebook = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    print(f"{path.name}: {time.perf_counter() - started:.1f} s")  # reported with pytest -s; never asserted
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    for expected in EXPECTED.get(path.name, []):
        assert expected in text, (path.name, expected)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_the_notebook_reads_nothing_beside_the_repository(path: Path) -> None:
    """Everything a notebook reads is in the repository, an installed package, or written by the notebook."""
    notebook = nbformat.read(path, as_version=4)
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert not OUTSIDE_THE_REPOSITORY.findall(code), path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_the_notebook_is_committed_with_its_outputs(path: Path) -> None:
    """The documentation renders the stored outputs; a notebook committed without them renders empty."""
    notebook = nbformat.read(path, as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells and all(cell.get("execution_count") for cell in code_cells), path.name
    assert not [o for cell in code_cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def test_there_are_the_first_notebooks() -> None:
    assert {p.name[:3] for p in NOTEBOOKS} >= {"01_", "02_", "03_", "04_"}
    assert set(EXPECTED) == {p.name for p in NOTEBOOKS}
