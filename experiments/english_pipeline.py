"""The English pipeline of issue 29's acceptance: an English OBO ontology, BLURB training sentences.

Given an OBO file (the Human Phenotype Ontology's ``hp.obo`` is what the figures were taken on;
this script downloads nothing), it prints, as markdown:

* the corpus: the training sentences of BLURB NCBI-disease and BC5CDR (chemical + disease),
  from ``$KGPLM_SHARED_DATA/tasks``;
* linking BEFORE (``EntityLinker`` with every issue-29 filter off: no stop list, numeric names
  kept, no hyphen variants — the old defaults, ``linking_filters.LINKING_BEFORE_OPTIONS``) and
  AFTER (the current defaults): mentions, the top-10 linked entities with their counts, and the
  share of qualifier-like mentions. A mention is qualifier-like when the entity it links to is the
  root or lies under one of the ontology's qualifier branches, read from the OBO file itself
  (``is_a`` lines, independent of the linker's filters); for HPO: ``HP:0000001`` "All" (the root
  only), and every descendant of ``HP:0012823`` "Clinical modifier", ``HP:0040279`` "Frequency"
  and ``HP:0000005`` "Mode of inheritance" (``--qualifier-roots`` changes them);
* linking speed: MB of UTF-8 text per CPU-second (user+system of this single-threaded process,
  best of ``--repeat``) of ``find_many`` with the defaults, with the load average;
* with ``--pipeline``: ``kgplm.train("kebiolm")`` on the ontology and the sentences, tiny budget;
  ``kgplm.finetune`` on NCBI-disease, tiny; ``kgplm.predict`` on test sentences; the number of
  predicted spans that start or end inside a word (should be 0, issue 29.5).

    KGPLM_SHARED_DATA=/path/to/shared/data .venv/bin/python experiments/english_pipeline.py --obo hp.obo --pipeline
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _shared  # noqa: E402,F401  (puts benchmarks/ on the path: _data, _runs)
from _runs import code_version  # noqa: E402

import kgplm  # noqa: E402
from kgplm import KGStore  # noqa: E402
from kgplm.evaluation.tasks import load_task  # noqa: E402
from kgplm.text import EntityLinker  # noqa: E402
from kgplm.text.linking_filters import LINKING_BEFORE_OPTIONS  # noqa: E402

SHARED = Path(os.environ.get("KGPLM_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
#: HPO's root "All" (alone), then its qualifier branches (with their descendants)
HPO_QUALIFIERS = ("HP:0000001", "HP:0012823", "HP:0040279", "HP:0000005")
_LINKER_KEYS = ("stop_words", "min_length", "exclude_numeric", "hyphen_variants", "entity_types", "roots")


def obo_descendants(path: Path, roots: list[str]) -> set[str]:
    """The term ids under ``roots`` along ``is_a`` lines of the OBO file (roots included)."""
    children: dict[str, list[str]] = {}
    term = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("["):
            term = None
        elif line.startswith("id: "):
            term = line[4:].strip()
        elif line.startswith("is_a: ") and term is not None:
            children.setdefault(line[6:].split("!")[0].strip(), []).append(term)
    found, frontier = set(), list(roots)
    while frontier:
        node = frontier.pop()
        if node not in found:
            found.add(node)
            frontier += children.get(node, [])
    return found


def english_sentences() -> list[str]:
    tasks = SHARED / "tasks"
    return [example.text for task in ("ncbi-disease", "bc5cdr") for example in load_task(task, tasks, "train")]


def linking_figures(store: KGStore, linker: EntityLinker, texts: list[str], qualifiers: set[int]) -> dict:
    counts: Counter = Counter()
    for _, _, entries in linker.find_many(texts):
        counts.update(linker.best_entities(entries).tolist())
    total = sum(counts.values())
    return {
        "mentions": total,
        "entities": len(counts),
        "qualifier_mentions": sum(n for entity, n in counts.items() if entity in qualifiers),
        "top_qualifiers": [
            (store.entity_name(entity), n) for entity, n in counts.most_common() if entity in qualifiers
        ][:10],
        "top": [(store.entity_name(entity), n) for entity, n in counts.most_common(10)],
    }


def cpu_seconds(repeat: int, function) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        function()
        best = min(best, time.process_time() - started)
    return best


def inside_a_word(text: str, start: int, end: int) -> bool:
    joined = lambda i: 0 < i < len(text) and text[i - 1].isalnum() and text[i].isalnum()  # noqa: E731
    return joined(start) or joined(end)


def pipeline(obo: Path, texts: list[str], work: Path) -> list[str]:
    from kgplm.models import TINY_TEXT_ENCODER

    corpus = work / "blurb_sentences.txt"
    corpus.write_text("\n".join(texts), encoding="utf-8")
    lines = []
    started = time.perf_counter()
    trained = kgplm.train(
        "kebiolm",
        graph=obo,
        corpus=corpus,
        output_dir=work / "kebiolm",
        text_model=dict(TINY_TEXT_ENCODER),
        vocab_size=3000,
        max_length=64,
        entity_dim=16,
        kg_epochs=1,
        max_steps=10,
        batch_size=16,
        learning_rate=2e-3,
        checkpoint_every=10,
        log_every=5,
        device="cpu",
        progress=False,
    )
    losses = trained.curve("loss")
    lines.append(
        f'- `kgplm.train("kebiolm", graph={obo.name}, corpus=<{len(texts):,} BLURB sentences>, '
        f"text_model=TINY_TEXT_ENCODER, vocab_size=3000, max_length=64, entity_dim=16, kg_epochs=1, "
        f"max_steps=10, batch_size=16)`: {time.perf_counter() - started:.0f} s wall; loss "
        f"{losses[0]:.3f} → {losses[-1]:.3f}"
    )
    started = time.perf_counter()
    tuned = kgplm.finetune(
        model=trained.output_dir,
        task="ncbi-disease",
        data_dir=SHARED / "tasks",
        output_dir=work / "ncbi",
        epochs=4,
        batch_size=16,
        learning_rate=3e-3,
        max_length=64,
        max_train_examples=1600,
        max_eval_examples=100,
        device="cpu",
        progress=False,
    )
    lines.append(
        f'- `kgplm.finetune(task="ncbi-disease", epochs=4, batch_size=16, learning_rate=3e-3, '
        f"max_train_examples=1600, max_eval_examples=100)` (400 steps; notebook 03's 75 steps predicted no "
        f"entity after this pre-training): "
        f"{time.perf_counter() - started:.0f} s wall; {tuned}"
    )
    output = kgplm.predict(
        model=tuned.output_dir,
        data_dir=SHARED / "tasks",
        output=work / "test.jsonl",
        max_examples=50,
        device="cpu",
        progress=False,
    )
    records = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines() if line.strip()]
    spans = [(record["text"], span) for record in records for span in record["predicted"]]
    inside = [span["mention"] for text, span in spans if inside_a_word(text, span["start"], span["end"])]
    lines.append(
        f"- `kgplm.predict` on {len(records)} NCBI-disease test sentences: {len(spans)} predicted spans, "
        f"{len(inside)} start or end inside a word{': ' + ', '.join(map(repr, inside)) if inside else ''}"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--obo", type=Path, required=True, help="an English OBO ontology (e.g. HPO's hp.obo)")
    parser.add_argument(
        "--qualifier-roots",
        nargs="+",
        default=list(HPO_QUALIFIERS),
        help="the root and the qualifier branches (the first: the root alone; the others: with their descendants)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pipeline", action="store_true", help="also train, fine-tune and predict (tiny)")
    args = parser.parse_args()
    print(
        f"# English pipeline (issue 29 acceptance)\n\ncommit {code_version()}; "
        f"`{' '.join(Path(a).name if a == str(args.obo) else a for a in sys.argv[1:])}`\n"
    )
    data_version = next(
        (line.split(":", 1)[1].strip() for line in args.obo.open(encoding="utf-8") if line.startswith("data-version:")),
        "unknown",
    )
    store = KGStore.from_obo(args.obo, show_progress=False)
    texts = english_sentences()
    megabytes = sum(len(text.encode("utf-8")) for text in texts) / 1e6
    root, *branches = args.qualifier_roots
    curies = {root} | obo_descendants(args.obo, branches)
    qualifiers = {store.entity_id(curie) for curie in curies if store.entity_ids(curie)}
    print(
        f"ontology: {args.obo.name} (data-version {data_version}), {store.num_entities:,} entities; corpus: "
        f"{len(texts):,} training sentences of BLURB NCBI-disease and BC5CDR, {megabytes:.2f} MB"
    )
    print(
        f"qualifier-like: the root {root} and the descendants of {', '.join(branches)} ({len(qualifiers):,} entities)\n"
    )
    linkers = {
        "BEFORE (filters off)": EntityLinker(store, **{k: LINKING_BEFORE_OPTIONS[k] for k in _LINKER_KEYS}),
        "AFTER (defaults)": EntityLinker(store),
    }
    figures = {label: linking_figures(store, linker, texts, qualifiers) for label, linker in linkers.items()}
    print("| | mentions | distinct entities | qualifier-like mentions |\n|---|---|---|---|")
    for label, found in figures.items():
        share = found["qualifier_mentions"] / max(found["mentions"], 1)
        print(
            f"| {label} | {found['mentions']:,} | {found['entities']:,} | "
            f"{found['qualifier_mentions']:,} ({100 * share:.1f} %) |"
        )
    print("\n| rank | BEFORE: entity (count) | AFTER: entity (count) |\n|---|---|---|")
    before, after = figures["BEFORE (filters off)"]["top"], figures["AFTER (defaults)"]["top"]
    for rank in range(max(len(before), len(after))):
        cell = lambda top: f"{top[rank][0]} ({top[rank][1]:,})" if rank < len(top) else ""  # noqa: E731
        print(f"| {rank + 1} | {cell(before)} | {cell(after)} |")
    for label, found in figures.items():
        print(
            f"\nmost-linked qualifier-like entities, {label}: "
            + ", ".join(f"{name} ({n:,})" for name, n in found["top_qualifiers"])
        )
    linker = linkers["AFTER (defaults)"]
    seconds = cpu_seconds(args.repeat, lambda: list(linker.find_many(texts)))
    print(
        f"\nlinking speed (defaults, `find_many`): {megabytes / seconds:.2f} MB per CPU-second "
        f"({seconds:.3f} CPU-s, best of {args.repeat}); load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)"
    )
    if args.pipeline:
        print("\nEnd to end, tiny (CPU):\n")
        with tempfile.TemporaryDirectory(prefix="kgplm-english-") as work:
            for line in pipeline(args.obo, texts, Path(work)):
                print(line, flush=True)
        print(f"\nload average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
