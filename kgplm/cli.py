"""The ``kgplm`` command line. It mirrors the Python API; ``kgplm --help`` lists the commands."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import warnings
from collections.abc import Sequence

import numpy as np

from kgplm.api import BUILT_IN_METHODS
from kgplm.arguments import (
    DeprecatedFlag,
    EvaluationArguments,
    FineTuningArguments,
    PredictionArguments,
    PretrainingArguments,
    add_arguments,
    from_namespace,
)
from kgplm.exceptions import ConfigurationError, KgplmError

logger = logging.getLogger("kgplm.cli")


def _store(spec: str | None):
    from kgplm.kg import open_store

    if spec is None:
        print(
            "kgplm: no --store given: using CMeKG (the graph of the pycmekg package); pass --store to read "
            "another graph",
            file=sys.stderr,
        )
        spec = "cmekg"
    return open_store(spec)


def _cmd_kg_import(args: argparse.Namespace) -> int:
    import inspect

    from kgplm.kg import importers

    if len(args.source) > 2:
        raise ConfigurationError(f"kg import takes [FORMAT] SOURCE, got {len(args.source)} arguments: {args.source}")
    kind = args.source[0] if len(args.source) == 2 else args.kind
    source = args.source[-1]
    importer = importers.guess(source) if kind == "auto" else importers.get(kind)
    query = args.query
    if args.query_file is not None:
        with open(args.query_file, encoding="utf-8") as handle:
            query = handle.read()
    options = {
        "format": args.format,
        "base_iri": args.base_iri,
        "graph": args.graph,
        "query": query,
        "page_size": args.page_size,
        "timeout": args.timeout,
        "merge_same_as": True if args.merge_same_as else None,
    }
    options = {key: value for key, value in options.items() if value is not None}
    parameters = inspect.signature(importer.function()).parameters
    refused = [key for key in options if key not in parameters]
    if refused:
        flags = ", ".join("--" + key.replace("_", "-") for key in refused)
        raise ConfigurationError(f"the {importer.name} importer takes no {flags}")
    store = importer.load(source, **options)
    store.save(args.output_dir)
    print(store.summary())
    print(f"saved to {args.output_dir}")
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
    frame = store.neighbors(
        entity, direction=args.direction, k=args.k, ranked_by="pepr" if args.ranked_by == "pepr" else None
    )
    print(
        f"{store.entity_name(entity)} (id {entity}, type {store.entity_type(entity)}, "
        f"aliases: {', '.join(store.aliases(entity)[:8]) or '-'})"
    )
    with pd.option_context("display.max_rows", None, "display.width", 200):
        print(frame.to_string(index=False) if len(frame) else "(no neighbours)")
    return 0


def _cmd_kg_pepr(args: argparse.Namespace) -> int:
    from kgplm.kg.pepr import top_k_neighbors

    store = _store(args.store)
    seeds = None if args.seeds is None else [int(s) if s.isdigit() else s for s in args.seeds]
    budget = {} if args.budget_seconds is None else {"budget_seconds": args.budget_seconds}
    table = top_k_neighbors(
        store,
        seeds,
        k=args.k,
        mode=args.mode,
        candidates=args.candidates,
        alpha=args.alpha,
        jump=args.jump,
        directed=args.directed,
        epsilon=args.epsilon,
        num_hubs=args.num_hubs,
        **budget,
    )
    table.save(args.output)
    filled = (table.neighbors >= 0).sum(axis=1)
    print(
        f"wrote top-{args.k} PEPR neighbours of {len(table):,} entities to {args.output} "
        f"({int((filled > 0).sum()):,} with at least one neighbour, mean {filled.mean():.2f} per entity); "
        f"{table.config.get('mode_reason')}"
    )
    return 0


def _cmd_kg_embed(args: argparse.Namespace) -> int:
    from kgplm.kg.embeddings import KGEmbeddings, split_triples, train_kg_embeddings

    store = _store(args.store)
    train, test = store.triples, None
    if args.test_fraction > 0:
        train, test = split_triples(store.triples, test_fraction=args.test_fraction, seed=args.seed)
    initialize_from = None if args.init_from is None else KGEmbeddings.load(args.init_from, store=store)
    embeddings = train_kg_embeddings(
        store,
        method=args.method,
        dim=args.dim,
        relation_dim=args.relation_dim,
        epochs=args.epochs,
        batch_size=args.batch_size,
        num_negatives=args.num_negatives,
        margin=args.margin,
        lr=args.lr,
        norm=args.norm,
        negative_sampling=args.negative_sampling,
        optimizer=args.optimizer,
        triples=train,
        initialize_from=initialize_from,
        seed=args.seed,
        device=args.device,
    )
    if args.format == "openke":
        embeddings.to_openke(args.output_dir, store)
    elif args.format == "dglke":
        embeddings.to_dglke(args.output_dir, store)
    else:
        embeddings.save(args.output_dir)
    print(
        f"{embeddings!r}: {embeddings.timings['triples_per_second']:,.0f} triples/s, final mean loss "
        f"{embeddings.history[-1]['loss']:.4f}; saved ({args.format}) to {args.output_dir}"
    )
    if test is not None and len(test):
        sample = test[np.random.default_rng(args.seed).permutation(len(test))[: args.max_eval]]
        metrics = embeddings.evaluate(sample, filter_triples=store.triples)
        print(
            f"filtered link prediction on {len(sample):,} held-out triples: "
            + ", ".join(
                f"{key} {value:.4f}" if isinstance(value, float) else f"{key} {value}" for key, value in metrics.items()
            )
        )
    return 0


def _cmd_kg_export(args: argparse.Namespace) -> int:
    store = _store(args.store)
    path = store.to_rdf(args.output, format=args.format)
    print(f"wrote {store.num_triples:,} triples of {store!r} to {path}")
    return 0


def _cmd_text_vocab(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kgplm.text import build_vocab

    corpus = [Path(path) for path in args.corpus]
    tokenizer = build_vocab(corpus, args.vocab_size, min_frequency=args.min_frequency, output_dir=args.output_dir)
    print(f"trained a WordPiece vocabulary of {len(tokenizer):,} pieces; saved to {args.output_dir}")
    return 0


def _linking_options(args: argparse.Namespace) -> dict:
    """The ``linking=`` options of ``kgplm text link``'s flags (only those given)."""
    options: dict = {"min_length": args.min_length}
    if args.stop_words is not None:
        options["stop_words"] = (
            None
            if args.stop_words == "none"
            else (
                "english"
                if args.stop_words == "english"
                else [line.strip() for line in open(args.stop_words, encoding="utf-8") if line.strip()]
            )
        )
    if args.keep_numeric:
        options["exclude_numeric"] = False
    if args.no_hyphen_variants:
        options["hyphen_variants"] = False
    if args.entity_type:
        options["entity_types"] = args.entity_type
    if args.root:
        options["roots"] = args.root
    if args.common_word_share is not None:
        options["common_word_share"] = args.common_word_share
    return options


def _cmd_text_link(args: argparse.Namespace) -> int:
    from collections import Counter

    from kgplm.text import read_corpus
    from kgplm.text.linking import build_linker

    store = _store(args.store)
    texts = [(f"arg{i}", text) for i, text in enumerate(args.text)]
    if args.file:
        texts += [(document.id, document.text) for document in read_corpus(args.file)]
    linker, report = build_linker(store, _linking_options(args), texts=lambda: (text for _, text in texts))
    entities, surfaces = Counter(), Counter()
    for identifier, text in texts:
        for mention in linker.link(text, nested=args.nested):
            if args.stats:
                entities[mention.entity_id] += 1
                surfaces[mention.surface] += 1
                continue
            record = {
                "text": identifier,
                "start": mention.start,
                "end": mention.end,
                "surface": mention.surface,
                "entity_id": mention.entity_id,
                "entity": store.entity_name(mention.entity_id),
                "type": store.entity_type(mention.entity_id),
            }
            if len(mention.candidates) > 1:
                record["candidates"] = list(mention.candidates)
            print(json.dumps(record, ensure_ascii=False))
    if args.stats:
        total = sum(entities.values())
        print(f"{total:,} mentions of {len(entities):,} entities in {len(texts):,} texts")
        for name, share in report.get("common_names", {}).items():
            print(f"dropped as a common word: {name!r} (in {share:.1%} of the texts)")
        print(f"\ntop {args.top} entities:\n| entity | id | type | mentions | share |\n|---|---|---|---|---|")
        for entity, count in entities.most_common(args.top):
            print(
                f"| {store.entity_name(entity)} | {store.entity_iri(entity)} | {store.entity_type(entity)} | "
                f"{count:,} | {count / total:.1%} |"
            )
        print(f"\ntop {args.top} surfaces:\n| surface | mentions | share |\n|---|---|---|")
        for surface, count in surfaces.most_common(args.top):
            print(f"| {surface} | {count:,} | {count / total:.1%} |")
    return 0


def _cmd_text_build_corpus(args: argparse.Namespace) -> int:
    from kgplm.text import build_corpus, load_tokenizer
    from kgplm.text.corpus import corpus_manifest

    store = _store(args.store)
    tokenizer = load_tokenizer(args.tokenizer)
    options = {"columns": args.columns} if args.columns else {}
    dataset = build_corpus(
        args.corpus,
        store=store,
        tokenizer=tokenizer,
        output_dir=args.output_dir,
        neighbor_table=args.neighbor_table,
        max_length=args.max_length,
        stride=args.stride,
        whole_word=not args.no_whole_word,
        shard_size=args.shard_size,
        **options,
    )
    statistics = corpus_manifest(args.output_dir)["statistics"]
    print(
        f"{len(dataset):,} examples from {statistics['documents']:,} documents; "
        f"{statistics['mentions_in_examples']:,} of {statistics['mentions_in_text']:,} mentions kept; "
        f"written to {args.output_dir}"
    )
    return 0


def _is_main_process() -> bool:
    """Rank 0 of a ``torchrun`` launch (or the only process) prints; the others stay quiet."""
    from kgplm.training.launch import launched_rank

    return launched_rank() == 0


def _cmd_train(args: argparse.Namespace) -> int:
    import kgplm

    if args.config is not None:
        result = kgplm.train_from_config(args.config, progress=args.progress)
    else:
        if args.method is None or args.corpus is None or args.output_dir is None:
            raise ConfigurationError(
                "kgplm train needs --method, --corpus and --output-dir (or --config run_config.json)"
            )
        corpus_options = dict(args.corpus_options or {})
        if args.columns:
            corpus_options["columns"] = args.columns
        if args.encoding is not None:
            corpus_options["encoding"] = args.encoding
        arguments = from_namespace(PretrainingArguments, args, corpus_options=corpus_options or None)
        result = kgplm.train(args.method, args=arguments)
    if not _is_main_process():
        return 0
    first, last = result.metrics[0], result.metrics[-1]
    print(
        f"{result.method}: {result.steps} steps; loss {first['loss']:.4f} (step {first['step']}) → "
        f"{last['loss']:.4f} (step {last['step']}); model in {result.model_dir}"
    )
    return 0


def _cmd_cache_ls(args: argparse.Namespace) -> int:
    from kgplm.artefact_cache import ArtefactCache, cache_dir

    root = args.dir or cache_dir()
    if root is None:
        print("the KG artefact cache is turned off (KGPLM_CACHE)")
        return 0
    entries = ArtefactCache(root).entries(args.kind)
    print(f"{root}: {len(entries)} entries, {sum(e.size for e in entries) / 1e6:,.1f} MB")
    for entry in entries:
        settings = entry.record.get("settings", {})
        shown = {k: v for k, v in settings.items() if k not in ("defaults", "graph", "seeds_and_counts", "triples")}
        print(
            f"{entry.kind:<15} {entry.key[:16]}  {entry.size / 1e6:>9,.1f} MB  graph {settings.get('graph', '')[:12]}  "
            f"{json.dumps(shown, ensure_ascii=False, sort_keys=True)}"
        )
    return 0


def _cmd_cache_prune(args: argparse.Namespace) -> int:
    from kgplm.artefact_cache import ArtefactCache, cache_dir

    root = args.dir or cache_dir()
    if root is None:
        print("the KG artefact cache is turned off (KGPLM_CACHE)")
        return 0
    removed = ArtefactCache(root).prune(kind=args.kind, older_than_days=args.older_than, everything=args.all)
    print(f"removed {len(removed)} entries from {root}")
    return 0


def _cmd_methods(args: argparse.Namespace) -> int:
    from kgplm.methods import available, get

    for name in available():
        spec = get(name)
        needs = ", ".join(sorted(spec.artefacts)) or "text only"
        if spec.kg_embedding:
            needs = needs.replace("kg_embeddings", f"kg_embeddings ({spec.kg_embedding})")
        print(f"{name:<10} {spec.summary}")
        print(f"{'':<10} losses: {', '.join(spec.losses)}; needs: {needs}; masking: {spec.default_masking}")
    return 0


def _cmd_finetune(args: argparse.Namespace) -> int:
    import kgplm

    result = kgplm.finetune(args=from_namespace(FineTuningArguments, args))
    if not _is_main_process():
        return 0
    test = "unlabelled" if result.test is None else f"{result.test['main']:.4f}"
    print(
        f"{result.task}: dev {result.dev['main']:.4f}, test {test} "
        f"({len(result.history)} epochs); model and results.json in {result.output_dir}"
    )
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    import kgplm

    from kgplm.evaluation.probing import PROBE_TASK, probe_table, result_rows

    scores = dict(kgplm.evaluate(args=from_namespace(EvaluationArguments, args)))
    if _is_main_process():
        if args.task == PROBE_TASK:  # the probe's table always shows the baseline and chance beside the model
            print(probe_table(result_rows(scores, name=str(args.model))))
        print(json.dumps(scores, indent=1))
    return 0


def _cmd_probe(args: argparse.Namespace) -> int:
    from kgplm.evaluation.probing import build_probe

    store = _store(args.store)
    probe = build_probe(
        store,
        queries_per_relation=args.queries_per_relation,
        max_answer_tokens=args.max_answer_tokens,
        held_out_fraction=args.held_out_fraction,
        seed=args.seed,
    )
    probe.save(args.output)
    held_out = sum(query.held_out for query in probe.queries)
    print(
        f"{len(probe.queries):,} queries over {len({q.relation for q in probe.queries})} relations "
        f"({held_out:,} held out; {len(probe.exclude_from_training):,} triples to exclude from training) "
        f"written to {args.output}; train with --exclude-triples {args.output}, score with "
        f"kgplm evaluate --task probe --data-dir {args.output}"
    )
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    import kgplm

    result = kgplm.predict(args=from_namespace(PredictionArguments, args))
    print(f"{result.examples} predictions written to {result.path}")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from kgplm.training.reporting import plot_run

    print(f"curves written to {plot_run(args.run_dir, args.output)}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from kgplm.demo import run_demo

    return run_demo(work_dir=args.work_dir)


def _output(parser: argparse.ArgumentParser, *, directory: bool, required: bool = True, help: str) -> None:
    """The output flag of a command: ``--output-dir`` for a directory, ``--output`` for a file; ``--out``, the
    earlier spelling of both, still works with a warning."""
    name = "--output-dir" if directory else "--output"
    dest = "output_dir" if directory else "output"
    parser.add_argument(name, dest=dest, required=False, default=None, help=help)
    parser.add_argument(
        "--out", dest=dest, action=DeprecatedFlag, replacement=name, default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    if required:
        parser.set_defaults(**{f"_required_{dest}": name})


def build_parser() -> argparse.ArgumentParser:
    from kgplm import __version__

    parser = argparse.ArgumentParser(prog="kgplm", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument(
        "--debug", action="store_true", help="log at DEBUG level and show the traceback of an error or Ctrl-C"
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    kg = commands.add_parser("kg", help="knowledge-graph commands").add_subparsers(dest="kg_command", required=True)
    store_help = "a saved store directory, 'cmekg', a UMLS RRF directory or a KG file (RDF, OBO, TSV)"

    from kgplm.kg import importers

    formats = importers.available(aliases=True)
    p = kg.add_parser(
        "import",
        help="import a knowledge graph and save the compiled store",
        description="kgplm kg import [FORMAT] SOURCE --out DIR. FORMAT is one of the registered "
        f"importers ({', '.join(formats)}); without it the format is guessed from SOURCE "
        "(file suffix, 'cmekg', a UMLS directory, an http(s):// SPARQL endpoint).",
    )
    p.add_argument(
        "source",
        nargs="+",
        metavar="[FORMAT] SOURCE",
        help="file, directory, 'cmekg' or SPARQL endpoint URL, optionally preceded by its format",
    )
    p.add_argument("--kind", choices=["auto", *formats], default="auto", help="the importer (same as FORMAT)")
    p.add_argument("--format", default=None, help="RDF syntax for the rdf importer (guessed from the extension)")
    p.add_argument("--base-iri", default=None, help="rdf: the base that relative IRIs resolve against")
    p.add_argument(
        "--merge-same-as",
        action="store_true",
        help="rdf, sparql: one entity per class of owl:sameAs / skos:exactMatch links",
    )
    p.add_argument("--graph", default=None, help="sparql: read this named graph instead of the default graph")
    p.add_argument("--query", default=None, help="sparql: a SELECT ?s ?p ?o, CONSTRUCT or DESCRIBE query")
    p.add_argument("--query-file", default=None, help="sparql: read the query from this file")
    p.add_argument("--page-size", type=int, default=None, help="sparql: rows per request (default 10000)")
    p.add_argument("--timeout", type=float, default=None, help="sparql: seconds to wait for each answer (default 60)")
    _output(p, directory=True, help="directory to write the store to")
    p.set_defaults(handler=_cmd_kg_import)

    p = kg.add_parser("stats", help="counts per type and relation")
    p.add_argument("store", help=store_help)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--json", action="store_true", help="print describe() as JSON")
    p.set_defaults(handler=_cmd_kg_stats)

    p = kg.add_parser("neighbors", help="one-hop neighbours of an entity")
    p.add_argument("entity", help="name, alias or IRI")
    p.add_argument("--store", default=None, help=store_help + " (default: cmekg, said on stderr)")
    p.add_argument("--k", type=int, default=None, help="show at most K rows")
    p.add_argument("--direction", choices=["both", "out", "in"], default="both")
    p.add_argument(
        "--ranked-by",
        choices=["none", "pepr"],
        default="pepr",
        help="order by personalised entity PageRank (default) or list raw neighbours",
    )
    p.set_defaults(handler=_cmd_kg_neighbors)

    p = kg.add_parser("pepr", help="top-K PEPR neighbour table for every entity (or --seeds)")
    p.add_argument("--store", default=None, help=store_help + " (default: cmekg, said on stderr)")
    _output(p, directory=False, help="the neighbour table file to write (.npz)")
    p.add_argument("--k", type=int, default=10)
    p.add_argument(
        "--mode",
        choices=["auto", "exact", "fast"],
        default="auto",
        help="exact, fast, or exact when its modelled time fits --budget-seconds (default)",
    )
    p.add_argument(
        "--budget-seconds",
        type=float,
        default=None,
        help="time exact mode may take under --mode auto (modelled from the graph, never timed; "
        "default: kgplm.kg.pepr.DEFAULT_BUDGET_SECONDS)",
    )
    p.add_argument("--candidates", choices=["one_hop", "any"], default="one_hop")
    p.add_argument("--alpha", type=float, default=0.15, help="jump probability")
    p.add_argument("--jump", choices=["paper", "seed"], default="paper")
    p.add_argument("--directed", action="store_true")
    p.add_argument("--epsilon", type=float, default=1e-2, help="fast mode: push threshold (smaller: slower, closer)")
    p.add_argument("--num-hubs", type=int, default=64, help="fast mode: highest-degree entities resolved exactly")
    p.add_argument("--seeds", nargs="*", default=None, help="entity names or ids (default: every entity)")
    p.set_defaults(handler=_cmd_kg_pepr)

    p = kg.add_parser("embed", help="train TransE / TransR embeddings of a store")
    p.add_argument("--store", default=None, help=store_help + " (default: cmekg, said on stderr)")
    _output(p, directory=True, help="the directory the embeddings are written to")
    p.add_argument("--method", choices=["transe", "transr"], default="transe")
    p.add_argument("--dim", type=int, default=100, help="entity embedding size")
    p.add_argument("--relation-dim", type=int, default=None, help="TransR relation size (default: --dim)")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=8192)
    p.add_argument("--num-negatives", type=int, default=1)
    p.add_argument("--margin", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument(
        "--norm", type=int, choices=[1, 2], default=None, help="distance norm (default 1 for TransE, 2 for TransR)"
    )
    p.add_argument("--negative-sampling", choices=["bernoulli", "uniform"], default="bernoulli")
    p.add_argument("--optimizer", choices=["sparse_adam", "adagrad", "sgd"], default="sparse_adam")
    p.add_argument("--init-from", default=None, help="start from saved embeddings (TransR from TransE)")
    p.add_argument("--format", choices=["kgplm", "openke", "dglke"], default="kgplm")
    p.add_argument(
        "--test-fraction",
        type=float,
        default=0.0,
        help="hold out this share of triples and report filtered MRR / Hits@k on them",
    )
    p.add_argument("--max-eval", type=int, default=2000, help="evaluate at most this many held-out triples")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.set_defaults(handler=_cmd_kg_embed)

    p = kg.add_parser("export", help="export a store as RDF")
    p.add_argument("store", help=store_help)
    _output(
        p,
        directory=False,
        help="output file; its extension names the format (.ttl .nt .nq .trig .rdf .xml .jsonld .n3, optionally .gz)",
    )
    p.add_argument(
        "--format", default=None, help="turtle, nt, nquads, trig, xml, json-ld or n3 (overrides the extension)"
    )
    p.set_defaults(handler=_cmd_kg_export)

    text = commands.add_parser("text", help="text pipeline commands").add_subparsers(dest="text_command", required=True)
    p = text.add_parser("vocab", help="train an in-domain WordPiece vocabulary")
    p.add_argument("corpus", nargs="+", help="corpus files (text lines, CSV, JSON lines)")
    p.add_argument("--vocab-size", type=int, default=21128)
    p.add_argument("--min-frequency", type=int, default=5)
    _output(p, directory=True, help="tokenizer directory (save_pretrained + vocab.txt)")
    p.set_defaults(handler=_cmd_text_vocab)

    p = text.add_parser("link", help="link KG mentions in text; prints one JSON object per mention")
    p.add_argument("text", nargs="*", default=[], help="texts to link")
    p.add_argument("--file", default=None, help="a corpus file to link")
    p.add_argument("--store", default=None, help=store_help + " (default: cmekg, said on stderr)")
    p.add_argument("--min-length", type=int, default=2)
    p.add_argument("--nested", action="store_true", help="every match, also inside longer names")
    p.add_argument(
        "--stop-words", default=None, help="'english' (the default), 'none', or a file with one stop word a line"
    )
    p.add_argument("--keep-numeric", action="store_true", help="also link names without a letter (277000)")
    p.add_argument("--no-hyphen-variants", action="store_true", help="hyphens no longer match spaces")
    p.add_argument("--entity-type", action="append", default=[], help="link only entities of this type (repeat)")
    p.add_argument(
        "--root",
        action="append",
        default=[],
        help="link only this entity and its is_a descendants, e.g. HP:0000118 (repeat)",
    )
    p.add_argument(
        "--common-word-share",
        type=float,
        default=None,
        help="drop names linked in more than this share of the texts (measured first)",
    )
    p.add_argument("--stats", action="store_true", help="print the most-linked entities and surfaces instead")
    p.add_argument("--top", type=int, default=20, help="rows of --stats")
    p.set_defaults(handler=_cmd_text_link)

    p = text.add_parser("build-corpus", help="tokenize, link and attach neighbours; write Arrow shards")
    p.add_argument("corpus", help="corpus file (text lines, CSV, JSON lines)")
    p.add_argument("--store", default=None, help=store_help + " (default: cmekg, said on stderr)")
    p.add_argument("--tokenizer", required=True, help="tokenizer directory or vocab.txt")
    _output(p, directory=True, help="the directory the Arrow shards are written to")
    p.add_argument("--neighbor-table", default=None, help="a PEPR neighbour table (.npz) to attach")
    p.add_argument(
        "--pepr",
        dest="neighbor_table",
        action=DeprecatedFlag,
        replacement="--neighbor-table",
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )
    p.add_argument("--columns", nargs="*", default=None, help="CSV columns to use")
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--stride", type=int, default=0)
    p.add_argument("--shard-size", type=int, default=5000)
    p.add_argument("--no-whole-word", action="store_true", help="skip jieba segmentation")
    p.set_defaults(handler=_cmd_text_build_corpus)

    cache = commands.add_parser(
        "cache", help="the KG artefact cache (PEPR tables, TransE/TransR embeddings)"
    ).add_subparsers(dest="cache_command", required=True)
    cache_kinds = ["neighbor_table", "transe", "transr"]
    p = cache.add_parser("ls", help="list the cached artefacts")
    p.add_argument("--dir", default=None, help="the cache directory (default: $KGPLM_CACHE, else ~/.cache/kgplm)")
    p.add_argument("--kind", choices=cache_kinds, default=None)
    p.set_defaults(handler=_cmd_cache_ls)
    p = cache.add_parser("prune", help="remove cached artefacts (runs keep their own links or copies)")
    p.add_argument("--dir", default=None, help="the cache directory (default: $KGPLM_CACHE, else ~/.cache/kgplm)")
    p.add_argument("--kind", choices=cache_kinds, default=None, help="only this kind")
    p.add_argument("--older-than", type=float, default=None, metavar="DAYS", help="entries unused for DAYS days")
    p.add_argument("--all", action="store_true", help="every entry")
    p.set_defaults(handler=_cmd_cache_prune)

    p = commands.add_parser("methods", help="list the registered pre-training methods")
    p.set_defaults(handler=_cmd_methods)

    p = commands.add_parser(
        "train",
        help="pre-train a model (kgplm.train); rerun to resume",
        description="Pre-train a model with one of the registered methods (kgplm.train): one flag per field of "
        "kgplm.arguments.PretrainingArguments. Rerun the same command to resume.",
    )
    p.add_argument(
        "--method",
        default=None,
        metavar="METHOD",
        help=f"a registered method ({', '.join(BUILT_IN_METHODS)}, or one an installed package registers; "
        "`kgplm methods` lists them); mlm is the plain baseline; required unless --config",
    )
    p.add_argument("--config", default=None, help="replay or resume a run_config.json instead")
    p.add_argument("--columns", nargs="*", default=None, help="CSV columns to use (fills --corpus-options)")
    p.add_argument(
        "--encoding", default=None, help="the corpus file's text encoding, e.g. gbk (fills --corpus-options)"
    )
    add_arguments(p, PretrainingArguments, optional=("corpus", "output_dir"))
    p.set_defaults(handler=_cmd_train)

    p = commands.add_parser(
        "finetune",
        help="fine-tune a pre-trained model on a task (kgplm.finetune)",
        description="Fine-tune a pre-trained model on a task (kgplm.finetune): one flag per field of "
        "kgplm.arguments.FineTuningArguments.",
    )
    add_arguments(p, FineTuningArguments)
    p.set_defaults(handler=_cmd_finetune)

    p = commands.add_parser(
        "evaluate",
        help="score a fine-tuned model on a split (kgplm.evaluate); prints JSON",
        description="Score a fine-tuned model on a split (kgplm.evaluate): one flag per field of "
        "kgplm.arguments.EvaluationArguments.",
    )
    add_arguments(p, EvaluationArguments)
    p.set_defaults(handler=_cmd_evaluate)

    p = commands.add_parser("probe", help="build a KG cloze probe with held-out facts (kgplm.evaluation.probing)")
    p.add_argument("--store", default=None, help=store_help + " (default: cmekg, said on stderr)")
    _output(p, directory=False, help="probe file to write (JSON)")
    p.add_argument("--queries-per-relation", type=int, default=100)
    p.add_argument("--max-answer-tokens", type=int, default=10)
    p.add_argument(
        "--held-out-fraction",
        type=float,
        default=0.5,
        help="share of each relation's queries whose facts are excluded from training",
    )
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=_cmd_probe)

    p = commands.add_parser(
        "predict",
        help="write a fine-tuned model's predictions (kgplm.predict)",
        description="Write a fine-tuned model's predictions (kgplm.predict): one flag per field of "
        "kgplm.arguments.PredictionArguments.",
    )
    add_arguments(p, PredictionArguments)
    p.set_defaults(handler=_cmd_predict)

    p = commands.add_parser("plot", help="draw a run's loss curves (per objective) and metrics to a PNG")
    p.add_argument("run_dir", help="a kgplm train output directory (or a kgplm finetune output)")
    _output(p, directory=False, required=False, help="PNG file (default: RUN_DIR/curves.png)")
    p.set_defaults(handler=_cmd_plot)

    p = commands.add_parser("demo", help="run the demo on the embedded CMeKG graph (about 15 min on 2 busy cores)")
    p.add_argument("--work-dir", default="artifacts/demo", help="where the demo writes its artefacts")
    p.set_defaults(handler=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # idle OpenMP threads (torch's and numba's pools) sleep instead of spinning against other processes; read
    # when the OpenMP runtime loads, which no kgplm command has done yet
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    parser = build_parser()
    with warnings.catch_warnings():
        # an earlier flag's FutureWarning reads as a command-line message, without a source line
        warnings.showwarning = _show_warning
        args = parser.parse_args(argv)
    missing = [
        flag for name, flag in vars(args).items() if name.startswith("_required_") and getattr(args, name[10:]) is None
    ]
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)}")
    level = logging.DEBUG if args.debug else logging.INFO if args.verbose else logging.WARNING
    if not _is_main_process():  # under torchrun rank 0 logs for the run
        level = logging.ERROR
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from kgplm.exceptions import PreemptedError
    from kgplm.training.interrupts import INTERRUPTED_EXIT_STATUS, PREEMPTED_EXIT_STATUS

    try:
        return args.handler(args)
    except PreemptedError as error:
        if _is_main_process():
            print(f"kgplm: {error}", file=sys.stderr)
        return PREEMPTED_EXIT_STATUS
    except KgplmError as error:
        if args.debug:
            raise
        print(f"kgplm: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if args.debug:
            raise
        if _is_main_process():
            print(f"kgplm: interrupted; {_resume_hint(args)}", file=sys.stderr)
        return INTERRUPTED_EXIT_STATUS


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"kgplm: {category.__name__}: {message}", file=sys.stderr)


def _resume_hint(args: argparse.Namespace) -> str:
    """Where an interrupted command can pick up: the last checkpoint of ``kgplm train`` or ``kgplm finetune``."""
    if args.command not in ("train", "finetune"):
        return "nothing of this command is half-written; run it again to redo it"
    from pathlib import Path

    from kgplm.training.checkpoints import latest_checkpoint

    out = args.output_dir
    if out is None and getattr(args, "config", None) is not None:
        config = Path(args.config)
        out = config if config.is_dir() else config.parent
    checkpoint = latest_checkpoint(out) if out is not None else None
    if checkpoint is None:
        return "no checkpoint was written yet; running the same command again starts the run over"
    return f"the last checkpoint is {checkpoint}; run the same command again to resume from it"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
