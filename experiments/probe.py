"""KG cloze probe: a tiny plain-MLM control and a tiny KeBioLM pre-trained on the same real text and budget.

Data: CMeKG (shared data); text = the first ``--facts`` CMeKG entity descriptions written as sentences
(:func:`kgplm.demo.verbalized_facts`) + ``--dialogues`` consultations of the Chinese medical dialogue
corpus. The probe (:mod:`kgplm.evaluation.probing`) asks about facts those descriptions state, at most
``--per-relation`` queries per relation, half of them held out: ``kgplm.train(exclude_triples=probe)``
removes their sentences from the text and their triples from TransE. Both models: ``--hidden``,
``--layers``, the same vocabulary (built on the filtered text), whole-entity masking, ``--steps`` steps
of 16 sequences. Prints the leak check (held-out facts stated in the text each model trained on), KeBioLM's
loss curve and its mention detection against the linker on unseen dialogues, and the probe table with
the model-free baseline and chance: the primary figure is recall on the *hard* queries (those the
baseline, the slot's most frequent fillers among the other facts, misses), seen and held out, with
chance beside it; the easy queries and the paper's type 1 / type 2 split are reported apart.

Every stage (the graph, text, probe and both pre-trainings) is cached in one directory under
``--work`` keyed by every setting and the code version (``_runs.run_directory``: the git commit, plus
a hash of any uncommitted change), which the benchmark prints: a run of other settings or other code
is never resumed or reused.

    .venv/bin/python experiments/probe.py [--steps 300 --hidden 128 --layers 4 --per-relation 10 --threads 1
                                          --work DIR]
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np
import _shared  # noqa: E402,F401  (puts benchmarks/ on the path: _data, _runs)
from _data import cmekg_store, dialogues, fact_probe, mixed_corpus  # noqa: E402
from _runs import code_version, run_directory  # noqa: E402

ROWS = {  # row name → kgplm.train arguments
    "mlm (control, whole-entity masking)": {"method": "mlm", "masking": "whole_entity"},
    "kebiolm": {"method": "kebiolm"},
}
#: kgplm.train settings shared by both rows (with the command line's, they key the run directory)
TRAINING = {
    "vocab_size": 8000,
    "kg_method": "transe",
    "entity_dim": 64,
    "kg_epochs": 2,
    "batch_size": 16,
    "learning_rate": 1e-3,
    "seed": 0,
}


def prepare(work: Path, store, num_facts: int, num_dialogues: int, per_relation: int):
    from kgplm.evaluation.probing import Probe

    corpus = mixed_corpus(work / "corpus.txt", store, num_facts, num_dialogues)
    return corpus, Probe.load(fact_probe(work / "probe.json", store, num_facts, per_relation))


def stated_facts(texts, store, probe) -> dict[str, int]:
    """How many held-out facts, and how many facts of seen queries, some sentence of ``texts`` states."""
    from kgplm.training.heldout import HeldOutTriples

    counts = {}
    for name, wanted in (("held_out", True), ("seen", False)):
        queries = [q for q in probe.queries if q.held_out == wanted]
        triples = [(store.entity_id(q.known), 0, store.entity_id(a)) for q in queries for a in q.answers]
        checker = HeldOutTriples(store, np.array(triples))
        counts[f"{name}_sentences"] = sum(checker.filter_text(text)[1] for text in texts)
        counts[f"{name}_queries"] = len(queries)
    return counts


def detection_quality(run: Path, store, texts: list[str]) -> tuple[float, float, int, int]:
    """Exact-span precision and recall of KeBioLM's own detections against the linker's mentions."""
    import torch

    from kgplm.methods.kebiolm.modeling import KEBIOLM_ENCODING
    from kgplm.models import load_pretrained
    from kgplm.text.alignment import char_spans_to_token_spans
    from kgplm.text.linking import EntityLinker
    from kgplm.text.tokenization import load_tokenizer

    model, tokenizer, linker = (
        load_pretrained(run / "model").eval(),
        load_tokenizer(run / "tokenizer"),
        EntityLinker(store),
    )
    encoded = tokenizer(
        texts, padding=True, truncation=True, max_length=128, return_tensors="pt", return_offsets_mapping=True
    )
    offsets = encoded.pop("offset_mapping").numpy()
    with torch.no_grad():
        extras = KEBIOLM_ENCODING.encode(model, **encoded).extras
    predicted = set(zip(extras["mention_batch"].tolist(), map(tuple, extras["mention_spans"].tolist())))
    gold = set()
    for row, text in enumerate(texts):
        starts, ends, _ = linker.find(text)
        spans = char_spans_to_token_spans(offsets[row], np.stack([starts, ends], 1) if len(starts) else [])
        gold |= {(row, (int(s), int(e))) for s, e in spans.tolist() if s >= 0}
    hits = len(predicted & gold)
    return hits / max(len(predicted), 1), hits / max(len(gold), 1), len(predicted), len(gold)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--per-relation", type=int, default=10)
    parser.add_argument("--facts", type=int, default=3000)
    parser.add_argument("--dialogues", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / ".cache" / "probe")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    import torch

    import kgplm
    from kgplm.evaluation.probing import probe_model, probe_table, result_rows
    from kgplm.models import CPU_TEXT_ENCODER
    from kgplm.text.corpus import load_corpus
    from kgplm.text.tokenization import load_tokenizer

    started = time.perf_counter()
    torch.set_num_threads(args.threads)
    version = code_version()
    settings = {**{k: v for k, v in vars(args).items() if k != "work"}, "training": TRAINING, "rows": ROWS}
    work = run_directory(args.work, "probe", settings, version=version)
    print(f"code version {version}; run directory {work}")
    store = cmekg_store(work)
    corpus, probe = prepare(work, store, args.facts, args.dialogues, args.per_relation)
    raw = corpus.read_text(encoding="utf-8").splitlines()
    before = stated_facts(raw, store, probe)
    text_model = dict(
        CPU_TEXT_ENCODER,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=max(1, args.hidden // 32),
        intermediate_size=4 * args.hidden,
    )
    tokenizer, table, runs, timings = None, {}, {}, {}
    for row, options in ROWS.items():
        output = work / f"pretrain-{options['method']}"
        began = time.perf_counter()
        runs[row] = kgplm.train(
            options["method"],
            graph=store,
            corpus=corpus,
            output_dir=output,
            text_model=text_model,
            tokenizer=tokenizer,
            masking=options.get("masking"),
            exclude_triples=str(work / "probe.json"),
            max_steps=args.steps,
            log_every=20,
            checkpoint_every=args.steps,
            max_length=args.max_length,
            progress=False,
            **TRAINING,
        )
        timings[row] = time.perf_counter() - began
        tokenizer = tokenizer or output / "tokenizer"
        result = probe_model(output, probe, store=store, progress=False)
        rows = result_rows(result, name=row)
        table[row] = rows[row]
        table.update({name: summary for name, summary in rows.items() if name != row})  # baseline, chance
    words = load_tokenizer(tokenizer)
    trained_on = [
        words.decode(ids, skip_special_tokens=True).replace(" ", "")
        for ids in load_corpus(runs["kebiolm"].output_dir / "corpus")["input_ids"]
    ]
    after = stated_facts(trained_on, store, probe)

    print(f"\ncode version {version}")
    print(
        f"KG cloze probe on CMeKG: {len(probe.queries)} queries ({before['held_out_queries']} held out, "
        f"{before['seen_queries']} seen) over {len({q.relation for q in probe.queries})} relations, at most "
        f"{args.per_relation} per relation, answers of 1-10 tokens, beam 5 per length"
    )
    print(
        f"text: {args.facts} CMeKG descriptions + {args.dialogues} dialogues; sentences stating a held-out fact: "
        f"{before['held_out_sentences']} in the raw text, {after['held_out_sentences']} in the text the models "
        f"trained on; sentences stating a seen query's fact there: {after['seen_sentences']}"
    )
    split = runs["kebiolm"].load_model().config.layer_split
    print(
        f"both models: hidden {args.hidden}, {args.layers} layers, the same vocabulary, whole-entity masking, "
        f"{args.steps} steps × 16 sequences of ≤ {args.max_length} tokens, lr 1e-3; KeBioLM: {split[0]} + {split[1]} "
        f"layers, TransE (dim 64, 2 epochs, held-out triples excluded)"
    )
    kebiolm = runs["kebiolm"]
    for name in ("mlm", "ed", "el", "ed_accuracy", "el_accuracy"):
        curve = kebiolm.curve(name)
        print(
            f"  kebiolm {name:<12} step {kebiolm.metrics[0]['step']}: {curve[0]:.3f} → step "
            f"{kebiolm.metrics[-1]['step']}: {curve[-1]:.3f}"
        )
    control = runs["mlm (control, whole-entity masking)"].curve("mlm")
    print(f"  control mlm          {control[0]:.3f} → {control[-1]:.3f}")
    unseen_dialogues = dialogues(args.dialogues + 200)[args.dialogues :]
    precision, recall, predicted, gold = detection_quality(kebiolm.output_dir, store, unseen_dialogues)
    print(
        f"KeBioLM's own mention detection on 200 unseen dialogues vs the linker: precision {precision:.3f}, "
        f"recall {recall:.3f} ({predicted} detected, {gold} linked)"
    )
    print(
        "pre-training time: "
        + ", ".join(f"{row} {seconds:.0f} s" for row, seconds in timings.items())
        + " (CPU, shared with other jobs)\n"
    )
    print(probe_table(table))
    print(
        f"(kebiolm's probe runs its fusion on its own detections: precision {precision:.3f}, recall {recall:.3f} "
        f"on unseen dialogues)"
    )
    print(f"\ntotal {time.perf_counter() - started:.0f} s, {args.threads} torch thread(s); code version {version}")


if __name__ == "__main__":
    main()
