"""Do a method's losses decrease on real text? One ``kgplm.train`` run on CMeKG + real Chinese medical text.

The corpus is CMeKG's facts written as sentences plus consultations of the medical dialogue corpus
(``_data.mixed_corpus``); the graph is the full CMeKG. Prints every logged loss at each logging
step, then first → last and the ratio, for any registered method:

    .venv/bin/python experiments/real_text_losses.py --method NAME [--steps 300 --facts 1500 --dialogues 1500]
        [--model-options '{"field": value}']
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import _shared  # noqa: E402,F401  (puts benchmarks/ on the path: _data, _runs)
from _data import cmekg_store, mixed_corpus  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache" / "real_text_losses"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", required=True)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--facts", type=int, default=1500)
    parser.add_argument("--dialogues", type=int, default=1500)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--log-every", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model-options", type=json.loads, default={}, help="the method's config fields, as JSON")
    args = parser.parse_args()

    import kgplm
    from kgplm.methods import get

    CACHE.mkdir(parents=True, exist_ok=True)
    store = cmekg_store(CACHE)
    corpus = mixed_corpus(CACHE / f"corpus-{args.facts}-{args.dialogues}.txt", store, args.facts, args.dialogues)
    text = dict(
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=max(1, args.hidden // 64),
        intermediate_size=4 * args.hidden,
        max_position_embeddings=160,
    )
    options = "".join(f"-{key}={value}" for key, value in sorted(args.model_options.items()))
    output = CACHE / (
        f"{args.method}-{args.steps}-{args.facts}-{args.dialogues}-{args.hidden}x{args.layers}-s{args.seed}{options}"
    )
    started = time.perf_counter()
    result = kgplm.train(
        args.method,
        graph=store,
        corpus=corpus,
        output_dir=output,
        text_model=text,
        vocab_size=4000,
        kg_method="transe",
        entity_dim=32,
        kg_epochs=1,
        max_steps=args.steps,
        batch_size=args.batch,
        learning_rate=args.learning_rate,
        log_every=args.log_every,
        model_options=args.model_options,
        checkpoint_every=args.steps,
        max_length=128,
        seed=args.seed,
        progress=False,
    )
    elapsed = time.perf_counter() - started
    names = ["loss", *(name for name in get(args.method).losses if result.curve(name))]
    print(
        f"\n{args.method}: {args.steps} steps of {args.batch} chunks (≤ 128 tokens) of {args.facts} CMeKG fact "
        f"sentences + {args.dialogues} consultations; encoder {args.hidden}×{args.layers}; {elapsed / 60:.1f} min "
        f"(CPU, shared machine)\n"
    )
    print(f"{'step':>6}" + "".join(f"{name:>10}" for name in names))
    for record in result.metrics:
        print(
            f"{record['step']:>6}"
            + "".join(f"{record[name]:>10.4f}" if name in record else f"{'':>10}" for name in names)
        )
    print()
    for name in names:
        curve = result.curve(name)
        print(f"{name:>6}: {curve[0]:.4f} → {curve[-1]:.4f}  (last/first {curve[-1] / curve[0]:.3f})")


if __name__ == "__main__":
    main()
