"""KG embeddings and the knowledge methods at UMLS scale (issue 30.4–5): one function per stage for the
scale table (``benchmarks/scale.py``) and a CLI that prints this module's own table.

Stages (each returns ``seconds`` (wall), ``cpu_seconds`` (user + sys of the process: all its
threads), ``peak_rss_delta`` (bytes: the highest resident set during the stage minus the resident
set before it, Linux ``/proc``) and a throughput):

* :func:`transe_epoch` — one TransE (or TransR) epoch over every triple, from the initial tables:
  ``triples_per_second`` and ``triples_per_cpu_second`` (the throughput per core). A store, or random
  int32 triples of a given size: the epoch's cost depends on the counts, not on the graph's shape,
  except for the Bernoulli statistics (one sort); the CLI uses random triples at ~7 a concept, the
  density of the UMLS-shaped generator (``benchmarks/synthetic_umls.py``: 1M concepts, 7M rows).
* :func:`kebiolm_step` — a KeBioLM pre-training step (forward, backward, clipping, the trainer's
  optimiser step) with an entity table of ``num_entities`` rows, fp32, the tiny text encoder
  (hidden 32, 2 layers), batch 8 × 128 tokens with 20 linked mentions a sequence; exact
  (``linking_softmax="full"``, dense AdamW over the table) or ``"sampled"`` (row-wise AdamW).
  ``peak_rss_delta`` covers building the model and the optimiser and the first step (when the
  optimiser's moments are allocated): what a run at that size must fit. ``seconds`` is the mean of
  the next ``steps`` steps. A random batch: its cost does not depend on which entities it names.
* :func:`smedbert_step` — the same for SMedBERT (frozen TransR tables as in the paper, 4 knowledge
  mentions a sequence with 10 PEPR neighbours each, 2 MNeM targets with 3 edges and 10 negatives).

    python benchmarks/scale_models.py --sizes 115k 1M 4M           # the table (one process per cell)
    python benchmarks/scale_models.py --compare-softmax --steps 150 # sampled vs exact L_EL on CMeKG
    python benchmarks/scale_models.py --smoke                       # every stage with 1,000 entities

``--smoke`` fills the table at 1,000 entities: the first stage in its own process as every cell of the
full table, the others in this process (each new process imports torch, PyG and transformers again,
several seconds a cell). ``--smoke --compare-softmax`` runs the comparison on the repository's toy
graph and sentences generated from its names, 3 steps, in a temporary folder.

``--compare-softmax`` pre-trains KeBioLM twice on CMeKG (115k entities) and real text (CMeKG facts
as sentences + consultations), same seed, tiny encoder: the exact softmax, then the sampled one
with the same tokenizer and TransE table, and prints both runs' last logged values of the exact
linking loss (``el`` for the exact run, ``el_exact_loss`` for the sampled one), the loss each
optimised (``el``) and the linking accuracy (``el_accuracy``: the gold is the top retrieved
entity). Runs are kept under ``--work`` keyed by every setting and the commit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

__all__ = [
    "transe_epoch",
    "kebiolm_step",
    "smedbert_step",
    "random_triples",
    "TriplesGraph",
    "compare_linking_softmaxes",
    "parse_size",
    "toy_corpus",
    "print_softmax_table",
]

SIZES = {"115k": 115_157, "1M": 1_000_000, "4M": 4_000_000}
TRIPLES_PER_ENTITY = 7
NUM_RELATIONS = 40


def parse_size(text: str) -> int:
    """``115k``, ``1M``, ``4M`` or a plain integer."""
    if text in SIZES:
        return SIZES[text]
    scale = {"k": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


# -- measuring -------------------------------------------------------------------------------------
def _status_bytes(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


@contextmanager
def measured(into: dict):
    """Fill ``into`` with ``seconds``, ``cpu_seconds`` and ``peak_rss_delta`` of the block: the peak
    resident set is reset first (``/proc/self/clear_refs``), so the delta is this block's own."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
        handle.write("5")  # resets VmHWM to the current resident set
    before = _status_bytes("VmRSS")
    wall, cpu = time.perf_counter(), time.process_time()
    yield into
    into["seconds"] = time.perf_counter() - wall
    into["cpu_seconds"] = time.process_time() - cpu
    into["peak_rss_delta"] = _status_bytes("VmHWM") - before


# -- TransE / TransR -------------------------------------------------------------------------------
def random_triples(
    num_entities: int, num_triples: int, num_relations: int = NUM_RELATIONS, seed: int = 0, chunk: int = 1 << 22
) -> np.ndarray:
    """``(num_triples, 3)`` int32 (head, relation, tail), uniform, written chunk by chunk."""
    rng = np.random.default_rng(seed)
    triples = np.empty((num_triples, 3), dtype=np.int32)
    for start in range(0, num_triples, chunk):
        rows = triples[start : start + chunk]
        rows[:, 0] = rng.integers(0, num_entities, len(rows), dtype=np.int32)
        rows[:, 1] = rng.integers(0, num_relations, len(rows), dtype=np.int32)
        rows[:, 2] = rng.integers(0, num_entities, len(rows), dtype=np.int32)
    return triples


class TriplesGraph:
    """What ``train_kg_embeddings`` reads from a store, for id triples without names (entity IRIs
    ``E<id>``)."""

    def __init__(self, triples: np.ndarray, num_entities: int, num_relations: int) -> None:
        self.triples, self.num_entities, self.num_relations = triples, num_entities, num_relations
        self.num_triples = len(triples)
        self.relation_iris = [f"R{index}" for index in range(num_relations)]

    def entity_iri(self, index: int) -> str:
        return f"E{index}"

    def require_links(self, purpose: str) -> None:
        return None


def transe_epoch(
    store_or_triples,
    *,
    num_entities: int | None = None,
    num_relations: int | None = None,
    method: str = "transe",
    dim: int = 100,
    relation_dim: int | None = None,
    batch_size: int = 8192,
    seed: int = 0,
) -> dict:
    """One epoch of :func:`kgplm.kg.embeddings.training.train_kg_embeddings` over every triple (a ``KGStore``,
    or an ``(n, 3)`` id array with ``num_entities``/``num_relations``)."""
    from kgplm.kg.embeddings import train_kg_embeddings

    graph = store_or_triples
    if isinstance(store_or_triples, np.ndarray):
        graph = TriplesGraph(store_or_triples, num_entities, num_relations)
    warm_up = TriplesGraph(np.zeros((8, 3), dtype=np.int32), 2, 1)  # loads the numba kernels before timing
    train_kg_embeddings(warm_up, method=method, dim=dim, relation_dim=relation_dim, epochs=1, progress=False)
    result = {
        "stage": method,
        "num_entities": graph.num_entities,
        "num_triples": graph.num_triples,
        "num_relations": graph.num_relations,
        "dim": dim,
        "relation_dim": relation_dim or dim,
    }
    with measured(result):
        embeddings = train_kg_embeddings(
            graph,
            method=method,
            dim=dim,
            relation_dim=relation_dim,
            epochs=1,
            batch_size=batch_size,
            seed=seed,
            progress=False,
        )
    result["triples_per_second"] = graph.num_triples / result["seconds"]
    result["triples_per_cpu_second"] = graph.num_triples / result["cpu_seconds"]
    result["table_bytes"] = sum(
        t.numel() * 4
        for t in (embeddings.entity_embeddings, embeddings.relation_embeddings, embeddings.projections)
        if t is not None
    )
    return result


# -- knowledge methods -----------------------------------------------------------------------------
def _text_batch(generator, batch_size: int, length: int, vocab_size: int, mention_starts):
    import torch

    input_ids = torch.randint(5, vocab_size, (batch_size, length), generator=generator)
    input_ids[:, 0], input_ids[:, -1] = 2, 3
    labels = torch.full((batch_size, length), -100)
    masked = torch.rand(batch_size, length, generator=generator) < 0.15
    masked[:, 0] = masked[:, -1] = False
    labels[masked] = input_ids[masked]
    input_ids[masked] = 4
    mention_batch = torch.arange(batch_size).repeat_interleave(len(mention_starts))
    starts = torch.tensor(mention_starts).repeat(batch_size)
    spans = torch.stack([starts, starts + 2], 1)
    return (
        dict(
            input_ids=input_ids,
            attention_mask=torch.ones(batch_size, length, dtype=torch.long),
            token_type_ids=torch.zeros(batch_size, length, dtype=torch.long),
            labels=labels,
        ),
        mention_batch,
        spans,
    )


def _measure_steps(build, batch: dict, steps: int, seed: int, mentions: int, result: dict) -> dict:
    """Build the model (seeded) and time its steps inside :func:`measured`; seconds per step and mentions/s."""
    import torch

    with measured(result):
        torch.manual_seed(seed)
        _time_steps(build(), batch, steps, result)
    result["seconds"] = result.pop("step_seconds")
    result["mentions_per_second"] = mentions / result["seconds"]
    return result


def _time_steps(model, batch: dict, steps: int, result: dict) -> None:
    """Build the optimiser, run one step inside the measured block (the caller's), then time ``steps``."""
    import torch

    from kgplm.training.trainer import TrainerSettings, build_optimizer, optimizer_step

    optimizer = build_optimizer(model, TrainerSettings(learning_rate=5e-4))
    trainable = [p for p in model.parameters() if p.requires_grad]

    def step(index: int) -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.manual_seed(index)
        output = model(**batch)
        output.loss.backward()
        optimizer_step(optimizer, trainable, 1.0, None, index)

    step(0)  # allocates the optimiser's moments: inside the caller's memory measurement
    result["first_step"] = True
    wall, cpu = time.perf_counter(), time.process_time()
    for index in range(1, steps + 1):
        step(index)
    result["step_seconds"] = (time.perf_counter() - wall) / steps
    result["step_cpu_seconds"] = (time.process_time() - cpu) / steps


def kebiolm_step(
    num_entities: int,
    *,
    linking_softmax: str = "full",
    entity_dim: int = 64,
    batch_size: int = 8,
    length: int = 128,
    mentions: int = 20,
    steps: int = 2,
    vocab_size: int = 8000,
    seed: int = 0,
) -> dict:
    """A KeBioLM pre-training step with ``num_entities`` entities (see the module docstring)."""
    import torch

    from kgplm.methods.kebiolm import KebiolmConfig, KebiolmForPreTraining
    from kgplm.methods.kebiolm.detection import tags_from_spans
    from kgplm.models import TINY_TEXT_ENCODER

    generator = torch.Generator().manual_seed(seed)
    starts = list(range(1, 1 + 6 * mentions, 6))
    text, mention_batch, spans = _text_batch(generator, batch_size, length, vocab_size, starts)
    valid = np.ones(length, dtype=bool)
    valid[[0, -1]] = False  # [CLS] and [SEP] are not scored
    batch = dict(
        text,
        mention_batch=mention_batch,
        mention_spans=spans,
        mention_entity_ids=torch.randint(0, num_entities, (len(spans),), generator=generator),
        detection_labels=torch.from_numpy(
            np.stack([tags_from_spans(length, spans[mention_batch == row].numpy(), valid) for row in range(batch_size)])
        ),
    )
    result = {
        "stage": f"kebiolm-{linking_softmax}",
        "num_entities": num_entities,
        "entity_dim": entity_dim,
        "mentions": len(spans),
    }
    return _measure_steps(
        lambda: KebiolmForPreTraining(
            KebiolmConfig(
                vocab_size=vocab_size,
                num_entities=num_entities,
                entity_dim=entity_dim,
                linking_softmax=linking_softmax,
                **TINY_TEXT_ENCODER,
            )
        ),
        batch,
        steps,
        seed,
        len(spans),
        result,
    )


def smedbert_step(
    num_entities: int,
    *,
    entity_dim: int = 64,
    batch_size: int = 8,
    length: int = 128,
    mentions: int = 4,
    neighbours: int = 10,
    steps: int = 2,
    vocab_size: int = 8000,
    num_relations: int = NUM_RELATIONS,
    seed: int = 0,
) -> dict:
    """A SMedBERT pre-training step with ``num_entities`` entities (see the module docstring)."""
    import torch

    from kgplm.methods.smedbert import SmedbertConfig, SmedbertForPreTraining
    from kgplm.models import TINY_TEXT_ENCODER

    generator = torch.Generator().manual_seed(seed)
    knowledge_starts, mnem_starts = list(range(1, 1 + 6 * mentions, 6)), [100, 110]
    text, mention_batch, spans = _text_batch(generator, batch_size, length, vocab_size, knowledge_starts)
    _, mnem_batch, mnem_spans = _text_batch(generator, batch_size, length, vocab_size, mnem_starts)
    edges, mnem_edges, negatives = len(spans) * neighbours, len(mnem_spans) * 3, 10

    def ids(count: int, high: int) -> torch.Tensor:
        return torch.randint(0, high, (count,), generator=generator)

    batch = dict(
        text,
        sentence_order_label=ids(batch_size, 2),
        mention_batch=mention_batch,
        mention_spans=spans,
        mention_masked=torch.rand(len(spans), generator=generator) < 0.5,
        neighbor_mention=torch.arange(len(spans)).repeat_interleave(neighbours),
        neighbor_entity_ids=ids(edges, num_entities),
        neighbor_relation_ids=ids(edges, num_relations),
        neighbor_directions=ids(edges, 2),
        neighbor_type_ids=ids(edges, 8),
        mnem_mention_batch=mnem_batch,
        mnem_mention_spans=mnem_spans,
        mnem_edge_mention=torch.arange(len(mnem_spans)).repeat_interleave(3),
        mnem_entity_ids=ids(mnem_edges, num_entities),
        mnem_relation_ids=ids(mnem_edges, num_relations),
        mnem_directions=ids(mnem_edges, 2),
        mnem_negative_ids=torch.randint(0, num_entities, (mnem_edges, negatives), generator=generator),
        mnem_log_q=-torch.rand(mnem_edges, negatives + 1, generator=generator) - 5,
    )
    result = {
        "stage": "smedbert",
        "num_entities": num_entities,
        "entity_dim": entity_dim,
        "mentions": len(spans),
        "neighbour_edges": edges,
    }
    return _measure_steps(
        lambda: SmedbertForPreTraining(
            SmedbertConfig(
                vocab_size=vocab_size,
                num_entities=num_entities,
                num_relations=num_relations,
                num_entity_types=8,
                entity_dim=entity_dim,
                relation_dim=entity_dim,
                mnem_num_negatives=negatives,
                **TINY_TEXT_ENCODER,
            )
        ),
        batch,
        steps,
        seed,
        len(spans),
        result,
    )


# -- the sampled softmax against the exact one on CMeKG --------------------------------------------
def compare_linking_softmaxes(
    work: Path,
    *,
    steps: int = 150,
    batch_size: int = 8,
    seed: int = 0,
    num_facts: int = 3000,
    num_dialogues: int = 300,
    log_every: int = 10,
    store=None,
    corpus: Path | None = None,
) -> dict:
    """Two short KeBioLM runs on CMeKG (exact, then sampled with the exact run's artefacts); on ``store``
    and ``corpus`` instead when given (``num_facts`` and ``num_dialogues`` then unused)."""
    from _data import cmekg_store, mixed_corpus
    from _runs import code_version, run_directory

    import kgplm
    from kgplm.models import TINY_TEXT_ENCODER

    given = {}
    if store is None:
        store = cmekg_store(work)
        corpus = mixed_corpus(work / f"corpus-{num_facts}-{num_dialogues}.txt", store, num_facts, num_dialogues)
    elif corpus is None:
        from kgplm.exceptions import ConfigurationError

        raise ConfigurationError(
            "compare_linking_softmaxes got a store without a corpus: pass the text to "
            "pre-train on as corpus= (a file path)"
        )
    else:
        given = {"graph": repr(store), "corpus": str(corpus)}
    common = dict(
        text_model=dict(TINY_TEXT_ENCODER, max_position_embeddings=160),
        max_length=128,
        entity_dim=64,
        kg_epochs=1,
        max_steps=steps,
        batch_size=batch_size,
        seed=seed,
        log_every=log_every,
        checkpoint_every=steps,
        device="cpu",
        progress=False,
    )
    version = code_version()
    runs = {}
    for softmax in ("full", "sampled"):
        settings = dict(common, linking_softmax=softmax, num_facts=num_facts, num_dialogues=num_dialogues, **given)
        directory = run_directory(work / "softmax", f"kebiolm-{softmax}", settings, version=version)
        extra = {}
        if softmax == "sampled":  # the exact run's tokenizer and TransE table: only the softmax differs
            extra = dict(tokenizer=runs["full"].tokenizer_dir, kg_embeddings=runs["full"].output_dir / "kg" / "transe")
        runs[softmax] = kgplm.train(
            "kebiolm",
            graph=store,
            corpus=corpus,
            output_dir=directory,
            model_options={"linking_softmax": softmax},
            **common,
            **extra,
        )
    summary = {"commit": version, "num_entities": store.num_entities, "steps": steps}
    for softmax, run in runs.items():
        exact_name = "el" if softmax == "full" else "el_exact_loss"

        def tail(name: str) -> float:
            values = run.curve(name)
            return float(np.mean(values[-3:])) if values else float("nan")  # the last 3 logged values

        summary[softmax] = {
            "exact_el": tail(exact_name),
            "optimised_el": tail("el"),
            "el_accuracy": tail("el_accuracy"),
            "first_exact_el": run.curve(exact_name)[0],
            "loss": tail("loss"),
            "output_dir": str(run.output_dir),
        }
    return summary


def toy_corpus(path: Path, store, documents: int = 200, seed: int = 0) -> Path:
    """``documents`` short consultations, each naming three of ``store``'s entities, written to ``path``."""
    import random

    rng = random.Random(seed)
    names = [store.entity_name(entity) for entity in range(store.num_entities)]
    path.write_text(
        "\n".join(
            f"患者主诉{a}三天，伴有{b}，既往有{c}病史，建议复查。"
            for a, b, c in (rng.sample(names, 3) for _ in range(documents))
        ),
        encoding="utf-8",
    )
    return path


def print_softmax_table(summary: dict) -> None:
    """The comparison's figures as a Markdown table, one row per softmax."""
    print(
        f"\nKeBioLM, {summary['num_entities']:,} entities, {summary['steps']} steps (commit {summary['commit']}); "
        "means of the last 3 logged values\n"
    )
    print("| linking softmax | exact L_EL, first | exact L_EL | optimised L_EL | EL accuracy | loss |")
    print("|---|---|---|---|---|---|")
    for softmax in ("full", "sampled"):
        row = summary[softmax]
        print(
            f"| {softmax} | {row['first_exact_el']:.4f} | {row['exact_el']:.4f} | {row['optimised_el']:.4f} | "
            f"{row['el_accuracy']:.4f} | {row['loss']:.4f} |"
        )


# -- CLI -------------------------------------------------------------------------------------------
def _one(stage: str, size: int, seed: int) -> dict:
    if stage in ("transe", "transr"):
        triples = random_triples(size, TRIPLES_PER_ENTITY * size, seed=seed)
        # for a cell cut at --limit-seconds: the parent reads the peak from /proc against this line
        print(json.dumps({"rss_before": _status_bytes("VmRSS")}), flush=True)
        return transe_epoch(triples, num_entities=size, num_relations=NUM_RELATIONS, method=stage, seed=seed)
    if stage.startswith("kebiolm-"):
        return kebiolm_step(size, linking_softmax=stage.split("-", 1)[1], seed=seed)
    if stage == "smedbert":
        return smedbert_step(size, seed=seed)
    raise SystemExit(f"unknown stage {stage!r}")


def _run_cell(stage: str, size: str, seed: int, limit: float | None) -> dict:
    """One cell in its own process; past ``limit`` seconds the process is stopped and the row says so,
    with the peak resident set it had reached (read from ``/proc/<pid>/status``) minus its resident set
    before training."""
    import tempfile
    import threading

    errors = tempfile.TemporaryFile("w+")  # not a pipe: a child that logs much must not block on it
    process = subprocess.Popen(
        [sys.executable, __file__, "--one", stage, size, "--seed", str(seed)],
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    started, peak = time.perf_counter(), 0
    while process.poll() is None:
        try:
            with open(f"/proc/{process.pid}/status", encoding="ascii") as handle:
                peak = max([peak] + [int(line.split()[1]) * 1024 for line in handle if line.startswith("VmHWM:")])
        except OSError:
            pass
        if limit is not None and time.perf_counter() - started > limit:
            process.kill()
            process.wait()
            reader.join(5)
            before = next((json.loads(line)["rss_before"] for line in lines if "rss_before" in line), 0)
            return {
                "stage": stage,
                "num_entities": parse_size(size),
                "partial_seconds": limit,
                "peak_rss_delta": peak - before,
            }
        time.sleep(0.5)
    reader.join(5)
    if process.returncode:
        errors.seek(0)
        return {"stage": stage, "num_entities": parse_size(size), "error": errors.read().strip()[-300:]}
    return json.loads(lines[-1])


def _row(result: dict) -> str:
    if "error" in result:
        return f"| {result['stage']} | {result['num_entities']:,} | failed: {result['error']} |"
    if "partial_seconds" in result:
        return (
            f"| {result['stage']} | {result['num_entities']:,} | stopped after {result['partial_seconds']:.0f} s "
            f"(peak RSS Δ so far {result['peak_rss_delta'] / 2**30:.2f} GiB) |"
        )
    throughput = (
        f"{result['triples_per_second'] / 1e3:,.0f}k triples/s, {result['triples_per_cpu_second'] / 1e3:,.0f}k /CPU-s"
        if "triples_per_second" in result
        else f"{result['mentions_per_second']:,.0f} mentions/s"
    )
    seconds = result["seconds"]
    cpu = result.get("step_cpu_seconds", result["cpu_seconds"])
    return (
        f"| {result['stage']} | {result['num_entities']:,} | {result.get('num_triples', '')} | {seconds:.2f} | "
        f"{cpu:.2f} | {result['peak_rss_delta'] / 2**30:.2f} | {throughput} |"
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["115k", "1M", "4M"])
    parser.add_argument("--stages", nargs="+", default=["transe", "kebiolm-full", "kebiolm-sampled", "smedbert"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one", nargs=2, metavar=("STAGE", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--compare-softmax", action="store_true")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument(
        "--limit-seconds",
        type=float,
        default=None,
        help="stop a cell after this many seconds and report the peak RSS it reached",
    )
    parser.add_argument("--work", type=Path, default=ROOT / "benchmarks" / ".cache" / "scale_models")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the table's stages at 1,000 entities (one process per cell, as in the full table)",
    )
    args = parser.parse_args(argv)
    if args.smoke and args.compare_softmax:
        import tempfile

        from kgplm import KGStore

        with tempfile.TemporaryDirectory(prefix="kgplm-scale-models-") as scratch:
            store = KGStore.from_rdf(ROOT / "graphs" / "toy_medical.ttl", show_progress=False)
            summary = compare_linking_softmaxes(
                Path(scratch),
                steps=3,
                batch_size=4,
                seed=args.seed,
                log_every=1,
                store=store,
                corpus=toy_corpus(Path(scratch) / "corpus.txt", store),
            )
            print(json.dumps(summary, indent=1))
            print_softmax_table(summary)
        return
    if args.smoke:
        args.sizes = ["1k"]
    if args.one:
        print(json.dumps(_one(args.one[0], parse_size(args.one[1]), args.seed)))
        return
    from _runs import code_version

    print(f"commit {code_version()}; load average before: {os.getloadavg()}")
    if args.compare_softmax:
        summary = compare_linking_softmaxes(args.work, steps=args.steps, seed=args.seed)
        print(json.dumps(summary, indent=1))
        print_softmax_table(summary)
        return
    print("| stage | entities | triples | seconds (wall) | CPU seconds | peak RSS Δ GiB | throughput |")
    print("|---|---|---|---|---|---|---|")
    for size in args.sizes:
        for stage in args.stages:
            if args.smoke and stage != args.stages[0]:
                print(_row(_one(stage, parse_size(size), args.seed)), flush=True)
                continue
            # one process per cell: the resident set of one cell does not carry into the next
            print(_row(_run_cell(stage, size, args.seed, args.limit_seconds)), flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
