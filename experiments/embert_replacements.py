"""What EMBERT's CECP replacements put into real text, and how much of BEM's target stays visible.

Builds the linked corpus of ``--dialogues`` Chinese medical consultations (CMeKG, its thesaurus and
entity segments, bert-base-chinese word pieces, chunks of ``--max-length`` tokens), draws every
chunk's replacements ``--repeats`` times with :class:`~kgplm.methods.embert.EmbertCollator` as
``kgplm.train`` builds it (the run's entity frequencies, the KG's 1-hop neighbours, the config's
``cecp_rate`` and ``cecp_max_entity_share``), and prints (issue 27.13):

* replacements, and the share of each label;
* surfaces in a script other than the mention's (a Latin name in place of a Chinese mention, or
  the reverse), and Latin surfaces inside text that is mostly Chinese;
* the entities whose surfaces are spliced in most often, with their shares of all replacements;
* among inconsistent replacements, the share whose entity a KG triple joins to the original's, and
  the share that is a thesaurus synonym of the original (both excluded by construction: 0 expected);
* BEM: target tokens left visible by the 80/10/10 replacement (kept or a random token).

``--max-entity-share 1 --any-neighbour`` prints the shares without the cap and the neighbour
exclusion. Prints the commit and every setting; nothing is cached between runs except the
compiled CMeKG store under ``experiments/.cache``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _shared  # noqa: E402,F401  (puts benchmarks/ on the path: _data, _runs)
from _data import SHARED, cmekg_store, dialogues  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache"


def commit() -> str:
    result = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).resolve().parent
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent,
    ).stdout.strip()
    return (result.stdout.strip() or "unknown") + ("+dirty" if dirty else "")


def han_share(text: str) -> float:
    from kgplm.methods.embert.batching import is_han

    letters = [c for c in text if c.isalpha()]
    return sum(is_han(c) for c in letters) / max(len(letters), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dialogues", type=int, default=1000)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cecp-rate", type=float, default=None, help="default: EmbertConfig's")
    parser.add_argument("--max-entity-share", type=float, default=None, help="default: EmbertConfig's")
    parser.add_argument("--any-neighbour", action="store_true", help="do not exclude KG neighbours")
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()

    from kgplm.methods.embert import EmbertCollator, EmbertConfig, EntityLexicon, build_entity_segments, build_thesaurus
    from kgplm.methods.embert.batching import LATIN
    from kgplm.text import EntityLinker, Masker, build_corpus, load_tokenizer
    from kgplm.training.loader import example_seeds

    config = EmbertConfig()
    rate = config.cecp_rate if args.cecp_rate is None else args.cecp_rate
    share = config.cecp_max_entity_share if args.max_entity_share is None else args.max_entity_share
    print(
        f"commit {commit()}; dialogues {args.dialogues}, max_length {args.max_length}, repeats {args.repeats}, "
        f"cecp_rate {rate}, max_entity_share {share}, neighbours {'kept' if args.any_neighbour else 'excluded'}"
    )

    store = cmekg_store(CACHE)
    tokenizer = load_tokenizer(SHARED / "vocab" / "bert-base-chinese" / "vocab.txt")
    linker = EntityLinker(store)
    texts = dialogues(args.dialogues)
    thesaurus = build_thesaurus(store)
    segments = build_entity_segments(store, linker=linker)
    work = CACHE / f"embert_corpus_{args.dialogues}_{args.max_length}"
    dataset = build_corpus(
        texts,
        store=store,
        tokenizer=tokenizer,
        output_dir=work,
        linker=linker,
        whole_word=False,
        max_length=args.max_length,
        progress=False,
    )
    neighbors = None if args.any_neighbour else store.adjacency(symmetric=True)
    lexicon = EntityLexicon(
        thesaurus,
        segments,
        tokenizer,
        store.primary_type_ids(),
        linker.count(texts),
        max_replacement_tokens=config.cecp_max_tokens,
        neighbors=neighbors,
        max_entity_share=share,
    )
    collator = EmbertCollator(
        lexicon=lexicon,
        cecp_rate=rate,
        bem_rate=config.bem_rate,
        bem_max_positions=config.bem_max_positions,
        max_sequence_length=512,
        masker=Masker.from_tokenizer(tokenizer, "bert"),
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    adjacency = store.adjacency(symmetric=True)
    rows = dataset[:]
    labels = Counter()
    other_script = latin_in_chinese = 0
    by_entity = Counter()
    neighbour = synonym = 0
    bem_targets = bem_visible = 0
    for repeat in range(args.repeats):
        for start in range(0, len(dataset), 64):
            positions = np.arange(start, min(start + 64, len(dataset)))
            seeds = example_seeds(repeat, 0, positions)
            part = {key: [rows[key][i] for i in positions] for key in rows}
            for offset, index in enumerate(positions):
                rng = np.random.default_rng([int(v) for v in seeds[offset]])
                example = collator.make_example(part, offset, rng)
                original = np.asarray(rows["input_ids"][index])
                original_spans = np.asarray(rows["mention_spans"][index]).reshape(-1, 2)
                text_is_chinese = han_share(tokenizer.decode(original, skip_special_tokens=True)) > 0.5
                base_entities = np.asarray(rows["mention_entity_ids"][index])[example.mention_rows]
                for mention, label in zip(example.replaced.tolist(), example.consistent.tolist()):
                    labels[label] += 1
                    name = int(example.mention_names[mention])
                    entity, old = int(example.mention_entities[mention]), int(base_entities[mention])
                    old_start, old_end = original_spans[example.mention_rows[mention]]
                    old_script = lexicon.span_script(original[old_start:old_end])
                    new_script = int(lexicon.script[name])
                    other_script += new_script != old_script
                    latin_in_chinese += text_is_chinese and new_script == LATIN
                    by_entity[entity] += 1
                    if label == 0:
                        neighbour += entity in set(adjacency.indices[adjacency.indptr[old] : adjacency.indptr[old + 1]])
                        synonym += lexicon.names[name] in set(thesaurus.synonyms(old))
            batch = collator(part, seeds)  # the same examples, masked: BEM's target tokens as the model sees them
            for row, (start_, end_) in zip(batch["bem_batch"].tolist(), batch["bem_target_spans"].tolist()):
                bem_targets += end_ - start_
                bem_visible += int((batch["input_ids"][row, start_:end_] != tokenizer.mask_token_id).sum())
    total = sum(labels.values())
    inconsistent = labels[0]
    print()
    print("| measure | value |")
    print("|---|---|")
    print(f"| chunks × repeats | {len(dataset)} × {args.repeats} |")
    print(f"| replacements (consistent / inconsistent) | {total} ({labels[1]} / {labels[0]}) |")
    print(f"| surface in another script than the mention's | {other_script / max(total, 1):.1%} |")
    print(f"| Latin surface inside mostly-Chinese text | {latin_in_chinese / max(total, 1):.1%} |")
    for entity, count in by_entity.most_common(args.top):
        print(f"| share of replacements: {store.entity_name(entity)} | {count / max(total, 1):.1%} |")
    print(
        f"| inconsistent replacements that are KG neighbours of the original | {neighbour / max(inconsistent, 1):.1%} |"
    )
    print(f"| inconsistent replacements that are synonyms of the original | {synonym / max(inconsistent, 1):.1%} |")
    print(
        f"| BEM target tokens left visible (kept or random) | {bem_visible / max(bem_targets, 1):.1%} "
        f"of {bem_targets} |"
    )


if __name__ == "__main__":
    main()
