"""Training-step benchmark: SMedBERT vs plain BERT MLM of the same size and batch, in one run.

Data: CMeKG (shared data) and 400 consultations of the Chinese medical dialogue corpus, prepared
once by ``kgplm.train`` (vocabulary, PEPR table, TransE embeddings, linked corpus) and cached in
``benchmarks/.cache/train_step``. Then, for each method, the same batches (same example indices)
are timed over ``--steps`` steps after 3 warm-up steps:

  * collate  — the collator: SOP pairs, masking, flat mention/neighbour tensors, negatives;
  * step     — forward + backward + AdamW update of the model;
  * linking  — the per-batch cost of linking and encoding the batch's raw text (what the
               corpus builder does once, offline), for scale.

The goal is an SMedBERT step ≤ 1.25× the plain MLM step. Threads: torch uses all cores.

    .venv/bin/python benchmarks/train_step.py [--hidden 256 --layers 4 --batch 16 --length 128 --steps 20]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch

SHARED = Path(os.environ.get("KGPLM_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
CACHE = Path(__file__).resolve().parent / ".cache" / "train_step"


def prepare(length: int) -> Path:
    import kgplm
    from kgplm import KGStore

    run = CACHE / f"run-{length}"
    if (run / "corpus" / "manifest.json").is_file():
        return run
    CACHE.mkdir(parents=True, exist_ok=True)
    corpus = CACHE / "dialogue.txt"
    with open(SHARED / "corpus" / "medical_dialogue" / "sample_IM_5000-6000.utf8.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))[:400]
    corpus.write_text("\n".join((r["ask"] + r["answer"]).replace("\n", " ") for r in rows), encoding="utf-8")
    store = KGStore.from_cmekg(SHARED / "kg" / "cmekg" / "triples.tsv.gz", show_progress=False)
    kgplm.train("smedbert", graph=store, corpus=corpus, output_dir=run, text_model={"hidden_size": 32,
                "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64},
                vocab_size=8000, kg_method="transe", entity_dim=100, kg_epochs=1, max_steps=1, max_length=length,
                progress=False)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    from kgplm import KGStore
    from kgplm.kg.embeddings import KGEmbeddings
    from kgplm.models import KgplmConfig, KgplmForMaskedLM, SmedbertForPreTraining
    from kgplm.text import EntityLinker, load_corpus, load_tokenizer, read_corpus
    from kgplm.text.masking import Masker
    from kgplm.training.collator import PretrainingCollator, TypeFrequencySampler
    from kgplm.training.trainer import _batch_indices

    run = prepare(args.length)
    store = KGStore.load(run / "kg" / "store")
    tokenizer = load_tokenizer(run / "tokenizer")
    dataset = load_corpus(run / "corpus")
    embeddings = KGEmbeddings.load(run / "kg" / "embeddings")
    frequencies = np.load(run / "kg" / "entity_frequencies.npy")
    text = dict(vocab_size=len(tokenizer), hidden_size=args.hidden, num_hidden_layers=args.layers,
                num_attention_heads=max(1, args.hidden // 64), intermediate_size=4 * args.hidden,
                max_position_embeddings=512)
    knowledge = dict(num_entities=store.num_entities, num_relations=store.num_relations,
                     num_entity_types=store.num_types, entity_dim=embeddings.entity_dim,
                     relation_dim=embeddings.relation_dim)

    def collator(method: str) -> PretrainingCollator:
        smedbert = method == "smedbert"
        masker = Masker.from_tokenizer(tokenizer, "whole_entity" if smedbert else "bert")
        sampler = TypeFrequencySampler(frequencies, store.primary_type_ids()) if smedbert else None
        return PretrainingCollator(masker=masker, cls_token_id=tokenizer.cls_token_id,
                                   sep_token_id=tokenizer.sep_token_id, pad_token_id=tokenizer.pad_token_id,
                                   sentence_order=smedbert, knowledge=smedbert, sampler=sampler)

    torch.manual_seed(0)
    models = {"mlm": KgplmForMaskedLM(KgplmConfig(method="mlm", **text)),
              "smedbert": SmedbertForPreTraining(KgplmConfig(method="smedbert", **text, **knowledge))}
    models["smedbert"].kg.load_embeddings(embeddings)
    cache: dict = {}
    batches = [dataset[_batch_indices(step, args.batch, len(dataset), 0, cache)] for step in range(args.steps + 3)]
    results = {}
    for method, model in models.items():
        model.train()
        optimizer = torch.optim.AdamW(model.trainable_parameters(), lr=1e-4)
        make = collator(method)
        collate_times, step_times, mentions, edges = [], [], [], []
        for step, rows in enumerate(batches):
            started = time.perf_counter()
            batch = make(rows, step)
            collated = time.perf_counter()
            output = model(**batch)
            optimizer.zero_grad(set_to_none=True)
            output.loss.backward()
            optimizer.step()
            finished = time.perf_counter()
            if step >= 3:
                collate_times.append(collated - started)
                step_times.append(finished - collated)
                mentions.append(len(batch.get("mention_spans", [])))
                edges.append(len(batch.get("neighbor_mention", [])))
        results[method] = (statistics.median(collate_times), statistics.median(step_times), np.mean(mentions),
                           np.mean(edges))

    # linking + encoding of a batch's worth of raw documents (the corpus builder's offline work)
    linker = EntityLinker(store)
    documents = [d.text for d in read_corpus(CACHE / "dialogue.txt")][: args.batch]
    started = time.perf_counter()
    for text_ in documents:
        linker.find(text_)
        tokenizer(text_, max_length=args.length, truncation=True, return_offsets_mapping=True)
    linking = time.perf_counter() - started

    print(f"\nCMeKG ({store.num_entities:,} entities), {len(dataset):,} linked chunks of ≤ {args.length} tokens; "
          f"encoder hidden {args.hidden}, {args.layers} layers, batch {args.batch}; torch threads "
          f"{torch.get_num_threads()}; median of {args.steps} steps\n")
    header = f"{'method':<10}{'mentions':>9}{'edges':>8}{'collate ms':>12}{'step ms':>10}{'total ms':>10}" \
             f"{'step ×mlm':>11}{'total ×mlm':>12}{'collate %':>11}"
    print(header)
    print("-" * len(header))
    base_step = results["mlm"][1]
    base_total = sum(results["mlm"][:2])
    for method, (collate, step, mention_count, edge_count) in results.items():
        total = collate + step
        print(f"{method:<10}{mention_count:>9.1f}{edge_count:>8.1f}{collate * 1e3:>12.1f}{step * 1e3:>10.1f}"
              f"{total * 1e3:>10.1f}{step / base_step:>11.3f}{total / base_total:>12.3f}{100 * collate / total:>10.1f}%")
    print(f"\nlinking + tokenizing one batch of raw documents (offline, in build_corpus): {linking * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
