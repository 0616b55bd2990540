"""Training-step benchmark: every registered method against plain BERT MLM of the same size and batch.

Data: CMeKG (shared data) and 400 consultations of the Chinese medical dialogue corpus, prepared
once through kgplm's own stages (vocabulary, every KG artefact any registered method needs, the
linked corpus) and cached in ``benchmarks/.cache/train_step``. Then, for each method of
``kgplm.methods.available()``, the same examples (same indices and example seeds) are timed over
``--steps`` steps after 3 warm-up steps:

  * collate  — the method's collator (SOP pairs, masking, its own inputs);
  * step     — forward + backward + AdamW update of the model;
  * linking  — the per-batch cost of linking and encoding the batch's raw text (what the
               corpus builder does once, offline), for scale.

The goal is every knowledge-enhanced method's step ≤ 1.25× the plain MLM step. Threads: torch
uses all cores; time nothing else on the machine meanwhile.

    .venv/bin/python benchmarks/train_step.py [--hidden 256 --layers 4 --batch 16 --length 128 --steps 20]
                                              [--methods mlm,kebiolm]   # a subset; mlm is always timed
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from _data import cmekg_store, dialogues  # noqa: E402  (benchmarks/ is the script's directory)

CACHE = Path(__file__).resolve().parent / ".cache" / "train_step"


def prepare(length: int, methods: list[str]):
    """(store, tokenizer, linked corpus, artefacts) of the cached run; built on first use, with only the
    artefacts (and the KG embedding, TransE or TransR) that ``methods`` need."""
    from kgplm.methods import get
    from kgplm.training import stages
    from kgplm.training.run import RunDirectory

    CACHE.mkdir(parents=True, exist_ok=True)
    corpus = CACHE / "dialogue.txt"
    if not corpus.is_file():
        corpus.write_text("\n".join(dialogues(400)), encoding="utf-8")
    run = RunDirectory(CACHE / f"run-{length}")
    store, graph = stages.prepare_store(run, cmekg_store(CACHE), progress=False)
    specs = [get(name) for name in methods]
    kg_method = "transr" if any(spec.kg_embedding == "transr" for spec in specs) else "transe"
    arguments = dict(graph=graph, tokenizer=None, text_model=None, vocab_size=8000, pepr_mode="fast",
                     num_neighbors=10, kg_method=kg_method, entity_dim=100, kg_epochs=1, seed=0, max_length=length,
                     neighbor_table=None, kg_embeddings=None)
    run.write_run_config({"kgplm_run": 1, "benchmark": "train_step", **arguments})
    inputs = stages.StageInputs(arguments=arguments, store=store, corpus=corpus, corpus_options={}, progress=False)
    tokenizer = stages.prepare_tokenizer(run, inputs)
    stages.run_artefact_stages(set().union(*(spec.artefacts for spec in specs)), run, inputs)
    dataset = stages.prepare_corpus(run, inputs, tokenizer, masking="whole_word")
    return store, tokenizer, dataset, inputs.artefacts, run


def build(name, store, tokenizer, artefacts, run, text, length):
    from kgplm.kg.embeddings import KGEmbeddings
    from kgplm.methods import MethodContext, get
    from kgplm.training import stages

    spec = get(name)
    own = {key: artefacts[key] for key in spec.artefacts}
    if spec.kg_embedding == "transe":
        own["kg_embeddings"] = KGEmbeddings.load(run.embeddings_dir("transe"), store=store)
    torch.manual_seed(0)
    model, _ = stages.build_model(spec, store, tokenizer, text_model=text, model_options={}, max_length=length,
                                  entity_dim=100, artefacts=own)
    context = MethodContext(config=model.config, tokenizer=tokenizer, store=store, masking=spec.default_masking,
                            seed=0, artefacts=own)
    if spec.prepare_model is not None:
        spec.prepare_model(model, context)
    return model, spec.build_collator(context)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--methods", default=None, help="comma-separated registered methods (default: all)")
    args = parser.parse_args()

    from kgplm.methods import available, get
    from kgplm.text import EntityLinker, read_corpus
    from kgplm.training.trainer import _batch_indices, example_seeds

    methods = available() if args.methods is None else ["mlm"] + [m for m in args.methods.split(",") if m != "mlm"]
    for name in methods:
        get(name)  # an unknown name fails here, listing the known ones
    store, tokenizer, dataset, artefacts, run = prepare(args.length, methods)
    text = dict(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=max(1, args.hidden // 64),
                intermediate_size=4 * args.hidden, max_position_embeddings=512)
    cache: dict = {}
    batches = [(dataset[_batch_indices(step, args.batch, len(dataset), 0, cache)],
                example_seeds(0, step, np.arange(args.batch))) for step in range(args.steps + 3)]
    results = {}
    for name in methods:
        model, collator = build(name, store, tokenizer, artefacts, run, text, args.length)
        model.train()
        optimizer = torch.optim.AdamW(model.trainable_parameters(), lr=1e-4)
        collate_times, step_times, mentions = [], [], []
        for step, (rows, seeds) in enumerate(batches):
            started = time.perf_counter()
            batch = collator(rows, seeds)
            collated = time.perf_counter()
            output = model(**batch)
            optimizer.zero_grad(set_to_none=True)
            output.loss.backward()
            optimizer.step()
            finished = time.perf_counter()
            if step >= 3:
                collate_times.append(collated - started)
                step_times.append(finished - collated)
                mentions.append(len(batch.get("mention_spans", [])) + len(batch.get("mnem_mention_spans", [])))
        results[name] = (statistics.median(collate_times), statistics.median(step_times), np.mean(mentions))
        del model

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
          f"{torch.get_num_threads()}; median of {args.steps} steps (CPU)\n")
    header = f"{'method':<10}{'mentions':>9}{'collate ms':>12}{'step ms':>10}{'total ms':>10}" \
             f"{'step ×mlm':>11}{'total ×mlm':>12}{'collate %':>11}"
    print(header)
    print("-" * len(header))
    base_step = results["mlm"][1]
    base_total = sum(results["mlm"][:2])
    for name, (collate, step, mention_count) in results.items():
        total = collate + step
        print(f"{name:<10}{mention_count:>9.1f}{collate * 1e3:>12.1f}{step * 1e3:>10.1f}"
              f"{total * 1e3:>10.1f}{step / base_step:>11.3f}{total / base_total:>12.3f}{100 * collate / total:>10.1f}%")
    print(f"\nlinking + tokenizing one batch of raw documents (offline, in build_corpus): {linking * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
