"""Fine-tuning, evaluation and prediction: ``kgplm.finetune``, ``kgplm.evaluate``, ``kgplm.predict``.

Split out of :mod:`kgplm.api` (which re-exports every name here); the pre-training side,
``kgplm.train``, stays there.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kgplm._io import atomic_directory, atomic_file, json_safe
from kgplm.exceptions import ConfigurationError, MissingFileError

__all__ = ["finetune", "evaluate", "predict", "FineTuningResult", "EVALUATION_SUBSET_SEED"]

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
    epochs: int | str = "auto",
    batch_size: int = 32,
    learning_rate: float | str | None = "auto",
    warmup_ratio: float = 0.1,
    weight_decay: float = 0.01,
    patience: int | str = "auto",
    max_length: int | None = None,
    tagging: str = "bio",
    max_train_examples: int | None = None,
    max_eval_examples: int | None = None,
    seed: int = 0,
    encoder_inputs: bool = True,
    mention_spans: bool | str = False,
    kg_embeddings: str | os.PathLike | None = None,
    device: str = "auto",
    mixed_precision: str = "no",
    report_to: tuple[str, ...] | list[str] = (),
    progress: bool = True,
) -> FineTuningResult:
    """Fine-tune a pre-trained kgplm model on ``task`` and score the best-on-dev epoch on dev and test.

    Args:
        model: a ``kgplm.train`` output directory (or its ``model/``); a method whose encoder reads
            more than text (SMedBERT) rebuilds those inputs from that run's artefacts.
        task: a name from :func:`kgplm.evaluation.task_names` (``"cmedqaner"``, ``"cmedqq"`` …).
        data_dir: a tasks root laid out like the official releases or the task's own directory.
        epochs, batch_size, learning_rate, warmup_ratio, weight_decay: AdamW with linear decay;
            ``patience``: epochs without dev improvement before stopping. ``"auto"`` (the default of
            ``learning_rate``, ``epochs`` and ``patience``; ``learning_rate=None`` means the same) follows
            the encoder's width by the table :data:`kgplm.training.finetuning.FINE_TUNING_DEFAULTS`:
            BERT-large and larger 2e-5, BERT-base 5e-5 (3 epochs, patience 2); narrower encoders, such
            as the ones ``kgplm.train`` builds by default, more (1e-3 from 256 wide, 3e-3 below; 10
            epochs, patience 4). A value given always wins. The values used are logged and saved in
            ``finetune_config.json``, with what each ``"auto"`` resolved to under ``"auto"``.
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
        mention_spans: give the encoder the linked mentions SMedBERT receives (the linker of the
            pre-training run's graph: the same spans, the same entity ids;
            :mod:`kgplm.training.span_indicator`). ``True``: the spans alone, as a learned "inside a
            mention" vector added to the token embeddings
            (:class:`~kgplm.models.finetuning.MentionSpanIndicator`). ``"typed"``: a typed gazetteer —
            per mention a begin/inside marker (adjacent mentions stay apart), a learned embedding of
            the entity's KG type and the entity's own vector from ``kg_embeddings``, projected to the
            hidden size; no neighbours (:class:`~kgplm.models.finetuning.TypedMentionGazetteer`; its
            tables are saved with the model). Either is recorded in the model's config, so
            ``evaluate`` feeds it too. Not with a method that already reads the mentions (SMedBERT)
            unless ``encoder_inputs=False``.
        kg_embeddings: the TransE or TransR directory of the pre-training run's graph whose entity
            vectors the typed gazetteer reads (``mention_spans="typed"`` only); default: the run's own
            (given to or computed by ``kgplm.train``). A text-only run (a control) has none: pass
            the table its knowledge method was trained with. The directory used is recorded.
        mixed_precision: ``"no"``, ``"bf16"`` or ``"fp16"`` (training and scoring under autocast).
        device: ``"auto"`` (CUDA when available, else CPU; logged, and recorded resolved in
            ``finetune_config.json``), ``"cpu"`` or ``"cuda"``; see ``kgplm.train``.
        report_to: ``("tensorboard",)`` writes each epoch's training loss, learning rate and dev scores
            to ``output_dir/tensorboard``; ``FineTuningResult.plot()`` draws them.

    A model whose dev predictions are constant (no entity at all for NER, one class for all examples)
    learned nothing: the log and ``FineTuningResult.warnings`` (and ``results.json``) say so and
    suggest another learning rate or more epochs.

    Under ``torchrun`` each batch is split over the processes (DDP; the loss stays the mean over
    the whole batch); rank 0 scores dev and test and writes the outputs.

    Writes ``output_dir/model`` (the best epoch), ``tokenizer/``, ``finetune_config.json`` (the
    arguments, which replay the run) and ``results.json`` (history, dev and test scores, the splits
    that were derived rather than read from an official file, what the encoding counted per split).
    A test split without labels (the CBLUE test files) is not scored: ``test`` is ``None``.
    """
    arguments = json_safe({name: value for name, value in locals().items()})
    from kgplm.evaluation.tasks import get_task, load_task_splits

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
    from kgplm.training.finetuning import (
        FineTuneSettings,
        TaskEncoder,
        fine_tuning_defaults,
        finetune_loop,
        label_names_for,
        predict,
        score,
    )
    from kgplm.training import distributed
    from kgplm.training.precision import autocast
    from kgplm.training.reporting import check_report_to, open_reporters
    from kgplm.training.run import locate_model
    from kgplm.training.span_indicator import fine_tuning_knowledge, gazetteer_tables

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
    from kgplm.training.finetuning import predict
    from kgplm.training.precision import autocast

    with autocast(device, mixed_precision):
        outputs = predict(network, encoder, features, batch_size=batch_size, device=device)
    description = constant_prediction(example_predictions(encoder, examples, features, outputs), encoder.kind)
    if description is None:
        return []
    message = learned_nothing_message(description, split="dev", learning_rate=learning_rate, epochs=epochs)
    logger.warning("%s", message)
    return [message]


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
    from kgplm.training.span_indicator import fine_tuning_knowledge

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
    device: str = "auto",
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
        from kgplm.training.distributed import auto_device

        device = auto_device(device)
        return probe_model(model, data_dir, batch_size=batch_size, device=device, progress=progress)
    return score(
        *_run_fine_tuned(model, task, data_dir, split, batch_size, max_examples, seed, encoder_inputs, device, progress)
    )


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
    device: str = "auto",
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
    encoder, examples, features, outputs = _run_fine_tuned(
        model, task, data_dir, split, batch_size, max_examples, seed, encoder_inputs, device, progress
    )
    records = example_predictions(encoder, examples, features, outputs)
    written = write_predictions(records, output, task=encoder.spec.name, format=format)
    logger.info("wrote %d %s predictions to %s", len(records), encoder.spec.name, written)
    return written
