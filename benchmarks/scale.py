"""The UMLS-scale chain (issue 30.7): import, save/load, name index, PEPR, TransE, linker, KeBioLM, SMedBERT.

Run: ``.venv/bin/python benchmarks/scale.py --sizes 115k 1M 4M``. For each size a UMLS-shaped RRF
set (benchmarks/synthetic_umls.py, seed 0) is generated once under ``benchmarks/.cache/umls-SIZE``,
then every stage runs in its own Python process, so that its peak RSS (``ru_maxrss``) is its own,
and reports wall time, CPU time (user + sys: the machine is shared, so wall time is inflated by
other work) and a throughput. Later stages read what earlier ones saved (the store, the linker).
Each stage's figures are recorded under ``benchmarks/.cache/scale-SIZE/results/COMMIT/`` and reused by
a later run at the same commit (never for a tree with uncommitted changes); ``--reuse`` takes the
newest record at any commit and the cell names that commit. Prints one Markdown table, the growth exponent of each cost between consecutive sizes (the slope of
log cost against log number of concepts: 1 is linear), the commit and the load average.

Stages ``transe``, ``kebiolm`` and ``smedbert`` come from ``benchmarks/scale_models.py`` (issue
30.4–30.5); where that module is not in the tree their rows read "not measured at this commit".

``--smoke`` runs every stage on 300 generated concepts with 0.05 MB of text to link and a PEPR
budget of 0 s (so ``mode="auto"`` takes the fast mode, as it does at the full sizes), everything
(the RRF files, the stores, the records) in a temporary folder: the first stage in its own process
as every stage of the full run, the others in the benchmark's process (a new process imports
torch, numba's kernels and the models again, seconds a stage).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CACHE = Path(__file__).resolve().parent / ".cache"
STAGES = (
    "import",
    "save",
    "load",
    "name_index",
    "pepr",
    "pepr_coarse",
    "pepr_recall",
    "transe",
    "linker_build",
    "linker_load",
    "linker_link",
    "kebiolm",
    "smedbert",
)
MODEL_STAGES = {"transe": "transe_epoch", "kebiolm": "kebiolm_step", "smedbert": "smedbert_step"}
#: contested seeds whose fast PEPR rows are checked against exact PEPR (power iteration, tol 1e-8)
RECALL_SEEDS = 32
#: text linked per size for the MB/s figure (the same generator for every size)
TEXT_MB = 8
#: the comparator of the linking rows (issue 30.6: "within 2× of CMeKG's"): ``--sizes cmekg`` runs the
#: linker stages on CMeKG's store, with text from the same generator
COMPARATOR = "cmekg"
LINKER_STAGES = ("linker_build", "linker_load", "linker_link")
#: the modelled seconds ``mode="auto"`` allows exact PEPR (beyond it, the fast mode)
PEPR_BUDGET_SECONDS = 120
#: whether this is a ``--smoke`` run (its child processes are started with ``--smoke`` too)
SMOKE = False


def _paths(size: str) -> dict[str, Path]:
    root = CACHE / f"umls-{size}"
    if size == COMPARATOR:  # CMeKG's own store (benchmarks/_data.py), linked on text of the same generator
        return {"cmekg": True, "linker": CACHE / "scale-cmekg" / "linker", "text": CACHE / "scale-cmekg" / "text.txt"}
    return {
        "rrf": root,
        "store": CACHE / f"scale-{size}" / "store",
        "linker": CACHE / f"scale-{size}" / "linker",
        "text": CACHE / f"scale-{size}" / "text.txt",
        "pepr": CACHE / f"scale-{size}" / "pepr.npz",
        "pepr_coarse": CACHE / f"scale-{size}" / "pepr-coarse.npz",
        "copy": CACHE / f"scale-{size}" / "store-copy",
    }


def _store(paths):
    from kgplm import KGStore

    if paths.get("cmekg"):
        from _data import cmekg_store

        return cmekg_store(CACHE)
    return KGStore.load(paths["store"])


def _text(store, paths, megabytes: float | None = None) -> str:
    """Sentences of filler words with an entity name every few words (names drawn evenly over the ids),
    written once per size: the same shape of text at every size (``megabytes``: ``TEXT_MB`` unless given)."""
    import numpy as np

    megabytes = TEXT_MB if megabytes is None else megabytes
    if paths["text"].is_file():
        return paths["text"].read_text(encoding="utf-8")
    rng = np.random.default_rng(0)
    filler = [
        "the",
        "patient",
        "was",
        "given",
        "with",
        "and",
        "after",
        "shows",
        "no",
        "signs",
        "of",
        "患者",
        "出现",
        "治疗",
        "后",
        "症状",
    ]
    pieces, size = [], 0
    while size < megabytes * 1_000_000:
        words = [filler[i] for i in rng.integers(0, len(filler), 6)]
        words.insert(int(rng.integers(0, 6)), store.entity_name(int(rng.integers(0, store.num_entities))))
        sentence = " ".join(words) + ". "
        pieces.append(sentence)
        size += len(sentence.encode("utf-8"))
    text = "".join(pieces)
    paths["text"].parent.mkdir(parents=True, exist_ok=True)
    paths["text"].write_text(text, encoding="utf-8")
    return text


def run_stage(stage: str, size: str) -> dict:
    """One stage in this process; returns what it measured (the parent adds time and memory)."""
    paths = _paths(size)
    if stage == "import":
        from kgplm import KGStore

        store = KGStore.from_umls_rrf(paths["rrf"], show_progress=False)
        began = time.perf_counter()
        store.save(paths["store"])
        return {
            "count": store.num_entities,
            "unit": "concepts",
            "note": f"{store.num_triples:,} triples, "
            f"{len(store.strings):,} strings; save {time.perf_counter() - began:.1f} s",
        }
    if stage == "save":
        store = _store(paths)
        store.save(paths["copy"])
        return {"count": store.num_entities, "unit": "concepts", "note": "memory-mapped store written again"}
    if stage == "load":
        store = _store(paths)
        name = store.entity_name(store.num_entities // 2)
        return {"count": store.num_entities, "unit": "concepts", "note": f"then entity_name: {name!r}"}
    if stage == "name_index":
        import numpy as np

        store = _store(paths)
        lookup = store.name_lookup()
        probes = np.linspace(0, store.num_entities - 1, 1000).astype(int).tolist()
        began = time.perf_counter()
        found = sum(entity in store.entity_ids(store.entity_name(entity)) for entity in probes)
        per_lookup = (time.perf_counter() - began) / len(probes)
        return {
            "count": len(lookup),
            "unit": "names",
            "note": f"index {lookup.nbytes / 1e6:.0f} MB; "
            f"{found}/1000 display names found, {per_lookup * 1e6:.0f} µs a lookup",
        }
    if stage in ("pepr", "pepr_coarse"):
        from kgplm.kg.pepr import top_k_neighbors

        store = _store(paths)
        # "pepr": the defaults (fast mode refines contested seeds); "pepr_coarse": the coarse push alone
        options = {} if stage == "pepr" else {"refine": False}
        table = top_k_neighbors(
            store, None, k=10, mode="auto", budget_seconds=PEPR_BUDGET_SECONDS, show_progress=False, **options
        )
        table.save(paths[stage])
        config = table.config
        return {
            "count": store.num_entities,
            "unit": "seeds",
            "note": f"mode {config['mode']} ({config['mode_reason']}); {config.get('num_contested', 0):,} "
            f"contested, refined {config.get('num_refined')}",
        }
    if stage == "pepr_recall":
        import numpy as np

        from kgplm.kg.pepr import NeighborTable, one_hop_candidates, personalized_pagerank

        store = _store(paths)
        tables = {name: NeighborTable.load(paths[name]) for name in ("pepr", "pepr_coarse") if paths[name].is_file()}
        if not tables:
            raise SystemExit("no PEPR table: run the pepr or pepr_coarse stage first")
        jumps = {table.config["jump"] for table in tables.values()}
        if len(jumps) != 1:
            raise SystemExit(f"the PEPR tables use different jump vectors: {sorted(jumps)}")
        indptr, neighbors, _, _ = one_hop_candidates(store, np.arange(store.num_entities))
        contested = np.flatnonzero(np.diff(indptr) > 10)
        sample = np.sort(np.random.default_rng(0).choice(contested, min(RECALL_SEEDS, len(contested)), replace=False))
        exact = personalized_pagerank(store, sample, tol=1e-8, batch_size=16, jump=jumps.pop())
        notes = []
        for name, table in tables.items():
            recalls = []
            for row, seed in enumerate(sample.tolist()):
                candidates = neighbors[indptr[seed] : indptr[seed + 1]]
                kth = np.sort(exact[row, candidates])[-10]
                chosen = table.neighbors[table.row_of(seed)]
                recalls.append(float(np.mean(exact[row, chosen[chosen >= 0]] >= kth * (1 - 1e-6))))
            notes.append(f"{name} {np.mean(recalls):.4f} (min {np.min(recalls):.2f})")
        return {
            "count": len(sample),
            "unit": "seeds",
            "note": f"fast PEPR contested recall@10: {', '.join(notes)} "
            f"on {len(sample)} contested seeds vs exact (tol 1e-8)",
        }
    if stage == "linker_build":
        from kgplm.text.linking import EntityLinker

        store = _store(paths)
        linker = EntityLinker(store)
        linker.save(paths["linker"])
        return {"count": linker.num_names, "unit": "names", "note": f"{len(store.strings):,} strings in the store"}
    if stage == "linker_load":
        from kgplm.text.linking import EntityLinker

        linker = EntityLinker.load(paths["linker"], store=_store(paths))
        return {"count": linker.num_names, "unit": "names", "note": "memory-mapped"}
    if stage == "linker_link":
        from kgplm.text.linking import EntityLinker

        store = _store(paths)
        text = _text(store, paths)
        megabytes = len(text.encode("utf-8")) / 1e6
        rates, counts = {}, set()
        # memory-mapped (the default load: pages read as the walk touches them, 4 KB pages) and read into
        # memory (numpy's arrays there are on transparent huge pages, so the trie walk's random reads miss
        # the TLB less: the difference grows with the trie, 1.6 GB of nodes at 4M concepts)
        for mmap in (True, False):
            linker = EntityLinker.load(paths["linker"], store=store, mmap=mmap)
            linker.link(text[:1000])  # compile
            cpu = time.process_time()
            counts.add(len(linker.link(text)))
            rates[mmap] = megabytes / (time.process_time() - cpu)
            del linker
        if len(counts) != 1:
            raise SystemExit(f"the two loads found different mentions: {counts}")
        return {
            "count": megabytes,
            "unit": "MB",
            "seconds_override": megabytes / rates[False],
            "mb_per_cpu_second": {"memory": rates[False], "mapped": rates[True]},
            "note": f"{rates[False]:.2f} MB per CPU-second loaded into memory, {rates[True]:.2f} memory-mapped; "
            f"{counts.pop():,} mentions",
        }
    if stage in MODEL_STAGES:
        import scale_models  # benchmarks/scale_models.py (issue 30.4-30.5): its figures, this stage's process

        store = _store(paths)
        if stage == "transe":
            figures = scale_models.transe_epoch(store)
            return {
                "count": store.num_triples,
                "unit": "triples",
                "note": f"one TransE epoch: {figures['triples_per_cpu_second']:,.0f} triples per CPU-second",
            }
        step = scale_models.kebiolm_step if stage == "kebiolm" else scale_models.smedbert_step
        figures = step(store.num_entities)
        # the rate and the growth exponent read the step's own CPU time, not the model's build
        return {
            "count": 1,
            "unit": "steps",
            "seconds_override": figures["step_cpu_seconds"],
            "note": f"a step with {store.num_entities:,} entities: {figures['seconds']:.2f} s wall, "
            f"{figures['step_cpu_seconds']:.2f} s CPU (the stage's time includes building the model and "
            "the optimiser)",
        }
    raise SystemExit(f"unknown stage {stage!r}")


def _child(stage: str, size: str) -> None:
    print("RESULT " + json.dumps(_measure_here(stage, size)), flush=True)


def _measure_here(stage: str, size: str) -> dict:
    """Run one stage in this process, add its time and memory, and record the figures."""
    import resource

    began_wall, began_cpu = time.perf_counter(), time.process_time()
    result = run_stage(stage, size)
    wall, cpu = time.perf_counter() - began_wall, time.process_time() - began_cpu
    result.update(
        wall=wall,
        cpu=cpu,
        peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
        load_average=os.getloadavg()[0],
    )
    from _runs import code_version

    result["commit"] = code_version()
    record = _record(size, result["commit"], stage)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(result), encoding="utf-8")
    return result


def _models_available() -> bool:
    return (Path(__file__).resolve().parent / "scale_models.py").is_file()


def _record(size: str, commit: str, stage: str) -> Path:
    return CACHE / f"scale-{size}" / "results" / commit / f"{stage}.json"


def measure(stage: str, size: str, timeout: float, commit: str, reuse: bool, in_process: bool = False) -> dict:
    """The stage's figures: measured in a child process (which records them under
    ``benchmarks/.cache/scale-SIZE/results/COMMIT/STAGE.json``; in this process with ``in_process``),
    or read from the record made at ``commit``; with ``reuse``, from the newest record at any commit (the
    cell then names it)."""
    if stage in MODEL_STAGES and not _models_available():
        return {"missing": "not measured at this commit (benchmarks/scale_models.py absent)"}
    record = _record(size, commit, stage)
    if record.is_file() and "dirty" not in commit:
        return json.loads(record.read_text(encoding="utf-8"))
    if reuse:
        older = sorted((CACHE / f"scale-{size}" / "results").glob(f"*/{stage}.json"), key=lambda p: p.stat().st_mtime)
        if older:
            return json.loads(older[-1].read_text(encoding="utf-8"))
    if in_process:
        return _measure_here(stage, size)
    return _measure_in_child(stage, size, timeout)


def _measure_in_child(stage: str, size: str, timeout: float) -> dict:
    command = [sys.executable, __file__, "--stage", stage, "--size", size, "--cache", str(CACHE)]
    command += ["--smoke"] if SMOKE else []
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    print(f"  {size} {stage} ...", file=sys.stderr, flush=True)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"missing": f"stopped after {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"missing": f"failed: {tail[:160]}"}
    result = json.loads(lines[-1][len("RESULT ") :])
    print(f"  {size} {stage}: {result}", file=sys.stderr, flush=True)
    return result


def _ensure_rrf(size: str) -> None:
    import synthetic_umls

    directory = _paths(size)["rrf"]
    if not all((directory / f"{table}.RRF").is_file() for table in ("MRCONSO", "MRREL", "MRSTY")):
        synthetic_umls.write_synthetic_umls(directory, synthetic_umls.parse_size(size), seed=0)


def _link_ratio(reference: dict, result: dict) -> str:
    """CMeKG's MB per CPU-second over this size's, read into memory and memory-mapped (a record made before the
    stage timed both loads has one rate, its rate column)."""

    def rates(record: dict) -> dict[str, float]:
        return record.get("mb_per_cpu_second") or {
            "memory": record["count"] / record.get("seconds_override", record["cpu"])
        }

    mine, theirs = rates(result), rates(reference)
    return ", ".join(
        f"{theirs[load] / mine[load]:.2f} {'in memory' if load == 'memory' else 'memory-mapped'}"
        for load in ("memory", "mapped")
        if load in mine and load in theirs
    )


def _format_seconds(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.1f} s" if seconds >= 1 else f"{seconds:.2f} s"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["115k", "1M", "4M"])
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    parser.add_argument("--stage", help=argparse.SUPPRESS)
    parser.add_argument("--size", help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds a stage may take")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="take a stage's figures from its newest record at any commit (the cell names the commit)",
    )
    parser.add_argument(
        "--skip", nargs="*", default=[], metavar="STAGE@SIZE", help="cells not run, each STAGE@SIZE or STAGE@SIZE=why"
    )
    parser.add_argument("--skip-reason", default="skipped", help="what the skipped cells say")
    parser.add_argument("--cache", type=Path, default=None, help=argparse.SUPPRESS)  # a child's CACHE
    parser.add_argument(
        "--smoke", action="store_true", help="every stage on 300 generated concepts, in a temporary folder"
    )
    args = parser.parse_args(argv)
    global CACHE, TEXT_MB, PEPR_BUDGET_SECONDS, SMOKE
    settings = CACHE, TEXT_MB, PEPR_BUDGET_SECONDS, SMOKE
    try:
        if args.smoke:
            args.sizes, args.reuse = ["300"], False
            TEXT_MB, PEPR_BUDGET_SECONDS, SMOKE = 0.05, 0, True
        if args.cache is not None:
            CACHE = args.cache
        if args.stage:
            _child(args.stage, args.size)
        elif args.smoke:
            import tempfile

            with tempfile.TemporaryDirectory(prefix="kgplm-scale-") as scratch:
                CACHE = Path(scratch)
                run_benchmark(args)
        else:
            run_benchmark(args)
    finally:
        CACHE, TEXT_MB, PEPR_BUDGET_SECONDS, SMOKE = settings  # main() called in a process leaves them as they were


def run_benchmark(args: argparse.Namespace) -> None:
    from _runs import code_version
    import synthetic_umls

    commit = code_version()
    skipped = dict((cell.split("=", 1) + [""])[:2] for cell in args.skip)  # STAGE@SIZE[=why]
    load_before = os.getloadavg()
    results: dict[tuple[str, str], dict] = {}
    for size in args.sizes:
        if size != COMPARATOR:
            _ensure_rrf(size)
        for stage in args.stages:
            if size == COMPARATOR and stage not in LINKER_STAGES:
                results[stage, size] = {"missing": "–"}
                continue
            if f"{stage}@{size}" in skipped:
                results[stage, size] = {"missing": f"not run: {skipped[f'{stage}@{size}'] or args.skip_reason}"}
                continue
            results[stage, size] = measure(
                stage, size, args.timeout, commit, args.reuse, in_process=args.smoke and stage != args.stages[0]
            )
    load_after = os.getloadavg()
    scaled = [size for size in args.sizes if size != COMPARATOR]  # the UMLS-shaped sizes
    concepts = {size: synthetic_umls.parse_size(size) for size in scaled}
    print(
        f"benchmarks/scale.py at commit {commit}; UMLS-shaped sets of {', '.join(scaled)} concepts "
        f"(benchmarks/synthetic_umls.py, seed 0); {os.cpu_count()} cores, load average {load_before[0]:.1f} "
        f"before, {load_after[0]:.1f} after. Wall and CPU (user + sys) time, peak RSS of the stage's own "
        "process, throughput per CPU-second.\n"
    )
    print("| stage | " + " | ".join(args.sizes) + " |")
    print("|---|" + "---|" * len(args.sizes))
    for stage in args.stages:
        cells = []
        for size in args.sizes:
            result = results[stage, size]
            if "missing" in result:
                cells.append(result["missing"])
                continue
            cpu = result.get("seconds_override", result["cpu"])
            rate = result["count"] / cpu if cpu > 0 else float("inf")
            measured_at = "" if result.get("commit") == commit else f" (at {result.get('commit')})"
            cells.append(
                f"{_format_seconds(result['wall'])} wall, {_format_seconds(result['cpu'])} CPU, "
                f"{result['peak_rss_gb']:.2f} GB; {rate:,.1f} {result['unit']}/CPU-s; {result.get('note', '')}; "
                f"load {result.get('load_average', float('nan')):.1f}{measured_at}"
            )
        print(f"| {stage} | " + " | ".join(cells) + " |")
    if COMPARATOR in args.sizes and "missing" not in results.get(("linker_link", COMPARATOR), {"missing": ""}):
        reference = results["linker_link", COMPARATOR]
        print(
            f"\nCMeKG's linking rate ÷ each size's (the `{COMPARATOR}` column: CMeKG's store, text of the same "
            "generator; issue 30.6 asks for at most 2): "
            + "; ".join(
                f"{size} {_link_ratio(reference, results['linker_link', size])}"
                for size in scaled
                if "missing" not in results["linker_link", size]
            )
            + "."
        )
    if len(scaled) > 1:
        print(
            "\nGrowth exponents (slope of log cost against log concepts between consecutive sizes; CPU time "
            "(of the linking or the step alone where the rate reads it), peak RSS):\n"
        )
        pairs = list(zip(scaled[:-1], scaled[1:]))
        print("| stage | " + " | ".join(f"{a}→{b} CPU | {a}→{b} RSS" for a, b in pairs) + " |")
        print("|---|" + "---|---|" * len(pairs))
        for stage in args.stages:
            cells = []
            for small, large in pairs:
                first, second = results[stage, small], results[stage, large]
                if "missing" in first or "missing" in second:
                    cells += ["–", "–"]
                    continue
                ratio = math.log(concepts[large] / concepts[small])
                cost = [result.get("seconds_override", result["cpu"]) for result in (first, second)]
                cells += [
                    f"{math.log(max(cost[1], 1e-3) / max(cost[0], 1e-3)) / ratio:.2f}",
                    f"{math.log(second['peak_rss_gb'] / first['peak_rss_gb']) / ratio:.2f}",
                ]
            print(f"| {stage} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
