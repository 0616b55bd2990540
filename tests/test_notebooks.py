"""Every notebook in notebooks/ runs top to bottom without error (headless), on small data."""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import shared_data_dir

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))

#: what each notebook must print (beyond running without error)
EXPECTED = {
    "01_explore_kg.ipynb": ["entities", "max degree", "top-5 is the head of the top-10: True"],
    "02_pretrain_and_watch.ipynb": ["objectives logged: ['mlm', 'ed', 'el']", "curves written to curves.png",
                                    "pretrain/loss", "tensorboard matches metrics.jsonl: True"],
    "03_finetune_predict.ipynb": ["FineTuningResult(task='ncbi-disease'", "predicted spans", "spans inside a word: 0"],
    "04_does_knowledge_help.ipynb": ["replicate-smedbert-1seed.json", "plotted"],
}
#: notebooks that read the real data in shared/data
NEEDS_SHARED_DATA = {"03_finetune_predict.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch) -> None:
    if path.name in NEEDS_SHARED_DATA:
        if not shared_data_dir().is_dir():
            pytest.skip(f"real data not found at {shared_data_dir()} (set KGPLM_SHARED_DATA)")
        monkeypatch.setenv("KGPLM_SHARED_DATA", str(shared_data_dir()))  # the kernel inherits it
    notebook = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    print(f"{path.name}: {time.perf_counter() - started:.1f} s")  # reported with pytest -s; never asserted
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    for expected in EXPECTED.get(path.name, []):
        assert expected in text, (path.name, expected)


def test_there_are_the_first_notebooks() -> None:
    assert {p.name[:3] for p in NOTEBOOKS} >= {"01_", "02_", "03_", "04_"}
    assert set(EXPECTED) == {p.name for p in NOTEBOOKS}
