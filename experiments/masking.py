"""Whole-entity masking rates on real text: are mention tokens chosen as often as other tokens?

Builds the linked corpus of ``--dialogues`` Chinese medical consultations (CMeKG linker,
bert-base-chinese vocabulary from ``../shared/data``, sequences of ``--max-length`` tokens), then
masks it ``--repeats`` times with ``Masker(scheme="whole_entity")`` and reports, per token class,
the share of maskable tokens chosen as MLM targets (the scheme's rate is 15%):

* mention tokens vs other tokens (issue: 13.7% vs 15.5% before the per-unit draw);
* tokens of 4-token mentions in sequences of at most 24 tokens (never masked before);
* sequences with a maskable token but no target.

The sequences and their mention spans are computed once and cached as ``.npz`` under
``experiments/.cache``, so the same inputs can be masked by another checkout's ``Masker``
(``PYTHONPATH=<old checkout> python experiments/masking.py --from-cache``; the call
``masker(input_ids, attention_mask=..., mention_spans=...)`` is the same in every version).
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _shared  # noqa: E402,F401  (puts benchmarks/ on the path: _data, _runs)
from _data import SHARED, cmekg_store, dialogues  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache"


def build_inputs(num_dialogues: int, max_length: int, path: Path) -> None:
    from kgplm.text.corpus import build_corpus
    from kgplm.text.tokenization import load_tokenizer

    store = cmekg_store(CACHE)
    tokenizer = load_tokenizer(SHARED / "vocab" / "bert-base-chinese" / "vocab.txt")
    dataset = build_corpus(
        dialogues(num_dialogues),
        store=store,
        tokenizer=tokenizer,
        output_dir=CACHE / f"masking_corpus_{num_dialogues}_{max_length}",
        whole_word=False,
        max_length=max_length,
        progress=False,
    )
    rows = [dataset[i] for i in range(len(dataset))]
    width = max(len(row["input_ids"]) for row in rows)
    input_ids = np.full((len(rows), width), tokenizer.pad_token_id, dtype=np.int64)
    attention = np.zeros((len(rows), width), dtype=np.int64)
    spans, owners = [], []
    for index, row in enumerate(rows):
        input_ids[index, : len(row["input_ids"])] = row["input_ids"]
        attention[index, : len(row["input_ids"])] = 1
        for start, end in row["mention_spans"]:
            spans.append((start, end))
            owners.append(index)
    special = np.array(sorted(set(tokenizer.all_special_ids)), dtype=np.int64)
    np.savez(
        path,
        input_ids=input_ids,
        attention_mask=attention,
        spans=np.array(spans, dtype=np.int64).reshape(-1, 2),
        owners=np.array(owners, dtype=np.int64),
        special_ids=special,
        mask_token_id=tokenizer.mask_token_id,
        vocab_size=len(tokenizer),
    )


def measure(path: Path, repeats: int, batch_size: int = 64) -> dict[str, float]:
    from kgplm.text.masking import Masker

    data = np.load(path)
    input_ids, attention = data["input_ids"], data["attention_mask"]
    spans_by_row = [[] for _ in range(len(input_ids))]
    for (start, end), owner in zip(data["spans"].tolist(), data["owners"].tolist()):
        spans_by_row[owner].append((start, end))
    masker = Masker(
        "whole_entity",
        mask_token_id=int(data["mask_token_id"]),
        vocab_size=int(data["vocab_size"]),
        special_token_ids=data["special_ids"].tolist(),
        seed=0,
    )
    maskable = attention.astype(bool) & ~np.isin(input_ids, data["special_ids"])
    in_mention = np.zeros_like(maskable)
    in_short_four = np.zeros_like(maskable)  # tokens of 4-token mentions in sequences of ≤ 24 tokens
    for row, spans in enumerate(spans_by_row):
        for start, end in spans:
            in_mention[row, start:end] = True
            if end - start == 4 and attention[row].sum() <= 24:
                in_short_four[row, start:end] = True
    chosen = np.zeros(maskable.shape, dtype=np.int64)
    empty = 0
    for _ in range(repeats):
        for start in range(0, len(input_ids), batch_size):
            rows = slice(start, start + batch_size)
            _, labels = masker(
                torch.from_numpy(input_ids[rows]),
                attention_mask=torch.from_numpy(attention[rows]),
                mention_spans=spans_by_row[rows],
            )
            targets = labels.numpy() != -100
            chosen[rows] += targets
            empty += int((~targets.any(1) & maskable[rows].any(1)).sum())
    mention, other = maskable & in_mention, maskable & ~in_mention
    return {
        "sequences": len(input_ids),
        "mention_tokens": int(mention.sum()),
        "other_tokens": int(other.sum()),
        "mention_rate": chosen[mention].sum() / (repeats * mention.sum()),
        "other_rate": chosen[other].sum() / (repeats * other.sum()),
        "short_four_tokens": int(in_short_four.sum()),
        "short_four_rate": chosen[in_short_four].sum() / max(repeats * in_short_four.sum(), 1),
        "sequences_without_target": empty / repeats,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialogues", type=int, default=1000)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--from-cache", action="store_true", help="mask the cached inputs only (another checkout)")
    args = parser.parse_args()
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"masking_inputs_{args.dialogues}_{args.max_length}.npz"
    if not args.from_cache and not path.is_file():
        build_inputs(args.dialogues, args.max_length, path)
    result = measure(path, args.repeats)
    import kgplm

    print(
        f"whole_entity masking, rate 0.15; {args.dialogues} consultations, max_length {args.max_length}, "
        f"{result['sequences']} sequences, {args.repeats} draws each; kgplm at {Path(kgplm.__file__).parent}\n"
    )
    print("| tokens | count | chosen as targets |")
    print("|---|---|---|")
    print(f"| in linked mentions | {result['mention_tokens']:,} | {result['mention_rate']:.2%} |")
    print(f"| other maskable tokens | {result['other_tokens']:,} | {result['other_rate']:.2%} |")
    print(
        f"| in 4-token mentions of sequences ≤ 24 tokens | {result['short_four_tokens']:,} | "
        f"{result['short_four_rate']:.2%} |"
    )
    print(f"\nsequences with a maskable token but no target, per draw: {result['sequences_without_target']:.1f}")


if __name__ == "__main__":
    main()
