"""One tiny SMedBERT call on real CMeKG, run in 1 process and under ``torchrun --nproc_per_node 2``:
do the two build the same artefacts and log the same losses? (issue 27.8)

Run: ``python experiments/ddp_agreement.py [--steps 4] [--facts 300] [--dialogues 200]``

Both runs compute *every* artefact themselves — vocabulary, linked corpus, PEPR table (the default
``pepr_mode="auto"``), TransR embeddings — from the same arguments; nothing is handed from one to the
other (``tests/training/test_distributed.py`` hands the 2-process run the 1-process run's artefacts, so
it cannot see a default that reads the machine). The 2-process run splits the global batch of 8 into
2 ranks × 2 micro-batches of 2. Prints the commit, the PEPR decision each run recorded, whether the
vocabularies, neighbour tables and KG embeddings are identical, and per step the largest relative difference of
any logged loss against the DDP tolerance of ``test_distributed.py`` (1e-5). Run directories are
keyed by the settings and the commit (``experiments/.cache/ddp_agreement/<key>``); the machine's load
average is printed beside the wall times.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
CACHE = REPO_ROOT / "experiments" / ".cache" / "ddp_agreement"
TOLERANCE = 1e-5  # relative, as tests/training/test_distributed.py
TEXT_MODEL = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 160,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}


def commit() -> str:
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=REPO_ROOT).returncode != 0
    return head + ("+dirty" if dirty else "")


def shared_data() -> Path:
    return Path(os.environ.get("KGPLM_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def prepare(work: Path, facts: int, dialogues: int) -> tuple[Path, Path]:
    """The CMeKG store (saved once) and a corpus of verbalised facts and medical dialogues."""
    from kgplm import KGStore
    from kgplm.demo import verbalize_triples

    store_dir = CACHE / "cmekg_store"
    if not (store_dir / "manifest.json").is_file():
        store = KGStore.from_cmekg(shared_data() / "kg" / "cmekg" / "triples.tsv.gz", show_progress=False)
        store.save(store_dir)
    store = KGStore.load(store_dir)
    corpus = work / "text.txt"
    if not corpus.is_file():
        source = shared_data() / "corpus" / "medical_dialogue" / "sample_IM_5000-6000.utf8.csv"
        with open(source, encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))[:dialogues]
        texts = verbalize_triples(store, facts) + [(r["ask"] + r["answer"]).replace("\n", " ") for r in rows]
        work.mkdir(parents=True, exist_ok=True)
        corpus.write_text("\n".join(texts), encoding="utf-8")
    return store_dir, corpus


def cli_arguments(store_dir: Path, corpus: Path, output_dir: Path, steps: int) -> list[str]:
    return [
        "--method",
        "smedbert",
        "--graph",
        str(store_dir),
        "--corpus",
        str(corpus),
        "--output-dir",
        str(output_dir),
        "--text-model",
        json.dumps(TEXT_MODEL),
        "--vocab-size",
        "2000",
        "--entity-dim",
        "16",
        "--kg-epochs",
        "1",
        "--max-steps",
        str(steps),
        "--batch-size",
        "8",
        "--learning-rate",
        "2e-3",
        "--checkpoint-every",
        str(steps),
        "--log-every",
        "1",
        "--max-length",
        "128",
        "--no-progress",
    ]


def launch(command: list[str]) -> float:
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    started = time.monotonic()
    result = subprocess.run(command, cwd=REPO_ROOT, env=environment, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command[:6])} … failed:\n{result.stderr[-3000:]}")
    return time.monotonic() - started


def compare(one: Path, two: Path) -> dict:
    from safetensors.numpy import load_file

    from kgplm.kg.pepr import NeighborTable

    stages = [json.loads((path / "run_config.json").read_text())["stages"] for path in (one, two)]
    tables = [NeighborTable.load(path / "kg" / "neighbors.npz") for path in (one, two)]
    same_table = all(
        np.array_equal(getattr(tables[0], c), getattr(tables[1], c))
        for c in ("seeds", "neighbors", "relations", "directions", "scores")
    )
    embeddings = []
    for path in (one, two):
        files = sorted((path / "kg" / "embeddings").glob("*.safetensors"))
        embeddings.append({f.name + ":" + k: v for f in files for k, v in load_file(str(f)).items()})
    same_embeddings = embeddings[0].keys() == embeddings[1].keys() and all(
        np.array_equal(embeddings[0][k], embeddings[1][k]) for k in embeddings[0]
    )
    same_vocabulary = (one / "tokenizer" / "vocab.txt").read_bytes() == (two / "tokenizer" / "vocab.txt").read_bytes()
    records = [[json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()] for path in (one, two)]
    steps = []
    for a, b in zip(*records):
        worst = max(
            ((abs(b[k] - a[k]) / max(abs(a[k]), 1e-12), k) for k in a if k != "step" and k in b), default=(0.0, "")
        )
        steps.append({"step": a["step"], "largest_relative_difference": worst[0], "at": worst[1]})
    return {
        "stages": stages,
        "same_vocabulary": same_vocabulary,
        "same_neighbor_table": same_table,
        "same_kg_embeddings": same_embeddings,
        "steps": steps,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--facts", type=int, default=300)
    parser.add_argument("--dialogues", type=int, default=200)
    args = parser.parse_args(argv)
    head = commit()
    settings = {
        "steps": args.steps,
        "facts": args.facts,
        "dialogues": args.dialogues,
        "text_model": TEXT_MODEL,
        "commit": head,
    }
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    work = CACHE / key
    print(
        f"commit {head}; settings {json.dumps({k: v for k, v in settings.items() if k != 'commit'})}; "
        f"run directory {work}",
        flush=True,
    )
    if head.endswith("+dirty"):
        print("warning: tracked files differ from the commit; the runs are keyed by it anyway", flush=True)
    store_dir, corpus = prepare(work, args.facts, args.dialogues)
    one, two = work / "one", work / "two"
    timings = {}
    if not (one / "model").is_dir():
        timings["one"] = launch(
            [sys.executable, "-m", "kgplm", "train", *cli_arguments(store_dir, corpus, one, args.steps)]
        )
    if not (two / "model").is_dir():
        timings["two"] = launch(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc_per_node",
                "2",
                "-m",
                "kgplm",
                "train",
                *cli_arguments(store_dir, corpus, two, args.steps),
                "--gradient-accumulation-steps",
                "2",
            ]
        )
    result = compare(one, two)
    load = os.getloadavg()
    print(
        f"\nwall seconds {json.dumps({k: round(v) for k, v in timings.items()})} (load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}; runs found in the cache are not re-timed)"
    )
    for name, stages in zip(("1 process", "2 processes"), result["stages"]):
        print(f"{name}: PEPR {stages.get('pepr_mode_used')} — {stages.get('pepr_mode_reason')}")
    print(
        f"vocabularies identical: {result['same_vocabulary']}; neighbour tables identical: "
        f"{result['same_neighbor_table']}; KG embeddings identical: {result['same_kg_embeddings']}\n"
    )
    print("| step | largest relative loss difference | where | within 1e-5 |\n|---|---|---|---|")
    for row in result["steps"]:
        print(
            f"| {row['step']} | {row['largest_relative_difference']:.2e} | {row['at']} | "
            f"{'yes' if row['largest_relative_difference'] <= TOLERANCE else 'NO'} |"
        )
    agree = (
        result["same_vocabulary"]
        and result["same_neighbor_table"]
        and result["same_kg_embeddings"]
        and all(r["largest_relative_difference"] <= TOLERANCE for r in result["steps"])
    )
    (work / "result.json").write_text(json.dumps({"settings": settings, **result}, indent=1, default=str))
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
