"""One-call pre-training, fine-tuning and evaluation: ``kgplm.train``, ``train_from_config``, ``finetune``, ``evaluate``.

``train`` runs the chain — graph, tokenizer, the KG-side artefacts the method's registry record asks
for (:mod:`kgplm.training.stages`), the linked corpus, the model, the training loop — reusing every
stage whose artefact is already in ``output_dir`` (laid out as :class:`~kgplm.training.run.RunDirectory`
describes). Nothing here names a method: everything method-specific comes from
:func:`kgplm.methods.get`.
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
from kgplm.exceptions import ConfigurationError

__all__ = ["train", "train_from_config", "TrainingResult", "finetune", "evaluate", "predict", "FineTuningResult"]

logger = logging.getLogger(__name__)


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
        """The logged values of one loss or metric (``loss``, ``mlm``, ``sop_accuracy`` …)."""
        return [record[name] for record in self.metrics if name in record]

    def load_model(self):
        from kgplm.models import load_pretrained

        return load_pretrained(self.model_dir)

    def load_tokenizer(self):
        from kgplm.text.tokenization import load_tokenizer

        return load_tokenizer(self.tokenizer_dir)

    def __repr__(self) -> str:
        last = self.metrics[-1].get("loss", float("nan")) if self.metrics else float("nan")
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
    method: str,
    *,
    graph,
    corpus: str | os.PathLike,
    output_dir: str | os.PathLike,
    text_model: str | os.PathLike | dict | None = None,
    tokenizer: str | os.PathLike | None = None,
    kg_embeddings: str | os.PathLike | None = None,
    neighbor_table: str | os.PathLike | None = None,
    graph_shuffle_seed: int | None = None,
    corpus_options: dict | None = None,
    vocab_size: int = 8000,
    max_length: int = 128,
    num_neighbors: int = 10,
    pepr_mode: str = "auto",
    pepr_budget_seconds: float = 120.0,
    kg_method: str | None = None,
    entity_dim: int = 100,
    kg_epochs: int = 5,
    model_options: dict | None = None,
    method_data: dict | None = None,
    exclude_triples: str | os.PathLike | None = None,
    masking: str | None = None,
    max_steps: int = 1000,
    batch_size: int = 16,
    gradient_accumulation_steps: int = 1,
    learning_rate: float = 5e-4,
    warmup_steps: int | None = None,
    weight_decay: float = 0.01,
    checkpoint_every: int = 200,
    log_every: int = 10,
    seed: int = 0,
    device: str = "cpu",
    mixed_precision: str = "no",
    num_workers: int = 0,
    progress: bool = True,
) -> TrainingResult:
    """Pre-train ``method`` (a name from :func:`kgplm.methods.available`) on ``corpus`` with ``graph``.

    Args:
        graph: a :class:`~kgplm.KGStore` or anything :func:`kgplm.kg.open_store` accepts
            (``"cmekg"``, a saved store, an RDF/OBO/TSV file, a UMLS directory).
        corpus: a corpus file (text lines, CSV, JSON lines); ``corpus_options`` go to
            :func:`kgplm.text.read_corpus` (e.g. ``{"columns": ["ask", "answer"]}``).
        text_model: ``None`` (a small CPU encoder, :data:`kgplm.models.CPU_TEXT_ENCODER`), a local
            directory holding a BERT checkpoint (``config.json`` + weights — every weight it has is
            loaded, the MLM head and an NSP head (as SOP's) included — and its tokenizer unless
            ``tokenizer`` is given) or a dict of BERT config fields.
        tokenizer: a tokenizer directory or ``vocab.txt``; default: the text model's, else a
            WordPiece vocabulary of ``vocab_size`` trained on the corpus.
        kg_embeddings, neighbor_table: cached artefacts (a :class:`KGEmbeddings` directory, a PEPR
            ``.npz``); by default computed when the method needs them: PEPR top-``num_neighbors``
            of every mentioned entity (``pepr_mode``: ``"auto"`` computes it exactly when exact mode's
            cost, modelled from the graph, the number of mentioned entities and the settings (never
            timed: :func:`kgplm.kg.pepr.exact_cost`), fits ``pepr_budget_seconds``, and in fast mode
            otherwise, so the same call builds the same table on any machine; the mode used and why
            are recorded in ``run_config.json`` under ``stages.pepr_mode_used`` and
            ``stages.pepr_mode_reason``),
            ``kg_method`` embeddings (default: the
            method's; TransR starts from TransE) of size ``entity_dim`` for ``kg_epochs``.
        graph_shuffle_seed: a control for the knowledge's contribution: the PEPR table and the KG
            embeddings are built on
            :meth:`KGStore.with_shuffled_links(seed) <kgplm.KGStore.with_shuffled_links>`, the same
            graph with its links attached to the wrong entities (text still links to the same ids).
            Recorded in ``run_config.json`` (and under ``stages.graph_shuffle``); cannot be combined
            with a given ``kg_embeddings``, ``neighbor_table`` or ``exclude_triples``.
        model_options: the method's own config fields (``kgplm.methods.get(method).config_class.option_names()``:
            ablations, loss weights, ``use_sop`` …).
        method_data: inputs of the method's own stages that are not model fields (files such as a
            product-attribute table); JSON-safe, recorded in ``run_config.json``. Each method's
            docstring says which keys it reads.
        exclude_triples: a file of triples kept out of pre-training (a probe file's
            ``exclude_from_training`` list, or a TSV of labelled triples): the sentences stating them
            leave the corpus, the KG embeddings and PEPR table are built without them
            (:mod:`kgplm.training.heldout`).
        masking: the MLM masking scheme (default: the method's, e.g. ``whole_entity`` for SMedBERT).
        batch_size: examples per optimiser step, split into ``gradient_accumulation_steps``
            micro-batches (the loss is the mean over the whole batch either way).
        max_steps, learning_rate, warmup_steps (default 6% of the steps), weight_decay,
        checkpoint_every, log_every, seed, device: the loop's (:class:`kgplm.training.TrainerSettings`).
        mixed_precision: ``"no"``, ``"bf16"`` or ``"fp16"`` (autocast; fp16 with a gradient scaler).
        num_workers: DataLoader processes that collate batches ahead of the loop (0: in this process);
            it does not change the batches, so a run may resume with another value.

    Under ``torchrun --nproc_per_node N`` (``WORLD_SIZE`` > 1) the run is data-parallel
    (:mod:`kgplm.training.distributed`): ``batch_size`` is the global batch, split over the
    processes; ``device="cuda"`` is each process's own GPU; rank 0 builds the artefacts while the
    others wait, and only rank 0 writes. ``run_config.json`` records the launch under
    ``stages.distributed`` (``world_size``, ``backend``), which is not a setting: a run may resume
    with another number of processes.

    Returns a :class:`TrainingResult`. Rerunning the same call resumes; a different call into
    the same ``output_dir`` raises :class:`~kgplm.exceptions.ArtifactError`.
    """
    arguments = {name: value for name, value in locals().items()}
    from kgplm.methods import MethodContext, get
    from kgplm.models.card import write_model_card
    from kgplm.text.masking import SCHEMES
    from kgplm.training import distributed, stages
    from kgplm.training.run import RunDirectory
    from kgplm.training.trainer import TrainerSettings, train_loop

    spec = get(method)
    masking = masking or spec.default_masking
    if masking not in SCHEMES:
        raise ConfigurationError(f"masking must be one of {SCHEMES}, got {masking!r}")
    if kg_method is None:
        kg_method = spec.kg_embedding or "transe"
    arguments.update(kg_method=kg_method, masking=masking)  # what was used, so a replay does not depend on defaults
    if warmup_steps is None:
        warmup_steps = int(0.06 * max_steps)
    settings = TrainerSettings(max_steps=max_steps, batch_size=batch_size,
                               gradient_accumulation_steps=gradient_accumulation_steps,
                               learning_rate=learning_rate, warmup_steps=warmup_steps, weight_decay=weight_decay,
                               checkpoint_every=checkpoint_every, log_every=log_every, seed=seed,
                               mixed_precision=mixed_precision, num_workers=num_workers)
    settings.validate()
    if graph_shuffle_seed is not None and (kg_embeddings, neighbor_table, exclude_triples) != (None, None, None):
        raise ConfigurationError(f"graph_shuffle_seed={graph_shuffle_seed} rebuilds the KG artefacts on the shuffled "
                                 f"graph; a given kg_embeddings or neighbor_table would bypass it, and exclude_triples "
                                 f"names facts of the real graph (leave all three None)")
    context = distributed.initialize(device)
    try:
        settings.validate(context.world_size)
        main = context.is_main
        run = RunDirectory(output_dir)
        # rank 0 builds every cached artefact; the other ranks wait, then load them
        with context.main_first("preparing the run's artefacts"):
            if main:
                run.path.mkdir(parents=True, exist_ok=True)
            store, arguments["graph"] = stages.prepare_store(run, graph, progress and main)
            if main:
                run.write_run_config(_json_safe({"kgplm_run": 1, **arguments}))
                run.record_stage("distributed", context.describe())
            if graph_shuffle_seed is not None:  # the saved store stays the real one: fine-tuning links with it
                store = store.with_shuffled_links(graph_shuffle_seed)
                if main:
                    run.record_stage("graph_shuffle", {"seed": int(graph_shuffle_seed),
                                                       "what": "entity ids permuted in every triple (a derangement) "
                                                               "before PEPR and KG embeddings"})
            inputs = stages.StageInputs(arguments=arguments, store=store, corpus=corpus,
                                        corpus_options=dict(corpus_options or {}), progress=progress and main,
                                        held_out=_held_out(run, exclude_triples, store, record=main))
            tokenizer_object = stages.prepare_tokenizer(run, inputs)
            stages.run_artefact_stages(spec.artefacts, run, inputs)
            dataset = stages.prepare_corpus(run, inputs, tokenizer_object, masking=masking)
        import torch

        torch.manual_seed(seed)  # the model's initial weights
        model, checkpoint = stages.build_model(spec, store, tokenizer_object, text_model=text_model,
                                               model_options=dict(model_options or {}), max_length=max_length,
                                               entity_dim=entity_dim, artefacts=inputs.artefacts)
        if main:
            stages.record_model_length(run, tokenizer_object, model.config.max_position_embeddings)
        method_context = MethodContext(config=model.config, tokenizer=tokenizer_object, store=store, masking=masking,
                                       seed=seed, text_model_dir=checkpoint, artefacts=inputs.artefacts)
        if spec.prepare_model is not None:
            spec.prepare_model(model, method_context)
        collator = spec.build_collator(method_context)
        metrics = train_loop(model, dataset, collator, output_dir=run.path, settings=settings, progress=progress,
                             distributed=context)
        if main:
            with atomic_directory(run.model_dir) as temporary:
                model.save_pretrained(str(temporary))
                write_model_card(temporary, model.config, arguments=run.read_run_config(), metrics=metrics)
            logger.info("saved the model to %s", run.model_dir)
        context.barrier()
        return TrainingResult(output_dir=run.path, method=method, steps=max_steps, metrics=metrics,
                              run_config=run.read_run_config())
    finally:
        context.close()


def _held_out(run, exclude_triples, store, *, record: bool = True):
    """The held-out triples of a run; a rerun must name the same triples as the run it resumes.
    ``record``: write their digest into the run config (rank 0 only under torchrun)."""
    import hashlib

    from kgplm.exceptions import ArtifactError
    from kgplm.training.heldout import HeldOutTriples

    if exclude_triples is None:
        return None
    held_out = HeldOutTriples.load(exclude_triples, store)
    digest = hashlib.sha256(held_out.triples.tobytes()).hexdigest()
    recorded = run.read_run_config().get("stages", {}).get("held_out_triples")
    if recorded is not None and recorded["sha256"] != digest:
        raise ArtifactError(f"{run.path} was built with other held-out triples than {exclude_triples} lists now; "
                            f"choose another output_dir or delete it")
    if record:
        run.record_stage("held_out_triples", {"count": len(held_out), "sha256": digest})
    return held_out


def train_from_config(path: str | os.PathLike, **overrides) -> TrainingResult:
    """Replay (or resume) the run a ``run_config.json`` (or its directory) describes; ``overrides`` change arguments."""
    path = Path(path)
    config = _read_config_file(path / "run_config.json" if path.is_dir() else path)
    for key in ("kgplm_run", "stages"):
        config.pop(key, None)
    config.update(overrides)
    method = config.pop("method")
    return train(method, **config)


def _read_config_file(path: Path) -> dict[str, Any]:
    from kgplm.exceptions import ArtifactError, MissingFileError

    if not path.is_file():
        raise MissingFileError(path, "run configuration (run_config.json)")
    config = json.loads(path.read_text(encoding="utf-8"))
    if config.get("kgplm_run") != 1:
        raise ArtifactError(f"{path} is not a kgplm run configuration")
    return config


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


def _encoder_inputs(method: str, run, progress: bool, wanted: bool = True):
    """The provider of the extra encoder inputs a method reads at fine-tuning (``None`` for none, or when
    not ``wanted``: the encoder then runs on the text alone)."""
    from kgplm.exceptions import MissingFileError
    from kgplm.methods import get

    spec = get(method)
    if spec.finetuning_inputs is None or not wanted:
        return None
    if run is None:
        raise MissingFileError("<model>", f"pre-training run next to the model: a {method!r} encoder reads inputs "
                                          f"built from its pre-training run's artefacts")
    return spec.finetuning_inputs(run, progress)


def _span_inputs(method: str, run, knowledge, progress: bool):
    """The span-indicator inputs (:mod:`kgplm.training.span_indicator`) of a pre-training run."""
    from kgplm.exceptions import MissingFileError
    from kgplm.training.span_indicator import span_lookup

    if knowledge is not None:
        raise ConfigurationError(f"mention_spans=True: a {method!r} encoder already reads the linked mentions; "
                                 f"pass encoder_inputs=False to give it the span indicator instead")
    if run is None:
        raise MissingFileError("<model>", "pre-training run next to the model: mention_spans links the task text "
                                          "with the run's graph")
    return span_lookup(run, progress)


#: The seed of dev and test subsets (``max_eval_examples``): fixed, so that every training seed and every
#: model is scored on the same examples (``evaluate``'s default ``seed`` draws the same subset).
EVALUATION_SUBSET_SEED = 0


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
    learning_rate: float | None = None,
    warmup_ratio: float = 0.1,
    weight_decay: float = 0.01,
    patience: int = 2,
    max_length: int | None = None,
    tagging: str = "bio",
    max_train_examples: int | None = None,
    max_eval_examples: int | None = None,
    seed: int = 0,
    encoder_inputs: bool = True,
    mention_spans: bool = False,
    device: str = "cpu",
    mixed_precision: str = "no",
    progress: bool = True,
) -> FineTuningResult:
    """Fine-tune a pre-trained kgplm model on ``task`` and score the best-on-dev epoch on dev and test.

    Args:
        model: a ``kgplm.train`` output directory (or its ``model/``); a method whose encoder reads
            more than text (SMedBERT) rebuilds those inputs from that run's artefacts.
        task: a name from :func:`kgplm.evaluation.task_names` (``"cmedqaner"``, ``"cmedqq"`` …).
        data_dir: a tasks root laid out like ``../shared/data/tasks`` or the task's own directory.
        epochs, batch_size, learning_rate, warmup_ratio, weight_decay: AdamW with linear decay;
            ``patience``: epochs without dev improvement before stopping. ``learning_rate=None``
            picks one by the encoder's size (:func:`kgplm.training.finetuning.default_learning_rate`:
            5e-5 for BERT-base and larger, more for the small encoders ``kgplm.train`` builds by
            default); the rate used is logged and saved in ``finetune_config.json``.
        max_length: tokens per window (``None``: as many as the model has positions, at most 512);
            longer NER documents are read in overlapping windows, see
            :class:`kgplm.training.finetuning.TaskEncoder`.
        tagging: ``"bio"`` or ``"bioes"`` for NER tasks.
        max_train_examples, max_eval_examples: subsets for quick runs (``None``: all); the training
            subset follows ``seed``, the dev and test subsets do not (:data:`EVALUATION_SUBSET_SEED`),
            so runs with different seeds are scored on the same examples.
        encoder_inputs: ``False`` fine-tunes a method whose encoder reads extra inputs (SMedBERT's
            linked mentions and neighbours) on the text alone — the "no knowledge at fine-tuning"
            ablation; ``evaluate`` then does the same.
        mention_spans: give the encoder the linked mention spans SMedBERT receives (the linker of the
            pre-training run's graph), as a learned "inside a mention" vector added to the token
            embeddings (:class:`~kgplm.models.finetuning.MentionSpanIndicator`; saved in the model's
            config, so ``evaluate`` feeds it too): the "control + the same mention spans" row. Not
            with a method that already reads the mentions (SMedBERT) unless ``encoder_inputs=False``.
        mixed_precision: ``"no"``, ``"bf16"`` or ``"fp16"`` (training and scoring under autocast).

    Under ``torchrun`` each batch is split over the processes (DDP; the loss stays the mean over
    the whole batch); rank 0 scores dev and test and writes the outputs.

    Writes ``output_dir/model`` (the best epoch), ``tokenizer/``, ``finetune_config.json`` (the
    arguments, which replay the run) and ``results.json`` (history, dev and test scores, the splits
    that were derived rather than read from an official file, what the encoding counted per split).
    A test split without labels (the CBLUE test files) is not scored: ``test`` is ``None``.
    """
    arguments = _json_safe({name: value for name, value in locals().items()})
    from kgplm.evaluation.tasks import get_task, load_task_splits
    from kgplm.models import KgplmConfig, KgplmForFineTuning
    from kgplm.models.card import write_model_card
    from kgplm.text.tokenization import load_tokenizer, save_tokenizer
    from kgplm.training.finetuning import (
        FineTuneSettings,
        TaskEncoder,
        default_learning_rate,
        finetune_loop,
        label_names_for,
        predict,
        score,
    )
    from kgplm.training import distributed
    from kgplm.training.precision import autocast
    from kgplm.training.run import locate_model

    spec = get_task(task)
    model_dir, tokenizer_dir, run = locate_model(model)
    output_dir = Path(output_dir)
    arguments["model"] = str(Path(model).resolve())
    config = KgplmConfig.from_pretrained(str(model_dir))
    if learning_rate is None:
        learning_rate = default_learning_rate(config.hidden_size)
        logger.info("fine-tuning learning rate %g (chosen by the encoder's size; pass learning_rate to override)",
                    learning_rate)
    arguments["learning_rate"] = learning_rate
    settings = FineTuneSettings(epochs=epochs, batch_size=batch_size, learning_rate=learning_rate,
                                warmup_ratio=warmup_ratio, weight_decay=weight_decay, patience=patience, seed=seed,
                                mixed_precision=mixed_precision)
    settings.validate()
    context = distributed.initialize(device)
    try:
        main = context.is_main
        loaded = load_task_splits(spec.name, data_dir)
        splits = loaded.splits
        train_examples = _subset(splits["train"], max_train_examples, seed)
        dev_examples = _subset(splits["dev"], max_eval_examples, EVALUATION_SUBSET_SEED)
        test_examples = _subset(splits["test"], max_eval_examples, EVALUATION_SUBSET_SEED)
        tokenizer = load_tokenizer(tokenizer_dir)
        if max_length is None:
            max_length = arguments["max_length"] = min(config.max_position_embeddings, 512)
        if max_length > config.max_position_embeddings:
            raise ConfigurationError(f"max_length {max_length} exceeds the model's {config.max_position_embeddings} "
                                     f"positions")
        label_names = label_names_for(spec, train_examples, tagging)
        config.set_task(spec.kind, spec.name, label_names, tagging)
        config.mention_span_indicator = mention_spans
        knowledge = _encoder_inputs(config.method, run, progress and main, encoder_inputs)
        if mention_spans:
            knowledge = _span_inputs(config.method, run, knowledge, progress and main)
        encoder = TaskEncoder(spec, tokenizer, label_names=label_names, max_length=max_length, tagging=tagging,
                              knowledge=knowledge)
        import torch

        torch.manual_seed(seed)  # the head's initial weights
        network = KgplmForFineTuning.from_pretrained(str(model_dir), config=config)
        train_features = encoder.encode(train_examples)
        encoding = {"train": dict(encoder.last_statistics)}
        dev_features = encoder.encode(dev_examples)
        encoding["dev"] = dict(encoder.last_statistics)
        history, dev_scores = finetune_loop(network, encoder, train_features, dev_examples, dev_features, settings,
                                            progress=progress, distributed=context)
        test_scores = None
        if main and "test" not in loaded.unlabelled:
            test_features = encoder.encode(test_examples)
            encoding["test"] = dict(encoder.last_statistics)
            with autocast(context.device, mixed_precision):
                outputs = predict(network, encoder, test_features, batch_size=2 * batch_size, device=context.device)
            test_scores = score(encoder, test_examples, test_features, outputs)
        if main:
            logger.info("%s: dev %s %.4f, test %s", spec.name, spec.metric, dev_scores["main"],
                        "unlabelled" if test_scores is None else f"{test_scores['main']:.4f}")
        test_scores = context.broadcast(test_scores)
        finetune_config = {"kgplm_finetune": 1, **arguments}
        if main:
            output_dir.mkdir(parents=True, exist_ok=True)
            results = {"task": spec.name, "metric": spec.metric, "dev": dev_scores, "test": test_scores,
                       "history": history, "examples": {"train": len(train_examples), "dev": len(dev_examples),
                                                        "test": len(test_examples)},
                       "example_ids": {"dev": [e.id for e in dev_examples], "test": [e.id for e in test_examples]},
                       "derived_splits": list(loaded.derived), "unlabelled_splits": list(loaded.unlabelled),
                       "encoding": encoding}
            with atomic_directory(output_dir / "model") as temporary:
                network.save_pretrained(str(temporary))
                write_model_card(temporary, network.config, arguments=finetune_config, results=results)
            tokenizer.model_max_length = config.max_position_embeddings  # what the model can read
            with atomic_directory(output_dir / "tokenizer") as temporary:
                save_tokenizer(tokenizer, temporary)
            for name, content in (("finetune_config.json", finetune_config), ("results.json", results)):
                with atomic_file(output_dir / name, "w", encoding="utf-8") as handle:
                    json.dump(content, handle, indent=1, ensure_ascii=False)
        context.barrier()
        return FineTuningResult(output_dir=output_dir, task=spec.name, dev=dev_scores, test=test_scores,
                                history=history, config=finetune_config)
    finally:
        context.close()


def _run_fine_tuned(model, task, data_dir, split, batch_size, max_examples, seed, encoder_inputs, device, progress):
    """Load a fine-tuned model and its task's split; run it. Returns (encoder, examples, features, outputs).

    ``max_examples`` draws a subset with ``seed`` (by default the subset ``finetune`` scored);
    ``encoder_inputs`` (default: as the model was fine-tuned) feeds the method's extra encoder inputs.
    """
    from kgplm.evaluation.tasks import get_task, load_task
    from kgplm.models import load_pretrained
    from kgplm.text.tokenization import load_tokenizer
    from kgplm.training.finetuning import TaskEncoder, predict
    from kgplm.training.run import locate_model

    model_dir, tokenizer_dir, run = locate_model(model)
    network = load_pretrained(str(model_dir))
    config = network.config
    if config.task_kind is None:
        raise ConfigurationError(f"{model_dir} is a pre-trained model without a task head; run kgplm.finetune first")
    spec = get_task(task or config.task_name)
    if spec.kind != config.task_kind:
        raise ConfigurationError(f"the model was fine-tuned for a {config.task_kind} task ({config.task_name}); "
                                 f"{spec.name} is a {spec.kind} task")
    examples = _subset(load_task(spec.name, data_dir, split), max_examples, seed)
    max_length = None
    finetune_config = model_dir.parent / "finetune_config.json"
    if finetune_config.is_file():  # the length (and encoder inputs) it was fine-tuned with
        recorded = json.loads(finetune_config.read_text(encoding="utf-8"))
        max_length = recorded["max_length"]
        encoder_inputs = recorded.get("encoder_inputs", True) if encoder_inputs is None else encoder_inputs
    max_length = max_length or min(config.max_position_embeddings, 512)
    knowledge = _encoder_inputs(config.method, run, progress, encoder_inputs is not False)
    if getattr(config, "mention_span_indicator", False):
        knowledge = _span_inputs(config.method, run, knowledge, progress)
    encoder = TaskEncoder(spec, load_tokenizer(tokenizer_dir), label_names=config.label_names, max_length=max_length,
                          tagging=config.tagging, knowledge=knowledge)
    features = encoder.encode(examples)
    network.to(device)
    outputs = predict(network, encoder, features, batch_size=batch_size, device=device, progress=progress)
    return encoder, examples, features, outputs


def evaluate(
    *,
    model: str | os.PathLike,
    task: str | None = None,
    data_dir: str | os.PathLike,
    split: str = "test",
    batch_size: int = 64,
    max_examples: int | None = None,
    seed: int = EVALUATION_SUBSET_SEED,
    encoder_inputs: bool | None = None,
    device: str = "cpu",
    progress: bool = True,
) -> dict[str, float]:
    """Score a fine-tuned model (a ``kgplm.finetune`` output) on one split; ``task`` defaults to its own.

    ``max_examples`` draws a subset with ``seed`` (by default the subset ``finetune`` scored);
    ``encoder_inputs`` (default: as the model was fine-tuned) feeds the method's extra encoder inputs.
    ``task="probe"``: the KG cloze probe of a pre-trained model (a ``kgplm.train`` output);
    ``data_dir`` is then the probe file (:func:`kgplm.evaluation.probing.probe_model`).
    """
    from kgplm.evaluation.probing import PROBE_TASK
    from kgplm.training.finetuning import score

    if task == PROBE_TASK:
        from kgplm.evaluation.probing import probe_model

        return probe_model(model, data_dir, batch_size=batch_size, device=device, progress=progress)
    return score(*_run_fine_tuned(model, task, data_dir, split, batch_size, max_examples, seed, encoder_inputs,
                                  device, progress))


def predict(
    *,
    model: str | os.PathLike,
    data_dir: str | os.PathLike,
    output: str | os.PathLike,
    task: str | None = None,
    split: str = "test",
    format: str = "jsonl",
    batch_size: int = 64,
    max_examples: int | None = None,
    seed: int = EVALUATION_SUBSET_SEED,
    encoder_inputs: bool | None = None,
    device: str = "cpu",
    progress: bool = True,
) -> Path:
    """Write a fine-tuned model's predictions on one split (:mod:`kgplm.evaluation.predictions`).

    ``format="jsonl"``: one JSON line per example in the file ``output`` — the text, the gold
    annotation where the split has labels, the prediction (NER spans with character offsets,
    ``text[start:end] == mention``; labels; triples; candidate scores). ``format="cblue"``: the CBLUE
    submission file of the task (CMeEE, CMeIE, CHIP-STS, KUAKE-QIC) in the directory ``output``, so
    the hidden-label CBLUE test sets can be scored. Returns the file written.
    """
    from kgplm.evaluation.predictions import PREDICTION_FORMATS, example_predictions, write_predictions

    if format not in PREDICTION_FORMATS:
        raise ConfigurationError(f"format must be one of {PREDICTION_FORMATS}, got {format!r}")
    encoder, examples, features, outputs = _run_fine_tuned(model, task, data_dir, split, batch_size, max_examples,
                                                          seed, encoder_inputs, device, progress)
    records = example_predictions(encoder, examples, features, outputs)
    written = write_predictions(records, output, task=encoder.spec.name, format=format)
    logger.info("wrote %d %s predictions to %s", len(records), encoder.spec.name, written)
    return written
