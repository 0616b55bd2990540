"""PEPR top-10 neighbour tables: kgplm exact and fast modes against networkx and scikit-network.

Run: ``.venv/bin/pip install -e '.[bench]' && .venv/bin/python benchmarks/pepr.py``
(``--graph cmekg`` for the real CMeKG graph instead of the synthetic 274,163-entity /
4,390,726-triple graph of benchmarks/synthetic_kg.py).

Recall is measured on **contested seeds only**: seeds with more than k = 10 one-hop candidates
(a seed with ≤ k candidates keeps all of them, so any method is right there). A random sample of
them (``--recall-seeds``, 800 by default, fixed ``--sample-seed``) is ranked by an exact PEPR
reference written with scipy alone, independent of kgplm's walk and kernels (power iteration to
an L1 change of 1e-12, :func:`independent_ppr`, cached in benchmarks/.cache), for each jump vector
measured (``--jumps``: the paper's, the default, and plain PPR's one-hot ``seed``); a chosen neighbour counts as
correct when its exact score is at least the exact 10th score (ties count). Per method: seeds/s,
the time for every entity (fast modes: measured on every entity, one-off costs such as hub vectors
included; exact and the anchors: measured on the sample and extrapolated), recall@10 mean and min
over the sample, and the process's peak RSS. The machine's load average is printed with the table:
timings on a shared machine are inflated by other work. Prints a Markdown table.

``--smoke`` runs every row on the tiny instance of the synthetic graph (``synthetic_kg.SMOKE``: 500
entities, 3,000 triples) with 20 recall seeds, 8 exact-mode seeds and one anchor seed, everything
(the store, the reference) in a temporary folder; scikit-network's and networkx's anchors are left
out where those packages are not installed.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

CACHE = Path(__file__).resolve().parent / ".cache"
K = 10


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def load_graph(name: str):
    from kgplm import KGStore

    cache = CACHE / f"{name}_store"
    if (cache / "manifest.json").is_file():
        return KGStore.load(cache)
    if name == "cmekg":
        # the shared dump when there is one (KGPLM_SHARED_DATA), else the pycmekg package
        dump = Path(os.environ.get("KGPLM_SHARED_DATA", "../shared/data")) / "kg" / "cmekg" / "triples.tsv.gz"
        store = KGStore.from_cmekg(dump if dump.is_file() else None, show_progress=False)
    elif name == "smoke":
        from synthetic_kg import SMOKE, write_ntriples

        store = KGStore.from_rdf(write_ntriples(CACHE / "synthetic_kg_smoke.nt", **SMOKE), show_progress=False)
    else:
        from synthetic_kg import synthetic_ntriples

        store = KGStore.from_rdf(synthetic_ntriples(), show_progress=False)
    store.save(cache)
    return KGStore.load(cache)


class _LoggedRows(list):
    """Rows of the table, each also logged as soon as it is measured."""

    def append(self, row) -> None:
        print(f"  measured: {row}", file=sys.stderr, flush=True)
        super().append(row)


def contested_sample(store, size: int, seed: int) -> np.ndarray:
    from kgplm.kg.pepr.pagerank import one_hop_candidates

    indptr, *_ = one_hop_candidates(store, np.arange(store.num_entities))
    contested = np.flatnonzero(np.diff(indptr) > K)
    return np.sort(np.random.default_rng(seed).choice(contested, min(size, len(contested)), replace=False))


def independent_ppr(
    store, seeds: np.ndarray, jump: str, alpha: float = 0.15, tol: float = 1e-12, block: int = 64
) -> np.ndarray:
    """Exact PEPR of ``seeds``, ``(len(seeds), entities)``, written here with scipy alone (no kgplm walk or
    kernel): the undirected walk P(u, v) = (triples linking u and v) / deg(u), self-loops dropped; the jump
    vector one-hot at the seed (``jump="seed"``) or the paper's w_s · one-hot + w_u / Z (Z entities,
    w_s = (1 − 1/Z) / (1 + (Z − 1)/Z), w_u = 1 / (1 + (Z − 1)/Z)); a dangling entity's mass restarts at the
    jump vector. Power iteration x ← (1 − α) Pᵀ x + (α + (1 − α) · dangling mass) · jump, from uniform,
    until every column's L1 change is below ``tol``."""
    import scipy.sparse

    triples = np.asarray(store.triples, dtype=np.int64)
    triples = triples[triples[:, 0] != triples[:, 2]]
    n = store.num_entities
    rows = np.concatenate([triples[:, 0], triples[:, 2]])
    columns = np.concatenate([triples[:, 2], triples[:, 0]])
    counts = scipy.sparse.coo_matrix((np.ones(len(rows)), (rows, columns)), shape=(n, n)).tocsr()
    degree = np.asarray(counts.sum(axis=1)).ravel()
    transposed = (scipy.sparse.diags(np.divide(1.0, degree, out=np.zeros(n), where=degree > 0)) @ counts).T.tocsr()
    dangling = degree == 0
    z = float(n)
    seed_weight, uniform_weight = (
        ((1 - 1 / z) / (1 + (z - 1) / z), 1 / (1 + (z - 1) / z)) if jump == "paper" else (1.0, 0.0)
    )
    result = np.empty((len(seeds), n))
    for begin in range(0, len(seeds), block):
        part = seeds[begin : begin + block]
        width = np.arange(len(part))
        jump_vectors = np.full((n, len(part)), uniform_weight / z)
        jump_vectors[part, width] += seed_weight
        current = np.full((n, len(part)), 1.0 / n)
        for _ in range(5000):
            restart = alpha + (1 - alpha) * current[dangling].sum(axis=0)
            following = (1 - alpha) * (transposed @ current) + restart * jump_vectors
            change = np.abs(following - current).sum(axis=0).max()
            current = following
            if change < tol:
                break
        result[begin : begin + len(part)] = current.T
        print(f"  reference ({jump} jump): {begin + len(part)} of {len(seeds)} seeds", file=sys.stderr, flush=True)
    return result


def exact_reference(store, graph: str, seeds: np.ndarray, sample_seed: int, jump: str) -> dict:
    """Exact PEPR (:func:`independent_ppr`) of each sample seed's one-hop candidates, CSR over the seeds; cached."""
    from kgplm.kg.pepr.pagerank import one_hop_candidates

    path = CACHE / f"pepr_independent_{graph}_{jump}_{len(seeds)}_seed{sample_seed}.npz"
    if path.is_file():
        with np.load(path) as data:
            if np.array_equal(data["seeds"], seeds):
                return dict(data)
    indptr, neighbors, _, _ = one_hop_candidates(store, seeds)
    scores = np.zeros(len(neighbors))
    full = independent_ppr(store, seeds, jump)
    for row in range(len(seeds)):
        lo, hi = indptr[row], indptr[row + 1]
        scores[lo:hi] = full[row, neighbors[lo:hi]]
    reference = {"seeds": seeds, "indptr": indptr, "neighbors": neighbors, "scores": scores}
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **reference)
    return reference


def contested_recall(reference: dict, table) -> tuple[float, float]:
    """Recall@K of ``table``'s rows for the reference seeds (rows looked up by seed)."""
    values = []
    indptr, neighbors, scores = reference["indptr"], reference["neighbors"], reference["scores"]
    for row, seed in enumerate(reference["seeds"].tolist()):
        candidate_scores = dict(
            zip(neighbors[indptr[row] : indptr[row + 1]].tolist(), scores[indptr[row] : indptr[row + 1]].tolist())
        )
        kth = np.sort(list(candidate_scores.values()))[-K]
        chosen = table.neighbors[table.row_of(seed)]
        chosen = chosen[chosen >= 0].tolist()
        values.append(np.mean([candidate_scores[c] >= kth * (1 - 1e-6) for c in chosen]))
    return float(np.mean(values)), float(np.min(values))


def _fast_setting(text: str) -> dict:
    """``EPSILON/NUM_HUBS[/ROUNDS]``: ROUNDS "off" (no refinement) or ``EPS:GAP,EPS:GAP`` (forced rounds)."""
    parts = text.split("/")
    setting = {"epsilon": float(parts[0]), "num_hubs": int(parts[1])}
    if len(parts) > 2 and parts[2] == "off":
        setting["refine"] = False
    elif len(parts) > 2:
        rounds = [tuple(float(x) for x in level.split(":")) for level in parts[2].split(",")]
        setting.update(refine=True, refine_rounds=rounds)
    return setting


def _describe(setting: dict, table) -> str:
    config = table.config
    text = f"kgplm fast (push eps {setting['epsilon']:g}, {setting['num_hubs']} exact hubs"
    if config.get("refined"):
        rounds = ", ".join(
            f"{count:,} to eps {level[0]:g} (gap < {level[1]:g})"
            for count, level in zip(config["num_refined"], config["refine_rounds"])
        )
        text += f"; of {config['num_contested']:,} contested seeds, deep pushes: {rounds}"
    else:
        text += "; no refinement"
    if config.get("short_cycle_share") is not None:
        text += f"; short-cycle share {config['short_cycle_share']:.3f}"
    return text + "), every entity"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graph", choices=["synthetic", "cmekg"], default="synthetic")
    parser.add_argument(
        "--jumps",
        nargs="+",
        choices=["paper", "seed"],
        default=["paper", "seed"],
        help="jump vectors measured: the paper's (seed 1, others 1/Z) and plain PPR's one-hot",
    )
    parser.add_argument("--recall-seeds", type=int, default=800, help="contested seeds compared with exact PEPR")
    parser.add_argument("--sample-seed", type=int, default=1, help="random seed of the contested sample")
    parser.add_argument(
        "--fast",
        type=_fast_setting,
        nargs="+",
        default=[_fast_setting("1e-2/64/off"), _fast_setting("1e-2/64")],
        help="fast-mode settings to time, each EPSILON/NUM_HUBS[/off or EPS:GAP,EPS:GAP]; "
        "without the third part, the defaults (refine='auto': deep pushes only where the graph has short cycles)",
    )
    parser.add_argument("--exact-seeds", type=int, default=256, help="sample seeds timed in exact mode")
    parser.add_argument("--anchor-seeds", type=int, default=3, help="seeds timed for networkx / scikit-network")
    parser.add_argument("--skip-networkx", action="store_true")
    parser.add_argument(
        "--smoke", action="store_true", help="the tiny synthetic graph, a few seeds, everything in a temporary folder"
    )
    args = parser.parse_args()
    if args.smoke:
        import importlib.util
        import tempfile

        global CACHE
        args.__dict__.update(
            graph="smoke",
            recall_seeds=20,
            exact_seeds=8,
            anchor_seeds=1,
            skip_networkx=args.skip_networkx or importlib.util.find_spec("networkx") is None,
        )
        cache = CACHE
        with tempfile.TemporaryDirectory(prefix="kgplm-pepr-") as scratch:
            try:
                CACHE = Path(scratch)
                run_benchmark(args)
            finally:
                CACHE = cache
        return
    run_benchmark(args)


def run_benchmark(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.INFO, format="  %(message)s", stream=sys.stderr)

    from kgplm.kg.pepr import TransitionMatrix, top_k_neighbors

    started = time.perf_counter()
    store = load_graph(args.graph)
    n = store.num_entities
    print(f"graph: {store!r}, ready in {time.perf_counter() - started:.1f} s\n", file=sys.stderr)
    sample = contested_sample(store, args.recall_seeds, args.sample_seed)
    references = {jump: exact_reference(store, args.graph, sample, args.sample_seed, jump) for jump in args.jumps}
    load_before = os.getloadavg()
    rows = _LoggedRows()
    top_k_neighbors(
        store,
        sample[:2],
        k=K,
        mode="fast",
        num_hubs=1,
        epsilon=0.5,
        refine=True,
        refine_rounds=[(0.1, 1.0)],
        show_progress=False,
    )  # compile
    for jump in args.jumps:
        reference = references[jump]
        # exact mode, timed on part of the sample and extrapolated; its recall on the whole sample
        if args.exact_seeds:
            timed = sample[: args.exact_seeds]
            began = time.perf_counter()
            top_k_neighbors(store, timed, k=K, mode="exact", tol=1e-6, jump=jump, show_progress=False)
            per_seed = (time.perf_counter() - began) / len(timed)
            exact = top_k_neighbors(store, sample, k=K, mode="exact", tol=1e-6, jump=jump, show_progress=False)
            rows.append(
                (
                    jump,
                    "kgplm exact (batched power iteration, f64, tol 1e-6, 256 seeds/block)",
                    per_seed,
                    n * per_seed,
                    *contested_recall(reference, exact),
                    peak_rss_gb(),
                )
            )
        # fast: timed on every entity, the real job (hub vectors, global PageRank, candidate lists and the
        # refinement included); recall from the rows of the contested sample
        for setting in args.fast:
            began = time.perf_counter()
            fast = top_k_neighbors(store, None, k=K, mode="fast", jump=jump, show_progress=False, **setting)
            seconds = time.perf_counter() - began
            rows.append(
                (
                    jump,
                    _describe(setting, fast),
                    seconds / n,
                    seconds,
                    *contested_recall(reference, fast),
                    peak_rss_gb(),
                )
            )

    # anchors: one seed at a time, the paper's jump vector
    import scipy.sparse

    walk = TransitionMatrix.from_store(store)
    adjacency = scipy.sparse.csr_matrix(
        (np.ones(len(walk.push_indices)), walk.push_indices, walk.push_indptr), shape=(n, n)
    )  # scikit-network takes csr_matrix, not csr_array
    anchors = sample[: args.anchor_seeds]
    try:
        if not len(anchors):
            raise ImportError  # --anchor-seeds 0: no anchor
        from sknetwork.ranking import PageRank

        began = time.perf_counter()
        for seed in anchors.tolist():
            weights = np.full(n, 1.0 / n)
            weights[seed] = 1.0
            PageRank(damping_factor=0.85, n_iter=100, tol=1e-6).fit(adjacency, weights=weights / weights.sum())
        per_seed = (time.perf_counter() - began) / len(anchors)
        rows.append(
            (
                "paper",
                "scikit-network PageRank (power iteration, tol 1e-6), per seed",
                per_seed,
                n * per_seed,
                float("nan"),
                float("nan"),
                peak_rss_gb(),
            )
        )
    except ImportError:
        print("scikit-network is not installed (pip install -e '.[bench]'): anchor skipped", file=sys.stderr)
    if not args.skip_networkx and len(anchors):
        import networkx as nx

        graph = nx.from_scipy_sparse_array(adjacency, create_using=nx.DiGraph)
        began = time.perf_counter()
        for seed in anchors[:1].tolist():
            personalization = dict.fromkeys(range(n), 1.0 / n)
            personalization[seed] = 1.0
            nx.pagerank(graph, alpha=0.85, personalization=personalization, tol=1e-6)
        per_seed = time.perf_counter() - began
        rows.append(
            ("paper", "networkx pagerank, per seed", per_seed, n * per_seed, float("nan"), float("nan"), peak_rss_gb())
        )

    load_after = os.getloadavg()
    print(
        f"{args.graph}: {n:,} entities, {store.num_triples:,} triples; recall on {len(sample)} of the contested "
        f"seeds (> {K} candidates); load average {load_before[0]:.1f} before, {load_after[0]:.1f} after "
        f"({os.cpu_count()} cores)\n"
    )
    print("| jump | method | seeds/s | all entities | contested recall@10 mean | min | peak RSS (GB) |")
    print("|---|---|---|---|---|---|---|")
    for jump, name, seconds, total, mean, minimum, rss in rows:
        hours = f"{total / 3600:.1f} h" if total > 3600 else f"{total / 60:.1f} min" if total > 60 else f"{total:.0f} s"
        print(f"| {jump} | {name} | {1 / seconds:,.1f} | {hours} | {mean:.4f} | {minimum:.2f} | {rss:.2f} |")


if __name__ == "__main__":
    main()
