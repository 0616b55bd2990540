"""The arguments of ``kgplm.train``, ``finetune``, ``evaluate`` and ``predict``, as typed dataclasses.

Each field is documented once, here, in its ``help``; the docs, the functions' signatures and the
command line are made from these classes. :func:`add_arguments` generates a command's flags from a
class (one ``--field-name`` per field, grouped as the class groups them), :func:`from_namespace` turns
the parsed flags back into the class, so the Python API and the CLI cannot drift apart. A function
that takes arguments accepts either keywords (``kgplm.train("smedbert", corpus=..., output_dir=...)``)
or an instance (``kgplm.train("smedbert", args=PretrainingArguments(...))``) or both (the keywords
replace fields of the instance); :func:`resolve` does that and refuses an unknown name with the
closest known one.

Nothing here imports torch: the command line answers ``--help`` and refuses bad input before the
model code loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib
import inspect
import json
import os
import re
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar, Union, get_args, get_origin, get_type_hints

from kgplm._deprecation import renamed_keyword
from kgplm.exceptions import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = [
    "PretrainingArguments",
    "FineTuningArguments",
    "EvaluationArguments",
    "PredictionArguments",
    "add_arguments",
    "from_namespace",
    "resolve",
    "flag",
    "EVALUATION_SUBSET_SEED",
]


class LazyChoices:
    """``choices`` read from a module on first use, so that building the parser imports no model code."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name, self._values = module, name, None

    def values(self) -> tuple:
        if self._values is None:
            value = getattr(importlib.import_module(self.module), self.name)
            self._values = tuple(value() if callable(value) else value)
        return self._values

    def __contains__(self, item) -> bool:
        return item in self.values()

    def __iter__(self):
        return iter(self.values())

    def __len__(self) -> int:
        return len(self.values())


def argument(
    default: Any = MISSING,
    *,
    group: str,
    help: str,
    choices: Iterable | LazyChoices | None = None,
    cli_type: Callable[[str], Any] | None = None,
    nargs: str | None = None,
    const: Any = None,
    metavar: str | None = None,
    deprecated_flags: tuple[str, ...] = (),
    cli: bool = True,
) -> Any:
    """A dataclass field with what the docs and the command line need.

    ``help``: the field's documentation (reStructuredText; the command line shows it without markup).
    ``cli_type``: how the command line parses the value (default: from the annotation; a boolean field with
    a ``cli_type`` takes a value instead of ``--x/--no-x``). ``const``: the value of the flag given without
    one (with ``nargs="?"``). ``deprecated_flags``:
    earlier spellings the command line still reads, with a warning. ``cli=False``: no flag (a value only
    Python can pass, e.g. a callback).
    """
    metadata = {
        "group": group,
        "help": help,
        "choices": choices,
        "cli_type": cli_type,
        "nargs": nargs,
        "const": const,
        "metavar": metavar,
        "deprecated_flags": deprecated_flags,
        "cli": cli,
    }
    if default is MISSING:
        return field(metadata=metadata)
    return field(default=default, metadata=metadata)


def number_or_auto(kind: type) -> Callable[[str], Any]:
    """A command-line type: ``auto`` or a number of ``kind``."""

    def parse(text: str):
        return "auto" if text == "auto" else kind(text)

    parse.__name__ = kind.__name__
    return parse


def json_object(text: str) -> dict:
    """A command-line type: a JSON object (``'{"use_sop": false}'``)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON ({error}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object ({{...}}), got {text!r}")
    return value


def text_or_json_object(text: str) -> str | dict:
    """A command-line type: a JSON object when the text starts with ``{``, else the text."""
    return json_object(text) if text.lstrip().startswith("{") else text


def mention_span_option(text: str) -> bool | str:
    """A command-line type: ``typed``, or ``true`` / ``false`` (any case) for the span indicator's on and off."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "typed":
        return "typed"
    raise argparse.ArgumentTypeError(f"expected typed, true or false, got {text!r}")


def flag(name: str) -> str:
    """The command-line flag of a field: ``output_dir`` → ``--output-dir``."""
    return "--" + name.replace("_", "-")


# groups of PretrainingArguments, in the order the docs and ``kgplm train --help`` show them
DATA = "data and graph"
KNOWLEDGE = "knowledge artefacts"
MODEL = "model"
OPTIMISATION = "optimisation"
SCHEDULE = "schedule and checkpoints"
HARDWARE = "hardware"
REPORTING = "reporting"

STORE_HELP = (
    "a :class:`~kgplm.KGStore` or anything :func:`kgplm.kg.open_store` accepts (``cmekg``, a saved store, an "
    "RDF/OBO/TSV file, a UMLS directory)"
)
DEVICE_HELP = (
    "``auto`` (CUDA when torch sees a GPU, else the CPU), ``cpu`` or ``cuda`` (under torchrun: each process's "
    "own GPU). The device used is logged and recorded resolved, so a replay runs where the run ran; on a "
    "machine without a GPU ``auto`` is ``cpu`` and the artefacts are exactly those of ``device='cpu'``."
)
MIXED_PRECISION_HELP = "``no``, ``bf16`` or ``fp16``: autocast the forward pass (fp16 with a gradient scaler)."
PROGRESS_HELP = "show progress bars (``--no-progress`` turns them off)."
MIXED_PRECISION_CHOICES = LazyChoices("kgplm.training.precision", "MIXED_PRECISION")


@dataclass(kw_only=True)
class PretrainingArguments:
    """The arguments of :func:`kgplm.train` (the method's name is separate: ``kgplm.train(method, ...)``).

    ``run_config.json`` records them (with the values the defaults resolved to), so a run replays from
    it (:func:`kgplm.train_from_config`); ``kgplm train`` has one flag per field.
    """

    graph: KGStore | str | os.PathLike | None = argument(
        None,
        group=DATA,
        help=STORE_HELP + ". Required when the method or its masking reads a graph "
        "(:meth:`kgplm.methods.MethodSpec.needs_graph`); ``None`` for the text-only methods (``mlm``, "
        "``electra``, ``ehealth`` with their own masking), which then link nothing and load no graph.",
        cli_type=str,
    )
    corpus: str | os.PathLike = argument(
        group=DATA,
        help="the pre-training corpus: a file of text lines, CSV or JSON lines (:func:`kgplm.text.read_corpus`).",
        cli_type=str,
    )
    output_dir: str | os.PathLike = argument(
        group=DATA,
        help="the run directory (:class:`~kgplm.training.run.RunDirectory`). Rerunning the same call resumes; "
        "a different call into it raises :class:`~kgplm.exceptions.ArtifactError`; the call holds an advisory "
        "lock on it, so a second call into it while this one runs raises "
        ":class:`~kgplm.exceptions.RunDirectoryLockedError`.",
        cli_type=str,
        deprecated_flags=("--out",),
    )
    text_model: str | os.PathLike | dict | None = argument(
        None,
        group=MODEL,
        help="the encoder to start from: ``None`` (a small CPU encoder, :data:`kgplm.models.CPU_TEXT_ENCODER`), a "
        "Hugging Face hub id (``org/name`` or ``org/name@revision``, fetched into the hub cache; "
        "``HF_HUB_OFFLINE=1`` reads the cache only), a local directory holding a BERT checkpoint (every weight "
        "it has is loaded, the MLM and NSP heads included, and its tokenizer unless ``tokenizer`` is given) or "
        "a dict of BERT config fields (on the command line: a JSON object).",
        cli_type=text_or_json_object,
    )
    tokenizer: str | os.PathLike | None = argument(
        None,
        group=MODEL,
        help="a tokenizer directory, ``vocab.txt`` or hub id; default: the text model's, else a WordPiece "
        "vocabulary of ``vocab_size`` trained on the corpus.",
        cli_type=str,
    )
    init_from: str | os.PathLike | None = argument(
        None,
        group=MODEL,
        help="continued pre-training from a kgplm pre-training run (its directory or its ``model/``): the run's "
        "encoder sizes and tokenizer are used and every tensor this method's model shares with it by name and "
        "shape is loaded (embeddings, encoder, the MLM and SOP heads; for the ELECTRA family the generator and "
        "the replaced-token head); the method's own modules start fresh from ``seed``. ``text_model`` must then "
        "be ``None``. The source and its weights' SHA-256 are recorded under ``stages.init_from``.",
        cli_type=str,
    )
    kg_embeddings: str | os.PathLike | None = argument(
        None,
        group=KNOWLEDGE,
        help="a saved :class:`~kgplm.kg.embeddings.KGEmbeddings` directory to use instead of training "
        "``kg_method`` embeddings.",
        cli_type=str,
    )
    neighbor_table: str | os.PathLike | None = argument(
        None,
        group=KNOWLEDGE,
        help="a saved PEPR neighbour table (``.npz``, :func:`kgplm.kg.pepr.top_k_neighbors`) to use instead of "
        "computing one.",
        cli_type=str,
        deprecated_flags=("--pepr",),
    )
    knowledge_graph: KGStore | str | os.PathLike | None = argument(
        None,
        group=DATA,
        help="the store whose links the PEPR table and the KG embeddings are built from, when it is not ``graph`` "
        "(a :class:`~kgplm.KGStore` or a saved store's directory): it holds ``graph``'s entities and relations "
        "in the same order with other triples, e.g. made by :meth:`KGStore.with_triples "
        "<kgplm.KGStore.with_triples>`. Text is linked with ``graph``, which the run saves for fine-tuning; a "
        "store object is saved into the run's ``knowledge_store/``. Cannot be combined with ``kg_embeddings``, "
        "``neighbor_table`` or ``exclude_triples``.",
        cli_type=str,
    )
    corpus_options: dict | None = argument(
        None,
        group=DATA,
        help='options of :func:`kgplm.text.read_corpus`, e.g. ``{"columns": ["ask", "answer"], "encoding": '
        '"gbk"}`` (the command line also has ``--columns`` and ``--encoding``).',
        cli_type=json_object,
    )
    vocab_size: int = argument(
        8000, group=MODEL, help="pieces of the WordPiece vocabulary trained when no tokenizer is given."
    )
    max_length: int = argument(128, group=MODEL, help="tokens per pre-training example.")
    num_neighbors: int = argument(
        10, group=KNOWLEDGE, help="PEPR neighbours kept per mentioned entity (methods that read neighbours)."
    )
    pepr_mode: str = argument(
        "auto",
        group=KNOWLEDGE,
        help="how the PEPR table is computed: ``exact``, ``fast``, or ``auto``: exact when exact mode's cost, "
        "modelled from the graph, the mentioned entities and the settings (never timed: "
        ":func:`kgplm.kg.pepr.exact_cost`), fits ``pepr_budget_seconds``, else fast — so the same call builds "
        "the same table on any machine. The mode used and why are recorded under ``stages.pepr_mode_used``.",
        choices=("auto", "exact", "fast"),
    )
    pepr_budget_seconds: float = argument(
        120.0, group=KNOWLEDGE, help="the modelled time exact PEPR may take under ``pepr_mode='auto'``."
    )
    kg_method: str | None = argument(
        None,
        group=KNOWLEDGE,
        help="``transe`` or ``transr`` KG embeddings (default: the method's; TransR starts from TransE).",
        choices=("transe", "transr"),
    )
    entity_dim: int = argument(100, group=KNOWLEDGE, help="the KG embeddings' size.")
    kg_epochs: int = argument(5, group=KNOWLEDGE, help="epochs of KG-embedding training.")
    kg_seed: int | None = argument(
        None,
        group=KNOWLEDGE,
        help="the KG embeddings' seed (default: ``seed``). The PEPR table and the embeddings are kept in the KG "
        "artefact cache (:mod:`kgplm.artefact_cache`); a fixed ``kg_seed`` lets runs with other seeds share them.",
    )
    model_options: dict | None = argument(
        None,
        group=MODEL,
        help="the method's own config fields "
        "(``kgplm.methods.get(method).config_class.option_names()``: ablations, loss weights, ``use_sop`` …).",
        cli_type=json_object,
    )
    method_data: dict | None = argument(
        None,
        group=DATA,
        help="inputs of the method's own stages that are not model fields (files such as a product-attribute "
        "table); JSON-safe, recorded in ``run_config.json``. Each method's docstring says which keys it reads.",
        cli_type=json_object,
    )
    exclude_triples: str | os.PathLike | None = argument(
        None,
        group=DATA,
        help="a file of triples kept out of pre-training (a probe file's ``exclude_from_training`` list, or a TSV "
        "of labelled triples): the sentences stating them leave the corpus, the KG embeddings and PEPR table "
        "are built without them (:mod:`kgplm.training.heldout`).",
        cli_type=str,
    )
    linking: dict | None = argument(
        None,
        group=DATA,
        help="which names the corpus links (:mod:`kgplm.text.linking_filters`): ``stop_words`` (default "
        "``'english'``), ``min_length``, ``exclude_numeric``, ``hyphen_variants``, ``entity_types``, ``roots`` "
        '(e.g. ``["HP:0000118"]``), ``common_word_share``. Every option, defaults included, is recorded.',
        cli_type=json_object,
    )
    masking: str | None = argument(
        None,
        group=MODEL,
        help="the MLM masking scheme (default: the method's, e.g. ``whole_entity`` for SMedBERT).",
        choices=LazyChoices("kgplm.text.masking", "SCHEMES"),
        metavar="SCHEME",
    )
    max_steps: int = argument(1000, group=SCHEDULE, help="optimiser steps of the run.")
    batch_size: int = argument(
        16,
        group=OPTIMISATION,
        help="examples per optimiser step over all processes (split into ``gradient_accumulation_steps`` "
        "micro-batches; the loss is the mean over the whole batch either way).",
    )
    gradient_accumulation_steps: int = argument(
        1, group=OPTIMISATION, help="micro-batches each process's share of ``batch_size`` is split into."
    )
    learning_rate: float = argument(5e-4, group=OPTIMISATION, help="AdamW's peak learning rate.")
    warmup_steps: int | None = argument(
        None,
        group=SCHEDULE,
        help="steps of linear warmup before the linear decay to 0 at ``max_steps`` (default: 6% of ``max_steps``).",
    )
    weight_decay: float = argument(0.01, group=OPTIMISATION, help="AdamW's weight decay.")
    checkpoint_every: int = argument(200, group=SCHEDULE, help="steps between checkpoints.")
    log_every: int = argument(10, group=REPORTING, help="steps between logged losses (``metrics.jsonl``).")
    seed: int = argument(0, group=OPTIMISATION, help="the seed of the model's initial weights and the data order.")
    device: str = argument("auto", group=HARDWARE, help=DEVICE_HELP)
    mixed_precision: str = argument(
        "no", group=HARDWARE, help=MIXED_PRECISION_HELP, choices=MIXED_PRECISION_CHOICES, metavar="PRECISION"
    )
    num_workers: int = argument(
        0,
        group=HARDWARE,
        help="DataLoader processes that collate batches ahead of the loop (0: in this process); it does not "
        "change the batches, so a run may resume with another value.",
    )
    num_threads: int | None = argument(
        None,
        group=HARDWARE,
        help="threads of torch's and numba's pools together (:mod:`kgplm.training.threads`). Default: "
        "``OMP_NUM_THREADS`` when set, else the cores this process may run on, divided among the processes "
        "torchrun starts on the machine. Recorded in ``run_config.json``: artefacts are byte-identical for the "
        "same code, thread count and hardware kind.",
    )
    report_to: tuple[str, ...] | list[str] = argument(
        (),
        group=REPORTING,
        help="``tensorboard`` writes every logged loss, learning rate and metric to ``output_dir/tensorboard`` "
        "(:mod:`kgplm.training.reporting`).",
        nargs="*",
        metavar="REPORTER",
    )
    stop_signals: tuple[str, ...] | list[str] = argument(
        ("SIGTERM", "SIGUSR1"),
        group=SCHEDULE,
        help="signals on which the loop finishes its step, writes a checkpoint and raises "
        ":class:`~kgplm.exceptions.PreemptedError` (``kgplm train`` exits with status 75); the same call "
        "resumes from it (:mod:`kgplm.training.interrupts`).",
        nargs="+",
        metavar="SIGNAL",
    )
    resume_with_new_schedule: bool = argument(
        False,
        group=SCHEDULE,
        help="continue a run of ``output_dir`` that trained under another ``max_steps``, with the learning-rate "
        "schedule recomputed for this one (its finished ``model/`` is kept as ``model-step-N/``); without it "
        "such a call is refused with what to do instead.",
    )
    progress: bool = argument(True, group=REPORTING, help=PROGRESS_HELP)


# groups of the fine-tuning and evaluation arguments
TASK = "model and task"
FINETUNE_OPTIMISATION = "optimisation"
ENCODING = "encoding"


@dataclass(kw_only=True)
class FineTuningArguments:
    """The arguments of :func:`kgplm.finetune`; ``finetune_config.json`` records them, so a run replays."""

    model: str | os.PathLike = argument(
        group=TASK,
        help="a ``kgplm.train`` output directory (or its ``model/``); a method whose encoder reads more than "
        "text (SMedBERT) rebuilds those inputs from that run's artefacts.",
        cli_type=str,
    )
    task: str = argument(
        group=TASK, help="a name from :func:`kgplm.evaluation.task_names` (``cmedqaner``, ``cmedqq`` …)."
    )
    data_dir: str | os.PathLike = argument(
        group=TASK,
        help="a tasks root laid out like the official releases, or the task's own directory.",
        cli_type=str,
    )
    output_dir: str | os.PathLike = argument(
        group=TASK,
        help="where the fine-tuned ``model/``, ``tokenizer/``, ``finetune_config.json`` and ``results.json`` go.",
        cli_type=str,
        deprecated_flags=("--out",),
    )
    epochs: int | str = argument(
        "auto",
        group=FINETUNE_OPTIMISATION,
        help="training epochs; ``auto``: by the encoder's width "
        "(:data:`kgplm.finetuning.defaults.FINE_TUNING_DEFAULTS`: 3 for BERT-base and larger, 10 for small "
        "encoders).",
        cli_type=number_or_auto(int),
    )
    batch_size: int = argument(32, group=FINETUNE_OPTIMISATION, help="examples per optimiser step.")
    learning_rate: float | str | None = argument(
        "auto",
        group=FINETUNE_OPTIMISATION,
        help="AdamW's peak learning rate (linear warmup and decay); ``auto`` (or ``None``): by the encoder's "
        "width — BERT-large and larger 2e-5, BERT-base 5e-5, narrower encoders more (1e-3 from 256 wide, 3e-3 "
        "below). A value given always wins; what ``auto`` resolved to is saved in ``finetune_config.json``.",
        cli_type=number_or_auto(float),
    )
    warmup_ratio: float = argument(
        0.1, group=FINETUNE_OPTIMISATION, help="share of the steps with a linear learning-rate warmup."
    )
    weight_decay: float = argument(0.01, group=FINETUNE_OPTIMISATION, help="AdamW's weight decay.")
    patience: int | str = argument(
        "auto",
        group=FINETUNE_OPTIMISATION,
        help="epochs without dev improvement before stopping; ``auto``: 2, or 4 for small encoders.",
        cli_type=number_or_auto(int),
    )
    max_length: int | None = argument(
        None,
        group=ENCODING,
        help="tokens per window (default: as many as the model has positions, at most 512); longer NER "
        "documents are read in overlapping windows (:class:`kgplm.finetuning.encoding.TaskEncoder`).",
    )
    tagging: str = argument("bio", group=ENCODING, help="``bio`` or ``bioes`` for NER tasks.", choices=("bio", "bioes"))
    max_train_examples: int | None = argument(
        None,
        group=TASK,
        help="a training subset for quick runs (``None``: all), drawn with ``seed``.",
    )
    max_eval_examples: int | None = argument(
        None,
        group=TASK,
        help="dev and test subsets for quick runs (``None``: all), drawn with a fixed seed "
        "(:data:`kgplm.arguments.EVALUATION_SUBSET_SEED`), so runs with different seeds score the same "
        "examples.",
    )
    seed: int = argument(0, group=FINETUNE_OPTIMISATION, help="the seed of the head's weights and the data order.")
    encoder_inputs: bool = argument(
        True,
        group=ENCODING,
        help="feed the method's extra encoder inputs (SMedBERT's linked mentions and neighbours); "
        "``False`` (``--no-encoder-inputs``): fine-tune on the text alone — the 'no knowledge at fine-tuning' "
        "ablation, which ``evaluate`` then repeats.",
    )
    mention_spans: bool | str = argument(
        False,
        group=ENCODING,
        help="give the encoder the linked mentions SMedBERT receives (the linker of the pre-training run's "
        "graph: the same spans and entity ids, :mod:`kgplm.finetuning.mention_inputs`). ``True`` "
        "(``--mention-spans``): the spans alone, a learned 'inside a mention' vector added to the token "
        "embeddings (:class:`~kgplm.models.finetuning.MentionSpanIndicator`). ``typed`` (``--mention-spans "
        "typed``): a typed gazetteer — per mention a begin/inside marker (adjacent mentions stay apart), a "
        "learned embedding of the entity's KG type and the entity's own vector from ``kg_embeddings``, "
        "projected to the hidden size; no neighbours (:class:`~kgplm.models.finetuning.TypedMentionGazetteer`; "
        "its tables are saved with the model). Either is recorded in the model's config, so ``evaluate`` feeds "
        "it too. Not with a method that already reads the mentions (SMedBERT) unless ``encoder_inputs=False``.",
        cli_type=mention_span_option,
        choices=("typed", True, False),
        nargs="?",
        const=True,
    )
    kg_embeddings: str | os.PathLike | None = argument(
        None,
        group=ENCODING,
        help="the TransE or TransR directory of the pre-training run's graph whose entity vectors the typed "
        "gazetteer reads (``mention_spans='typed'`` only); default: the run's own (given to or computed by "
        "``kgplm.train``). A text-only run (a control) has none: pass the table its knowledge method was "
        "trained with. The directory used is recorded in ``finetune_config.json``.",
        cli_type=str,
    )
    device: str = argument("auto", group=HARDWARE, help=DEVICE_HELP)
    mixed_precision: str = argument(
        "no", group=HARDWARE, help=MIXED_PRECISION_HELP, choices=MIXED_PRECISION_CHOICES, metavar="PRECISION"
    )
    report_to: tuple[str, ...] | list[str] = argument(
        (),
        group=REPORTING,
        help="``tensorboard`` writes each epoch's training loss, learning rate and dev scores to "
        "``output_dir/tensorboard``.",
        nargs="*",
        metavar="REPORTER",
    )
    progress: bool = argument(True, group=REPORTING, help=PROGRESS_HELP)
    stop_signals: tuple[str, ...] | list[str] = argument(
        ("SIGTERM", "SIGUSR1"),
        group=SCHEDULE,
        help="signals on which fine-tuning finishes its optimiser step, writes a checkpoint to "
        "``output_dir/checkpoints`` and raises :class:`~kgplm.exceptions.PreemptedError` (``kgplm finetune`` "
        "exits with status 75); the same call resumes from it. It does not change the result, so a run may "
        "resume with other signals.",
        nargs="+",
        metavar="SIGNAL",
    )


#: The seed of the dev and test subsets (``max_eval_examples``, ``max_examples``): fixed, so that runs with
#: different seeds are scored on the same examples.
EVALUATION_SUBSET_SEED = 0

EVALUATION_SUBSET_SEED_HELP = (
    "the seed of the ``max_examples`` subset (default: the subset ``finetune`` scored, "
    ":data:`kgplm.arguments.EVALUATION_SUBSET_SEED`)."
)


@dataclass(kw_only=True)
class EvaluationArguments:
    """The arguments of :func:`kgplm.evaluate`."""

    model: str | os.PathLike = argument(
        group=TASK,
        help="a ``kgplm.finetune`` output directory; with ``task='probe'`` a ``kgplm.train`` output.",
        cli_type=str,
    )
    task: str | None = argument(
        None,
        group=TASK,
        help="default: the task the model was fine-tuned on; ``probe``: the KG cloze probe of a pre-trained "
        "model (``data_dir`` is then the probe file, :func:`kgplm.evaluation.probing.probe_model`).",
    )
    data_dir: str | os.PathLike = argument(
        group=TASK,
        help="a tasks root laid out like the official releases, or the task's own directory.",
        cli_type=str,
    )
    split: str = argument("test", group=TASK, help="``train``, ``dev`` or ``test``.")
    batch_size: int = argument(64, group=HARDWARE, help="examples per forward pass.")
    max_examples: int | None = argument(None, group=TASK, help="score a subset of this many examples.")
    seed: int = argument(EVALUATION_SUBSET_SEED, group=TASK, help=EVALUATION_SUBSET_SEED_HELP)
    encoder_inputs: bool | None = argument(
        None,
        group=ENCODING,
        help="feed the method's extra encoder inputs (default: as the model was fine-tuned).",
    )
    device: str = argument("auto", group=HARDWARE, help=DEVICE_HELP)
    progress: bool = argument(True, group=REPORTING, help=PROGRESS_HELP)


@dataclass(kw_only=True)
class PredictionArguments(EvaluationArguments):
    """The arguments of :func:`kgplm.predict`: those of :class:`EvaluationArguments`, where the predictions go
    and in which format."""

    output_dir: str | os.PathLike = argument(
        group=TASK,
        help="the directory the predictions are written to: ``<task>-<split>.jsonl`` (``format='jsonl'``) or the "
        "CBLUE submission file (``format='cblue'``).",
        cli_type=str,
        deprecated_flags=("--out",),
    )
    format: str = argument(
        "jsonl",
        group=TASK,
        help="``jsonl``: one JSON line per example (the text, the gold annotation where the split has labels, "
        "the prediction); ``cblue``: the CBLUE submission file of a CBLUE task.",
        choices=("jsonl", "cblue"),
    )


Arguments = TypeVar("Arguments")


def resolve(cls: type[Arguments], args: Arguments | None, keywords: Mapping[str, Any], *, function: str) -> Arguments:
    """``args`` with ``keywords`` replacing its fields, or ``cls(**keywords)`` when ``args`` is None.

    An unknown keyword or a missing required one raises :class:`~kgplm.exceptions.ConfigurationError` naming
    ``function`` (and the closest known name).
    """
    names = [item.name for item in fields(cls)]
    unknown = [name for name in keywords if name not in names]
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, names, n=1)
            hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ConfigurationError(
            f"{function}() got unknown argument(s) {', '.join(hints)}; its arguments are the fields of "
            f"{cls.__name__}: {', '.join(names)}"
        )
    if args is not None:
        if not isinstance(args, cls):
            raise ConfigurationError(f"{function}(args=...) takes a {cls.__name__}, got {type(args).__name__}")
        return dataclasses.replace(args, **keywords)
    missing = [item.name for item in fields(cls) if _required(item) and item.name not in keywords]
    if missing:
        raise ConfigurationError(f"{function}() needs {', '.join(missing)}")
    return cls(**keywords)


def _required(item: dataclasses.Field) -> bool:
    return item.default is MISSING and item.default_factory is MISSING


def groups(cls: type) -> dict[str, list[dataclasses.Field]]:
    """The fields of an arguments class by group, in the order the class first names each group."""
    grouped: dict[str, list[dataclasses.Field]] = {}
    for item in fields(cls):
        grouped.setdefault(item.metadata["group"], []).append(item)
    return grouped


_ROLE = re.compile(r":[a-z]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")


def plain(text: str) -> str:
    """Documentation text without reStructuredText markup (for ``--help``)."""
    text = _ROLE.sub(lambda match: match.group(1).rsplit(".", 1)[-1] if "~" in match.group(0) else match.group(1), text)
    return text.replace("``", "").replace("%", "%%")


class DeprecatedFlag(argparse.Action):
    """An earlier spelling of a flag: sets the same field, with the :class:`FutureWarning` of
    :func:`kgplm._deprecation.renamed_keyword` naming the new one."""

    def __init__(self, option_strings, dest, *, replacement: str, parse: Callable | None = None, **kwargs) -> None:
        self.replacement = replacement
        super().__init__(option_strings, dest, type=parse, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        moved = renamed_keyword({option_string: values}, option_string, self.replacement, kind="option", stacklevel=3)
        setattr(namespace, self.dest, moved[self.replacement])


def _annotation_kind(annotation: Any) -> tuple[Any, bool]:
    """The scalar type of an annotation and whether it is a sequence (``tuple[str, ...]``)."""
    options = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)
    options = [option for option in options if option is not type(None)]
    for option in options:
        origin = get_origin(option) or option
        if origin in (tuple, list):
            return str, True
    for kind in (bool, int, float, dict):
        if kind in options:
            return kind, False
    return str, False


def add_arguments(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    exclude: Iterable[str] = (),
    optional: Iterable[str] = (),
    helps: Mapping[str, str] | None = None,
) -> None:
    """Add one flag per field of ``cls`` to ``parser``, in argument groups named as the class groups them.

    A required field gets a required flag unless it is in ``optional`` (a command that can take it from
    elsewhere, e.g. ``kgplm train --config``); ``exclude`` names fields the command sets itself; ``helps``
    replaces a field's help on this command. Booleans are ``--name/--no-name``; ``auto``-or-number fields,
    JSON objects and choices parse as the field's metadata says.
    """
    exclude, optional, helps = set(exclude), set(optional), dict(helps or {})
    hints = get_type_hints(cls, localns={"KGStore": object})
    for title, items in groups(cls).items():
        group = parser.add_argument_group(title)
        for item in items:
            if item.name in exclude or not item.metadata["cli"]:
                continue
            meta = item.metadata
            kind, sequence = _annotation_kind(hints[item.name])
            options: dict[str, Any] = {"dest": item.name}
            required = _required(item) and item.name not in optional
            if _required(item):
                options["default"] = None
                # a flag with an earlier spelling cannot be required by argparse (the earlier one may be
                # given instead); the command checks ``_required_<name>`` after parsing
                options["required"] = required and not meta["deprecated_flags"]
                if required and meta["deprecated_flags"]:
                    parser.set_defaults(**{f"_required_{item.name}": flag(item.name)})
            else:
                default = item.default if item.default_factory is MISSING else item.default_factory()
                options["default"] = list(default) if isinstance(default, tuple) else default
            text = plain(helps.get(item.name, meta["help"]))
            if kind is bool and not sequence and meta["cli_type"] is None:
                options["action"] = argparse.BooleanOptionalAction
            else:
                parse = meta["cli_type"] or (json_object if kind is dict else kind)
                options["type"] = parse
                if sequence or meta["nargs"]:
                    options["nargs"] = meta["nargs"] or "*"
                if meta["const"] is not None:
                    options["const"] = meta["const"]
                if meta["choices"] is not None:
                    options["choices"] = meta["choices"]
                    if meta["metavar"] is None and not isinstance(meta["choices"], LazyChoices):
                        text += " Choices: %(choices)s."
                if meta["metavar"] is not None:
                    options["metavar"] = meta["metavar"]
            if not required and not _required(item) and options.get("action") is None:
                shown = options["default"]
                if shown not in (None, [], ()):
                    text += " Default: %(default)s."
            group.add_argument(flag(item.name), help=text, **options)
            for old in meta["deprecated_flags"]:
                alias: dict[str, Any] = {"dest": item.name, "default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
                if "nargs" in options:
                    alias["nargs"] = options["nargs"]
                group.add_argument(
                    old, action=DeprecatedFlag, replacement=flag(item.name), parse=options.get("type"), **alias
                )


def from_namespace(cls: type[Arguments], namespace: argparse.Namespace, **values: Any) -> Arguments:
    """The ``cls`` instance a parsed command line describes (``values`` set fields the command computed)."""
    given = {item.name: getattr(namespace, item.name) for item in fields(cls) if hasattr(namespace, item.name)}
    for item in fields(cls):
        if isinstance(given.get(item.name), list) and not _required(item):
            default = item.default if item.default_factory is MISSING else item.default_factory()
            if isinstance(default, tuple):
                given[item.name] = tuple(given[item.name])
    given.update(values)
    return cls(**given)


def signature(cls: type, *, leading: Iterable[inspect.Parameter] = (), returns: Any = inspect.Signature.empty):
    """The signature a function taking ``cls``'s fields as keywords shows (``help()``, IDEs, the docs): the
    ``leading`` parameters, every field as a keyword with its default, and ``args``."""
    parameters = list(leading)
    for item in fields(cls):
        default = inspect.Parameter.empty if _required(item) else item.default
        parameters.append(
            inspect.Parameter(item.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=item.type)
        )
    parameters.append(
        inspect.Parameter("args", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=f"{cls.__name__} | None")
    )
    return inspect.Signature(parameters, return_annotation=returns)


def documented(cls: type[Arguments]) -> type[Arguments]:
    """Append each field's documentation, by group, to the class docstring (what the docs site shows)."""
    lines = [(cls.__doc__ or "").rstrip(), ""]
    for title, items in groups(cls).items():
        lines += [f"    **{title.capitalize()}**", ""]
        for item in items:
            default = "required" if _required(item) else f"default ``{item.default!r}``"
            lines += [f"    ``{item.name}`` ({default}; ``{flag(item.name)}``)", f"        {item.metadata['help']}", ""]
    cls.__doc__ = "\n".join(lines)
    return cls


for _arguments_class in (PretrainingArguments, FineTuningArguments, EvaluationArguments, PredictionArguments):
    documented(_arguments_class)
