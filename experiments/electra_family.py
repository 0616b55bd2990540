"""The ELECTRA family on real text: every logged loss, and what product attribute prediction teaches (PAP AUC).

Rows come from the method registry: every method whose model is an ELECTRA generator/discriminator
pair (:class:`kgplm.models.electra.KgplmForReplacedTokenDetection`) and its fair control (plain
ELECTRA with the same masking and replacement fractions), all pre-trained on the same real text —
CMeKG facts written as sentences + the Chinese medical dialogue corpus (``_data.py``) — with one
vocabulary, the same encoder size, steps, batch and seeds.

1. Loss curves: each logged loss of each row, first and last logging window (means over seeds).

2. PAP training against the title-agnostic baseline: the PAP loss of the last logging windows
   beside :func:`kgplm.methods.epplm.evaluation.title_agnostic_baseline_loss` (the loss the best
   scorer of (attribute, value) without the title reaches under the run's negative law); PAP has
   learnt something about titles only below it. Rows for both ``pap_schedule`` values
   (``with_rtd``, kgplm's default; ``alternate``, the paper's Algorithm 1).

3. PAP AUC (:mod:`kgplm.methods.epplm.evaluation`), for the methods that train on product
   attributes and their control: ``--held-out`` drugs' (drug, 适应症) pairs are held out of PAP
   training with every other attribute of those drugs (``method_data={"pap_held_out": n}``), and
   every text line naming a held-out drug with one of its values is dropped from the corpus. Each
   held-out pair is scored against ``--negatives`` indications the drug does not have, matched in
   popularity and length; "shuffled" scores the same values against another held-out drug (must be
   at chance). Scorers: head — the model's own f(E(t ⊕ n)), f(E(v)); probe — D frozen, a fresh
   pooler + f trained with the PAP loss (``--probe-steps`` steps of 16 groups, popularity-matched
   negatives); zero-shot — ‖h_[CLS](t ⊕ n) − h_[CLS](v)‖₁ on D's raw [CLS] states. The drug-ignoring
   baselines (popularity, length) are printed beside them, with the chance interval.

    .venv/bin/python experiments/electra_family.py [--steps 400 --seeds 0 1 --pap-probability 0.05 0.5 --hidden 128 --layers 4 --methods epplm
        --schedules with_rtd alternate]

CPU budget; the lead machine is shared, so timings printed are wall-clock under that load.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import _shared  # noqa: E402,F401  (puts benchmarks/ on the path: _data, _runs)
from _data import cmekg_store, dialogues  # noqa: E402
from study import STUDIES, study  # noqa: E402

ATTRIBUTE = "适应症"


def family_rows(
    pap_probabilities: list[float], methods: list[str] | None = None, schedules: tuple[str, ...] = ("with_rtd",)
) -> dict[str, dict]:
    """Row name → kgplm.train arguments, from the registry (ELECTRA-family methods and their controls;
    only ``methods`` and their controls when given; PAP methods once per ρ and ``pap_schedule``)."""
    from kgplm.methods import available, get
    from kgplm.models.electra import KgplmForReplacedTokenDetection

    rows = {}
    for name in available():
        spec = get(name)
        if (
            name not in STUDIES
            or not issubclass(spec.model_class, KgplmForReplacedTokenDetection)
            or study(name).control is None
        ):
            continue
        if methods and name not in methods:
            continue
        if spec.needs("product_attributes"):
            for probability in pap_probabilities:
                for schedule in schedules:
                    rows[f"{name} ρ={probability:g} {schedule}"] = {
                        "method": name,
                        "pap": True,
                        "model_options": {"pap_probability": probability, "pap_schedule": schedule},
                    }
        else:
            rows[name] = {"method": name}
        control = study(name).control
        rows[f"{name} control: {control.method}"] = {
            "method": control.method,
            "masking": control.masking,
            "model_options": dict(control.model_options),
            "control_of_pap": spec.needs("product_attributes"),
        }
    return rows


def build_corpus(work: Path, store, training, num_facts: int, num_dialogues: int) -> Path:
    """CMeKG facts as sentences + dialogues, without every line naming a held-out drug with one of its values."""
    from kgplm.demo import verbalize_triples
    from kgplm.methods.epplm.evaluation import drop_leaking_text

    path = work / f"corpus-{num_facts}-{num_dialogues}-held-out-{len(training.held_out)}.txt"
    if not path.is_file():
        lines = verbalize_triples(store, num_facts) + dialogues(num_dialogues)
        kept = drop_leaking_text(lines, training)
        logging.info(
            "corpus: %d lines (%d dropped for naming a held-out drug with one of its values)",
            len(kept),
            len(lines) - len(kept),
        )
        path.write_text("\n".join(kept), encoding="utf-8")
    return path


def pretrain(
    work: Path,
    store,
    corpus: Path,
    rows: dict,
    steps: int,
    seeds: list[int],
    held_out: int,
    text_model: dict,
    max_length: int,
) -> dict:
    import kgplm

    runs: dict[str, list[Path]] = {}
    tokenizer = None
    for row, options in rows.items():
        for seed in seeds:
            slug = "".join(c if c.isalnum() else "-" for c in row)
            output = work / (
                f"pretrain-{slug}-{steps}-h{text_model['hidden_size']}x{text_model['num_hidden_layers']}"
                f"-l{max_length}-{corpus.stem}-{commit()}-{seed}"
            )
            started = time.perf_counter()
            kgplm.train(
                options["method"],
                graph=store,
                corpus=corpus,
                output_dir=output,
                text_model=dict(text_model),
                tokenizer=tokenizer,
                vocab_size=8000,
                masking=options.get("masking"),
                model_options=options.get("model_options"),
                method_data={"pap_held_out": held_out} if options.get("pap") else None,
                max_steps=steps,
                batch_size=16,
                learning_rate=1e-3,
                log_every=steps // 10,
                checkpoint_every=steps,
                max_length=max_length,
                seed=seed,
                progress=False,
            )
            tokenizer = tokenizer or output / "tokenizer"  # one vocabulary for every row
            logging.info("%s seed %d: %.0f s", row, seed, time.perf_counter() - started)
            runs.setdefault(row, []).append(output)
    return runs


def curves(run: Path) -> dict[str, tuple[float, float]]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    names = [k for k in records[-1] if k not in ("step", "learning_rate") and not k.endswith("accuracy")]
    result = {}
    for name in names:
        values = [r[name] for r in records if name in r]
        result[name] = (values[0], values[-1])
    return result


# -- PAP scoring -----------------------------------------------------------------------------------------------
def commit() -> str:
    import subprocess

    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
                cwd=Path(__file__).resolve().parent,
                check=True,
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def head_scorer(model, tokenizer):
    def score(pairs):
        with torch.no_grad():
            model.eval()
            query = encode_texts(model, tokenizer, [t for t, _ in pairs], [ATTRIBUTE] * len(pairs), head=True)
            value = encode_texts(model, tokenizer, [v for _, v in pairs], None, head=True)
            return (-(query - value).abs().sum(-1)).numpy()

    return score


def zero_shot_scorer(model, tokenizer):
    def score(pairs):
        with torch.no_grad():
            model.eval()
            query = encode_texts(model, tokenizer, [t for t, _ in pairs], [ATTRIBUTE] * len(pairs), head=False)
            value = encode_texts(model, tokenizer, [v for _, v in pairs], None, head=False)
            return (-(query - value).abs().sum(-1)).numpy()

    return score


def encode_texts(model, tokenizer, first, second, *, head: bool, batch_size: int = 256) -> torch.Tensor:
    parts = []
    for start in range(0, len(first), batch_size):
        encoded = tokenizer(
            first[start : start + batch_size],
            second[start : start + batch_size] if second is not None else None,
            truncation=True,
            max_length=64 if second is not None else 20,
            padding=True,
            return_tensors="pt",
        )
        types = encoded.get("token_type_ids")
        if head:
            parts.append(model.encode_texts(encoded["input_ids"], encoded["attention_mask"], types))
        else:
            parts.append(model.discriminate(encoded["input_ids"], encoded["attention_mask"], types)[:, 0])
    return torch.cat(parts)


def pap_table(runs: dict, rows: dict, training, evaluation, probe_steps: int, work: Path) -> dict:
    from kgplm.methods.epplm.evaluation import evaluate_scorer, probe_scorer
    from kgplm.models import load_pretrained
    from kgplm.text.tokenization import load_tokenizer

    cache = work / "pap_auc.json"
    table = json.loads(cache.read_text(encoding="utf-8")) if cache.is_file() else {}
    for row, paths in runs.items():
        if not (rows[row].get("pap") or rows[row].get("control_of_pap")):
            continue
        for seed, path in enumerate(paths):
            key = f"{path.name}:{probe_steps}:{len(evaluation.positives)}x{len(evaluation.negatives)}"
            if key in table:
                continue
            model = load_pretrained(path / "model")
            tokenizer = load_tokenizer(path / "tokenizer")
            result = {
                "zero-shot": evaluate_scorer(zero_shot_scorer(model, tokenizer), evaluation),
                "probe": evaluate_scorer(
                    probe_scorer(model, tokenizer, training, steps=probe_steps, seed=seed), evaluation
                ),
            }
            if rows[row].get("pap"):
                result["head"] = evaluate_scorer(head_scorer(model, tokenizer), evaluation)
            table[key] = result
            cache.write_text(json.dumps(table), encoding="utf-8")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--pap-probability", type=float, nargs="+", default=[0.05, 0.5])
    parser.add_argument("--schedules", nargs="+", default=["with_rtd", "alternate"], help="pap_schedule values")
    parser.add_argument("--facts", type=int, default=3000)
    parser.add_argument("--dialogues", type=int, default=3000)
    parser.add_argument("--held-out", type=int, default=300)
    parser.add_argument("--negatives", type=int, default=4)
    parser.add_argument("--probe-steps", type=int, default=300)
    parser.add_argument("--hidden", type=int, default=128, help="D's hidden size (G's is a third)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--methods", nargs="+", help="only these ELECTRA-family methods (and their controls)")
    parser.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / ".cache" / "electra_family")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    started = time.perf_counter()
    from kgplm.methods.epplm import EpplmConfig, ProductAttributes
    from kgplm.methods.epplm.evaluation import (
        auc,
        build_evaluation_set,
        chance_interval,
        held_out_triples,
        length_scores,
        pap_held_out_pairs,
        popularity_scores,
        title_agnostic_baseline_loss,
    )

    print(f"commit {commit()}")
    args.work.mkdir(parents=True, exist_ok=True)
    store = cmekg_store(args.work)
    attributes = ProductAttributes.from_store(store)
    pairs = pap_held_out_pairs(attributes, args.held_out)  # what the stage holds out with pap_held_out
    training = attributes.holding_out(pairs, held_out_triples(attributes, pairs))
    evaluation = build_evaluation_set(training, per_pair=args.negatives)
    corpus = build_corpus(args.work, store, training, args.facts, args.dialogues)
    rows = family_rows(args.pap_probability, args.methods, tuple(args.schedules))
    text_model = dict(
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=max(1, args.hidden // 32),
        intermediate_size=4 * args.hidden,
        max_position_embeddings=512,
    )
    runs = pretrain(args.work, store, corpus, rows, args.steps, args.seeds, args.held_out, text_model, args.max_length)

    print(
        f"\nELECTRA family on real text: {args.steps} steps, batch 16 of ≤ {args.max_length} tokens, hidden "
        f"{args.hidden}, {args.layers} layers, seeds {args.seeds}; each logged loss, first → last logging window "
        f"(mean over seeds)"
    )
    for row, paths in runs.items():
        per_seed = [curves(path) for path in paths]
        cells = []
        for name in per_seed[0]:
            first = statistics.mean(c[name][0] for c in per_seed)
            last = statistics.mean(c[name][1] for c in per_seed)
            cells.append(f"{name} {first:.3f} → {last:.3f}")
        print(f"  {row}: " + ", ".join(cells))

    laws = sorted(
        {EpplmConfig(**rows[row].get("model_options", {})).pap_negatives for row in runs if rows[row].get("pap")}
    )
    baselines = {law: title_agnostic_baseline_loss(training, law) for law in laws}
    print(
        f"\nPAP training loss (mean of the last 3 logged windows with a PAP value, mean over seeds) against the "
        f"title-agnostic baseline (the best scorer of (attribute, value) alone; constant scorer 2 ln 2 = "
        f"{2 * np.log(2):.4f}):"
    )
    for row, paths in runs.items():
        if not rows[row].get("pap"):
            continue
        law = EpplmConfig(**rows[row]["model_options"]).pap_negatives
        losses = []
        for path in paths:
            records = [json.loads(line) for line in (path / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
            values = [r["pap"] for r in records if "pap" in r]
            losses.append(statistics.mean(values[-3:]) if values else float("nan"))
        loss = statistics.mean(losses)
        verdict = "below" if loss < baselines[law] else "NOT below"
        print(f"  {row:<34} PAP {loss:.4f}  baseline ({law} negatives) {baselines[law]:.4f}  → {verdict}")

    table = pap_table(runs, rows, training, evaluation, args.probe_steps, args.work)
    low, high = chance_interval(len(evaluation.positives), len(evaluation.negatives))
    print(
        f"\nPAP AUC on {len(evaluation.positives)} held-out (drug, {ATTRIBUTE}) pairs of CMeKG vs {args.negatives} "
        f"popularity- and length-matched {ATTRIBUTE} values each; chance 0.500, 95% chance interval "
        f"[{low:.3f}, {high:.3f}]; 'shuffled': the same values against another held-out drug "
        f"({len(evaluation.shuffled_positives)} pairs; must be at chance); mean ± std over seeds {args.seeds}; "
        f"probe: {args.probe_steps} steps of 16 groups on frozen D"
    )
    header = f"{'row':<34}" + "".join(
        f"{name:>16}" for name in ("head", "head shuffled", "probe", "probe shuffled", "zero-shot", "z-s shuffled")
    )
    print(header)
    print("-" * len(header))
    for row, paths in runs.items():
        results = [
            table.get(f"{path.name}:{args.probe_steps}:{len(evaluation.positives)}x{len(evaluation.negatives)}")
            for path in paths
        ]
        if not results[0]:
            continue

        def cell(name, part):
            values = [r[name][part] for r in results if name in r]
            if not values:
                return "—"
            return f"{statistics.mean(values):.3f}" + (f" ± {statistics.stdev(values):.3f}" if len(values) > 1 else "")

        print(
            f"{row:<34}"
            + "".join(
                f"{cell(name, part):>16}" for name in ("head", "probe", "zero-shot") for part in ("auc", "shuffled")
            )
        )
    for name, scores in (
        ("baseline: popularity (drug-ignoring)", lambda p: popularity_scores(training, p)),
        ("baseline: shorter wins (drug-ignoring)", length_scores),
    ):
        print(
            f"{name:<34}{auc(scores(evaluation.positives), scores(evaluation.negatives)):>16.3f}"
            f"{auc(scores(evaluation.shuffled_positives), scores(evaluation.shuffled_negatives)):>16.3f}"
        )
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
