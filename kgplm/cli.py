"""The ``kgplm`` command line. It mirrors the Python API; ``kgplm --help`` lists the commands."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from kgplm.exceptions import KgplmError

logger = logging.getLogger("kgplm.cli")


def _store(spec: str):
    from kgplm.kg import open_store

    return open_store(spec)


def _cmd_kg_import(args: argparse.Namespace) -> int:
    from kgplm.kg.store import KGStore

    kind = args.kind
    if kind == "auto":
        store = _store(args.source)
    elif kind == "cmekg":
        store = KGStore.from_cmekg(None if args.source == "cmekg" else args.source)
    elif kind == "rdf":
        store = KGStore.from_rdf(args.source, format=args.format)
    elif kind == "triples":
        store = KGStore.from_triples(args.source)
    elif kind == "obo":
        store = KGStore.from_obo(args.source)
    else:
        store = KGStore.from_umls_rrf(args.source)
    store.save(args.out)
    print(store.summary())
    print(f"saved to {args.out}")
    return 0


def _cmd_kg_stats(args: argparse.Namespace) -> int:
    store = _store(args.store)
    if args.json:
        print(json.dumps(store.describe(), ensure_ascii=False, indent=1))
    else:
        print(store.summary(top=args.top))
    return 0


def _cmd_kg_neighbors(args: argparse.Namespace) -> int:
    import pandas as pd

    store = _store(args.store)
    entity = store.entity_id(args.entity)
    frame = store.neighbors(entity, direction=args.direction, k=args.k,
                            ranked_by="pepr" if args.ranked_by == "pepr" else None)
    print(f"{store.entity_name(entity)} (id {entity}, type {store.entity_type(entity)}, "
          f"aliases: {', '.join(store.aliases(entity)[:8]) or '-'})")
    with pd.option_context("display.max_rows", None, "display.width", 200):
        print(frame.to_string(index=False) if len(frame) else "(no neighbours)")
    return 0


def _cmd_kg_pepr(args: argparse.Namespace) -> int:
    from kgplm.kg.pepr import top_k_neighbors

    store = _store(args.store)
    seeds = None if args.seeds is None else [int(s) if s.isdigit() else s for s in args.seeds]
    table = top_k_neighbors(store, seeds, k=args.k, mode=args.mode, candidates=args.candidates, alpha=args.alpha,
                            jump=args.jump, directed=args.directed)
    table.save(args.out)
    filled = (table.neighbors >= 0).sum(axis=1)
    print(f"wrote top-{args.k} PEPR neighbours of {len(table):,} entities to {args.out} "
          f"({int((filled > 0).sum()):,} with at least one neighbour, mean {filled.mean():.2f} per entity)")
    return 0


def _cmd_kg_export(args: argparse.Namespace) -> int:
    store = _store(args.store)
    path = store.to_rdf(args.out, format=args.format)
    print(f"wrote {store.num_triples:,} triples of {store!r} to {path}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from kgplm.demo import run_demo

    return run_demo(work_dir=args.work_dir)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kgplm", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    commands = parser.add_subparsers(dest="command", required=True)

    kg = commands.add_parser("kg", help="knowledge-graph commands").add_subparsers(dest="kg_command", required=True)
    store_help = "a saved store directory, 'cmekg', a UMLS RRF directory or a KG file (RDF, OBO, TSV)"

    p = kg.add_parser("import", help="import a knowledge graph and save the compiled store")
    p.add_argument("source", help="file or directory to import ('cmekg' for the embedded default)")
    p.add_argument("--kind", choices=["auto", "rdf", "cmekg", "triples", "obo", "umls"], default="auto")
    p.add_argument("--format", default=None, help="RDF format when --kind rdf (guessed from the extension)")
    p.add_argument("--out", required=True, help="directory to write the store to")
    p.set_defaults(handler=_cmd_kg_import)

    p = kg.add_parser("stats", help="counts per type and relation")
    p.add_argument("store", help=store_help)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--json", action="store_true", help="print describe() as JSON")
    p.set_defaults(handler=_cmd_kg_stats)

    p = kg.add_parser("neighbors", help="one-hop neighbours of an entity")
    p.add_argument("entity", help="name, alias or IRI")
    p.add_argument("--store", default="cmekg", help=store_help)
    p.add_argument("--k", type=int, default=None, help="show at most K rows")
    p.add_argument("--direction", choices=["both", "out", "in"], default="both")
    p.add_argument("--ranked-by", choices=["none", "pepr"], default="pepr",
                   help="order by personalised entity PageRank (default) or list raw neighbours")
    p.set_defaults(handler=_cmd_kg_neighbors)

    p = kg.add_parser("pepr", help="top-K PEPR neighbour table for every entity (or --seeds)")
    p.add_argument("--store", default="cmekg", help=store_help)
    p.add_argument("--out", required=True, help="output .npz")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--mode", choices=["exact", "fast"], default="fast")
    p.add_argument("--candidates", choices=["one_hop", "any"], default="one_hop")
    p.add_argument("--alpha", type=float, default=0.15, help="jump probability")
    p.add_argument("--jump", choices=["paper", "seed"], default="paper")
    p.add_argument("--directed", action="store_true")
    p.add_argument("--seeds", nargs="*", default=None, help="entity names or ids (default: every entity)")
    p.set_defaults(handler=_cmd_kg_pepr)

    p = kg.add_parser("export", help="export a store as RDF")
    p.add_argument("store", help=store_help)
    p.add_argument("--out", required=True, help="output file (.ttl or .nt)")
    p.add_argument("--format", default="turtle", help="turtle (default), nt, xml, json-ld")
    p.set_defaults(handler=_cmd_kg_export)

    p = commands.add_parser("demo", help="run the demo on the embedded CMeKG graph")
    p.add_argument("--work-dir", default="artifacts/demo", help="where the demo writes its artefacts")
    p.set_defaults(handler=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.handler(args)
    except KgplmError as error:
        print(f"kgplm: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
