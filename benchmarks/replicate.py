"""The replication table: every landed pre-training method vs plain MLM, at one small fixed budget.

Pre-trains each method on the same real text (CMeKG facts written as sentences + the Chinese
medical dialogue corpus) with the same vocabulary, encoder size and steps; fine-tunes each on
cMedQANER (entity F1), cMedQQ (accuracy) and cMedIC (accuracy) with 3 seeds; runs the
unsupervised similarity probe (D1–D3, Acc@1) and the cloze probe (:mod:`kgplm.evaluation.probing`);
prints one table, mean ± std over seeds. This is an honest small-scale check of the papers'
claims on a CPU budget, not a tuned leaderboard. Every stage is cached under ``--work`` (rerun
to resume or to add columns).

    .venv/bin/python benchmarks/replicate.py [--steps 400 --seeds 0 1 2 --work benchmarks/.cache/replicate]
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import statistics
import time
from pathlib import Path

SHARED = Path(os.environ.get("KGPLM_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
TASKS = {  # task: (max train examples, epochs)
    "cmedqaner": (800, 4),
    "cmedqq": (2000, 2),
    "cmedic": (None, 3),
}
METHODS = ("mlm", "smedbert")


def build_corpus(work: Path, store, num_facts: int, num_dialogues: int) -> Path:
    from kgplm.demo import verbalize_triples

    path = work / "corpus.txt"
    if path.is_file():
        return path
    with open(SHARED / "corpus" / "medical_dialogue" / "sample_IM_5000-6000.utf8.csv", encoding="utf-8") as handle:
        dialogues = [(r["ask"] + r["answer"]).replace("\n", " ") for r in list(csv.DictReader(handle))[:num_dialogues]]
    lines = verbalize_triples(store, num_facts) + dialogues
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def pretrain(work: Path, store, corpus: Path, steps: int) -> dict[str, tuple[Path, float]]:
    import kgplm
    from kgplm.models import CPU_TEXT_ENCODER

    runs = {}
    for method in ("smedbert", "mlm"):  # SMedBERT first: the MLM run reuses its vocabulary
        started = time.perf_counter()
        output = work / f"pretrain-{method}"
        tokenizer = None if method == "smedbert" else work / "pretrain-smedbert" / "tokenizer"
        result = kgplm.train(method, graph=store, corpus=corpus, output_dir=output, text_model=dict(CPU_TEXT_ENCODER),
                             tokenizer=tokenizer, vocab_size=8000, kg_method="transe", entity_dim=64, kg_epochs=2,
                             max_steps=steps, batch_size=16, learning_rate=1e-3, log_every=20,
                             checkpoint_every=steps, max_length=128, progress=False)
        curve = result.curve("loss")
        logging.info("%s: loss %.3f → %.3f in %.0f s", method, curve[0], curve[-1], time.perf_counter() - started)
        runs[method] = (output, time.perf_counter() - started)
    return runs


def finetune_all(work: Path, runs, seeds) -> dict:
    import kgplm

    table = {}
    for method, (run, _) in runs.items():
        for task, (limit, epochs) in TASKS.items():
            for seed in seeds:
                output = work / f"finetune-{method}-{task}-{seed}"
                results = output / "results.json"
                if not results.is_file():
                    kgplm.finetune(model=run, task=task, data_dir=SHARED / "tasks", output_dir=output, epochs=epochs,
                                   batch_size=32, learning_rate=5e-4, max_train_examples=limit, max_eval_examples=600,
                                   seed=seed, progress=False)
                table.setdefault(method, {}).setdefault(task, []).append(
                    json.loads(results.read_text(encoding="utf-8"))["test"]["main"])
    return table


def similarity_all(work: Path, store, runs, corpus: Path) -> dict:
    from kgplm.evaluation.similarity import build_similarity_sets, evaluate_similarity

    cache = work / "similarity.json"
    if cache.is_file():
        return json.loads(cache.read_text(encoding="utf-8"))
    sets = build_similarity_sets(store, corpus_texts=corpus.read_text(encoding="utf-8").splitlines(), seed=0)
    table = {method: evaluate_similarity(run / "model", run / "tokenizer", sets) for method, (run, _) in runs.items()}
    table["_sizes"] = {name: len(queries) for name, queries in sets.items()}
    cache.write_text(json.dumps(table), encoding="utf-8")
    return table


def cloze_all(work: Path, store, runs) -> dict:
    from kgplm.evaluation.probing import build_cloze_probes, evaluate_cloze
    from kgplm.models import load_pretrained
    from kgplm.text.tokenization import load_tokenizer

    cache = work / "cloze.json"
    if cache.is_file():
        return json.loads(cache.read_text(encoding="utf-8"))
    tokenizer = load_tokenizer(work / "pretrain-smedbert" / "tokenizer")  # shared by every method
    probes = build_cloze_probes(store, tokenizer, max_probes=500, seed=0)
    table = {method: evaluate_cloze(load_pretrained(run / "model"), tokenizer, probes) for method, (run, _) in runs.items()}
    cache.write_text(json.dumps(table), encoding="utf-8")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--facts", type=int, default=3000)
    parser.add_argument("--dialogues", type=int, default=3000)
    parser.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / ".cache" / "replicate")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from kgplm import KGStore

    started = time.perf_counter()
    args.work.mkdir(parents=True, exist_ok=True)
    store_dir = args.work / "cmekg_store"
    if (store_dir / "manifest.json").is_file():
        store = KGStore.load(store_dir)
    else:
        store = KGStore.from_cmekg(SHARED / "kg" / "cmekg" / "triples.tsv.gz", show_progress=False)
        store.save(store_dir)
    corpus = build_corpus(args.work, store, args.facts, args.dialogues)
    runs = pretrain(args.work, store, corpus, args.steps)
    scores = finetune_all(args.work, runs, args.seeds)
    similarity = similarity_all(args.work, store, runs, corpus)
    cloze = cloze_all(args.work, store, runs)

    def cell(values):
        if len(values) == 1:
            return f"{100 * values[0]:.1f}"
        return f"{100 * statistics.mean(values):.1f} ± {100 * statistics.stdev(values):.1f}"

    columns = [f"{t} ({'F1' if t == 'cmedqaner' else 'acc'})" for t in TASKS]
    sim_columns = [name for name in ("D1", "D2", "D3") if similarity and name in similarity.get("_sizes", {})]
    print(f"\nReplication at a fixed small budget: {args.steps} pre-training steps, hidden 128, 4 layers; "
          f"seeds {args.seeds}; test scores ×100, mean ± std")
    header = f"{'method':<10}" + "".join(f"{c:>22}" for c in columns + [f"sim {c} Acc@1" for c in sim_columns]
                                         + ["cloze exact", "cloze token"])
    print(header)
    print("-" * len(header))
    for method in runs:
        row = f"{method:<10}" + "".join(f"{cell(scores[method][t]):>22}" for t in TASKS)
        row += "".join(f"{100 * similarity[method][c]:>22.1f}" for c in sim_columns)
        row += f"{100 * cloze[method]['exact']:>22.1f}{100 * cloze[method]['token']:>22.1f}"
        print(row)
    if sim_columns:
        print("similarity query counts: " + ", ".join(f"{c} {similarity['_sizes'][c]}" for c in sim_columns)
              + "; chance Acc@1 = 5.0 (1 of 20 candidates)")
    print(f"cloze probes: {cloze[next(iter(runs))]['probes']} CMeKG triples, tails of 1-4 tokens")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
