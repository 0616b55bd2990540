"""How long does sentence-order prediction take to leave chance on real text? A long CPU run, logged.

SMedBERT's SOP stays at ln 2 ≈ 0.693 in short CPU runs on real text, and so does Hugging Face's
``BertForPreTraining`` fed the same batches; SOP alone learns (tests). This run trains the SOP
input format at the largest scale this machine allows in a few hours — the MLM control with SOP
(the same pairs, masking and heads as SMedBERT's, without the knowledge module, which does not
touch [CLS]) — and prints the SOP loss and accuracy curve. Results go to
``experiments/results/sop_curve.json``; rerun with the same arguments to resume.

    .venv/bin/python experiments/sop_curve.py [--method mlm --hidden 256 --layers 4 --steps 3000 --batch 32]
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import time
from pathlib import Path

import _shared  # noqa: E402,F401  (puts benchmarks/ on the path: _data, _runs)
from _data import cmekg_store, mixed_corpus  # noqa: E402

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", default="mlm", help="mlm (the SOP control) or smedbert")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--facts", type=int, default=6000)
    parser.add_argument("--dialogues", type=int, default=7644)
    parser.add_argument("--work", type=Path, default=HERE / ".cache" / "sop_curve")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    import kgplm

    args.work.mkdir(parents=True, exist_ok=True)
    store = cmekg_store(args.work)
    text = mixed_corpus(args.work / f"corpus-{args.facts}-{args.dialogues}.txt", store, args.facts, args.dialogues)
    name = f"{args.method}-h{args.hidden}-l{args.layers}-b{args.batch}-lr{args.learning_rate}-s{args.steps}"
    options = {"use_sop": True} if args.method == "mlm" else {}
    started = time.perf_counter()
    result = kgplm.train(
        args.method,
        graph=store,
        corpus=text,
        output_dir=args.work / name,
        text_model={
            "hidden_size": args.hidden,
            "num_hidden_layers": args.layers,
            "num_attention_heads": max(1, args.hidden // 64),
            "intermediate_size": 4 * args.hidden,
            "max_position_embeddings": 512,
        },
        vocab_size=8000,
        masking="whole_entity",
        model_options=options,
        kg_method="transe",
        entity_dim=64,
        kg_epochs=2,
        max_steps=args.steps,
        batch_size=args.batch,
        learning_rate=args.learning_rate,
        log_every=50,
        checkpoint_every=250,
        max_length=128,
        progress=True,
    )
    seconds = time.perf_counter() - started
    curve = [
        {"step": r["step"], "sop": r.get("sop"), "sop_accuracy": r.get("sop_accuracy"), "mlm": r.get("mlm")}
        for r in result.metrics
    ]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
    ).stdout.strip()
    output = HERE / "results" / "sop_curve.json"
    output.parent.mkdir(exist_ok=True)
    record = json.loads(output.read_text(encoding="utf-8")) if output.is_file() else {}
    record[name] = {
        "commit": commit,
        "arguments": {k: str(v) for k, v in vars(args).items()},
        "seconds_this_call": round(seconds),
        "examples": len(kgplm.text.load_corpus(args.work / name / "corpus")),
        "curve": curve,
    }
    output.write_text(json.dumps(record, indent=1), encoding="utf-8")
    print(f"\nSOP on real text: {name} (masking whole_entity, SOP pairs within each 128-token chunk)")
    print(f"{'step':>6}{'sop loss':>10}{'sop acc':>9}{'mlm':>8}")
    for row in curve[:: max(1, len(curve) // 30)] + ([curve[-1]] if curve else []):
        print(f"{row['step']:>6}{row['sop']:>10.4f}{row['sop_accuracy']:>9.3f}{row['mlm']:>8.3f}")
    print(f"chance: loss {0.6931:.4f}, accuracy 0.5; written to {output}")


if __name__ == "__main__":
    main()
