"""The replication table: every knowledge method against its fair control and its ablations, at one small budget.

Rows come from the method registry: each knowledge-enhanced method, its fair control (the record's
``control``: for SMedBERT plain MLM with the same whole-entity masking and SOP input), each ablation
it offers (``ablations``), and plain token-masking MLM for reference. All pre-train on the same real
text (CMeKG facts written as sentences + the Chinese medical dialogue corpus) with the same
vocabulary, encoder size and steps; fine-tunes each on
cMedQANER (entity F1), cMedQQ (accuracy) and cMedIC (accuracy) with 3 seeds; runs the
unsupervised similarity probe (D1–D3, Acc@1) and the KG cloze probe (:mod:`kgplm.evaluation.probing`:
facts the CMeKG sentences state, half of them held out of every row's pre-training with
``exclude_triples``; relation-level macro recall@5 on seen and unseen facts, with the model-free
baseline and chance printed under the table); prints one table, mean ± std over seeds. This is an honest small-scale check of the papers'
claims on a CPU budget, not a tuned leaderboard. Every stage is cached under ``--work`` (rerun
to resume or to add columns).

    .venv/bin/python benchmarks/replicate.py [--steps 400 --seeds 0 1 2 --work benchmarks/.cache/replicate]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

from _data import SHARED, cmekg_store, fact_probe, mixed_corpus  # noqa: E402  (benchmarks/ is the script's directory)

TASKS = {  # task: (max train examples, epochs)
    "cmedqaner": (800, 4),
    "cmedqq": (2000, 2),
    "cmedic": (None, 3),
}


def rows() -> dict[str, dict]:
    """Row name → kgplm.train arguments (method, masking, model_options), from the registry."""
    from kgplm.methods import available, get

    table = {}
    for name in available():
        spec = get(name)
        if spec.control is None:
            continue
        table[name] = {"method": name}
        control = spec.control
        table[f"{name} control: {control.method}"] = {"method": control.method, "masking": control.masking,
                                                      "model_options": dict(control.model_options)}
        for ablation, options in spec.ablations.items():
            table[f"{name} − {ablation.replace('no_', 'no ').replace('_', ' ')}"] = {
                "method": name, "model_options": dict(options)}
    table["mlm (token masking, no SOP)"] = {"method": "mlm"}
    return table


def build_corpus(work: Path, store, num_facts: int, num_dialogues: int) -> Path:
    return mixed_corpus(work / "corpus.txt", store, num_facts, num_dialogues)


def pretrain(work: Path, store, corpus: Path, steps: int, probe: Path) -> dict[str, tuple[Path, float]]:
    import kgplm
    from kgplm.models import CPU_TEXT_ENCODER

    runs = {}
    tokenizer = None
    for row, options in rows().items():  # the first row builds the vocabulary every later row reuses
        started = time.perf_counter()
        slug = "".join(c if c.isalnum() else "-" for c in row)
        output = work / f"pretrain-{slug}-{steps}"
        result = kgplm.train(options["method"], graph=store, corpus=corpus, output_dir=output,
                             text_model=dict(CPU_TEXT_ENCODER), tokenizer=tokenizer, vocab_size=8000,
                             masking=options.get("masking"), model_options=options.get("model_options"),
                             kg_method="transe", entity_dim=64, kg_epochs=2, exclude_triples=str(probe),
                             max_steps=steps, batch_size=16,
                             learning_rate=1e-3, log_every=20, checkpoint_every=steps, max_length=128,
                             progress=False)
        tokenizer = tokenizer or output / "tokenizer"
        curve = result.curve("loss")
        logging.info("%s: loss %.3f → %.3f in %.0f s", row, curve[0], curve[-1], time.perf_counter() - started)
        runs[row] = (output, time.perf_counter() - started)
    return runs


def finetune_all(work: Path, runs, seeds) -> dict:
    import kgplm

    table = {}
    for method, (run, _) in runs.items():
        for task, (limit, epochs) in TASKS.items():
            for seed in seeds:
                output = work / f"finetune-{run.name}-{task}-{seed}"
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

    cache = work / "similarity.json"  # keyed by run directory (which names the row and the steps)
    table = json.loads(cache.read_text(encoding="utf-8")) if cache.is_file() else {}
    sets = build_similarity_sets(store, corpus_texts=corpus.read_text(encoding="utf-8").splitlines(), seed=0)
    for run, _ in runs.values():
        if run.name not in table:
            table[run.name] = evaluate_similarity(run / "model", run / "tokenizer", sets)
    table["_sizes"] = {name: len(queries) for name, queries in sets.items()}
    cache.write_text(json.dumps(table), encoding="utf-8")
    return {row: table[run.name] for row, (run, _) in runs.items()} | {"_sizes": table["_sizes"]}


def cloze_all(work: Path, store, runs, probe: Path) -> dict:
    from kgplm.evaluation.probing import probe_model, result_rows

    cache = work / "cloze.json"  # keyed by run directory
    table = json.loads(cache.read_text(encoding="utf-8")) if cache.is_file() else {}
    for run, _ in runs.values():
        if run.name not in table:
            table[run.name] = probe_model(run, probe, store=store, progress=False)
    cache.write_text(json.dumps(table), encoding="utf-8")
    return {row: result_rows(table[run.name], name=row) for row, (run, _) in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--facts", type=int, default=3000)
    parser.add_argument("--dialogues", type=int, default=3000)
    parser.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / ".cache" / "replicate")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    started = time.perf_counter()
    args.work.mkdir(parents=True, exist_ok=True)
    store = cmekg_store(args.work)
    corpus = build_corpus(args.work, store, args.facts, args.dialogues)
    probe = fact_probe(args.work / "probe.json", store, args.facts)
    runs = pretrain(args.work, store, corpus, args.steps, probe)
    scores = finetune_all(args.work, runs, args.seeds)
    similarity = similarity_all(args.work, store, runs, corpus)
    cloze = cloze_all(args.work, store, runs, probe)

    def cell(values):
        if len(values) == 1:
            return f"{100 * values[0]:.1f}"
        return f"{100 * statistics.mean(values):.1f} ± {100 * statistics.stdev(values):.1f}"

    columns = [f"{t} ({'F1' if t == 'cmedqaner' else 'acc'})" for t in TASKS]
    sim_columns = [name for name in ("D1", "D2", "D3") if similarity and name in similarity.get("_sizes", {})]
    print(f"\nReplication at a fixed small budget: {args.steps} pre-training steps, hidden 128, 4 layers; "
          f"seeds {args.seeds}; test scores ×100, mean ± std")
    width = max(len(row) for row in runs) + 2
    header = f"{'row':<{width}}" + "".join(f"{c:>22}" for c in columns + [f"sim {c} Acc@1" for c in sim_columns]
                                            + ["probe R@5 seen", "probe R@5 unseen"])
    print(header)
    print("-" * len(header))
    for method in runs:
        row = f"{method:<{width}}" + "".join(f"{cell(scores[method][t]):>22}" for t in TASKS)
        row += "".join(f"{100 * similarity[method][c]:>22.1f}" for c in sim_columns)
        summary = cloze[method][method]
        row += f"{100 * summary['recall@5_seen']:>22.1f}{100 * summary['recall@5_unseen']:>22.1f}"
        print(row)
    if sim_columns:
        print("similarity query counts: " + ", ".join(f"{c} {similarity['_sizes'][c]}" for c in sim_columns)
              + "; chance Acc@1 = 5.0 (1 of 20 candidates)")
    references = {name: summary for name, summary in cloze[next(iter(runs))].items() if name not in runs}
    for name, summary in references.items():
        print(f"{name:<{width}}" + " " * 22 * (len(columns) + len(sim_columns))
              + f"{100 * summary['recall@5_seen']:>22.1f}{100 * summary['recall@5_unseen']:>22.1f}")
    first = cloze[next(iter(runs))][next(iter(runs))]
    print(f"cloze probe: {first['queries_seen']} seen / {first['queries_unseen']} held-out queries over "
          f"{first['relations']} CMeKG relations (relation-level macro recall@5, answers of 1-10 tokens)")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
