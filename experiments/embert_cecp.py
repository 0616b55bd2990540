"""EMBERT's consistency task (CECP) continued from the MLM base, beside its positive control (issue 28.2).

From scratch, CECP with the shipped negatives (another entity of the mention's type and script, by
capped corpus frequency, written with a non-display name) stays at ln 2 (issue 27.12); the paper
starts from a pre-trained BERT. This benchmark continues pre-training from the replication run's
MLM + SOP base (``experiments/replicate.py``, ``pretrain_base``) in two arms, the same in everything
but how inconsistent replacements are drawn:

* ``shipped``: EMBERT as registered (``cecp_negatives="shipped"``);
* ``fixed_surface``: the POSITIVE CONTROL — every inconsistent replacement is one and the same name
  (``cecp_negatives="fixed_surface"``), so the surface alone gives the label away; a CECP that cannot
  learn this from the base has a broken head, positions or labels. Not the paper's method.

Each arm is ``kgplm.train("embert", init_from=base, ...)`` with the replication budget's batch,
learning rate and max length, the shared tokenizer and linked corpus, ``--steps`` steps logged every
25. Reported per arm (``experiments/results/embert_cecp.json`` and ``.md``; ``--smoke``:
``embert_cecp-smoke.*``):

* the training curve of ``cecp`` (loss) and ``cecp_accuracy`` from ``metrics.jsonl``, each logged
  value the mean of the window's per-step values, beside chance: ln 2 and 0.5 ± the 95 % half-width
  of that mean under a fair coin, 1.96 · √(Σ_s 0.25 / n_s) / S over the window's S steps with n_s
  CECP targets each (counted by replaying the run's batches through its collator); the first logged
  step above the band, and whether every later one stays above it;
* a held-out CECP loss and accuracy at the end, on consultations the pre-training corpus does not
  hold (rows after the first ``Budget.dialogues`` of the dialogue sample that ``_data.mixed_corpus``
  reads; any whose text is a line of the corpus is dropped), linked and chunked as the training
  corpus, replacements drawn with a fixed seed by the arm's own collator; beside chance (ln 2 and
  0.5 ± 1.96 · √(0.25 / n)) and the best constant predictor of that label mix.

The base must use the shared tokenizer: its vocabulary is compared token by token (the replication
run's shared inputs depend on the rows planned, whose held-out filters change the corpus the
vocabulary is trained on: ``--methods`` must name the rows the base was trained with; default: every
method, as ``replicate.py --primary``). Run directories are keyed by every setting and the commit
(``_runs.run_directory``) under ``--out``; nothing is written into ``--work`` beyond what
``replicate.shared_inputs`` builds when it is missing.

    .venv/bin/python experiments/embert_cecp.py --base <work>/base/mlm-<hash> [--work <replicate.py's --work>]
        [--steps 800] [--held-out 2000] [--out experiments/.cache/embert_cecp] [--smoke --methods embert]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import logging
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _shared  # noqa: E402,F401  (puts benchmarks/ on the path: _data, _runs)
import replicate  # noqa: E402
from _data import DIALOGUES  # noqa: E402
from _runs import code_version, run_directory, settings_hash  # noqa: E402
from study import study  # noqa: E402

logger = logging.getLogger("embert_cecp")
HERE = Path(__file__).resolve().parent
ARMS = ("shipped", "fixed_surface")
LOG_EVERY = 25
SEED = 0
EVAL_SEED = 12345  # the held-out replacements' draws (one fixed draw, the same for every run of an arm)
EVAL_BATCH = 32
Z95 = 1.959964


# -- inputs ------------------------------------------------------------------------------------------------
def check_base(base: Path, shared) -> dict:
    """The base is a kgplm ``mlm`` pre-training run on the shared vocabulary (token by token) and corpus."""
    from kgplm.exceptions import ConfigurationError
    from kgplm.text.tokenization import load_tokenizer

    config_path = base / "model" / "config.json"
    if not config_path.is_file():
        raise ConfigurationError(
            f"--base {base}: no model/config.json (expected a kgplm pre-training run directory, "
            f"e.g. <replicate.py's --work>/base/mlm-<hash>)"
        )
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if config.get("method") != "mlm":
        raise ConfigurationError(
            f"--base {base}: {config_path} has method {config.get('method')!r}; EMBERT continues "
            f"from the MLM family's base (method 'mlm')"
        )
    ours, theirs = load_tokenizer(shared.tokenizer), load_tokenizer(base / "tokenizer")
    if len(ours) != config.get("vocab_size") or ours.get_vocab() != theirs.get_vocab():
        differing = sorted(set(ours.get_vocab().items()) ^ set(theirs.get_vocab().items()))[:5]
        raise ConfigurationError(
            f"--base {base}: its tokenizer ({len(theirs)} pieces, model vocab_size {config.get('vocab_size')}) is not "
            f"the shared one {shared.tokenizer} ({len(ours)} pieces; first differences {differing}); pass the --work "
            f"and --methods the base was trained with"
        )
    run_config = json.loads((base / "run_config.json").read_text(encoding="utf-8"))
    if Path(run_config["corpus"]).name != shared.corpus.name:
        raise ConfigurationError(
            f"--base {base} was trained on {run_config['corpus']}, the shared corpus is "
            f"{shared.corpus}: the held-out text would not be held out of the same corpus"
        )
    weights = base / "model" / "model.safetensors"
    return {
        "path": str(base.resolve()),
        "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        "steps": run_config.get("max_steps"),
        "batch_size": run_config.get("batch_size"),
        "learning_rate": run_config.get("learning_rate"),
        "model_options": run_config.get("model_options"),
        "masking": run_config.get("masking"),
        "encoder": run_config.get("text_model"),
        "vocab_size": config.get("vocab_size"),
    }


def held_out_texts(first: int, count: int, corpus: Path) -> tuple[list[str], dict]:
    """Consultations ``first … first + count − 1`` of the dialogue sample (question + answer, as
    ``_data.dialogues`` joins them), without any whose text is a line of ``corpus``."""
    with open(DIALOGUES, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))[first : first + count]
    texts = [(row["ask"] + row["answer"]).replace("\n", " ") for row in rows]
    trained = set(corpus.read_text(encoding="utf-8").splitlines())
    kept = [text for text in texts if text.strip() and text not in trained]
    return kept, {
        "rows": [first, first + len(rows)],
        "texts": len(kept),
        "dropped_as_in_corpus": len(texts) - len(kept),
    }


def held_out_corpus(out: Path, shared, budget, texts: list[str]):
    """The held-out texts linked and chunked exactly as the training corpus (the shared run's stage inputs)."""
    import dataclasses

    from kgplm.text.tokenization import load_tokenizer
    from kgplm.training import stages
    from kgplm.training.run import RunDirectory

    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:12]
    run = RunDirectory(out / f"held-out-{shared.kg.path.name}-{budget.max_length}-{digest}")
    run.path.mkdir(parents=True, exist_ok=True)
    text_file = run.path / "held_out.txt"
    if not text_file.is_file():
        temporary = text_file.with_suffix(".tmp")
        temporary.write_text("\n".join(texts), encoding="utf-8")
        temporary.replace(text_file)
    inputs = dataclasses.replace(shared.inputs, corpus=text_file, artefacts={}, progress=False)
    return stages.prepare_corpus(run, inputs, load_tokenizer(shared.tokenizer), masking="bert")


# -- the arms ----------------------------------------------------------------------------------------------
def arm_settings(arm: str, base_record: dict, budget, steps: int, shared) -> dict:

    return {
        "method": "embert",
        "cecp_negatives": arm,
        "base_weights_sha256": base_record["weights_sha256"],
        "steps": steps,
        "batch_size": budget.batch_size,
        "learning_rate": budget.learning_rate,
        "max_length": budget.max_length,
        "log_every": LOG_EVERY,
        "seed": SEED,
        "shared": shared.kg.path.name,
        "kg_method": budget.kg_method,
        "entity_dim": budget.entity_dim,
        "kg_epochs": budget.kg_epochs,
        "vocab_size": budget.vocab_size,
        "results_version": study("embert").results_version,
    }


def train_arm(directory: Path, arm: str, base: Path, shared, budget, steps: int) -> dict:
    """Continue ``base`` with EMBERT (``cecp_negatives=arm``) into ``directory``; the CPU seconds it took."""
    import kgplm

    timing_path = directory / "cecp_timing.json"
    if timing_path.is_file() and (directory / "model" / "model.safetensors").is_file():
        return json.loads(timing_path.read_text(encoding="utf-8"))
    cached = replicate.prepopulate(
        shared, budget, replicate.Pretraining.of("embert", None, {"cecp_negatives": arm}), directory
    )
    started, cpu_started = time.perf_counter(), time.process_time()
    kgplm.train(
        "embert",
        graph=shared.graph,
        corpus=shared.corpus,
        output_dir=directory,
        init_from=str(base),
        tokenizer=shared.tokenizer,
        vocab_size=budget.vocab_size,
        model_options={"cecp_negatives": arm},
        kg_method=budget.kg_method,
        entity_dim=budget.entity_dim,
        kg_epochs=budget.kg_epochs,
        max_steps=steps,
        batch_size=budget.batch_size,
        learning_rate=budget.learning_rate,
        log_every=LOG_EVERY,
        checkpoint_every=max(LOG_EVERY, steps // 4),
        max_length=budget.max_length,
        seed=SEED,
        device="cpu",
        progress=False,
        **cached,
    )
    timing = {
        "cpu_seconds": round(time.process_time() - cpu_started, 1),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "load_average": list(os.getloadavg()),
        "note": "this call only (a resumed run counts the steps after the resume)",
    }
    temporary = timing_path.with_suffix(".tmp")
    temporary.write_text(json.dumps(timing, indent=1), encoding="utf-8")
    temporary.replace(timing_path)
    return timing


def arm_collator(directory: Path, shared, seed: int):
    """The arm's collator as ``kgplm.train`` built it (its config, tokenizer and cached KG artefacts)."""
    import dataclasses

    from kgplm.methods import MethodContext, get
    from kgplm.methods.embert import EmbertConfig
    from kgplm.text.tokenization import load_tokenizer
    from kgplm.training import stages
    from kgplm.training.run import RunDirectory

    spec = get("embert")
    run = RunDirectory(directory)
    config = EmbertConfig.from_pretrained(str(run.model_dir))
    inputs = dataclasses.replace(shared.inputs, artefacts={}, progress=False)
    artefacts = stages.run_artefact_stages(spec.artefacts, run, inputs)  # cached in the run's kg/: loaded
    context = MethodContext(
        config=config,
        tokenizer=load_tokenizer(run.tokenizer_dir),
        store=shared.store,
        masking="bert",
        seed=seed,
        artefacts=artefacts,
    )
    return spec.build_collator(context)


def training_targets(directory: Path, shared, budget, steps: int) -> list[int]:
    """CECP targets of every training step, from the run's own batches replayed through its collator."""
    from kgplm.text.corpus import load_corpus
    from kgplm.training.loader import StepBatches
    from kgplm.training.run import RunDirectory

    collator = arm_collator(directory, shared, SEED)
    dataset = load_corpus(RunDirectory(directory).corpus_dir)
    batches = StepBatches(
        dataset, collator, batch_size=budget.batch_size, micro_batch_size=budget.batch_size, seed=SEED, max_steps=steps
    )
    return [sum(batch.target_counts.get("cecp", 0) for batch in batches[step]) for step in range(steps)]


def chance_band(counts: list[int]) -> float:
    """95 % half-width of the mean of per-step accuracies (steps with a target) under a fair coin."""
    scored = [n for n in counts if n > 0]
    return Z95 * math.sqrt(sum(0.25 / n for n in scored)) / len(scored) if scored else float("nan")


def training_curve(directory: Path, targets: list[int]) -> list[dict]:
    records = [
        json.loads(line)
        for line in (directory / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    curve, previous = [], 0
    for record in records:
        window = targets[previous : record["step"]]
        previous = record["step"]
        if "cecp" not in record:
            continue
        curve.append(
            {
                "step": record["step"],
                "cecp": record["cecp"],
                "cecp_accuracy": record["cecp_accuracy"],
                "targets": int(sum(window)),
                "chance_half_width": chance_band(window),
                **{name: record[name] for name in ("loss", "mlm", "es", "bem") if name in record},
            }
        )
    return curve


def leaves_chance(curve: list[dict]) -> dict:
    """The first log point above the chance band, and the first from which every later one is above it
    (each point is a one-sided 2.5 % test: over 30 log points one stray point above is likely at chance,
    a sustained run is not)."""
    above = [point["cecp_accuracy"] > 0.5 + point["chance_half_width"] for point in curve]
    first = next((index for index, flag in enumerate(above) if flag), None)
    sustained = next((index for index in range(len(above)) if all(above[index:])), None)
    return {
        "first_step_above_chance": None if first is None else curve[first]["step"],
        "stays_above_after_it": None if first is None else all(above[first:]),
        "above_from_step_on": None if sustained is None else curve[sustained]["step"],
        "log_points_above": int(sum(above)),
        "log_points": len(curve),
    }


def evaluate_held_out(directory: Path, shared, dataset) -> dict:
    """CECP loss and accuracy over every replaced mention of the held-out corpus (eval mode, no dropout)."""
    import torch

    from kgplm.methods.embert import EmbertForPreTraining
    from kgplm.training.loader import example_seeds

    model = EmbertForPreTraining.from_pretrained(str(directory / "model")).eval()
    collator = arm_collator(directory, shared, EVAL_SEED)
    total_loss = correct = targets = consistent = 0.0
    with torch.no_grad():
        for number, start in enumerate(range(0, len(dataset), EVAL_BATCH)):
            indices = np.arange(start, min(start + EVAL_BATCH, len(dataset)))
            batch = collator(dataset[start : start + EVAL_BATCH], example_seeds(EVAL_SEED, number, indices))
            count = batch.target_counts.get("cecp", 0)
            if not count:
                continue
            output = model(**batch)
            total_loss += float(output.losses["cecp"]) * count
            correct += float(output.metrics["cecp_accuracy"]) * count
            targets += count
            consistent += float(batch["cecp_labels"].sum())
    share = consistent / targets
    constant_loss = -(share * math.log(share) + (1 - share) * math.log(1 - share)) if 0 < share < 1 else 0.0
    return {
        "chunks": len(dataset),
        "targets": int(targets),
        "cecp": total_loss / targets,
        "cecp_accuracy": correct / targets,
        "consistent_share": share,
        "chance_loss": math.log(2),
        "chance_half_width": Z95 * math.sqrt(0.25 / targets),
        "constant_predictor_accuracy": max(share, 1 - share),
        "constant_predictor_loss": constant_loss,
    }


# -- report ------------------------------------------------------------------------------------------------
def markdown(record: dict) -> str:
    lines = [
        "# EMBERT's CECP continued from the MLM base, with its positive control (issue 28.2)",
        "",
        f"Code {record['code_version']}; base {record['base']['path']} (weights {record['base']['weights_sha256'][:12]}…, "
        f"{record['base']['steps']} steps × batch {record['base']['batch_size']}, lr {record['base']['learning_rate']}, "
        f"{record['base']['model_options']}, {record['base']['masking']} masking); each arm continues it for "
        f"{record['steps']} steps × batch {record['budget']['batch_size']} (lr {record['budget']['learning_rate']}, "
        f"max length {record['budget']['max_length']}, seed {SEED}) on {record['corpus']}. "
        f"{'SMOKE budget (development run, numbers mean nothing). ' if record['smoke'] else ''}"
        "Chance: loss ln 2 = 0.6931; accuracy 0.5 ± the 95 % half-width of each logged mean under a fair coin.",
        "",
    ]
    lines += [
        "## Held-out CECP at the end",
        "",
        f"Text: {record['held_out']['texts']} consultations (dialogue rows {record['held_out']['rows'][0]}–"
        f"{record['held_out']['rows'][1] - 1}, not in the pre-training corpus; "
        f"{record['held_out']['dropped_as_in_corpus']} dropped as corpus lines), replacements drawn once with seed "
        f"{EVAL_SEED} by each arm's collator.",
        "",
        "| arm | chunks | CECP targets | consistent share | loss | accuracy | chance loss | chance accuracy | "
        "constant predictor (acc / loss) | leaves chance? |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, result in record["arms"].items():
        held = result["held_out"]
        verdict = "yes" if held["cecp_accuracy"] > 0.5 + held["chance_half_width"] else "no"
        lines.append(
            f"| {arm} | {held['chunks']} | {held['targets']} | {held['consistent_share']:.3f} | "
            f"{held['cecp']:.4f} | {held['cecp_accuracy']:.3f} | {held['chance_loss']:.4f} | "
            f"0.5 ± {held['chance_half_width']:.3f} | {held['constant_predictor_accuracy']:.3f} / "
            f"{held['constant_predictor_loss']:.4f} | {verdict} |"
        )
    lines += ["", "## Training curves", ""]
    for arm, result in record["arms"].items():
        verdict = result["leaves_chance"]
        first = verdict["first_step_above_chance"]
        lines += [
            f"### {arm}",
            "",
            f"CPU {result['timing']['cpu_seconds']:.0f} s, wall {result['timing']['wall_seconds']:.0f} s (load "
            f"average {', '.join(f'{v:.1f}' for v in result['timing']['load_average'])} at the end, shared "
            f"machine); run {result['run']}. Training accuracy above the chance band first at "
            + (
                f"step {first} ({verdict['log_points_above']} of {verdict['log_points']} log points above); "
                + (
                    f"every log point from step {verdict['above_from_step_on']} on is above it."
                    if verdict["above_from_step_on"] is not None
                    else "the last log point is not above it."
                )
                if first is not None
                else f"no log point ({verdict['log_points']} log points)."
            ),
            "",
            "| step | CECP targets | cecp loss | cecp accuracy | chance band | mlm | es | bem |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for point in result["curve"]:
            lines.append(
                f"| {point['step']} | {point['targets']} | {point['cecp']:.4f} | {point['cecp_accuracy']:.3f} | "
                f"0.5 ± {point['chance_half_width']:.3f} | {point.get('mlm', float('nan')):.3f} | "
                f"{point.get('es', float('nan')):.3f} | {point.get('bem', float('nan')):.3f} |"
            )
        lines.append("")
    return "\n".join(lines)


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="a kgplm pre-training run of the mlm family")
    parser.add_argument(
        "--work",
        type=Path,
        default=replicate.ROOT / ".cache" / "replicate",
        help="the replication run's work directory (its shared inputs; read, built only if missing; "
        "default: replicate.py's own)",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        default=None,
        help="the knowledge methods whose rows the base's replication run planned (default: all)",
    )
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--held-out", type=int, default=2000, help="consultations after the corpus' own")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--smoke", action="store_true", help="replicate.SMOKE's budget (development only)")
    parser.add_argument("--out", type=Path, default=HERE / ".cache" / "embert_cecp")
    parser.add_argument("--results", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import torch

    torch.set_num_threads(1)
    version = code_version()
    print(f"code version {version}", flush=True)
    budget = replicate.SMOKE if args.smoke else replicate.Budget()
    shared = replicate.shared_inputs(args.work, budget, replicate.plan_rows(args.methods, primary=True))
    base_record = check_base(args.base, shared)
    texts, held_out = held_out_texts(budget.dialogues, args.held_out, shared.corpus)
    held_out_dataset = held_out_corpus(args.out, shared, budget, texts)
    record = {
        "code_version": version,
        "smoke": args.smoke,
        "steps": args.steps,
        "base": base_record,
        "corpus": shared.corpus.name,
        "shared": str(shared.kg.path),
        "held_out": held_out,
        "budget": {
            "batch_size": budget.batch_size,
            "learning_rate": budget.learning_rate,
            "max_length": budget.max_length,
        },
        "arms": {},
    }
    for arm in args.arms:
        settings = arm_settings(arm, base_record, budget, args.steps, shared)
        directory = run_directory(args.out / "runs", f"embert-{arm}", settings, version=version)
        print(f"{arm}: {directory} (settings {settings_hash(settings)})", flush=True)
        timing = train_arm(directory, arm, args.base, shared, budget, args.steps)
        logger.info("%s: counting the CECP targets of %d training steps (the run's batches replayed)", arm, args.steps)
        curve = training_curve(directory, training_targets(directory, shared, budget, args.steps))
        logger.info("%s: held-out evaluation on %d chunks", arm, len(held_out_dataset))
        record["arms"][arm] = {
            "run": str(directory),
            "settings": settings,
            "timing": timing,
            "curve": curve,
            "leaves_chance": leaves_chance(curve),
            "held_out": evaluate_held_out(directory, shared, held_out_dataset),
        }
        held = record["arms"][arm]["held_out"]
        print(
            f"{arm}: held-out CECP loss {held['cecp']:.4f}, accuracy {held['cecp_accuracy']:.3f} on "
            f"{held['targets']} targets (chance 0.5 ± {held['chance_half_width']:.3f}); training accuracy first above "
            f"chance at step {record['arms'][arm]['leaves_chance']['first_step_above_chance']}, above it from step "
            f"{record['arms'][arm]['leaves_chance']['above_from_step_on']} on; CPU {timing['cpu_seconds']:.0f} s",
            flush=True,
        )
    stem = "embert_cecp-smoke" if args.smoke else "embert_cecp"
    write_atomic(args.results / f"{stem}.json", json.dumps(record, indent=1, ensure_ascii=False))
    write_atomic(args.results / f"{stem}.md", markdown(record))
    print(markdown(record))
    print(f"\ncode version {version}; written {args.results / stem}.json and .md")


if __name__ == "__main__":
    main()
