"""Every Python example in README.md and the documentation runs, on the repository's toy graph.

The examples of a page run in order in one namespace (as a reader would paste them), in a scratch
directory holding what the README's examples name: ``graphs/toy_medical.ttl``, ``notes.txt`` (notes
naming the toy graph's entities) and ``my_ner/`` (a small NER task in cMedQANER's format written from
the toy graph, as the getting-started page writes it). An example that needs data a test cannot have (a UMLS
licence, a GPU, a SPARQL server, the real task files) is preceded by an HTML comment
``<!-- not run: why -->``; that comment must say why.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<why>[^>]*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<info>[^\n]*)$")


def python_examples(text: str) -> list[tuple[int, str, str | None]]:
    """``(line, code, why_not_run)`` for every top-level ```python block of a Markdown text."""
    examples, lines, index = [], text.splitlines(), 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        fence, info = match.group("fence"), match.group("info").strip()
        end = next((j for j in range(index + 1, len(lines)) if lines[j].strip() == fence), len(lines))
        if info in ("python", "py"):
            previous = next((lines[j] for j in range(index - 1, -1, -1) if lines[j].strip()), "")
            not_run = NOT_RUN.search(previous)
            examples.append((index + 1, "\n".join(lines[index + 1:end]), not_run and not_run.group("why")))
        index = end + 1
    return examples


def _write_notes_and_task(directory: Path) -> None:
    import json
    import random

    from kgplm import KGStore

    store = KGStore.from_rdf(directory / "graphs" / "toy_medical.ttl", show_progress=False)
    rng = random.Random(0)
    names = [store.entity_name(e) for e in range(store.num_entities)]
    notes = [f"患者主诉{a}三天，伴有{b}，既往有{c}病史，建议复查并随访观察。" for a, b, c in
             (rng.sample(names, 3) for _ in range(80))]
    (directory / "notes.txt").write_text("\n".join(notes), encoding="utf-8")
    kinds = {"疾病": "disease", "症状": "symptom"}
    entities = [(store.entity_name(e), kinds[store.entity_type(e)]) for e in range(store.num_entities)
                if store.entity_type(e) in kinds]
    (directory / "my_ner").mkdir()
    for split, count in (("train", 120), ("dev", 30), ("test", 30)):
        lines = []
        for _ in range(count):
            (first, first_type), (second, second_type) = rng.sample(entities, 2)
            mentions = [{"mention": first, "type": first_type, "offset": "2"},
                        {"mention": second, "type": second_type, "offset": str(2 + len(first) + 3)}]
            lines.append(json.dumps({"text": f"我有{first}，还有点{second}怎么办", "mention_data": mentions},
                                    ensure_ascii=False))
        (directory / "my_ner" / f"{split}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _pages() -> list[Path]:
    pages = [REPO_ROOT / "README.md"]
    pages += sorted(p for p in (REPO_ROOT / "docs").rglob("*.md")
                    if "_build" not in p.parts and not p.relative_to(REPO_ROOT / "docs").parts[0] == "notebooks")
    return [p for p in pages if python_examples(p.read_text(encoding="utf-8"))]


def test_the_extractor_reads_fences_and_reasons() -> None:
    text = "a\n```python\nx = 1\n```\n<!-- not run: needs UMLS -->\n```python\ny = 2\n```\n```bash\nls\n```\n"
    assert python_examples(text) == [(2, "x = 1", None), (6, "y = 2", "needs UMLS")]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_every_example_of_the_page_runs(page: Path, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "graphs").mkdir()
    shutil.copy(REPO_ROOT / "graphs" / "toy_medical.ttl", tmp_path / "graphs")
    _write_notes_and_task(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict = {"__name__": "__example__"}
    for line, code, why_not_run in python_examples(page.read_text(encoding="utf-8")):
        if why_not_run is not None:
            assert why_not_run.strip(), f"{page}:{line}: say why the example is not run"
            continue
        try:
            exec(compile(code, f"{page.relative_to(REPO_ROOT)}:{line}", "exec"), namespace)
        except Exception as error:  # noqa: BLE001  (name the example that failed)
            raise AssertionError(f"{page.relative_to(REPO_ROOT)}, the example at line {line} failed: {error!r}") from error
