"""The cached stages of ``kgplm.train``: one function per artefact, each reused when its file exists.

Always: the graph (:func:`prepare_store`), the tokenizer (:func:`prepare_tokenizer`), the linked
corpus (:func:`prepare_corpus`) and the model (:func:`build_model`). The KG-side artefacts run only
for a method whose record asks for them (``MethodSpec.artefacts``), through :data:`STAGES`:
``entity_frequencies`` (mentions per entity in the corpus), ``neighbor_table`` (PEPR top-K of
every mentioned entity), ``kg_embeddings`` (TransE, or TransR initialised from TransE as in Lin et
al. 2015). A method that needs another artefact registers its stage with :func:`register_stage`.
Every stage honours ``StageInputs.held_out`` (:mod:`kgplm.training.heldout`): held-out facts are
taken out of the text each stage reads, of the KG embeddings' triples and of the PEPR table.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import jieba
import numpy as np

from kgplm import __version__
from kgplm._io import atomic_directory, atomic_file, file_sha256
from kgplm.artefact_cache import graph_content_hash, graph_names_hash, texts_hash
from kgplm.exceptions import ArtifactError, ConfigurationError
from kgplm.kg import KGStore
from kgplm.kg.collector import GraphCollector
from kgplm.kg.embeddings import KGEmbeddings, train_kg_embeddings
from kgplm.kg.pepr import NeighborTable, top_k_neighbors
from kgplm.models.loading import silenced_load_report
from kgplm.registry import register_artefact
from kgplm.text.corpus import build_corpus, load_corpus, read_corpus
from kgplm.text.linking import EntityLinker, build_linker
from kgplm.text.linking_filters import linking_settings
from kgplm.text.linking_persistence import LINKER_FORMAT_VERSION
from kgplm.text.masking import WORD_SCHEMES
from kgplm.text.tokenization import build_vocab, load_tokenizer, save_tokenizer
from kgplm.training.preflight import text_fields as read_text_fields
from kgplm.training.run import RunDirectory

#: the directory of a run's knowledge graph, when it is not the linking graph (``kgplm.train(knowledge_graph=...)``)
KNOWLEDGE_STORE = "knowledge_store"

__all__ = [
    "StageInputs",
    "Stage",
    "STAGES",
    "register_stage",
    "run_artefact_stages",
    "prepare_store",
    "prepare_tokenizer",
    "prepare_corpus",
    "build_model",
    "load_text_checkpoint",
    "recorded_graph",
    "cached_graph",
    "recorded_knowledge_graph",
    "prepare_knowledge_store",
    "save_store",
    "linker_settings",
    "KNOWLEDGE_STORE",
]

logger = logging.getLogger(__name__)


@dataclass
class StageInputs:
    """What the stages read: the run's arguments (``kgplm.train``'s), the graph and the corpus."""

    arguments: dict[str, Any]
    store: Any
    corpus: Any
    corpus_options: dict[str, Any]
    progress: bool = True
    artefacts: dict[str, Any] = field(default_factory=dict)
    #: triples kept out of every stage (``kgplm.train(exclude_triples=...)``), or None
    held_out: Any = None
    #: where the KG artefacts of a graph are kept between runs (:mod:`kgplm.artefact_cache`), or None
    cache: Any = None
    #: the store text is linked with, when the KG artefacts come from another (``kgplm.train(knowledge_graph=...)``)
    linking_store: Any = None
    #: the run the stages write into; with a :attr:`cache`, the entity linker is kept in its ``kg/linker``
    run: RunDirectory | None = None

    @cached_property
    def graph_hash(self) -> str:
        """The graph's content hash (:func:`kgplm.artefact_cache.graph_content_hash`), computed once."""

        return graph_content_hash(self.store)

    @cached_property
    def linker(self):
        """The entity linker of ``kgplm.train(linking=...)``, made once and only when a stage still has to
        link; what its corpus pass dropped (``common_word_share``) goes to ``artefacts["linking"]``.

        With a :attr:`cache` and a :attr:`run`, the linker is a cached artefact (:func:`linker_settings`
        names it): taken from the cache into the run's ``kg/linker`` when a run on the same graph, names,
        options (and, for ``common_word_share``, corpus) built it, else built, saved there and added."""

        store = self.store if self.linking_store is None else self.linking_store
        cache, run = self.cache, self.run
        settings = None
        # a run without a graph (the text-only methods) links nothing: its empty linker is neither cached nor kept
        if cache is not None and run is not None and store.num_entities > 0:
            settings = linker_settings(store, self.arguments.get("linking"), self.corpus_texts)
            if cache.fetch("linker", settings, run.linker_dir):
                return self._load_linker(run.linker_dir, store)
        logger.info("linking stage: building the entity linker of %d entities' names and aliases", store.num_entities)
        began = time.perf_counter()
        linker, report = build_linker(store, self.arguments.get("linking"), texts=self.corpus_texts)
        logger.info(
            "linking stage: the linker has %d names, built in %.1f s", linker.num_names, time.perf_counter() - began
        )
        self.artefacts["linking"] = report
        if settings is not None:
            _save_linker(linker, report, run.linker_dir)
            cache.put("linker", settings, run.linker_dir)
            # what a run served by the cache reads: the saved arrays, so every run links with the same linker
            return self._load_linker(run.linker_dir, store)
        return linker

    def _load_linker(self, directory: Path, store):

        self.artefacts["linking"] = json.loads((directory / LINKER_REPORT).read_text(encoding="utf-8"))
        # the key holds the graph's content and names: a store of the same content read from elsewhere fits
        linker = EntityLinker.load(directory / LINKER_ARRAYS)
        linker.store = store
        return linker

    def documents(self):
        """The corpus documents, without the sentences that state held-out facts when there are any."""

        documents = read_corpus(self.corpus, **self.corpus_options)
        return documents if self.held_out is None else self.held_out.filter_documents(documents)

    def corpus_texts(self):
        return (document.text for document in self.documents())


@dataclass(frozen=True)
class Stage:
    """An artefact stage: ``run(run_directory, inputs) -> artefact``, after the stages it ``requires``."""

    name: str
    run: Callable[[RunDirectory, StageInputs], Any]
    requires: tuple[str, ...] = ()


STAGES: dict[str, Stage] = {}


def register_stage(stage: Stage) -> Stage:
    """Make an artefact available to methods (``MethodSpec.artefacts``)."""
    STAGES[stage.name] = stage
    register_artefact(stage.name)
    return stage


def run_artefact_stages(names, run: RunDirectory, inputs: StageInputs) -> dict[str, Any]:
    """Run the stages ``names`` (and what they require), each once, in dependency order."""

    def visit(name: str) -> None:
        if name in inputs.artefacts:
            return
        if name not in STAGES:
            raise ConfigurationError(f"no stage produces the artefact {name!r}; known: {sorted(STAGES)}")
        for requirement in STAGES[name].requires:
            visit(requirement)
        inputs.artefacts[name] = STAGES[name].run(run, inputs)

    for name in sorted(names, key=lambda n: list(STAGES).index(n) if n in STAGES else len(STAGES)):
        visit(name)
    return inputs.artefacts


# -- KG-side stages --------------------------------------------------------------------------------
def _entity_frequencies(run: RunDirectory, inputs: StageInputs) -> np.ndarray:
    path = run.entity_frequencies_path
    if path.is_file():
        return np.load(path, allow_pickle=False)
    logger.info("entity frequency stage: linking the corpus to the graph's %d entities", inputs.store.num_entities)
    began = time.perf_counter()
    counts = inputs.linker.count(inputs.corpus_texts())
    logger.info(
        "entity frequency stage: %d mentions of %d entities, in %.1f s",
        int(counts.sum()),
        int(np.count_nonzero(counts)),
        time.perf_counter() - began,
    )
    if counts.sum() == 0:
        raise ConfigurationError(
            f"no mention of the graph's {inputs.store.num_entities:,} entities was found in "
            f"{inputs.corpus}; a knowledge-enhanced method needs linked mentions"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "wb") as handle:
        np.save(handle, counts)
    return counts


def _neighbor_table(run: RunDirectory, inputs: StageInputs):

    arguments = inputs.arguments
    if arguments.get("neighbor_table") is not None:
        table = NeighborTable.load(arguments["neighbor_table"])
        return table if inputs.held_out is None else inputs.held_out.filter_neighbor_table(table)
    path = run.neighbor_table_path
    if path.is_file():
        return NeighborTable.load(path)
    frequencies = inputs.artefacts["entity_frequencies"]
    seeds = np.flatnonzero(frequencies > 0)
    mode, k = arguments["pepr_mode"], arguments["num_neighbors"]
    budget = arguments.get("pepr_budget_seconds") if mode == "auto" else None
    cache = inputs.cache if inputs.held_out is None else None  # held-out facts are filtered from the run's table
    settings = None
    if cache is not None:
        settings = {
            "graph": inputs.graph_hash,
            "seeds_and_counts": _digest(np.asarray(frequencies)),
            "k": k,
            "mode": mode,
            "budget_seconds": budget,
            "defaults": _defaults(top_k_neighbors),
            "kgplm": _kgplm_version(),
        }
        if cache.fetch("neighbor_table", settings, path):
            table = NeighborTable.load(path)
            _record_pepr(run, table, mode)
            return table
    store = inputs.store
    logger.info(
        "PEPR stage: top-%d neighbours of the %d mentioned entities in a graph of %d entities and %d triples (%s mode)",
        k,
        len(seeds),
        store.num_entities,
        store.num_triples,
        mode,
    )
    began = time.perf_counter()
    table = top_k_neighbors(
        store, seeds, k=k, mode=mode, frequencies=frequencies, budget_seconds=budget, show_progress=inputs.progress
    )
    logger.info("PEPR stage: done in %.1f s (%s)", time.perf_counter() - began, table.config.get("mode_reason"))
    if inputs.held_out is not None:
        table = inputs.held_out.filter_neighbor_table(table)
    table.save(path)
    if cache is not None:
        cache.put("neighbor_table", settings, path)
    _record_pepr(run, table, mode)
    return table


def _record_pepr(run: RunDirectory, table, mode: str) -> None:
    # the mode actually used ("auto" resolves to "exact" or "fast" by the modelled cost) and why
    run.record_stage("pepr_mode_used", table.mode)
    run.record_stage("pepr_mode_reason", table.config.get("mode_reason"))
    if mode == "auto":
        run.record_stage("pepr_exact_seconds_estimate", table.config.get("exact_seconds_estimate"))


def _digest(array: np.ndarray) -> str:

    array = np.ascontiguousarray(array)
    return hashlib.sha256(f"{array.dtype.str} {array.shape}".encode("ascii") + array.tobytes()).hexdigest()


def _defaults(function) -> dict[str, Any]:
    """The keyword defaults of ``function``: a cached artefact's key changes when one of them does."""

    return {
        name: parameter.default
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.default is not inspect.Parameter.empty and name not in ("show_progress", "progress")
    }


#: the entity linker's files in ``kg/linker`` (and in its cache entry): its arrays and what its build dropped
LINKER_ARRAYS = "entity_linker"
LINKER_REPORT = "linking_report.json"


def linker_settings(store, options: dict | None, texts: Callable[[], Any]) -> dict[str, Any]:
    """What the cached entity linker of ``kgplm.train(linking=options)`` on ``store`` is keyed by: the graph's
    content and names (:func:`~kgplm.artefact_cache.graph_names_hash`), every linking option with its
    default, the linker's other defaults, its format, jieba's version (its dictionary segments the text)
    and kgplm's; with ``common_word_share``, which reads the corpus, the hash of ``texts()`` too."""

    linking = linking_settings(options)
    return {
        "graph": graph_content_hash(store),
        "names": graph_names_hash(store),
        "linking": linking,
        "corpus": None if linking["common_word_share"] is None else texts_hash(texts()),
        "defaults": _defaults(EntityLinker),
        "linker_format": LINKER_FORMAT_VERSION,
        "jieba": jieba.__version__,
        "kgplm": _kgplm_version(),
    }


def _save_linker(linker, report: dict, directory: Path) -> None:

    with atomic_directory(directory) as temporary:
        linker.save(temporary / LINKER_ARRAYS)
        (temporary / LINKER_REPORT).write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")


def _kgplm_version() -> str:

    return __version__


def _kg_embeddings(run: RunDirectory, inputs: StageInputs):

    arguments = inputs.arguments
    store = inputs.store
    if arguments.get("kg_embeddings") is not None:
        if inputs.held_out is not None:
            raise ConfigurationError(
                "exclude_triples cannot be honoured with precomputed kg_embeddings (they may "
                "have been trained on the held-out triples); leave kg_embeddings out"
            )
        return KGEmbeddings.load(arguments["kg_embeddings"], store=store)
    method = arguments["kg_method"]
    kg_seed = arguments.get("kg_seed")
    options = dict(
        dim=arguments["entity_dim"],
        epochs=arguments["kg_epochs"],
        seed=arguments["seed"] if kg_seed is None else kg_seed,
        progress=inputs.progress,
    )
    if inputs.held_out is not None:
        options["triples"] = inputs.held_out.kept_triples()
        logger.info("KG embeddings without the %d held-out triples", len(inputs.held_out))

    cache = inputs.cache
    triples = options.get("triples")
    base_settings = None
    if cache is not None:
        base_settings = {
            "graph": inputs.graph_hash,
            "dim": options["dim"],
            "epochs": options["epochs"],
            "seed": options["seed"],
            "triples": "all" if triples is None else _digest(np.asarray(triples)),
            "defaults": _defaults(train_kg_embeddings),
            "kgplm": _kgplm_version(),
        }

    def trained(kind: str, settings: dict | None, **extra):
        path = run.embeddings_dir(kind)
        if path.is_dir():
            return KGEmbeddings.load(path, store=store)
        if settings is not None and cache.fetch(kind, settings, path):
            return KGEmbeddings.load(path, store=store)
        count = store.num_triples if triples is None else len(triples)
        logger.info(
            "KG embedding stage: training %s (dimension %d) on %d triples of %d entities and %d relations "
            "for %d epochs",
            kind,
            options["dim"],
            count,
            store.num_entities,
            store.num_relations,
            options["epochs"],
        )
        began = time.perf_counter()
        embeddings = train_kg_embeddings(store, method=kind, **options, **extra)
        logger.info("KG embedding stage: %s trained in %.1f s", kind, time.perf_counter() - began)
        embeddings.save(path)
        if settings is not None:
            cache.put(kind, settings, path)
        # what a resumed run or a run served by the cache reads: the saved tensors, so every run of these
        # settings computes with the same numbers whether it trained the embeddings or loaded them
        return KGEmbeddings.load(path, store=store)

    transe_settings = None if base_settings is None else {**base_settings, "method": "transe"}
    transe = trained("transe", transe_settings)
    if method == "transe":
        return transe
    transr_settings = (
        None
        if base_settings is None
        else {**base_settings, "method": "transr", "initialize_from": cache.key("transe", transe_settings)}
    )
    return trained("transr", transr_settings, initialize_from=transe)


register_stage(Stage("entity_frequencies", _entity_frequencies))
register_stage(Stage("neighbor_table", _neighbor_table, requires=("entity_frequencies",)))
register_stage(Stage("kg_embeddings", _kg_embeddings))


# -- stages every method runs ------------------------------------------------------------------------
def _is_saved_store(graph) -> bool:
    return isinstance(graph, (str, os.PathLike)) and (Path(graph) / "manifest.json").is_file()


def recorded_graph(run: RunDirectory, graph):
    """What ``run_config.json`` records as the graph: a :class:`KGStore` object is saved into the run, so
    the path of that copy; ``None`` (a method that reads no graph) and paths/names as given."""

    return str(run.store_dir) if isinstance(graph, KGStore) else graph


def recorded_knowledge_graph(run: RunDirectory, knowledge_graph):
    """What ``run_config.json`` records as the knowledge graph: a :class:`KGStore` object is saved into the
    run (:func:`prepare_knowledge_store`), so the path of that copy; a path as given; ``None``."""

    return str(run.path / KNOWLEDGE_STORE) if isinstance(knowledge_graph, KGStore) else knowledge_graph


def prepare_knowledge_store(run: RunDirectory, knowledge_graph, store, *, save: bool = True, cache=None):
    """The store the KG artefacts are built from when it is not the linking store ``store``:
    ``knowledge_graph`` (a :class:`KGStore`, or a saved store's directory), which must hold exactly
    ``store``'s entities and relations, in the same order (text links to ``store``'s ids). A store object
    is saved into the run's ``knowledge_store/`` (``save``; through ``cache`` when given,
    :func:`save_store`), so the run replays from its ``run_config.json``; the stage ``knowledge_graph``
    records its size and ``derived_from``."""

    knowledge = knowledge_graph if isinstance(knowledge_graph, KGStore) else KGStore.load(knowledge_graph)
    where = "the knowledge graph" if isinstance(knowledge_graph, KGStore) else str(knowledge_graph)
    same_entities = knowledge.num_entities == store.num_entities and all(
        np.array_equal(a, b) for a, b in zip(knowledge.entity_iris.buffers(), store.entity_iris.buffers())
    )
    if not same_entities:
        raise ConfigurationError(
            f"{where} must hold the same entities as the graph, in the same order (text links to "
            f"the graph's ids); it has {knowledge.num_entities:,} entities, the graph "
            f"{store.num_entities:,} (make it with KGStore.with_triples on the graph)"
        )
    if knowledge.relation_iris != store.relation_iris:
        raise ConfigurationError(
            f"{where} must have the graph's relations, in the same order; it has "
            f"{knowledge.num_relations} relations, the graph {store.num_relations}"
        )
    if save:
        target = run.path / KNOWLEDGE_STORE
        if isinstance(knowledge_graph, KGStore) and not (target / "manifest.json").is_file():
            save_store(knowledge, target, cache)
        run.record_stage(
            "knowledge_graph", {"num_triples": knowledge.num_triples, "derived_from": knowledge.derived_from}
        )
    return knowledge


def cached_graph(run: RunDirectory, graph):
    """The run's saved copy of ``graph`` when this run already parsed that same graph (a resume), else ``graph``."""

    if graph is None or isinstance(graph, KGStore) or _is_saved_store(graph):
        return graph
    if (run.store_dir / "manifest.json").is_file() and run.run_config_path.is_file():
        if str(run.read_run_config().get("graph")) == str(graph):
            return KGStore.load(run.store_dir)
    return graph


def save_store(store, target: Path, cache=None) -> None:
    """Save ``store`` at ``target``; with a ``cache`` (:class:`~kgplm.artefact_cache.ArtefactCache`) as a
    ``store`` entry keyed by the SHA-256 of each saved file, its files hard-linked into ``target``, so the
    runs that save the same store hold one copy of it on disk."""

    if cache is None:
        store.save(target)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        saved = store.save(temporary / "store")
        files = {}
        for path in sorted(Path(saved).iterdir()):
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            files[path.name] = digest.hexdigest()
        settings = {"files": files}
        cache.put("store", settings, saved)  # kept as it is when the cache holds these bytes already
        if not cache.fetch("store", settings, target):  # a read-only cache without the entry
            os.replace(saved, target)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def prepare_store(run: RunDirectory, store, graph, *, save: bool = True, cache=None):
    """The run's store: ``store`` (opened by :func:`kgplm.training.preflight.check_train_inputs`), saved
    into the run unless ``graph`` is a saved store already (through ``cache`` when given,
    :func:`save_store`); an empty store when the method reads no graph (``store`` is ``None``: no entity
    is linked, entity-sized tables are empty)."""

    if store is None:
        return GraphCollector(source="no graph").build(allow_empty=True)
    if save and not _is_saved_store(graph) and not (run.store_dir / "manifest.json").is_file():
        save_store(store, run.store_dir, cache)
    return store


def prepare_tokenizer(run: RunDirectory, inputs: StageInputs):

    target = run.tokenizer_dir
    if (target / "tokenizer.json").is_file():
        return load_tokenizer(target)
    arguments = inputs.arguments
    source, text_model = arguments.get("tokenizer"), arguments.get("text_model")
    if source is None and isinstance(text_model, (str, os.PathLike)):
        directory = Path(text_model)
        if (directory / "tokenizer.json").is_file() or (directory / "vocab.txt").is_file():
            source = directory
    if source is not None:
        loaded = load_tokenizer(source)
    else:
        logger.info("training a WordPiece vocabulary of %d pieces on the corpus", arguments["vocab_size"])
        loaded = build_vocab(
            inputs.corpus_texts(), arguments["vocab_size"], min_frequency=2, show_progress=inputs.progress
        )
    save_tokenizer(loaded, target)
    return load_tokenizer(target)


def prepare_corpus(run: RunDirectory, inputs: StageInputs, tokenizer, *, masking: str):
    """The linked corpus (every method's corpus carries mention spans; whole-entity masking reads them;
    word_ids, for the schemes that mask words, :data:`kgplm.text.masking.WORD_SCHEMES`)."""

    manifest_path = run.corpus_dir / "manifest.json"
    if manifest_path.is_file():
        _check_built_corpus(
            manifest_path, max_length=inputs.arguments["max_length"], whole_word=masking in WORD_SCHEMES
        )
        return load_corpus(run.corpus_dir)
    held_out = inputs.held_out
    if held_out is not None:
        held_out.statistics.update(documents=0, sentences_removed=0, documents_emptied=0)
    logger.info(
        "corpus stage: tokenizing and linking %s into examples of at most %d tokens",
        inputs.corpus if isinstance(inputs.corpus, (str, os.PathLike)) else "the corpus",
        inputs.arguments["max_length"],
    )
    began = time.perf_counter()
    dataset = build_corpus(
        inputs.corpus if held_out is None else inputs.documents(),
        store=inputs.store,
        tokenizer=tokenizer,
        output_dir=run.corpus_dir,
        neighbor_table=inputs.artefacts.get("neighbor_table"),
        linker=inputs.linker,
        whole_word=masking in WORD_SCHEMES,
        max_length=inputs.arguments["max_length"],
        progress=inputs.progress,
        **inputs.corpus_options,
    )
    logger.info("corpus stage: %d examples in %.1f s", len(dataset), time.perf_counter() - began)
    if held_out is not None:
        logger.info("held-out triples: %s", held_out.statistics)
        run.record_stage("held_out_text", dict(held_out.statistics))
    if inputs.artefacts.get("linking"):
        run.record_stage("linking", inputs.artefacts["linking"])  # e.g. the common names dropped
    return dataset


def _check_built_corpus(manifest_path, **expected) -> None:
    """A corpus already built in the run is reused only if it was built with the settings asked for now."""

    built = json.loads(manifest_path.read_text(encoding="utf-8")).get("config", {})
    different = {name: (built.get(name), value) for name, value in expected.items() if built.get(name) != value}
    if different:
        raise ArtifactError(
            f"{manifest_path}: the corpus there was built with "
            + ", ".join(f"{name}={was!r}" for name, (was, _) in different.items())
            + ", but this run asks for "
            + ", ".join(f"{name}={now!r}" for name, (_, now) in different.items())
            + "; use another output directory or remove the corpus"
        )


def record_model_length(run: RunDirectory, tokenizer, positions: int) -> None:
    """Save the tokenizer again with ``model_max_length`` = the model's positions (once)."""

    if tokenizer.model_max_length != positions:
        tokenizer.model_max_length = positions
        save_tokenizer(tokenizer, run.tokenizer_dir)


# -- the model -----------------------------------------------------------------------------------------
def build_model(
    spec,
    store,
    tokenizer,
    *,
    text_model,
    model_options: dict,
    max_length: int,
    entity_dim: int,
    artefacts: dict | None = None,
):
    """A fresh pre-training model of ``spec`` sized for ``store``, ``tokenizer`` and the KG embeddings
    (when the method uses them); returns (model, the text checkpoint directory or None)."""

    text_fields, checkpoint = read_text_fields(text_model)
    text_fields["vocab_size"] = len(tokenizer)
    text_fields.setdefault("pad_token_id", tokenizer.pad_token_id)
    graph_fields = {
        "method": spec.name,
        "num_entities": store.num_entities,
        "num_relations": store.num_relations,
        "num_entity_types": store.num_types,
        "entity_dim": entity_dim,
    }
    artefacts = artefacts or {}
    kg_embeddings = artefacts.get("kg_embeddings")
    if kg_embeddings is not None:
        graph_fields.update(entity_dim=kg_embeddings.entity_dim, relation_dim=kg_embeddings.relation_dim)
    if spec.derive_config is not None:
        graph_fields.update(spec.derive_config(artefacts))
    unknown = set(model_options) - set(spec.config_class.option_names())
    if unknown:
        raise ConfigurationError(
            f"unknown model_options {sorted(unknown)} for method {spec.name!r}; it takes "
            f"{spec.config_class.option_names()}"
        )
    config = spec.config_class(**{**text_fields, **graph_fields, **model_options})
    if max_length + 1 > config.max_position_embeddings:
        raise ConfigurationError(
            f"max_length {max_length} + 1 (the SOP separator) exceeds the text model's "
            f"max_position_embeddings {config.max_position_embeddings}"
        )
    model = spec.model_class(config)
    if checkpoint is not None:
        load_text_checkpoint(model, checkpoint)
    return model, checkpoint


def check_init_unchanged(run: RunDirectory, init) -> None:
    """A run that continued a model (``init``, a :class:`kgplm.training.preflight.InitFrom`) resumes only
    from the weights it started from: its checkpoints, loss curve and model descend from them. Raise
    :class:`ArtifactError` when the run in ``run`` has trained and ``init``'s weights now differ from those
    recorded under ``stages.init_from``: the same path holds another model (retrained, rebuilt)."""
    if not run.run_config_path.is_file():
        return
    recorded = run.read_run_config().get("stages", {}).get("init_from")
    trained = [path.name for path in (run.path / "checkpoints", run.metrics_path, run.model_dir) if path.exists()]
    if recorded is None or not trained:
        return
    digest = file_sha256(init.weights)
    if digest != recorded["sha256"]:
        raise ArtifactError(
            f"{run.path} continued {recorded['path']} from weights with SHA-256 {recorded['sha256']}, and its "
            f"{', '.join(trained)} descend from them; {init.weights} now has SHA-256 {digest}. Put the "
            "earlier weights back to resume, or choose another output_dir to continue the new ones"
        )


def load_init_weights(model, init) -> dict[str, Any]:
    """Continued pre-training: load every tensor of a kgplm model (``init``, a
    :class:`kgplm.training.preflight.InitFrom`) whose name and shape ``model`` shares — embeddings,
    encoder, and the heads both have (MLM, SOP, ELECTRA's generator and replaced-token head) — and
    keep ``model``'s fresh initialisation for the rest (the method's own modules). Refuses a
    checkpoint that gives none of the encoder. Returns what ``run_config.json`` records under
    ``stages.init_from``: the weights' SHA-256 and the tensors loaded, new and unused."""

    from safetensors.torch import load_file

    reference = load_file(str(init.weights))
    ours = model.state_dict()
    loaded = {
        name: tensor
        for name, tensor in reference.items()
        if name in ours and tuple(ours[name].shape) == tuple(tensor.shape)
    }
    if not any(".encoder." in name or name.startswith("encoder.") for name in loaded):
        raise ConfigurationError(
            f"init_from {init.model_dir} shares no encoder tensor with a {type(model).__name__} "
            f"(its tensors: {sorted(reference)[:5]} …)"
        )
    model.load_state_dict(loaded, strict=False)
    # a tied tensor (the MLM decoder is the word embeddings) was loaded under its other name: not new
    tensors = model.state_dict(keep_vars=True)
    loaded_storage = {tensors[name].data_ptr() for name in loaded}
    new = sorted(name for name in ours if name not in loaded and tensors[name].data_ptr() not in loaded_storage)
    unused = sorted(name for name in reference if name not in loaded)
    digest = file_sha256(init.weights)
    logger.info(
        "continued pre-training from %s: %d tensors loaded; newly initialised: %s; unused: %s",
        init.model_dir,
        len(loaded),
        new,
        unused,
    )
    return {"path": str(init.model_dir), "sha256": digest, "loaded": len(loaded), "new": new, "unused": unused}


#: Hugging Face ``BertForPreTraining`` parameter names → kgplm's (the NSP head warm-starts SOP's).
BERT_CHECKPOINT_RENAMES = (("cls.seq_relationship.", "sop."),)


def load_text_checkpoint(model, directory: Path) -> dict[str, list[str]]:
    """Load every weight a BERT checkpoint has into ``model``: encoder, MLM head (transform, LayerNorm,
    bias) and NSP head (as the SOP head). Logs the parameters that are new. Returns
    ``{"loaded": [...], "new": [...], "unused": [...]}``."""
    from transformers import BertForPreTraining

    with silenced_load_report():  # what was loaded is checked and logged below
        reference, info = BertForPreTraining.from_pretrained(str(directory), output_loading_info=True)
    if reference.config.vocab_size != model.config.vocab_size:
        raise ConfigurationError(
            f"the text model's vocabulary ({reference.config.vocab_size}) differs from the "
            f"tokenizer's ({model.config.vocab_size})"
        )
    absent = set(info.get("missing_keys", ()))  # initialised by transformers, not read from the checkpoint
    ours = model.state_dict()
    renamed: dict[str, Any] = {}
    unused = []
    for name, tensor in reference.state_dict().items():
        if name in absent:
            continue
        target = name
        for old, new in BERT_CHECKPOINT_RENAMES:
            if target.startswith(old):
                target = new + target[len(old) :]
        if target in ours and tuple(ours[target].shape) == tuple(tensor.shape):
            renamed[target] = tensor
        else:
            unused.append(name)
    model.load_state_dict(renamed, strict=False)
    new = sorted(name for name in ours if name not in renamed)
    logger.info(
        "initialised %d tensors of %s from %s; newly initialised: %s; unused from the checkpoint: %s",
        len(renamed),
        type(model).__name__,
        directory,
        new,
        unused,
    )
    return {"loaded": sorted(renamed), "new": new, "unused": unused}
