"""KG embedding benchmark: kgplm's TransE / TransR against PyKEEN on the same splits, in one run.

Datasets: CMeKG's entity links with 5% held out (``split_triples``, seed 0), and the classic UMLS
benchmark KG (135 entities, 46 relations; its official train/valid/test split) as bundled in the
PyKEEN package. Every model is evaluated by the same code (kgplm's filtered ranking, realistic
ranks, both sides) on the same test triples, so the MRRs compare directly; PyKEEN's tables are
read out of its model after training. Prints one table: dataset, model, epochs, training
triples/s, filtered MRR, Hits@1, Hits@10.

    .venv/bin/pip install -e '.[bench]'      # PyKEEN and scikit-network
    .venv/bin/python benchmarks/kge.py [--epochs 10] [--eval-sample 2000] [--skip-pykeen-transr]

Also measures the throughput on the 274k-entity / 4.4M-triple synthetic graph (one epoch on 1M
triples), where the issue's goals are set (TransE ≥ 200k, TransR ≥ 60k triples/s at dim 100).

``--smoke`` runs the same rows at toy size in a temporary folder: the repository's toy graph in
place of CMeKG, PyKEEN's UMLS only where PyKEEN is installed, the tiny instance of
benchmarks/synthetic_kg.py (``SMOKE``) in place of the full synthetic graph; 1 epoch, dimension 16.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from kgplm import KGStore
from kgplm.kg.embeddings import KGEmbeddings, split_triples, train_kg_embeddings

sys.path.insert(0, str(Path(__file__).resolve().parent))

TOY_GRAPH = Path(__file__).resolve().parents[1] / "graphs" / "toy_medical.ttl"


def load_umls_from_pykeen() -> tuple[KGStore, dict[str, np.ndarray]] | None:
    try:
        import pykeen.datasets
    except ImportError:
        return None
    folder = Path(pykeen.datasets.__file__).parent / "umls"
    splits = {name: folder / f"{name}.txt" for name in ("train", "valid", "test")}
    with tempfile.TemporaryDirectory() as scratch:
        combined = Path(scratch) / "umls.tsv"
        combined.write_text("".join(p.read_text(encoding="utf-8") for p in splits.values()), encoding="utf-8")
        store = KGStore.from_triples(combined, show_progress=False)
    arrays = {}
    for name, path in splits.items():
        rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        arrays[name] = np.array([[store.entity_id(h), store.relation_id(r), store.entity_id(t)] for h, r, t in rows])
    return store, arrays


def train_pykeen(
    store: KGStore,
    train: np.ndarray,
    *,
    model_name: str,
    dim: int,
    epochs: int,
    batch_size: int,
    lr: float,
    margin: float,
    seed: int,
) -> tuple[KGEmbeddings, float]:
    """Train PyKEEN's model on the same id-mapped triples; return its tables as KGEmbeddings and triples/s."""
    from pykeen.models import TransE, TransR
    from pykeen.training import SLCWATrainingLoop
    from pykeen.triples import CoreTriplesFactory

    torch.manual_seed(seed)
    factory = CoreTriplesFactory.create(
        mapped_triples=torch.as_tensor(train, dtype=torch.long),
        num_entities=store.num_entities,
        num_relations=store.num_relations,
    )
    if model_name == "transe":
        model = TransE(triples_factory=factory, embedding_dim=dim, scoring_fct_norm=1, random_seed=seed)
    else:
        model = TransR(triples_factory=factory, embedding_dim=dim, relation_dim=dim, random_seed=seed)
    from pykeen.losses import MarginRankingLoss

    model.loss = MarginRankingLoss(margin=margin)
    optimizer = torch.optim.Adam(model.get_grad_params(), lr=lr)
    loop = SLCWATrainingLoop(model=model, triples_factory=factory, optimizer=optimizer, negative_sampler="basic")
    started = time.perf_counter()
    loop.train(triples_factory=factory, num_epochs=epochs, batch_size=batch_size, use_tqdm=False)
    elapsed = time.perf_counter() - started
    with torch.no_grad():
        entities = model.entity_representations[0](indices=None).detach().clone()
        relations = model.relation_representations[0](indices=None).detach().clone()
        projections = None
        if model_name == "transr":
            projections = (
                model.relation_representations[1](indices=None).detach().clone().view(store.num_relations, dim, dim)
            )
    # PyKEEN's TransR scores ‖clamp(h M_r) + r − clamp(t M_r)‖₂ as kgplm does; TransE with p = 1
    embeddings = KGEmbeddings(
        method=model_name,
        entity_embeddings=entities,
        relation_embeddings=relations,
        projections=projections,
        norm=1 if model_name == "transe" else 2,
    )
    return embeddings, epochs * len(train) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--eval-sample", type=int, default=2000, help="CMeKG test triples ranked (both sides)")
    parser.add_argument("--skip-pykeen-transr", action="store_true", help="PyKEEN TransR on CMeKG takes long")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="toy graph and a tiny synthetic graph, 1 epoch, dimension 16, in a temporary folder",
    )
    args = parser.parse_args()
    if args.smoke:
        args.epochs, args.dim, args.eval_sample = 1, 16, 50
        with tempfile.TemporaryDirectory(prefix="kgplm-kge-") as scratch:
            run_benchmark(args, Path(scratch))
        return
    run_benchmark(args, None)


def run_benchmark(args: argparse.Namespace, smoke_folder: Path | None) -> None:
    """The table; ``smoke_folder``: the ``--smoke`` run's temporary folder (None: the full-size run)."""
    torch.manual_seed(0)
    rows: list[tuple] = []

    def report(dataset, model, epochs, speed, metrics):
        rows.append((dataset, model, epochs, speed, metrics["mrr"], metrics["hits@1"], metrics["hits@10"]))
        print(
            f"  {dataset:<8} {model:<22} {epochs:>3} ep  {speed:>10,.0f} triples/s  MRR {metrics['mrr']:.4f}  "
            f"H@1 {metrics['hits@1']:.4f}  H@10 {metrics['hits@10']:.4f}",
            flush=True,
        )

    datasets = []
    if smoke_folder is None:
        cmekg = KGStore.from_cmekg(show_progress=False)
    else:
        cmekg = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    train, test = split_triples(cmekg.triples, test_fraction=0.05, seed=0)
    sample = test[np.random.default_rng(0).permutation(len(test))[: args.eval_sample]]
    datasets.append(("CMeKG" if smoke_folder is None else "toy", cmekg, train, sample, 8192, args.epochs))
    umls = load_umls_from_pykeen()
    if umls is None:
        print(
            "PyKEEN is not installed: the UMLS dataset (bundled with PyKEEN) and the PyKEEN anchors are skipped;"
            " `pip install -e '.[bench]'` installs it"
        )
    else:
        store, splits = umls
        if smoke_folder is None:
            datasets.append(("UMLS", store, splits["train"], splits["test"], 256, 10 * args.epochs))
        else:  # a sample of the test triples, as for CMeKG
            sample = splits["test"][np.random.default_rng(0).permutation(len(splits["test"]))[: args.eval_sample]]
            datasets.append(("UMLS", store, splits["train"], sample, 256, args.epochs))

    for name, store, train, test, batch_size, epochs in datasets:
        print(
            f"{name}: {store.num_entities:,} entities, {store.num_relations} relations, {len(train):,} training "
            f"and {len(test):,} evaluated test triples",
            flush=True,
        )
        filter_triples = store.triples
        common = dict(dim=args.dim, epochs=epochs, batch_size=batch_size, triples=train, progress=False, seed=0)
        transe = train_kg_embeddings(store, method="transe", learning_rate=0.01, **common)
        report(
            name,
            "kgplm TransE (L1)",
            epochs,
            transe.timings["triples_per_second"],
            transe.evaluate(test, filter_triples=filter_triples, progress=False),
        )
        transr = train_kg_embeddings(store, method="transr", learning_rate=0.01, initialize_from=transe, **common)
        report(
            name,
            "kgplm TransR (from TransE)",
            epochs,
            transr.timings["triples_per_second"],
            transr.evaluate(test, filter_triples=filter_triples, progress=False),
        )
        if umls is None:
            continue
        pykeen_transe, speed = train_pykeen(
            store,
            train,
            model_name="transe",
            dim=args.dim,
            epochs=epochs,
            batch_size=batch_size,
            lr=0.01,
            margin=1.0,
            seed=0,
        )
        report(
            name,
            "PyKEEN TransE (L1)",
            epochs,
            speed,
            pykeen_transe.evaluate(test, filter_triples=filter_triples, progress=False),
        )
        if name == "CMeKG" and args.skip_pykeen_transr:
            continue
        pykeen_epochs = epochs if name != "CMeKG" else max(1, epochs // 5)
        pykeen_transr, speed = train_pykeen(
            store,
            train,
            model_name="transr",
            dim=args.dim,
            epochs=pykeen_epochs,
            batch_size=batch_size,
            lr=0.01,
            margin=1.0,
            seed=0,
        )
        report(
            name,
            "PyKEEN TransR",
            pykeen_epochs,
            speed,
            pykeen_transr.evaluate(test, filter_triples=filter_triples, progress=False),
        )

    if not args.skip_synthetic:
        if smoke_folder is None:
            cache = Path(__file__).resolve().parent / ".cache" / "synthetic_store"
            if not cache.is_dir():
                from synthetic_kg import synthetic_ntriples

                KGStore.from_rdf(synthetic_ntriples()).save(cache)
            store = KGStore.load(cache)
            size, dim = 1_000_000, 100
        else:
            from synthetic_kg import SMOKE, write_ntriples

            store = KGStore.from_rdf(write_ntriples(smoke_folder / "synthetic_kg.nt", **SMOKE), show_progress=False)
            size, dim = store.num_triples, args.dim
        subset = store.triples[np.random.default_rng(0).choice(store.num_triples, size, replace=False)]
        for method in ("transe", "transr"):
            result = train_kg_embeddings(store, method=method, dim=dim, epochs=1, triples=subset, progress=False)
            label = "1M" if size == 1_000_000 else f"{size:,}"
            rows.append(
                (
                    "synthetic",
                    f"kgplm {method} ({label} triples)",
                    1,
                    result.timings["triples_per_second"],
                    float("nan"),
                    float("nan"),
                    float("nan"),
                )
            )
            print(f"  synthetic {method}: {result.timings['triples_per_second']:,.0f} triples/s", flush=True)

    print("\n| dataset | model | epochs | training triples/s | filtered MRR | Hits@1 | Hits@10 |")
    print("|---|---|---|---|---|---|---|")
    for dataset, model, epochs, speed, mrr, hits1, hits10 in rows:
        quality = "| – | – | – |" if np.isnan(mrr) else f"| {mrr:.4f} | {hits1:.4f} | {hits10:.4f} |"
        print(f"| {dataset} | {model} | {epochs} | {speed:,.0f} {quality}")


if __name__ == "__main__":
    main()
