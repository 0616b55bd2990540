"""Linking benchmark: all CMeKG names and aliases against the Chinese medical dialogue corpus.

Measures, in one run and on one core's worth of work (single-threaded code):
  * kgplm ``EntityLinker.find`` (the arrays the corpus builder uses) and ``link_many`` (Mention objects),
  * pyahocorasick's ``iter_long`` over the same names (when installed: ``pip install pyahocorasick``),
  * a pure-Python character trie with greedy longest match (the SMedBERT reference code's method),
  * jieba segmentation of the same text (a private ``jieba.Tokenizer``, default dictionary).
Speeds are MB of UTF-8 text per second; the goal is ≥ 5 MB/s for kgplm.

    .venv/bin/python benchmarks/linking.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from kgplm import KGStore
from kgplm.text import EntityLinker, read_corpus
from kgplm.text.linking import normalize_for_matching

SHARED = Path(os.environ.get("KGPLM_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def best_of(repeat: int, function) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    folder = SHARED / "corpus" / "medical_dialogue"
    texts = [d.text for d in read_corpus(folder / "sample_IM_5000-6000.utf8.csv", columns=["title", "ask", "answer"])]
    texts += [d.text for d in read_corpus(folder / "IM_neike.utf8.txt")]
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    characters = sum(len(t) for t in texts)
    store = KGStore.from_cmekg(show_progress=False)
    build_seconds, linker = best_of(1, lambda: EntityLinker(store))
    print(f"corpus: {len(texts):,} documents, {characters:,} characters, {megabytes:.2f} MB; dictionary: "
          f"{linker.num_names:,} distinct names (≥ 2 characters) of {store.num_entities:,} entities; "
          f"linker built in {build_seconds:.1f} s", flush=True)
    rows = []

    linker.find(texts[0])  # load the compiled kernel
    seconds, _ = best_of(args.repeat, lambda: [linker.find(t) for t in texts])
    mentions = sum(len(linker.find(t)[0]) for t in texts)
    rows.append(("kgplm EntityLinker.find (arrays)", seconds, mentions))
    seconds, result = best_of(args.repeat, lambda: linker.link_many(texts))
    rows.append(("kgplm EntityLinker.link_many (Mention objects)", seconds, sum(map(len, result))))
    seconds, result = best_of(args.repeat, lambda: [linker.link(t) for t in texts])
    rows.append(("kgplm EntityLinker.link per document", seconds, sum(map(len, result))))

    try:
        import ahocorasick
    except ImportError:
        print("pyahocorasick is not installed; its row is skipped")
    else:
        automaton = ahocorasick.Automaton()
        for index, pattern in enumerate(linker.patterns):
            automaton.add_word(pattern, index)
        automaton.make_automaton()
        seconds, result = best_of(args.repeat, lambda: [list(automaton.iter_long(normalize_for_matching(t)))
                                                        for t in texts])
        rows.append(("pyahocorasick iter_long (no Latin boundaries)", seconds, sum(map(len, result))))

    root = python_trie(linker.patterns)
    seconds, result = best_of(1, lambda: [python_longest_match(root, normalize_for_matching(t)) for t in texts])
    rows.append(("pure-Python trie, greedy longest (SMedBERT code)", seconds, sum(result)))

    import jieba

    jieba.setLogLevel(60)
    segmenter = jieba.Tokenizer()
    segmenter.initialize()
    seconds, result = best_of(1, lambda: [list(segmenter.cut(t)) for t in texts])
    rows.append(("jieba segmentation (HMM on)", seconds, sum(map(len, result))))

    print("\n| method | seconds | MB/s | mentions (or words) |")
    print("|---|---|---|---|")
    for name, seconds, count in rows:
        print(f"| {name} | {seconds:.2f} | {megabytes / seconds:.2f} | {count:,} |")


if __name__ == "__main__":
    main()
