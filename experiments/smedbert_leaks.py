"""SMedBERT's entity-level copy path in MNeM, measured on real text.

A sequence's masked mentions are *knowledge* mentions (their PEPR neighbours are injected); the
others are MNeM targets (their neighbours are predicted). When an MNeM target names the same
*entity* as a knowledge mention of its sequence, the neighbours it must predict are exactly the
ones injected, and the MNeM head can copy them. This script builds the linked corpus of CMeKG
facts written as sentences and of Chinese medical consultations (bert-base-chinese vocabulary,
CMeKG linker, PEPR top-10 of the linked entities), collates it with SMedBERT's collator (whole-entity
masking, SOP) and prints, per corpus:

* ``repeat``: the share of linked mentions whose entity occurs earlier in the same sequence;
* ``before``: the share of unmasked mentions (the MNeM targets of the mention-level split) whose
  entity is a knowledge mention's in the same sequence;
* ``after``: the same share over the MNeM targets the collator now emits (expected 0), and how
  many unmasked mentions it leaves out of MNeM for that reason.

The store, the corpora and the table are cached under ``experiments/.cache``. Prints a Markdown
table and the git commit.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _shared  # noqa: E402,F401  (puts benchmarks/ on the path: _data, _runs)
from _data import SHARED, cmekg_store, dialogues  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache"


def _corpus(name: str, texts: list[str], store, tokenizer, max_length: int, table=None):
    from kgplm.text.corpus import build_corpus

    suffix = "linked" if table is None else "neighbours"
    return build_corpus(
        texts,
        store=store,
        tokenizer=tokenizer,
        max_length=max_length,
        whole_word=False,
        output_dir=CACHE / f"leaks_{name}_{len(texts)}_{max_length}_{suffix}",
        neighbor_table=table,
        progress=False,
    )


def measure(dataset, collator, batch_size: int, repeats: int) -> dict[str, float]:
    """Counts over ``repeats`` maskings of the whole corpus (seeds (repeat, batch, position))."""
    from kgplm.methods.smedbert.batching import SmedbertCollator

    counts = {"mentions": 0, "repeats": 0, "unmasked": 0, "unmasked_injected": 0, "targets": 0, "targets_injected": 0}
    for repeat in range(repeats):
        for first in range(0, len(dataset), batch_size):
            rows = dataset[first : first + batch_size]
            size = len(rows["input_ids"])
            seeds = np.stack([np.full(size, repeat), np.full(size, first), np.arange(size)], 1)
            recorded = {}

            class Recording(SmedbertCollator):
                def method_inputs(self, batch, rows, examples, original_ids, labels, rngs):
                    recorded["examples"], recorded["labels"] = examples, labels
                    super().method_inputs(batch, rows, examples, original_ids, labels, rngs)

            recording = Recording.__new__(Recording)
            recording.__dict__.update(collator.__dict__)
            batch = recording(rows, seeds)
            chosen = recorded["labels"] >= 0
            entity_of = {}  # (sequence, start, end) → entities (independent of the collator's split)
            for row, example in enumerate(recorded["examples"]):
                entities = np.asarray(rows["mention_entity_ids"][row], dtype=np.int64)[example.mention_rows]
                masked = [bool(chosen[row, s:e].all()) for s, e in example.mention_spans]
                injected = {int(e) for e, m in zip(entities, masked) if m}
                seen: set[int] = set()
                for (start, end), entity, is_masked in zip(example.mention_spans, entities, masked):
                    counts["mentions"] += 1
                    counts["repeats"] += int(entity) in seen
                    seen.add(int(entity))
                    entity_of.setdefault((row, int(start), int(end)), set()).add(int(entity))
                    if not is_masked:
                        counts["unmasked"] += 1
                        counts["unmasked_injected"] += int(entity) in injected
                entity_of[("injected", row)] = injected
            for row, (start, end) in zip(batch["mnem_mention_batch"].tolist(), batch["mnem_mention_spans"].tolist()):
                counts["targets"] += 1
                counts["targets_injected"] += bool(entity_of[(row, start, end)] & entity_of[("injected", row)])
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, default=1000)
    parser.add_argument("--dialogues", type=int, default=1000)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from kgplm.demo import verbalize_triples
    from kgplm.kg.pepr import top_k_neighbors
    from kgplm.methods.smedbert import SmedbertCollator, TypeFrequencySampler
    from kgplm.text.masking import Masker
    from kgplm.text.tokenization import load_tokenizer

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    ).stdout.strip()
    store = cmekg_store(CACHE)
    tokenizer = load_tokenizer(SHARED / "vocab" / "bert-base-chinese" / "vocab.txt")
    texts = {"facts": verbalize_triples(store, args.facts), "dialogues": dialogues(args.dialogues)}
    linked = {name: _corpus(name, part, store, tokenizer, args.max_length) for name, part in texts.items()}
    seeds = sorted({e for corpus in linked.values() for row in corpus["mention_entity_ids"] for e in row})
    table = top_k_neighbors(store, seeds, k=10, mode="fast", show_progress=False)
    sampler = TypeFrequencySampler(np.zeros(store.num_entities, np.int64), store.primary_type_ids())
    collator = SmedbertCollator(
        masker=Masker.from_tokenizer(tokenizer, "whole_entity", seed=0),
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
        sentence_order=True,
        sampler=sampler,
        num_negatives=4,
    )
    print(f"commit {commit}; {args.repeats} maskings, max_length {args.max_length}, whole-entity masking, SOP\n")
    print(
        "| corpus | sequences | mentions | repeats of an entity in its sequence | unmasked mentions "
        "| before: unmasked whose entity is injected | after: MNeM targets | after: whose entity is injected |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, part in texts.items():
        dataset = _corpus(name, part, store, tokenizer, args.max_length, table)
        c = measure(dataset, collator, 64, args.repeats)
        print(
            f"| {name} | {len(dataset)} | {c['mentions']} | {c['repeats'] / c['mentions']:.1%} | {c['unmasked']} "
            f"| {c['unmasked_injected']} ({c['unmasked_injected'] / c['unmasked']:.1%}) | {c['targets']} "
            f"| {c['targets_injected']} ({c['targets_injected'] / max(c['targets'], 1):.1%}) |"
        )


if __name__ == "__main__":
    main()
