"""One-call pre-training: ``kgplm.train(...)`` and ``kgplm.train_from_config(path)``.

``train`` runs the whole chain unless given cached artefacts: open the graph, count the corpus's
mentions, rank each mentioned entity's neighbours with PEPR, train KG embeddings, build (or
reuse) a WordPiece vocabulary, link and encode the corpus, build the model, pre-train it with
checkpoints, save it. Everything lands in ``output_dir``::

    run_config.json          the arguments; kgplm.train_from_config(path) replays the run
    kg/                      store/ (when the graph was not a saved store), entity_frequencies.npy,
                             neighbors.npz (PEPR table), embeddings/ (KGEmbeddings)
    tokenizer/               the tokenizer (tokenizer.json, vocab.txt)
    corpus/                  the linked corpus (Arrow shards)
    checkpoints/             the last checkpoints (resume)
    metrics.jsonl            the loss curve
    model/                   the final model (save_pretrained, safetensors)

Rerunning the same call resumes from the last checkpoint; every finished stage is reused.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kgplm._io import atomic_directory, atomic_file
from kgplm.exceptions import ArtifactError, ConfigurationError, MissingFileError

__all__ = ["train", "train_from_config", "TrainingResult", "METHODS", "finetune", "evaluate", "FineTuningResult"]

logger = logging.getLogger(__name__)

METHODS = ("mlm", "smedbert")
_PLANNED = ("kebiolm", "embert", "ehealth", "epplm")


@dataclass
class TrainingResult:
    """What ``kgplm.train`` produced: paths, the logged metrics and the configuration that replays it."""

    output_dir: Path
    method: str
    steps: int
    metrics: list[dict[str, Any]] = field(default_factory=list)
    run_config: dict[str, Any] = field(default_factory=dict)

    @property
    def model_dir(self) -> Path:
        return self.output_dir / "model"

    @property
    def tokenizer_dir(self) -> Path:
        return self.output_dir / "tokenizer"

    def curve(self, name: str = "loss") -> list[float]:
        """The logged values of one loss (``loss``, ``mlm``, ``sop``, ``mnem``, ``mmem`` …)."""
        return [record[name] for record in self.metrics if name in record]

    def load_model(self):
        from kgplm.models import load_pretrained

        return load_pretrained(self.model_dir)

    def load_tokenizer(self):
        from kgplm.text.tokenization import load_tokenizer

        return load_tokenizer(self.tokenizer_dir)

    def __repr__(self) -> str:
        last = self.metrics[-1]["loss"] if self.metrics else float("nan")
        return f"TrainingResult(method={self.method!r}, steps={self.steps}, final loss {last:.4f}, {self.output_dir})"


def _json_safe(value):
    if isinstance(value, os.PathLike):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def train(
    method: str = "smedbert",
    *,
    graph,
    corpus: str | os.PathLike,
    output_dir: str | os.PathLike,
    text_model: str | os.PathLike | dict | None = None,
    tokenizer: str | os.PathLike | None = None,
    kg_embeddings: str | os.PathLike | None = None,
    neighbor_table: str | os.PathLike | None = None,
    corpus_options: dict | None = None,
    vocab_size: int = 8000,
    max_length: int = 128,
    num_neighbors: int = 10,
    pepr_mode: str = "fast",
    kg_method: str = "transr",
    entity_dim: int = 100,
    kg_epochs: int = 5,
    model_options: dict | None = None,
    masking: str | None = None,
    max_steps: int = 1000,
    batch_size: int = 16,
    learning_rate: float = 5e-4,
    warmup_steps: int | None = None,
    weight_decay: float = 0.01,
    checkpoint_every: int = 200,
    log_every: int = 10,
    seed: int = 0,
    device: str = "cpu",
    progress: bool = True,
) -> TrainingResult:
    """Pre-train ``method`` (``"smedbert"`` or the plain ``"mlm"`` baseline) on ``corpus`` with ``graph``.

    Args:
        graph: a :class:`~kgplm.KGStore` or anything :func:`kgplm.kg.open_store` accepts
            (``"cmekg"``, a saved store, an RDF/OBO/TSV file, a UMLS directory).
        corpus: a corpus file (text lines, CSV, JSON lines); ``corpus_options`` go to
            :func:`kgplm.text.read_corpus` (e.g. ``{"columns": ["ask", "answer"]}``).
        text_model: ``None`` (a small CPU encoder, :data:`kgplm.models.CPU_TEXT_ENCODER`), a local
            directory holding a BERT checkpoint (``config.json`` + weights, and its tokenizer unless
            ``tokenizer`` is given) or a dict of BERT config fields.
        tokenizer: a tokenizer directory or ``vocab.txt``; default: the text model's, else a
            WordPiece vocabulary of ``vocab_size`` trained on the corpus.
        kg_embeddings, neighbor_table: cached artefacts (a :class:`KGEmbeddings` directory, a PEPR
            ``.npz``); by default computed: PEPR top-``num_neighbors`` for every mentioned entity
            (``pepr_mode``), ``kg_method`` embeddings of size ``entity_dim`` for ``kg_epochs``.
        model_options: :class:`~kgplm.models.KgplmConfig` knowledge fields (ablations, λ1, λ2 …).
        masking: the MLM masking scheme (default ``whole_entity`` for SMedBERT, ``bert`` for mlm).
        max_steps, batch_size, learning_rate, warmup_steps (default 6% of the steps), weight_decay,
        checkpoint_every, log_every, seed, device: the loop's (:class:`kgplm.training.TrainerSettings`).

    Returns a :class:`TrainingResult`. Rerunning the same call resumes; a different call into
    the same ``output_dir`` raises :class:`~kgplm.exceptions.ArtifactError`.
    """
    arguments = {name: value for name, value in locals().items()}
    if method in _PLANNED:
        raise ConfigurationError(f"method {method!r} is planned but not implemented yet; available: {METHODS}")
    if method not in METHODS:
        raise ConfigurationError(f"method must be one of {METHODS}, got {method!r}")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    if warmup_steps is None:
        warmup_steps = int(0.06 * max_steps)

    from kgplm.kg import KGStore, open_store

    if isinstance(graph, KGStore):
        store = graph
        store_dir = output_dir / "kg" / "store"
        if not (store_dir / "manifest.json").is_file():
            store.save(store_dir)
        arguments["graph"] = str(store_dir)
    else:
        cached = output_dir / "kg" / "store"
        is_saved_store = Path(str(graph)).is_dir() and (Path(str(graph)) / "manifest.json").is_file()
        if not is_saved_store and (cached / "manifest.json").is_file():
            store = KGStore.load(cached)
        else:
            store = open_store(graph, show_progress=progress)
            if not is_saved_store:
                store.save(cached)
    run_config = _json_safe({"kgplm_run": 1, **arguments})
    run_config_path = output_dir / "run_config.json"
    if run_config_path.is_file():
        previous = json.loads(run_config_path.read_text(encoding="utf-8"))
        changed = sorted(k for k in set(previous) | set(run_config)
                         if previous.get(k) != run_config.get(k) and k not in ("max_steps", "progress"))
        if changed:
            raise ArtifactError(f"{output_dir} holds a run with other settings ({', '.join(changed)} differ); "
                                f"choose another output_dir or delete it")
    with atomic_file(run_config_path, "w", encoding="utf-8") as handle:
        json.dump(run_config, handle, indent=1, ensure_ascii=False)

    corpus_options = dict(corpus_options or {})
    tokenizer_object = _prepare_tokenizer(output_dir, corpus, corpus_options, text_model, tokenizer, vocab_size,
                                          progress)
    knowledge = method == "smedbert"
    table, embeddings, frequencies = None, None, None
    from functools import cache

    from kgplm.text.linking import EntityLinker

    linker = cache(lambda: EntityLinker(store))  # built once, and only when a stage still has to link
    if knowledge:
        frequencies = _entity_frequencies(output_dir, store, linker, corpus, corpus_options)
        table = _prepare_neighbor_table(output_dir, store, frequencies, neighbor_table, num_neighbors, pepr_mode,
                                        seed, progress)
        embeddings = _prepare_kg_embeddings(output_dir, store, kg_embeddings, kg_method, entity_dim, kg_epochs, seed,
                                            progress)
    dataset = _prepare_corpus(output_dir, store, linker, corpus, corpus_options, tokenizer_object, table,
                              max_length, masking, progress)
    import torch

    torch.manual_seed(seed)  # the model's initial weights
    model = _build_model(method, store, tokenizer_object, text_model, embeddings, model_options or {}, max_length)
    collator = _build_collator(method, model.config, tokenizer_object, store, masking, frequencies, seed)

    from kgplm.training.trainer import TrainerSettings, train_loop

    settings = TrainerSettings(max_steps=max_steps, batch_size=batch_size, learning_rate=learning_rate,
                               warmup_steps=warmup_steps, weight_decay=weight_decay,
                               checkpoint_every=checkpoint_every, log_every=log_every, seed=seed)
    metrics = train_loop(model, dataset, collator, output_dir=output_dir, settings=settings, device=device,
                         progress=progress)
    with atomic_directory(output_dir / "model") as temporary:
        model.save_pretrained(str(temporary))
    logger.info("saved the model to %s", output_dir / "model")
    return TrainingResult(output_dir=output_dir, method=method, steps=max_steps, metrics=metrics,
                          run_config=run_config)


def train_from_config(path: str | os.PathLike, **overrides) -> TrainingResult:
    """Replay (or resume) the run a ``run_config.json`` describes; ``overrides`` change arguments."""
    path = Path(path)
    if path.is_dir():
        path = path / "run_config.json"
    if not path.is_file():
        raise MissingFileError(path, "run configuration (run_config.json)")
    config = json.loads(path.read_text(encoding="utf-8"))
    if config.pop("kgplm_run", None) != 1:
        raise ArtifactError(f"{path} is not a kgplm run configuration")
    config.update(overrides)
    method = config.pop("method")
    return train(method, **config)


# -- stages ----------------------------------------------------------------------------------------------
def _corpus_texts(corpus, corpus_options):
    from kgplm.text.corpus import read_corpus

    return (document.text for document in read_corpus(corpus, **corpus_options))


def _prepare_tokenizer(output_dir: Path, corpus, corpus_options, text_model, tokenizer, vocab_size, progress):
    from kgplm.text.tokenization import build_vocab, load_tokenizer, save_tokenizer

    target = output_dir / "tokenizer"
    if (target / "tokenizer.json").is_file():
        return load_tokenizer(target)
    source = tokenizer
    if source is None and isinstance(text_model, (str, os.PathLike)):
        directory = Path(text_model)
        if (directory / "tokenizer.json").is_file() or (directory / "vocab.txt").is_file():
            source = directory
    if source is not None:
        loaded = load_tokenizer(source)
    else:
        logger.info("training a WordPiece vocabulary of %d pieces on the corpus", vocab_size)
        loaded = build_vocab(_corpus_texts(corpus, corpus_options), vocab_size, min_frequency=2,
                             show_progress=progress)
    save_tokenizer(loaded, target)
    return load_tokenizer(target)


def _entity_frequencies(output_dir: Path, store, linker, corpus, corpus_options) -> np.ndarray:
    path = output_dir / "kg" / "entity_frequencies.npy"
    if path.is_file():
        return np.load(path, allow_pickle=False)
    counts = linker().count(_corpus_texts(corpus, corpus_options))
    if counts.sum() == 0:
        raise ConfigurationError(f"no mention of the graph's {store.num_entities:,} entities was found in {corpus}; "
                                 f"a knowledge-enhanced method needs linked mentions")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "wb") as handle:
        np.save(handle, counts)
    return counts


def _prepare_neighbor_table(output_dir, store, frequencies, neighbor_table, k, mode, seed, progress):
    from kgplm.kg.pepr import NeighborTable, top_k_neighbors

    if neighbor_table is not None:
        return NeighborTable.load(neighbor_table)
    path = output_dir / "kg" / "neighbors.npz"
    if path.is_file():
        return NeighborTable.load(path)
    seeds = np.flatnonzero(frequencies > 0)
    logger.info("PEPR top-%d neighbours of the %d mentioned entities (%s mode)", k, len(seeds), mode)
    table = top_k_neighbors(store, seeds, k=k, mode=mode, frequencies=frequencies, show_progress=progress)
    table.save(path)
    return table


def _prepare_kg_embeddings(output_dir, store, kg_embeddings, method, dim, epochs, seed, progress):
    from kgplm.kg.embeddings import KGEmbeddings, train_kg_embeddings

    if kg_embeddings is not None:
        return KGEmbeddings.load(kg_embeddings, store=store)
    path = output_dir / "kg" / "embeddings"
    if path.is_dir():
        return KGEmbeddings.load(path, store=store)
    embeddings = train_kg_embeddings(store, method=method, dim=dim, epochs=epochs, seed=seed, progress=progress)
    embeddings.save(path)
    return embeddings


def _prepare_corpus(output_dir, store, linker, corpus, corpus_options, tokenizer, table, max_length, masking,
                    progress):
    from kgplm.text.corpus import build_corpus, load_corpus

    directory = output_dir / "corpus"
    if (directory / "manifest.json").is_file():
        return load_corpus(directory)
    return build_corpus(corpus, store=store, tokenizer=tokenizer, output_dir=directory, neighbor_table=table,
                        linker=linker(), whole_word=masking == "whole_word", max_length=max_length, progress=progress,
                        **corpus_options)


def _build_model(method, store, tokenizer, text_model, embeddings, model_options, max_length):
    from transformers import BertConfig, BertModel

    from kgplm.models import CPU_TEXT_ENCODER, MODEL_CLASSES, KgplmConfig

    pretrained_dir = None
    if text_model is None:
        text_fields = dict(CPU_TEXT_ENCODER)
    elif isinstance(text_model, dict):
        text_fields = dict(text_model)
    else:
        pretrained_dir = Path(text_model)
        if not (pretrained_dir / "config.json").is_file():
            raise MissingFileError(pretrained_dir / "config.json", "BERT checkpoint configuration")
        text_fields = BertConfig.from_pretrained(str(pretrained_dir)).to_dict()
        for key in ("architectures", "model_type", "transformers_version", "_name_or_path"):
            text_fields.pop(key, None)
    text_fields["vocab_size"] = len(tokenizer)
    text_fields.setdefault("pad_token_id", tokenizer.pad_token_id)
    knowledge_fields: dict[str, Any] = {"method": method, "num_entities": store.num_entities,
                                        "num_relations": store.num_relations,
                                        "num_entity_types": store.num_types}
    if embeddings is not None:
        knowledge_fields.update(entity_dim=embeddings.entity_dim, relation_dim=embeddings.relation_dim)
    unknown = set(model_options) - set(KgplmConfig().to_dict())
    if unknown:
        raise ConfigurationError(f"unknown model_options {sorted(unknown)}; see kgplm.models.KgplmConfig")
    config = KgplmConfig(**{**text_fields, **knowledge_fields, **model_options})
    if max_length + 1 > config.max_position_embeddings:
        raise ConfigurationError(f"max_length {max_length} + 1 (the SOP separator) exceeds the text model's "
                                 f"max_position_embeddings {config.max_position_embeddings}")
    model = MODEL_CLASSES[method](config)
    if pretrained_dir is not None:
        bert = BertModel.from_pretrained(str(pretrained_dir))
        if bert.config.vocab_size != config.vocab_size:
            raise ConfigurationError(f"the text model's vocabulary ({bert.config.vocab_size}) differs from the "
                                     f"tokenizer's ({config.vocab_size})")
        missing, unexpected = model.bert.load_state_dict(bert.state_dict(), strict=False)
        logger.info("initialised the encoder from %s (missing %s, unexpected %s)", pretrained_dir, missing, unexpected)
    if embeddings is not None and hasattr(model, "kg"):
        model.kg.load_embeddings(embeddings)
    if hasattr(model, "snapshot_mmem_target"):
        model.snapshot_mmem_target()
    return model


def _build_collator(method, config, tokenizer, store, masking, frequencies, seed):
    from kgplm.text.masking import Masker
    from kgplm.training.collator import PretrainingCollator, TypeFrequencySampler

    scheme = masking or ("whole_entity" if method == "smedbert" else "bert")
    masker = Masker.from_tokenizer(tokenizer, scheme, seed=seed)
    knowledge = method == "smedbert"
    sampler = TypeFrequencySampler(frequencies, store.primary_type_ids()) if knowledge else None
    return PretrainingCollator(masker=masker, cls_token_id=tokenizer.cls_token_id,
                               sep_token_id=tokenizer.sep_token_id, pad_token_id=tokenizer.pad_token_id,
                               sentence_order=knowledge and config.use_sop, knowledge=knowledge, sampler=sampler,
                               num_negatives=config.mnem_num_negatives)


# -- fine-tuning and evaluation ----------------------------------------------------------------------------
@dataclass
class FineTuningResult:
    """What ``kgplm.finetune`` produced: the best-on-dev model and its dev and test scores."""

    output_dir: Path
    task: str
    dev: dict[str, float]
    test: dict[str, float] | None
    history: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def model_dir(self) -> Path:
        return self.output_dir / "model"

    def load_model(self):
        from kgplm.models import load_pretrained

        return load_pretrained(self.model_dir)

    def __repr__(self) -> str:
        test = f", test {self.test['main']:.4f}" if self.test else ""
        return f"FineTuningResult(task={self.task!r}, dev {self.dev['main']:.4f}{test}, {self.output_dir})"


def _pretrained_parts(model: str | os.PathLike) -> tuple[Path, Path, Path | None]:
    """(model directory, tokenizer directory, run directory or None) of a kgplm run or model directory."""
    path = Path(model)
    if (path / "model" / "config.json").is_file():
        model_dir, run_dir = path / "model", path
    elif (path / "config.json").is_file():
        model_dir, run_dir = path, path.parent if (path.parent / "tokenizer").is_dir() else None
    else:
        raise MissingFileError(path, "kgplm model (a train/finetune output directory or a save_pretrained directory)")
    for candidate in ((run_dir / "tokenizer") if run_dir else None, model_dir):
        if candidate is not None and ((candidate / "tokenizer.json").is_file() or (candidate / "vocab.txt").is_file()):
            return model_dir, candidate, run_dir
    raise MissingFileError(model_dir, "tokenizer next to the model (tokenizer/ or tokenizer.json)")


def _knowledge_lookup(run_dir: Path | None, progress: bool):
    """The linker and PEPR table a knowledge-enhanced model was pre-trained with."""
    from kgplm.kg import KGStore, open_store
    from kgplm.kg.pepr import NeighborTable
    from kgplm.training.finetuning import KnowledgeLookup

    if run_dir is not None and (run_dir / "finetune_config.json").is_file():
        # a fine-tuned model: its knowledge is the pre-training run it started from
        source = json.loads((run_dir / "finetune_config.json").read_text(encoding="utf-8"))["model"]
        run_dir = _pretrained_parts(source)[2]
    if run_dir is None or not (run_dir / "kg" / "neighbors.npz").is_file():
        raise MissingFileError(run_dir or "<model>", "pre-training run with kg/neighbors.npz (a knowledge-enhanced "
                               "model needs the graph and neighbour table it was trained with)")
    if (run_dir / "kg" / "store" / "manifest.json").is_file():
        store = KGStore.load(run_dir / "kg" / "store")
    else:
        store = open_store(json.loads((run_dir / "run_config.json").read_text(encoding="utf-8"))["graph"],
                           show_progress=progress)
    return KnowledgeLookup(store, NeighborTable.load(run_dir / "kg" / "neighbors.npz"))


def _subset(examples: list, limit: int | None, seed: int) -> list:
    if limit is None or len(examples) <= limit:
        return examples
    order = np.sort(np.random.default_rng(seed).permutation(len(examples))[:limit])
    return [examples[i] for i in order]


def finetune(
    *,
    model: str | os.PathLike,
    task: str,
    data_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    epochs: int = 3,
    batch_size: int = 32,
    learning_rate: float = 5e-5,
    warmup_ratio: float = 0.1,
    weight_decay: float = 0.01,
    patience: int = 2,
    max_length: int | None = None,
    tagging: str = "bio",
    max_train_examples: int | None = None,
    max_eval_examples: int | None = None,
    seed: int = 0,
    device: str = "cpu",
    progress: bool = True,
) -> FineTuningResult:
    """Fine-tune a pre-trained kgplm model on ``task`` and score the best-on-dev epoch on dev and test.

    Args:
        model: a ``kgplm.train`` output directory (or its ``model/``); knowledge-enhanced models
            reuse that run's graph, linker and PEPR table so their knowledge module stays active.
        task: a name from :func:`kgplm.evaluation.task_names` (``"cmedqaner"``, ``"cmedqq"`` …).
        data_dir: a tasks root laid out like ``../shared/data/tasks`` or the task's own directory.
        epochs, batch_size, learning_rate, warmup_ratio, weight_decay: AdamW with linear decay;
            ``patience``: epochs without dev improvement before stopping.
        max_length: tokens per window (``None``: as many as the model has positions, at most 512);
            longer NER documents are read in overlapping windows, see
            :class:`kgplm.training.finetuning.TaskEncoder`.
        tagging: ``"bio"`` or ``"bioes"`` for NER tasks.
        max_train_examples, max_eval_examples: seeded subsets for quick runs (``None``: all).

    Writes ``output_dir/model`` (the best epoch), ``tokenizer/``, ``finetune_config.json`` (the
    arguments, which replay the run) and ``results.json`` (history, dev and test scores, the splits
    that were derived rather than read from an official file, what the encoding counted per split).
    A test split without labels (the CBLUE test files) is not scored: ``test`` is ``None``.
    """
    arguments = _json_safe({name: value for name, value in locals().items()})
    from kgplm.evaluation.tasks import get_task, load_task_splits
    from kgplm.models import KgplmConfig, KgplmForFineTuning
    from kgplm.text.tokenization import load_tokenizer, save_tokenizer
    from kgplm.training.finetuning import (
        FineTuneSettings,
        TaskEncoder,
        finetune_loop,
        label_names_for,
        predict,
        score,
    )

    spec = get_task(task)
    model_dir, tokenizer_dir, run_dir = _pretrained_parts(model)
    output_dir = Path(output_dir)
    arguments["model"] = str(Path(model).resolve())
    loaded = load_task_splits(spec.name, data_dir)
    splits = loaded.splits
    train_examples = _subset(splits["train"], max_train_examples, seed)
    dev_examples = _subset(splits["dev"], max_eval_examples, seed)
    test_examples = _subset(splits["test"], max_eval_examples, seed)
    tokenizer = load_tokenizer(tokenizer_dir)
    config = KgplmConfig.from_pretrained(str(model_dir))
    if max_length is None:
        max_length = arguments["max_length"] = min(config.max_position_embeddings, 512)
    if max_length > config.max_position_embeddings:
        raise ConfigurationError(f"max_length {max_length} exceeds the model's {config.max_position_embeddings} "
                                 f"positions")
    label_names = label_names_for(spec, train_examples, tagging)
    config.task_kind, config.task_name, config.label_names, config.tagging = spec.kind, spec.name, label_names, tagging
    config.num_labels = max(len(label_names or ()), 1)
    knowledge = _knowledge_lookup(run_dir, progress) if config.method == "smedbert" else None
    encoder = TaskEncoder(spec, tokenizer, label_names=label_names, max_length=max_length, tagging=tagging,
                          knowledge=knowledge)
    import torch

    torch.manual_seed(seed)  # the head's initial weights
    network = KgplmForFineTuning.from_pretrained(str(model_dir), config=config)
    train_features = encoder.encode(train_examples)
    encoding = {"train": dict(encoder.last_statistics)}
    dev_features = encoder.encode(dev_examples)
    encoding["dev"] = dict(encoder.last_statistics)
    settings = FineTuneSettings(epochs=epochs, batch_size=batch_size, learning_rate=learning_rate,
                                warmup_ratio=warmup_ratio, weight_decay=weight_decay, patience=patience, seed=seed)
    history, dev_scores = finetune_loop(network, encoder, train_features, dev_examples, dev_features, settings,
                                        device=device, progress=progress)
    test_scores = None
    if "test" not in loaded.unlabelled:
        test_features = encoder.encode(test_examples)
        encoding["test"] = dict(encoder.last_statistics)
        test_scores = score(encoder, test_examples, test_features,
                            predict(network, encoder, test_features, batch_size=2 * batch_size, device=device))
    logger.info("%s: dev %s %.4f, test %s", spec.name, spec.metric, dev_scores["main"],
                "unlabelled" if test_scores is None else f"{test_scores['main']:.4f}")
    output_dir.mkdir(parents=True, exist_ok=True)
    with atomic_directory(output_dir / "model") as temporary:
        network.save_pretrained(str(temporary))
    with atomic_directory(output_dir / "tokenizer") as temporary:
        save_tokenizer(tokenizer, temporary)
    finetune_config = {"kgplm_finetune": 1, **arguments}
    results = {"task": spec.name, "metric": spec.metric, "dev": dev_scores, "test": test_scores, "history": history,
               "examples": {"train": len(train_examples), "dev": len(dev_examples), "test": len(test_examples)},
               "derived_splits": list(loaded.derived), "unlabelled_splits": list(loaded.unlabelled),
               "encoding": encoding}
    for name, content in (("finetune_config.json", finetune_config), ("results.json", results)):
        with atomic_file(output_dir / name, "w", encoding="utf-8") as handle:
            json.dump(content, handle, indent=1, ensure_ascii=False)
    return FineTuningResult(output_dir=output_dir, task=spec.name, dev=dev_scores, test=test_scores, history=history,
                            config=finetune_config)


def evaluate(
    *,
    model: str | os.PathLike,
    task: str | None = None,
    data_dir: str | os.PathLike,
    split: str = "test",
    batch_size: int = 64,
    max_examples: int | None = None,
    seed: int = 0,
    device: str = "cpu",
    progress: bool = True,
) -> dict[str, float]:
    """Score a fine-tuned model (a ``kgplm.finetune`` output) on one split; ``task`` defaults to its own."""
    from kgplm.evaluation.tasks import get_task, load_task
    from kgplm.models import load_pretrained
    from kgplm.text.tokenization import load_tokenizer
    from kgplm.training.finetuning import TaskEncoder, predict, score

    model_dir, tokenizer_dir, run_dir = _pretrained_parts(model)
    network = load_pretrained(str(model_dir))
    config = network.config
    if config.task_kind is None:
        raise ConfigurationError(f"{model_dir} is a pre-trained model without a task head; run kgplm.finetune first")
    spec = get_task(task or config.task_name)
    if spec.kind != config.task_kind:
        raise ConfigurationError(f"the model was fine-tuned for a {config.task_kind} task ({config.task_name}); "
                                 f"{spec.name} is a {spec.kind} task")
    examples = _subset(load_task(spec.name, data_dir, split), max_examples, seed)
    knowledge = _knowledge_lookup(run_dir, progress) if config.method == "smedbert" else None
    max_length = None
    if run_dir is not None and (run_dir / "finetune_config.json").is_file():  # the length it was fine-tuned with
        max_length = json.loads((run_dir / "finetune_config.json").read_text(encoding="utf-8"))["max_length"]
    max_length = max_length or min(config.max_position_embeddings, 512)
    encoder = TaskEncoder(spec, load_tokenizer(tokenizer_dir), label_names=config.label_names, max_length=max_length,
                          tagging=config.tagging, knowledge=knowledge)
    features = encoder.encode(examples)
    network.to(device)
    return score(encoder, examples, features, predict(network, encoder, features, batch_size=batch_size,
                                                      device=device, progress=progress))
