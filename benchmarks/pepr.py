"""PEPR top-10 neighbour tables: kgplm exact and fast modes against networkx and scikit-network.

Run: ``.venv/bin/pip install -e '.[bench]' && .venv/bin/python benchmarks/pepr.py``
(``--graph cmekg`` for the real CMeKG graph instead of the synthetic 274,163-entity /
4,390,726-triple graph of benchmarks/synthetic_kg.py).

Per method: seeds/s, the time for every entity (fast mode: measured on every entity, one-off
costs such as the hub vectors included; the others: measured on a sample and extrapolated), recall@10 (mean and min) against exact
PEPR on a common sample of seeds, and the process's peak RSS after the step. Recall counts a
chosen neighbour as correct when its exact score is at least the exact 10th score (ties count).
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import logging
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def load_graph(name: str):
    from kgplm import KGStore

    cache = Path(__file__).resolve().parent / ".cache" / f"{name}_store"
    if (cache / "manifest.json").is_file():
        return KGStore.load(cache)
    if name == "cmekg":
        store = KGStore.from_cmekg(show_progress=False)
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


def recall_at_k(reference_scores: np.ndarray, reference_table, table) -> tuple[float, float]:
    values = []
    for row in range(len(reference_table)):
        truth = reference_table.neighbors[row][reference_table.neighbors[row] >= 0]
        if not len(truth):
            continue
        kth = reference_scores[row][truth].min()
        chosen = table.neighbors[row][table.neighbors[row] >= 0]
        values.append(np.mean(reference_scores[row][chosen] >= kth * (1 - 1e-6)) if len(chosen) else 0.0)
    return float(np.mean(values)), float(np.min(values))


DEFAULT_FAST = (1e-2, 64)  # top_k_neighbors' defaults


def _fast_setting(text: str) -> tuple[float, int]:
    epsilon, num_hubs = text.split("/")
    return float(epsilon), int(num_hubs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graph", choices=["synthetic", "cmekg"], default="synthetic")
    parser.add_argument("--recall-seeds", type=int, default=256, help="seeds compared with exact PEPR")
    parser.add_argument("--fast", type=_fast_setting, nargs="+", default=[DEFAULT_FAST, (3e-3, 64), (1e-3, 128)],
                        help="fast-mode settings to time, each EPSILON/NUM_HUBS")
    parser.add_argument("--anchor-seeds", type=int, default=3, help="seeds timed for networkx / scikit-network")
    parser.add_argument("--skip-networkx", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="  %(message)s", stream=sys.stderr)

    from kgplm.kg.pepr import NeighborTable, TransitionMatrix, personalized_pagerank, top_k_neighbors

    started = time.perf_counter()
    store = load_graph(args.graph)
    n = store.num_entities
    print(f"graph: {store!r}, ready in {time.perf_counter() - started:.1f} s\n", file=sys.stderr)
    rng = np.random.default_rng(0)
    recall_seeds = rng.choice(n, args.recall_seeds, replace=False)
    rows = _LoggedRows()

    # exact: reference scores and table on the recall sample
    began = time.perf_counter()
    exact = top_k_neighbors(store, recall_seeds, k=10, mode="exact", tol=1e-6, show_progress=False)
    exact_seconds = time.perf_counter() - began
    reference_scores = personalized_pagerank(store, recall_seeds, tol=1e-9, dtype=np.float64)
    reference = top_k_neighbors(store, recall_seeds, k=10, mode="exact", tol=1e-9, show_progress=False)
    per_seed = exact_seconds / len(recall_seeds)
    rows.append(("kgplm exact (batched power iteration, f64, tol 1e-6, 256 seeds/block)", per_seed, n * per_seed,
                 *recall_at_k(reference_scores, reference, exact), peak_rss_gb()))

    # fast: timed on every entity, the real job (hub vectors, global PageRank and candidate lists
    # included); recall from the rows of the recall sample
    top_k_neighbors(store, recall_seeds[:2], k=10, mode="fast", num_hubs=1, epsilon=0.5, show_progress=False)  # compile
    for epsilon, num_hubs in args.fast:
        began = time.perf_counter()
        fast = top_k_neighbors(store, None, k=10, mode="fast", epsilon=epsilon, num_hubs=num_hubs, show_progress=False)
        seconds = time.perf_counter() - began
        fast_sample = NeighborTable(recall_seeds, fast.neighbors[recall_seeds], fast.relations[recall_seeds],
                                    fast.directions[recall_seeds], fast.scores[recall_seeds], config=fast.config)
        default = " (default)" if (epsilon, num_hubs) == DEFAULT_FAST else ""
        rows.append((f"kgplm fast{default} (push eps {epsilon:g}, {num_hubs} exact hubs), every entity", seconds / n,
                     seconds, *recall_at_k(reference_scores, reference, fast_sample), peak_rss_gb()))

    # anchors: one seed at a time, the paper's jump vector
    import scipy.sparse

    walk = TransitionMatrix.from_store(store)
    adjacency = scipy.sparse.csr_matrix((np.ones(len(walk.push_indices)), walk.push_indices, walk.push_indptr),
                                        shape=(n, n))  # scikit-network takes csr_matrix, not csr_array
    anchors = recall_seeds[: args.anchor_seeds]
    try:
        from sknetwork.ranking import PageRank

        began = time.perf_counter()
        for seed in anchors.tolist():
            weights = np.full(n, 1.0 / n)
            weights[seed] = 1.0
            PageRank(damping_factor=0.85, n_iter=100, tol=1e-6).fit(adjacency, weights=weights / weights.sum())
        per_seed = (time.perf_counter() - began) / len(anchors)
        rows.append(("scikit-network PageRank (power iteration, tol 1e-6), per seed", per_seed, n * per_seed,
                     float("nan"), float("nan"), peak_rss_gb()))
    except ImportError:
        print("scikit-network is not installed (pip install -e '.[bench]'): anchor skipped", file=sys.stderr)
    if not args.skip_networkx:
        import networkx as nx

        graph = nx.from_scipy_sparse_array(adjacency, create_using=nx.DiGraph)
        began = time.perf_counter()
        for seed in anchors[:1].tolist():
            personalization = dict.fromkeys(range(n), 1.0 / n)
            personalization[seed] = 1.0
            nx.pagerank(graph, alpha=0.85, personalization=personalization, tol=1e-6)
        per_seed = time.perf_counter() - began
        rows.append(("networkx pagerank, per seed", per_seed, n * per_seed, float("nan"), float("nan"), peak_rss_gb()))

    print(f"| method ({args.graph}: {n:,} entities, {store.num_triples:,} triples) | seeds/s | all entities | "
          "recall@10 mean | recall@10 min | peak RSS (GB) |")
    print("|---|---|---|---|---|---|")
    for name, seconds, total, mean, minimum, rss in rows:
        hours = f"{total / 3600:.1f} h" if total > 3600 else f"{total / 60:.1f} min" if total > 60 else f"{total:.0f} s"
        print(f"| {name} | {1 / seconds:,.1f} | {hours} | {mean:.4f} | {minimum:.2f} | {rss:.2f} |")


if __name__ == "__main__":
    main()
