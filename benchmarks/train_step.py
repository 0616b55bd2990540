"""Training-step throughput: every registered method against plain BERT MLM and Hugging Face's BertForPreTraining.

Data (``--data``): ``cmekg`` — CMeKG (shared data) and Chinese medical consultations, joined so
that chunks fill ``--length`` tokens; ``toy`` — the repository's toy graph and sentences generated
from it (nothing outside the source tree: what a fresh GPU machine can run). Either is prepared
once through kgplm's own stages (vocabulary, every KG artefact any registered method needs, the
linked corpus) and cached in ``benchmarks/.cache/train_step``. Then, for each method of
``kgplm.methods.available()`` and for ``BertForPreTraining`` fed the ``mlm`` row's batches, the
same examples (same indices and example seeds) are timed over ``--steps`` steps after 3 warm-up
steps:

  * collate   — the method's collator (SOP pairs, masking, its own inputs), on the CPU;
  * step      — forward + backward + AdamW update (under autocast with ``--mixed-precision``);
  * tokens/s  — non-padding tokens of the batch / step time;
  * peak MB   — CUDA: ``max_memory_allocated`` during the steps (weights, optimiser state and
                activations); CPU: growth of the peak resident set over the steps (activations,
                gradients and optimiser state; Linux ``/proc``), an approximation.

Two tables: CPU at the given size (default tiny: hidden 256, 4 layers, batch 16, length 128) and
GPU at BERT-base size (12 layers, hidden 768, length 512, bf16) when CUDA is available — otherwise
its rows read "not measured". The goal is every knowledge-enhanced method's step ≤ 1.25× the plain
MLM step of the same size. Threads: torch uses all cores; time nothing else on the machine
meanwhile.

    .venv/bin/python benchmarks/train_step.py                       # CPU table; GPU table if CUDA is there
    .venv/bin/python benchmarks/train_step.py --only gpu --data toy # on a GPU machine without the shared data
    .venv/bin/python benchmarks/train_step.py --hidden 256 --layers 4 --batch 16 --length 128 --steps 20
    .venv/bin/python benchmarks/train_step.py --smoke                # every method, tiny, in a temporary folder
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from the source tree without installing

CACHE = Path(__file__).resolve().parent / ".cache" / "train_step"
TOY_GRAPH = Path(__file__).resolve().parents[1] / "graphs" / "toy_medical.ttl"
BERT_BASE = dict(hidden=768, layers=12, length=512, batch=16, mixed_precision="bf16")


def _corpus(work: Path, data: str, length: int, store) -> Path:
    """Documents of about ``length`` characters (Chinese: about as many tokens), so chunks are full."""
    path = work / f"{data}-{length}.txt"
    if path.is_file():
        return path
    if data == "cmekg":
        from _data import dialogues

        pieces = dialogues(1000)
    else:
        rng = random.Random(0)
        names = [store.entity_name(e) for e in range(store.num_entities)]
        pieces = [
            f"患者主诉{a}三天，伴有{b}，既往有{c}病史，建议复查并随访观察。"
            for a, b, c in (rng.sample(names, 3) for _ in range(6000))
        ]
    documents, current = [], ""
    for piece in pieces:
        current += piece
        if len(current) >= 1.2 * length:
            documents.append(current)
            current = ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(documents[:400]), encoding="utf-8")
    return path


def prepare(work: Path, data: str, length: int, vocab_size: int = 8000):
    """(store, tokenizer, linked corpus, artefacts, run) of the run cached in ``work``; built on first use."""
    from kgplm.kg import KGStore
    from kgplm.methods import available, get
    from kgplm.training import stages
    from kgplm.training.run import RunDirectory

    work.mkdir(parents=True, exist_ok=True)
    if data == "cmekg":
        from _data import cmekg_store

        graph = cmekg_store(work)
    else:
        graph = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    corpus = _corpus(work, data, length, graph)
    run = RunDirectory(work / f"run-{data}-{length}-{vocab_size}")
    store = stages.prepare_store(run, graph, graph)
    arguments = dict(
        graph=stages.recorded_graph(run, graph),
        tokenizer=None,
        text_model=None,
        vocab_size=vocab_size,
        pepr_mode="fast",
        num_neighbors=10,
        kg_method="transr",
        entity_dim=100,
        kg_epochs=1,
        seed=0,
        max_length=length,
        neighbor_table=None,
        kg_embeddings=None,
    )
    run.write_run_config({"kgplm_run": 1, "benchmark": "train_step", **arguments})
    inputs = stages.StageInputs(arguments=arguments, store=store, corpus=corpus, corpus_options={}, progress=False)
    tokenizer = stages.prepare_tokenizer(run, inputs)
    stages.run_artefact_stages(set().union(*(get(name).artefacts for name in available())), run, inputs)
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
    model, _ = stages.build_model(
        spec, store, tokenizer, text_model=text, model_options={}, max_length=length, entity_dim=100, artefacts=own
    )
    context = MethodContext(
        config=model.config, tokenizer=tokenizer, store=store, masking=spec.default_masking, seed=0, artefacts=own
    )
    if spec.prepare_model is not None:
        spec.prepare_model(model, context)
    return model, spec.build_collator(context)


class HuggingFaceBert(torch.nn.Module):
    """Hugging Face's ``BertForPreTraining`` of the same size, its MLM loss computed the Hugging Face way
    (cross-entropy over every position, −100 ignored) on the ``mlm`` row's batches."""

    def __init__(self, text: dict, vocab_size: int) -> None:
        from transformers import BertConfig, BertForPreTraining

        super().__init__()
        torch.manual_seed(0)
        self.model = BertForPreTraining(BertConfig(vocab_size=vocab_size, **text))

    def trainable_parameters(self):
        return list(self.parameters())

    def forward(self, input_ids, attention_mask, token_type_ids, labels, **_):
        logits = self.model(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).prediction_logits
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100)
        return type("Output", (), {"loss": loss})()


def _resident_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak(device: torch.device) -> int:
    """Reset the peak-memory counter; returns the baseline (bytes; CPU: resident set)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        return 0
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # return freed heap, so the baseline is what is in use
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current resident set
    except OSError:
        pass
    return 1024 * _resident_kb("VmRSS")


def _peak(device: torch.device, baseline: int) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return max(0, 1024 * _resident_kb("VmHWM") - baseline) / 2**20


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(model, collate, batches, device: torch.device, mixed_precision: str) -> dict:
    from kgplm.training.precision import autocast

    model.to(device).train()
    optimizer = torch.optim.AdamW(model.trainable_parameters(), lr=1e-4)
    collate_times, step_times, tokens, mentions = [], [], [], []
    baseline = None
    for step, (rows, seeds) in enumerate(batches):
        if step == 3:
            baseline = _reset_peak(device)
        started = time.perf_counter()
        batch = collate(rows, seeds)
        collated = time.perf_counter()
        _synchronize(device)
        begun = time.perf_counter()
        with autocast(device, mixed_precision):
            output = model(**batch.to(device))
        optimizer.zero_grad(set_to_none=True)
        output.loss.backward()
        optimizer.step()
        _synchronize(device)
        finished = time.perf_counter()
        if step >= 3:
            collate_times.append(collated - started)
            step_times.append(finished - begun)
            tokens.append(int(batch["attention_mask"].sum()))
            mentions.append(len(batch.get("mention_spans", [])) + len(batch.get("mnem_mention_spans", [])))
    step = statistics.median(step_times)
    return {
        "collate": statistics.median(collate_times),
        "step": step,
        "tokens_per_s": np.mean(tokens) / step,
        "peak_mb": _peak(device, baseline),
        "mentions": float(np.mean(mentions)),
    }


def run_table(
    args, *, device: torch.device, hidden: int, layers: int, batch: int, length: int, mixed_precision: str
) -> dict[str, dict]:
    from kgplm.methods import available
    from kgplm.training.loader import batch_indices, example_seeds

    store, tokenizer, dataset, artefacts, run = prepare(args.work, args.data, length, args.vocab_size)
    text = dict(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64),
        intermediate_size=4 * hidden,
        max_position_embeddings=max(512, length + 1),
    )
    cache: dict = {}
    batches = [
        (dataset[batch_indices(step, batch, len(dataset), 0, cache)], example_seeds(0, step, np.arange(batch)))
        for step in range(args.steps + 3)
    ]
    results = {}
    for name in available():
        model, collator = build(name, store, tokenizer, artefacts, run, text, length)
        results[name] = measure(model, collator, batches, device, mixed_precision)
        if name == "mlm":
            mlm_collator = collator
        del model
    results["hf-bert"] = measure(HuggingFaceBert(text, len(tokenizer)), mlm_collator, batches, device, mixed_precision)
    results["_setting"] = dict(
        device=str(device),
        hidden=hidden,
        layers=layers,
        batch=batch,
        length=length,
        mixed_precision=mixed_precision,
        chunks=len(dataset),
        entities=store.num_entities,
        vocab=len(tokenizer),
        threads=torch.get_num_threads(),
    )
    return results


def print_table(title: str, results: dict | None, methods: list[str]) -> None:
    print(f"\n{title}")
    header = (
        f"{'method':<10}{'mentions':>9}{'collate ms':>12}{'step ms':>10}{'tokens/s':>11}{'peak MB':>10}"
        f"{'step ×mlm':>11}{'total ×mlm':>12}"
    )
    print(header)
    print("-" * len(header))
    if results is None:
        for name in methods:
            print(f"{name:<10}{'not measured':>20}")
        return
    base = results["mlm"]
    for name in methods:
        row = results[name]
        total, base_total = row["collate"] + row["step"], base["collate"] + base["step"]
        print(
            f"{name:<10}{row['mentions']:>9.1f}{row['collate'] * 1e3:>12.1f}{row['step'] * 1e3:>10.1f}"
            f"{row['tokens_per_s']:>11,.0f}{row['peak_mb']:>10.0f}{row['step'] / base['step']:>11.3f}"
            f"{total / base_total:>12.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", choices=["cmekg", "toy"], default="cmekg")
    parser.add_argument("--only", choices=["cpu", "gpu"], default=None, help="one table only")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--mixed-precision", choices=["no", "bf16", "fp16"], default="no", help="the CPU table's")
    parser.add_argument("--gpu-batch", type=int, default=BERT_BASE["batch"], help="the GPU table's batch")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--work", type=Path, default=CACHE, help="where the prepared run is cached")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="toy data, a 1-layer encoder of width 32, 1 timed step, CPU only, in a temporary folder",
    )
    args = parser.parse_args()
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="kgplm-train-step-") as work:
            args.__dict__.update(
                data="toy",
                only="cpu",
                hidden=32,
                layers=1,
                batch=4,
                length=32,
                steps=1,
                vocab_size=300,
                work=Path(work),
            )
            run_benchmark(args)
        return
    run_benchmark(args)


def run_benchmark(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)

    from kgplm.methods import available

    methods = [*available(), "hf-bert"]
    tables = []
    if args.only != "gpu":
        cpu = run_table(
            args,
            device=torch.device("cpu"),
            hidden=args.hidden,
            layers=args.layers,
            batch=args.batch,
            length=args.length,
            mixed_precision=args.mixed_precision,
        )
        tables.append(("CPU", cpu))
    if args.only != "cpu":
        gpu = None
        if torch.cuda.is_available():
            gpu = run_table(
                args,
                device=torch.device("cuda"),
                hidden=BERT_BASE["hidden"],
                layers=BERT_BASE["layers"],
                batch=args.gpu_batch,
                length=BERT_BASE["length"],
                mixed_precision=BERT_BASE["mixed_precision"],
            )
        tables.append(("GPU", gpu))
    for kind, results in tables:
        if results is None:
            title = (
                f"GPU, BERT-base (hidden {BERT_BASE['hidden']}, {BERT_BASE['layers']} layers, length "
                f"{BERT_BASE['length']}, batch {args.gpu_batch}, bf16): not measured (no CUDA device)"
            )
        else:
            s = results["_setting"]
            name = torch.cuda.get_device_name() if kind == "GPU" else f"CPU, torch threads {s['threads']}"
            title = (
                f"{name}: {args.data} data ({s['entities']:,} entities, {s['chunks']:,} linked chunks of ≤ "
                f"{s['length']} tokens, vocabulary {s['vocab']:,}); encoder hidden {s['hidden']}, {s['layers']} "
                f"layers, batch {s['batch']}, mixed precision {s['mixed_precision']}; median of {args.steps} "
                f"steps; peak MB: {'CUDA max allocated' if kind == 'GPU' else 'growth of peak RSS'}"
            )
        print_table(title, results, methods)
    knowledge = [name for name in available() if name != "mlm"]
    for kind, results in tables:
        if results is not None:
            worst = max((results[n]["step"] / results["mlm"]["step"] for n in knowledge), default=math.nan)
            print(f"\n{kind}: slowest knowledge-enhanced step ×mlm = {worst:.3f} (goal ≤ 1.25)")


if __name__ == "__main__":
    main()
