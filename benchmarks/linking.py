"""Linking benchmark: all CMeKG names and aliases against the Chinese medical dialogue corpus.

Measures, in one run and on one core's worth of work (single-threaded code):
  * kgplm ``EntityLinker.find_many`` (the arrays the corpus builder uses: one kernel call per batch of
    documents), ``find`` per document, and ``link_many`` (Mention objects),
    selecting the names on the best segmentation path (the default), and ``find`` with leftmost-longest
    selection (``word_boundaries=None``),
  * pyahocorasick's ``iter_long`` over the same names (when installed: ``pip install pyahocorasick``),
  * a pure-Python character trie with greedy longest match (the SMedBERT reference code's method),
  * jieba segmentation of the same text (a private ``jieba.Tokenizer``, default dictionary).
Speeds are MB of UTF-8 text per second; the goal (issue 29.11) is ≥ 12 MB per CPU-second of one
core for ``find_many`` with the default selection (the best segmentation path), gold-name recall ≥ 0.99.

It also measures how the selected mentions sit against human word boundaries, on the gold
mentions of the cMedQANER test file (all 1,350 annotations, offsets as released):
  * named gold: gold mentions whose surface, normalised as the linker normalises, is a CMeKG name;
  * lost to a crossing match: named gold mentions not linked at their span while a linked mention
    partly overlaps them (恢复视力 → 复视 loses 视力);
  * linked mentions crossing a gold boundary: linked mentions that partly overlap a gold mention
    (neither contains the other);
  * named gold linked exactly: named gold mentions found at exactly their span;
  * gold-name recall (issue 29.11): the share of named gold mentions not lost to a crossing match.

    .venv/bin/python benchmarks/linking.py [--repeat 3] [--quality-only]
    .venv/bin/python benchmarks/linking.py --smoke

``--smoke`` runs every row once on generated data in a temporary folder: the repository's toy graph
in place of CMeKG, consultations written from its names in place of the dialogue corpus (the same
CSV and text formats), and an NER file in the cMedQANER format whose gold mentions are the names
placed in those sentences.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _runs import code_version  # noqa: E402

from kgplm import KGStore  # noqa: E402
from kgplm.text import EntityLinker, read_corpus  # noqa: E402
from kgplm.text.linking import normalize_for_matching  # noqa: E402

SHARED = Path(os.environ.get("KGPLM_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
TOY_GRAPH = Path(__file__).resolve().parents[1] / "graphs" / "toy_medical.ttl"


CPU_SECONDS: dict[int, float] = {}  # id of a timed result → the user+system CPU seconds of its best run


def best_of(repeat: int, function) -> tuple[float, object]:
    """The best wall-clock seconds of ``repeat`` runs and the last result; the best run's CPU seconds
    (this process, user+system: what a loaded machine inflates least) go to ``CPU_SECONDS``."""
    best, best_cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        result = function()
        best = min(best, time.perf_counter() - started)
        best_cpu = min(best_cpu, time.process_time() - started_cpu)
    CPU_SECONDS[id(result)] = best_cpu
    return best, result


def python_trie(patterns: list[str]) -> dict:
    root: dict = {}
    for pattern in patterns:
        node = root
        for char in pattern:
            node = node.setdefault(char, {})
        node[""] = pattern
    return root


def python_longest_match(root: dict, text: str) -> int:
    found, position, size = 0, 0, len(text)
    while position < size:
        node, cursor, best = root, position, -1
        while cursor < size and text[cursor] in node:
            node = node[text[cursor]]
            cursor += 1
            if "" in node:
                best = cursor
        if best > 0:
            found += 1
            position = best
        else:
            position += 1
    return found


def _crosses(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[0] < a[1] < b[1] or b[0] < a[0] < b[1] < a[1]


def boundary_quality(linker: EntityLinker, path: Path) -> dict[str, int]:
    """The word-boundary figures of the module docstring on one ChineseBLUE NER JSON-lines file."""
    names = set(linker.patterns)
    figures = dict.fromkeys(
        ("gold", "named_gold", "named_gold_linked_exactly", "lost_to_crossing_match", "linked", "linked_crossing_gold"),
        0,
    )
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        text = record["text"]
        gold = [(int(m["offset"]), int(m["offset"]) + len(m["mention"])) for m in record["mention_data"]]
        linked = [(m.start, m.end) for m in linker.link(text)]
        found = set(linked)
        for span in gold:
            figures["gold"] += 1
            if normalize_for_matching(text[span[0] : span[1]]) not in names:
                continue
            figures["named_gold"] += 1
            if span in found:
                figures["named_gold_linked_exactly"] += 1
            elif any(_crosses(span, other) for other in linked):
                figures["lost_to_crossing_match"] += 1
        figures["linked"] += len(linked)
        figures["linked_crossing_gold"] += sum(any(_crosses(span, g) for g in gold) for span in linked)
    return figures


def write_smoke_data(folder: Path, store, documents: int = 200, seed: int = 0) -> Path:
    """Generated stand-ins for the shared data, written into ``folder``: ``medical_dialogue/`` (a CSV of
    consultations and a text file of them, in the dialogue corpus's formats) and ``test.json`` (NER records in
    the cMedQANER format, each gold mention one of the store's names placed in the sentence); returns ``folder``."""
    rng = random.Random(seed)
    names = sorted({store.entity_name(entity) for entity in range(store.num_entities)})
    records = []
    for _ in range(documents):
        text, mentions = "", []
        for prefix in ("患者主诉", "，伴有", "，既往有", "，建议"):
            name = rng.choice(names)
            text += prefix
            mentions.append({"mention": name, "type": "sym", "offset": len(text)})
            text += name
        records.append({"text": text + "。", "mention_data": mentions})
    corpus = folder / "medical_dialogue"
    corpus.mkdir(parents=True, exist_ok=True)
    half = len(records) // 2
    with open(corpus / "sample_IM_5000-6000.utf8.csv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["department", "title", "ask", "answer"])
        writer.writerows(["内科", record["text"][:8], record["text"], "建议复查。"] for record in records[:half])
    (corpus / "IM_neike.utf8.txt").write_text(
        "".join(f"{record['text']}\n建议复查。\n\n" for record in records[half:]), encoding="utf-8"
    )
    (folder / "test.json").write_text(
        "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records), encoding="utf-8"
    )
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quality-only", action="store_true", help="only the word-boundary figures")
    parser.add_argument(
        "--smoke", action="store_true", help="the toy graph and generated text in a temporary folder, each row once"
    )
    args = parser.parse_args()
    if args.smoke:
        args.repeat = 1
        store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
        with tempfile.TemporaryDirectory(prefix="kgplm-linking-") as scratch:
            folder = write_smoke_data(Path(scratch), store)
            run_benchmark(args, store, folder / "medical_dialogue", folder / "test.json")
        return
    run_benchmark(
        args,
        None,
        SHARED / "corpus" / "medical_dialogue",
        SHARED / "tasks" / "zh" / "chineseblue" / "cMedQANER" / "test.json",
    )


def run_benchmark(args: argparse.Namespace, store, folder: Path, ner_test: Path) -> None:
    """The figures and the table; ``store`` None: CMeKG; ``folder``: the dialogue corpus's files; ``ner_test``:
    NER records in the cMedQANER format."""
    texts = [d.text for d in read_corpus(folder / "sample_IM_5000-6000.utf8.csv", columns=["title", "ask", "answer"])]
    texts += [d.text for d in read_corpus(folder / "IM_neike.utf8.txt")]
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    characters = sum(len(t) for t in texts)
    if store is None:
        store = KGStore.from_cmekg(show_progress=False)
    build_seconds, linker = best_of(1, lambda: EntityLinker(store))
    print(
        f"corpus: {len(texts):,} documents, {characters:,} characters, {megabytes:.2f} MB; dictionary: "
        f"{linker.num_names:,} distinct names (≥ 2 characters) of {store.num_entities:,} entities; "
        f"linker built in {build_seconds:.1f} s",
        flush=True,
    )
    quality = boundary_quality(linker, ner_test)
    print(f"\n{'cMedQANER test' if ner_test.parent.name == 'cMedQANER' else 'generated NER records'}, word boundaries:")
    print(
        f"  named gold mentions (surface is a CMeKG name): {quality['named_gold']:,} of {quality['gold']:,}; "
        f"linked exactly {quality['named_gold_linked_exactly']:,}; "
        f"lost to a crossing match {quality['lost_to_crossing_match']:,}"
    )
    named = max(quality["named_gold"], 1)
    print(
        f"  gold-name recall (named gold not lost to a crossing match, issue 29's figure): "
        f"{1 - quality['lost_to_crossing_match'] / named:.4f}; named gold linked at exactly their span: "
        f"{quality['named_gold_linked_exactly'] / named:.4f} (the others lie inside or around a linked name)"
    )
    print(
        f"  linked mentions crossing a gold boundary: {quality['linked_crossing_gold']:,} of {quality['linked']:,}",
        flush=True,
    )
    if args.quality_only:
        return
    rows = []

    linker.find(texts[0])  # load the compiled kernel
    seconds, result = best_of(args.repeat, lambda: list(linker.find_many(texts)))
    rows.append(
        (
            "kgplm EntityLinker.find_many (arrays, batches of documents)",
            seconds,
            sum(len(found[0]) for found in result),
            result,
        )
    )
    seconds, result = best_of(args.repeat, lambda: [linker.find(t) for t in texts])
    rows.append(
        ("kgplm EntityLinker.find per document (arrays)", seconds, sum(len(found[0]) for found in result), result)
    )
    seconds, result = best_of(args.repeat, lambda: linker.link_many(texts))
    rows.append(("kgplm EntityLinker.link_many (Mention objects)", seconds, sum(map(len, result)), result))
    seconds, result = best_of(args.repeat, lambda: [linker.link(t) for t in texts])
    rows.append(("kgplm EntityLinker.link per document", seconds, sum(map(len, result)), result))
    unfiltered = EntityLinker(store, stop_words=None, exclude_numeric=False, hyphen_variants=False)
    unfiltered.find(texts[0])
    seconds, result = best_of(args.repeat, lambda: list(unfiltered.find_many(texts)))
    rows.append(
        (
            "kgplm EntityLinker.find_many, filters off (stop words, numeric names, hyphens)",
            seconds,
            sum(len(found[0]) for found in result),
            result,
        )
    )
    longest = EntityLinker(store, word_boundaries=None)
    longest.find(texts[0])
    seconds, result = best_of(args.repeat, lambda: list(longest.find_many(texts)))
    rows.append(
        (
            "kgplm EntityLinker.find_many, leftmost-longest (word_boundaries=None)",
            seconds,
            sum(len(found[0]) for found in result),
            result,
        )
    )

    try:
        import ahocorasick
    except ImportError:
        print("pyahocorasick is not installed; its row is skipped")
    else:
        automaton = ahocorasick.Automaton()
        for index, pattern in enumerate(linker.patterns):
            automaton.add_word(pattern, index)
        automaton.make_automaton()
        seconds, result = best_of(
            args.repeat, lambda: [list(automaton.iter_long(normalize_for_matching(t))) for t in texts]
        )
        rows.append(("pyahocorasick iter_long (no Latin boundaries)", seconds, sum(map(len, result)), result))

    root = python_trie(linker.patterns)
    seconds, result = best_of(1, lambda: [python_longest_match(root, normalize_for_matching(t)) for t in texts])
    rows.append(("pure-Python trie, greedy longest (SMedBERT code)", seconds, sum(result), result))

    import jieba

    jieba.setLogLevel(60)
    segmenter = jieba.Tokenizer()
    segmenter.initialize()
    seconds, result = best_of(1, lambda: [list(segmenter.cut(t)) for t in texts])
    rows.append(("jieba segmentation (HMM on)", seconds, sum(map(len, result)), result))

    print(
        f"\ncommit {code_version()}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min): "
        "wall-clock MB/s falls with the load, CPU MB/s (bytes / user+system CPU seconds, one thread) less"
    )
    print("\n| method | seconds | MB/s | CPU seconds | MB/s per CPU second | mentions (or words) |")
    print("|---|---|---|---|---|---|")
    for name, seconds, count, result in rows:
        cpu = CPU_SECONDS[id(result)]
        print(f"| {name} | {seconds:.2f} | {megabytes / seconds:.2f} | {cpu:.2f} | {megabytes / cpu:.2f} | {count:,} |")


if __name__ == "__main__":
    main()
