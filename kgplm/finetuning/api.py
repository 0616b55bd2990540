"""Fine-tuning, evaluation and prediction: ``kgplm.finetune``, ``kgplm.evaluate``, ``kgplm.predict``.

Split out of :mod:`kgplm.api` (which re-exports every name here); the pre-training side,
``kgplm.train``, stays there.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from kgplm._io import atomic_directory, atomic_file, json_safe
from kgplm._deprecation import DEFAULT_REMOVAL, DEFAULT_SINCE
from kgplm.arguments import (
    EVALUATION_SUBSET_SEED,
    EvaluationArguments,
    FineTuningArguments,
    PredictionArguments,
    resolve,
    signature,
)
from kgplm.exceptions import ConfigurationError, MissingFileError

__all__ = [
    "finetune",
    "evaluate",
    "predict",
    "FineTuningResult",
    "EvaluationResult",
    "PredictionResult",
    "EVALUATION_SUBSET_SEED",
]

logger = logging.getLogger(__name__)


@dataclass
class FineTuningResult:
    """What ``kgplm.finetune`` produced: the best-on-dev model and its dev and test scores."""

    output_dir: Path
    task: str
    dev: dict[str, float]
    test: dict[str, float] | None
    history: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    #: what looks wrong with the run, e.g. constant predictions (:mod:`kgplm.evaluation.degenerate`)
    warnings: list[str] = field(default_factory=list)

    @property
    def model_dir(self) -> Path:
        return self.output_dir / "model"

    def plot(self, path: str | os.PathLike | None = None) -> Path:
        """Draw the training loss and dev scores per epoch to a PNG (default ``output_dir/curves.png``)."""
        from kgplm.training.reporting import plot_run

        return plot_run(self.output_dir, path)

    def load_model(self):
        from kgplm.models import load_pretrained

        return load_pretrained(self.model_dir)

    def __repr__(self) -> str:
        test = f", test {self.test['main']:.4f}" if self.test else ""
        warning = f"; WARNING: {'; '.join(self.warnings)}" if self.warnings else ""
        return f"FineTuningResult(task={self.task!r}, dev {self.dev['main']:.4f}{test}, {self.output_dir}{warning})"


def _subset(examples: list, limit: int | None, seed: int) -> list:
    if limit is None or len(examples) <= limit:
        return examples
    order = np.sort(np.random.default_rng(seed).permutation(len(examples))[:limit])
    return [examples[i] for i in order]


def finetune(*, args: FineTuningArguments | None = None, **kwargs: Any) -> FineTuningResult:
    """Fine-tune a pre-trained kgplm model on a task and score the best-on-dev epoch on dev and test.

    The arguments are the fields of :class:`~kgplm.arguments.FineTuningArguments`, given as keywords
    (``model=``, ``task=``, ``data_dir=``, ``output_dir=`` …), as ``args=``, or both (the keywords replace
    fields of ``args``).

    A model whose dev predictions are constant (no entity at all for NER, one class for all examples)
    learned nothing: the log and ``FineTuningResult.warnings`` (and ``results.json``) say so and
    suggest another learning rate or more epochs.

    Under ``torchrun`` each batch is split over the processes (DDP; the loss stays the mean over
    the whole batch); rank 0 scores dev and test and writes the outputs.

    Preemption: on ``SIGTERM`` or ``SIGUSR1`` (:data:`kgplm.training.interrupts.DEFAULT_STOP_SIGNALS`)
    fine-tuning finishes its optimiser step, writes a checkpoint to ``output_dir/checkpoints`` and raises
    :class:`~kgplm.exceptions.PreemptedError` (``kgplm finetune`` exits with status 75); the same call run
    again resumes from it and ends with the results of an uninterrupted run
    (:mod:`kgplm.finetuning.checkpoints`). A call with other arguments refuses that checkpoint.

    Writes ``output_dir/model`` (the best epoch), ``tokenizer/``, ``finetune_config.json`` (the
    arguments, which replay the run) and ``results.json`` (history, dev and test scores, the splits
    that were derived rather than read from an official file, what the encoding counted per split).
    A test split without labels (the CBLUE test files) is not scored: ``test`` is ``None``.
    """
    arguments = resolve(FineTuningArguments, args, kwargs, function="kgplm.finetune")
    return _finetune(**{item.name: getattr(arguments, item.name) for item in fields(arguments)})


finetune.__signature__ = signature(FineTuningArguments, returns="FineTuningResult")


def _finetune(
    *,
    model,
    task,
    data_dir,
    output_dir,
    epochs,
    batch_size,
    learning_rate,
    warmup_ratio,
    weight_decay,
    patience,
    max_length,
    tagging,
    max_train_examples,
    max_eval_examples,
    seed,
    encoder_inputs,
    mention_spans,
    kg_embeddings,
    device,
    mixed_precision,
    report_to,
    progress,
    stop_signals,
) -> FineTuningResult:
    """The body of :func:`finetune` over resolved arguments (in the order of
    :class:`~kgplm.arguments.FineTuningArguments`, which ``finetune_config.json`` keeps)."""
    arguments = json_safe({name: value for name, value in locals().items()})
    from kgplm.evaluation.tasks import get_task, load_task_splits
    from kgplm.training.interrupts import StopRequest, check_stop_signals

    stop_signals = check_stop_signals(stop_signals)
    arguments["stop_signals"] = list(stop_signals)

    # the task's name and the model's path are checked before torch loads, so a refused call answers at once
    spec = get_task(task)
    if not (isinstance(mention_spans, bool) or mention_spans == "typed"):
        raise ConfigurationError(f"mention_spans must be False, True or 'typed', got {mention_spans!r}")
    if kg_embeddings is not None and mention_spans != "typed":
        raise ConfigurationError("kg_embeddings is read by the typed gazetteer only (mention_spans='typed')")
    if not Path(model).exists():
        raise MissingFileError(model, "kgplm model (a train/finetune output directory or a save_pretrained directory)")
    from kgplm.models import KgplmConfig, KgplmForFineTuning
    from kgplm.models.card import write_model_card
    from kgplm.models.loading import load_under_task_head
    from kgplm.text.tokenization import load_tokenizer, save_tokenizer
    from kgplm.finetuning.checkpoints import starting_weights
    from kgplm.finetuning.defaults import fine_tuning_defaults
    from kgplm.finetuning.encoding import TaskEncoder, label_names_for
    from kgplm.finetuning.loop import FineTuneSettings, finetune_loop, predict
    from kgplm.finetuning.scoring import score
    from kgplm.training import distributed
    from kgplm.training.precision import autocast
    from kgplm.training.reporting import check_report_to, open_reporters
    from kgplm.training.run import locate_model
    from kgplm.finetuning.mention_inputs import fine_tuning_knowledge, gazetteer_tables

    arguments["device"] = device = distributed.auto_device(device)
    report_to = check_report_to(report_to)
    arguments["report_to"] = list(report_to)
    model_dir, tokenizer_dir, run = locate_model(model)
    output_dir = Path(output_dir)
    arguments["model"] = str(Path(model).resolve())
    config = KgplmConfig.from_pretrained(str(model_dir))
    defaults = fine_tuning_defaults(config.hidden_size)
    resolved = {}
    for name, value in (("learning_rate", learning_rate), ("epochs", epochs), ("patience", patience)):
        if value is None and name == "learning_rate" or value == "auto":
            resolved[name] = getattr(defaults, name)
        elif isinstance(value, str):
            raise ConfigurationError(f"{name} must be a number or 'auto', got {value!r}")
    if resolved:
        logger.info(
            "fine-tuning %s (by the width of the encoder, %d: %s; pass a value to override)",
            ", ".join(f"{name} {value:g}" for name, value in resolved.items()),
            config.hidden_size,
            defaults.encoders,
        )
        learning_rate = resolved.get("learning_rate", learning_rate)
        epochs = resolved.get("epochs", epochs)
        patience = resolved.get("patience", patience)
        arguments["auto"] = {"hidden_size": config.hidden_size, **resolved}
    arguments.update(learning_rate=learning_rate, epochs=epochs, patience=patience)
    settings = FineTuneSettings(
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        warmup_ratio=warmup_ratio,
        weight_decay=weight_decay,
        patience=patience,
        seed=seed,
        mixed_precision=mixed_precision,
    )
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
            raise ConfigurationError(
                f"max_length {max_length} exceeds the model's {config.max_position_embeddings} positions"
            )
        label_names = label_names_for(spec, train_examples, tagging)
        config.set_task(spec.kind, spec.name, label_names, tagging)
        config.mention_span_indicator = mention_spans is True
        tables = None
        if mention_spans == "typed":
            if run is None:
                raise MissingFileError(
                    "<model>",
                    "pre-training run next to the model: the typed gazetteer links the task text with its graph",
                )
            tables = gazetteer_tables(run, kg_embeddings, progress and main)
            config.mention_gazetteer = tables.sizes
            arguments["kg_embeddings"] = str(tables.directory.resolve())
        knowledge = fine_tuning_knowledge(config, run, encoder_inputs=encoder_inputs, progress=progress and main)
        encoder = TaskEncoder(
            spec, tokenizer, label_names=label_names, max_length=max_length, tagging=tagging, knowledge=knowledge
        )
        import torch

        torch.manual_seed(seed)  # the head's initial weights
        network = load_under_task_head(KgplmForFineTuning, model_dir, config=config)
        if tables is not None:
            network.gazetteer.load_tables(tables.kg_vectors, tables.type_ids)
        train_features = encoder.encode(train_examples)
        encoding = {"train": dict(encoder.last_statistics)}
        dev_features = encoder.encode(dev_examples)
        encoding["dev"] = dict(encoder.last_statistics)
        logger.info("fine-tuning on %s", context.device)
        # a stop signal after the last epoch (while the model is scored and written) is held until the call
        # completes: fine-tuning is then finished, so the call ends normally
        with StopRequest(stop_signals) as late_stop:
            with open_reporters(report_to, output_dir, prefix="finetune", step_key="epoch", enabled=main) as report:
                history, dev_scores = finetune_loop(
                    network,
                    encoder,
                    train_features,
                    dev_examples,
                    dev_features,
                    settings,
                    progress=progress,
                    distributed=context,
                    report=report,
                    output_dir=output_dir,
                    # a checkpoint is resumed by the same call from the same weights only; where its progress is
                    # shown and reported may change
                    identity={
                        **{k: v for k, v in arguments.items() if k not in ("progress", "report_to", "stop_signals")},
                        "starting_weights": starting_weights(model_dir),
                    },
                    stop_signals=stop_signals,
                )
            warnings = []
            if main:
                warnings = _learned_nothing(
                    network,
                    encoder,
                    dev_examples,
                    dev_features,
                    batch_size=2 * batch_size,
                    device=context.device,
                    learning_rate=learning_rate,
                    epochs=epochs,
                    mixed_precision=mixed_precision,
                )
            test_scores = None
            if main and "test" not in loaded.unlabelled:
                test_features = encoder.encode(test_examples)
                encoding["test"] = dict(encoder.last_statistics)
                with autocast(context.device, mixed_precision):
                    outputs = predict(network, encoder, test_features, batch_size=2 * batch_size, device=context.device)
                test_scores = score(encoder, test_examples, test_features, outputs)
            if main:
                logger.info(
                    "%s: dev %s %.4f, test %s",
                    spec.name,
                    spec.metric,
                    dev_scores["main"],
                    "unlabelled" if test_scores is None else f"{test_scores['main']:.4f}",
                )
            test_scores = context.broadcast(test_scores)
            finetune_config = {"kgplm_finetune": 1, **arguments}
            if main:
                output_dir.mkdir(parents=True, exist_ok=True)
                results = {
                    "task": spec.name,
                    "metric": spec.metric,
                    "dev": dev_scores,
                    "test": test_scores,
                    "history": history,
                    "examples": {"train": len(train_examples), "dev": len(dev_examples), "test": len(test_examples)},
                    "example_ids": {"dev": [e.id for e in dev_examples], "test": [e.id for e in test_examples]},
                    "derived_splits": list(loaded.derived),
                    "unlabelled_splits": list(loaded.unlabelled),
                    "encoding": encoding,
                    "warnings": warnings,
                }
                with atomic_directory(output_dir / "model") as temporary:
                    network.save_pretrained(str(temporary))
                    write_model_card(temporary, network.config, arguments=finetune_config, results=results)
                tokenizer.model_max_length = config.max_position_embeddings  # what the model can read
                with atomic_directory(output_dir / "tokenizer") as temporary:
                    save_tokenizer(tokenizer, temporary)
                for name, content in (("finetune_config.json", finetune_config), ("results.json", results)):
                    with atomic_file(output_dir / name, "w", encoding="utf-8") as handle:
                        json.dump(content, handle, indent=1, ensure_ascii=False)
        if late_stop.requested:
            logger.warning("%s arrived after the last epoch; fine-tuning completed first", late_stop.signal_name)
        context.barrier()
        return FineTuningResult(
            output_dir=output_dir,
            task=spec.name,
            dev=dev_scores,
            test=test_scores,
            history=history,
            config=finetune_config,
            warnings=context.broadcast(warnings),
        )
    finally:
        context.close()


def _learned_nothing(
    network, encoder, examples, features, *, batch_size, device, learning_rate, epochs, mixed_precision
) -> list[str]:
    """A warning (logged and returned) when the model's dev predictions are constant."""
    from kgplm.evaluation.degenerate import constant_prediction, learned_nothing_message
    from kgplm.evaluation.predictions import example_predictions
    from kgplm.finetuning.loop import predict
    from kgplm.training.precision import autocast

    with autocast(device, mixed_precision):
        outputs = predict(network, encoder, features, batch_size=batch_size, device=device)
    description = constant_prediction(example_predictions(encoder, examples, features, outputs), encoder.kind)
    if description is None:
        return []
    message = learned_nothing_message(description, split="dev", learning_rate=learning_rate, epochs=epochs)
    logger.warning("%s", message)
    return [message]


def _run_fine_tuned(arguments: EvaluationArguments):
    """Load a fine-tuned model and its task's split; run it. Returns (encoder, examples, features, outputs).

    ``max_examples`` draws a subset with ``seed`` (by default the subset ``finetune`` scored);
    ``encoder_inputs`` (default: as the model was fine-tuned) feeds the method's extra encoder inputs.
    """
    model, task, data_dir, split = arguments.model, arguments.task, arguments.data_dir, arguments.split
    batch_size, max_examples, seed = arguments.batch_size, arguments.max_examples, arguments.seed
    encoder_inputs, device, progress = arguments.encoder_inputs, arguments.device, arguments.progress
    from kgplm.evaluation.tasks import get_task, load_task
    from kgplm.models import load_pretrained
    from kgplm.text.tokenization import load_tokenizer
    from kgplm.finetuning.encoding import TaskEncoder
    from kgplm.finetuning.loop import predict
    from kgplm.training.run import locate_model
    from kgplm.finetuning.mention_inputs import fine_tuning_knowledge

    from kgplm.training.distributed import auto_device

    device = auto_device(device)
    logger.info("running the model on %s", device)
    model_dir, tokenizer_dir, run = locate_model(model)
    network = load_pretrained(str(model_dir))
    config = network.config
    if config.task_kind is None:
        raise ConfigurationError(f"{model_dir} is a pre-trained model without a task head; run kgplm.finetune first")
    spec = get_task(task or config.task_name)
    if spec.kind != config.task_kind:
        raise ConfigurationError(
            f"the model was fine-tuned for a {config.task_kind} task ({config.task_name}); "
            f"{spec.name} is a {spec.kind} task"
        )
    examples = _subset(load_task(spec.name, data_dir, split), max_examples, seed)
    max_length = None
    finetune_config = model_dir.parent / "finetune_config.json"
    if finetune_config.is_file():  # the length (and encoder inputs) it was fine-tuned with
        recorded = json.loads(finetune_config.read_text(encoding="utf-8"))
        max_length = recorded["max_length"]
        encoder_inputs = recorded.get("encoder_inputs", True) if encoder_inputs is None else encoder_inputs
    max_length = max_length or min(config.max_position_embeddings, 512)
    knowledge = fine_tuning_knowledge(config, run, encoder_inputs=encoder_inputs is not False, progress=progress)
    encoder = TaskEncoder(
        spec,
        load_tokenizer(tokenizer_dir),
        label_names=config.label_names,
        max_length=max_length,
        tagging=config.tagging,
        knowledge=knowledge,
    )
    features = encoder.encode(examples)
    network.to(device)
    outputs = predict(network, encoder, features, batch_size=batch_size, device=device, progress=progress)
    return encoder, examples, features, outputs


@dataclass
class EvaluationResult(Mapping):
    """What :func:`kgplm.evaluate` scored: the scores (the result reads as their mapping, so
    ``result["main"]`` is the task's main metric), the task and split, and the arguments that replay it
    (``kgplm.evaluate(args=result.arguments)``)."""

    scores: dict[str, Any]
    task: str
    split: str
    examples: int | None
    arguments: EvaluationArguments

    def __getitem__(self, name: str) -> Any:
        return self.scores[name]

    def __iter__(self):
        return iter(self.scores)

    def __len__(self) -> int:
        return len(self.scores)

    def __repr__(self) -> str:
        main = self.scores.get("main")
        shown = f"main {main:.4f}" if isinstance(main, (int, float)) else f"{len(self.scores)} scores"
        return f"EvaluationResult(task={self.task!r}, split={self.split!r}, {shown}, model {self.arguments.model})"


@dataclass
class PredictionResult:
    """What :func:`kgplm.predict` wrote: the file (``path``; the result is path-like, so ``open(result)``
    reads it), how many examples it holds, and the arguments that replay it."""

    path: Path
    task: str
    split: str
    format: str
    examples: int
    arguments: PredictionArguments

    def __fspath__(self) -> str:
        return str(self.path)

    def records(self) -> list[dict[str, Any]]:
        """The predictions, one dict per example (``format="jsonl"``)."""
        if self.format != "jsonl":
            raise ConfigurationError(f"{self.path} is a {self.format} submission file; read it with json")
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def __repr__(self) -> str:
        return f"PredictionResult({self.examples} {self.task} {self.split} predictions in {self.path})"


def evaluate(*, args: EvaluationArguments | None = None, **kwargs: Any) -> EvaluationResult:
    """Score a fine-tuned model (a ``kgplm.finetune`` output) on one split; ``task`` defaults to its own.

    The arguments are the fields of :class:`~kgplm.arguments.EvaluationArguments` (keywords, ``args=``, or
    both). ``task="probe"``: the KG cloze probe of a pre-trained model (a ``kgplm.train`` output);
    ``data_dir`` is then the probe file (:func:`kgplm.evaluation.probing.probe_model`). Returns an
    :class:`EvaluationResult`, which reads as the mapping of the scores.
    """
    arguments = resolve(EvaluationArguments, args, kwargs, function="kgplm.evaluate")
    from kgplm.evaluation.probing import PROBE_TASK
    from kgplm.finetuning.scoring import score

    if arguments.task == PROBE_TASK:
        from kgplm.evaluation.probing import probe_model
        from kgplm.training.distributed import auto_device

        scores = probe_model(
            arguments.model,
            arguments.data_dir,
            batch_size=arguments.batch_size,
            device=auto_device(arguments.device),
            progress=arguments.progress,
        )
        return EvaluationResult(scores=scores, task=PROBE_TASK, split="probe", examples=None, arguments=arguments)
    encoder, examples, features, outputs = _run_fine_tuned(arguments)
    return EvaluationResult(
        scores=score(encoder, examples, features, outputs),
        task=encoder.spec.name,
        split=arguments.split,
        examples=len(examples),
        arguments=arguments,
    )


evaluate.__signature__ = signature(EvaluationArguments, returns="EvaluationResult")


def predict(*, args: PredictionArguments | None = None, **kwargs: Any) -> PredictionResult:
    """Write a fine-tuned model's predictions on one split (:mod:`kgplm.evaluation.predictions`).

    The arguments are the fields of :class:`~kgplm.arguments.PredictionArguments` (keywords, ``args=``, or
    both). ``format="jsonl"``: one JSON line per example in ``output_dir/<task>-<split>.jsonl`` — the text,
    the gold annotation where the split has labels, the prediction (NER spans with character offsets,
    ``text[start:end] == mention``; labels; triples; candidate scores). ``format="cblue"``: the CBLUE
    submission file of the task (CMeEE, CMeIE, CHIP-STS, KUAKE-QIC) in ``output_dir``, so the
    hidden-label CBLUE test sets can be scored. Returns a :class:`PredictionResult` naming the file.

    ``output=`` (the file itself) is the earlier spelling: it still works, with a ``FutureWarning``, until
    kgplm 0.3.
    """
    kwargs = dict(kwargs)
    legacy_file = kwargs.pop("output", None)
    if legacy_file is not None:
        if "output_dir" in kwargs:
            raise ConfigurationError("kgplm.predict() got both output (deprecated) and output_dir; pass output_dir")
        warnings.warn(
            f"kgplm.predict: the keyword argument 'output' is deprecated since kgplm {DEFAULT_SINCE} and will be "
            f"removed in kgplm {DEFAULT_REMOVAL}; use 'output_dir' (the predictions go to "
            "output_dir/<task>-<split>.jsonl)",
            FutureWarning,
            stacklevel=2,
        )
        kwargs["output_dir"] = Path(legacy_file).parent if kwargs.get("format", "jsonl") == "jsonl" else legacy_file
    arguments = resolve(PredictionArguments, args, kwargs, function="kgplm.predict")
    from kgplm.evaluation.predictions import PREDICTION_FORMATS, example_predictions, write_predictions

    if arguments.format not in PREDICTION_FORMATS:
        raise ConfigurationError(f"format must be one of {PREDICTION_FORMATS}, got {arguments.format!r}")
    encoder, examples, features, outputs = _run_fine_tuned(arguments)
    records = example_predictions(encoder, examples, features, outputs)
    task = encoder.spec.name
    target = Path(arguments.output_dir)
    if arguments.format == "jsonl":
        target = Path(legacy_file) if legacy_file is not None else target / f"{task}-{arguments.split}.jsonl"
    written = write_predictions(records, target, task=task, format=arguments.format)
    logger.info("wrote %d %s predictions to %s", len(records), task, written)
    return PredictionResult(
        path=written,
        task=task,
        split=arguments.split,
        format=arguments.format,
        examples=len(records),
        arguments=arguments,
    )


predict.__signature__ = signature(PredictionArguments, returns="PredictionResult")
