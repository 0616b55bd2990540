"""The replication table: does the knowledge help? Every registered method against its fair control.

Rows (from the method registry, :func:`plan_rows`): each knowledge method (a record with a
``control``), its fair control (the record's ``control``: plain MLM or plain ELECTRA with the same
masking and input format), every ablation it offers (``ablations``), for a method whose encoder
reads extra inputs at fine-tuning (``finetuning_inputs``, e.g. SMedBERT's linked mentions) a row
"no knowledge at fine-tuning" (the method's own pre-trained models fine-tuned on the text alone,
``kgplm.finetune(encoder_inputs=False)``), the rows of :data:`EXTRA_ROWS` (attribution rows and
model-based baselines other modules declare), and plain token-masking MLM for reference. Each row
names the row it is compared with (``Row.control``): the method its control, an ablation or
"− knowledge at fine-tuning" the method. Every row pre-trains on the same text (CMeKG facts written
as sentences + Chinese medical dialogues) with the same vocabulary, encoder size, steps, batch and
learning rate; identical configurations are trained once and shared between rows.

Seeds and statistics (:mod:`_table` states the protocol; :mod:`kgplm.evaluation.statistics` the
tests): every row is pre-trained with each of ``--seeds`` and every pre-trained model fine-tuned with
each of ``--finetune-seeds``, all on the same test examples. The unit of inference is the
pre-training seed: comparisons are paired by seed, tested with a paired t-test and an exact
sign-flip permutation test over the per-seed differences. Each method's pre-registered primary
endpoints (``MethodSpec.primary_endpoints``) are tested only with at least
:data:`_table.MIN_PRIMARY_SEEDS` seeds (fewer: labelled "not tested"); every other comparison of
the method's family is secondary, with Holm-adjusted p-values beside the raw ones. The paired
bootstrap over test examples is printed only as a "test-sampling interval". A fine-tuned run whose
dev score does not beat the best constant predictor's is flagged († in its cell, counted in the
footer), and a "best constant predictor" baseline row is printed.

Columns: fine-tuned test scores (cMedQANER and cEHRNER entity F1, cMedQQ accuracy, CHIP-STS
macro-F1; tasks with fewer than 200 scored test units go to a secondary table, e.g. cMedIC's 84
examples) and, on the pre-trained models, SMedBERT's similarity sets D1–D3 (Acc@1,
:mod:`kgplm.evaluation.similarity`), the cloze probe split into facts seen / not seen in the
pre-training text (:mod:`benchmarks._probe`), and each method's own evaluations
(``MethodSpec.evaluations``, e.g. a product-attribute AUC).

Cells (:mod:`_cells`): each fine-tuned run (row, pre-training seed, task, fine-tuning seed) is a
JSON under ``--cells/<run key>/`` (default ``experiments/results/cells``; for ``--smoke`` the work
directory's ``cells/``) with its outcomes, its dev check, every setting it depends on, the commit
and the results versions of its methods. The runner skips cells it has, resumes after a kill,
computes the missing ones in ``--jobs`` processes (``--max-new-cells`` stops after that many), and
refuses a table from cells of different results versions. Caches under ``--work`` (pre-trained
models, fine-tuned models, the shared KG artefacts and linked corpora, similarity sets) are keyed by
every setting that changes them and by the results version of the method (a test changes each
:class:`Budget` field and sees a key change). Results go to
``experiments/results/replicate[-smoke].{json,md}`` with the table's commit, every commit its cells
came from, the budget and the settings.

    .venv/bin/python experiments/replicate.py --smoke --jobs 1  # the runner at a tiny budget (checks it end to end)
    # a registered study (experiments/protocols/v5.md): its rows, seeds, the budgets its protocol measured and
    # its cut, one family per invocation (each family has its own budgets)
    .venv/bin/python experiments/replicate.py --primary --methods smedbert --tasks cmedqaner \
        --seeds 0 1 2 3 4 5 6 --paired-finetune-seeds --base-rows --choices experiments/results/protocol \
        --cut-rows "smedbert: shuffled graph" ... --threads 1 --jobs 2 --results-name replicate-v5-smedbert
    .venv/bin/python experiments/replicate.py [--steps 400 --seeds 0 1 2 3 4 --finetune-seeds 0 1 --jobs 4 --device cuda]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import _shared  # noqa: E402,F401  (puts benchmarks/ on the path: _data, _runs)
from _data import SHARED, cmekg_store, mixed_corpus  # noqa: E402
from _table import MIN_PRIMARY_SEEDS  # noqa: E402
from graph_controls import shuffle_links, shuffle_links_within_types  # noqa: E402
from study import study, studied  # noqa: E402

from kgplm.exceptions import ArtifactError, ConfigurationError  # noqa: E402

logger = logging.getLogger("replicate")
ROOT = Path(__file__).resolve().parent
HEADLINE_MIN_TEST_UNITS = 200


# -- settings --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Budget:
    """Everything that changes a number in the table (each cache key holds the part it depends on)."""

    steps: int = 400
    batch_size: int = 16
    learning_rate: float = 1e-3
    #: continued pre-training's warm-up (``kgplm.train(warmup_steps=)``; ``None``: kgplm's default)
    warmup_steps: int | None = None
    encoder: dict = field(
        default_factory=lambda: {
            "hidden_size": 128,
            "num_hidden_layers": 4,
            "num_attention_heads": 4,
            "intermediate_size": 512,
            "max_position_embeddings": 512,
        }
    )
    max_length: int = 128
    vocab_size: int = 8000
    facts: int = 3000
    dialogues: int = 3000
    kg_method: str | None = "transe"  # None: each method's own (SMedBERT: TransR from TransE)
    entity_dim: int = 64
    kg_epochs: int = 2
    seeds: tuple[int, ...] = (0, 1, 2)
    finetune_seeds: tuple[int, ...] = (0, 1)
    #: True: pre-training seed s is fine-tuned once, with fine-tuning seed s (``finetune_seeds`` unused), so
    #: a row without pre-training (the base fine-tuned) still varies with the seed it is paired by
    paired_finetune_seeds: bool = False
    #: task: [max train examples, epochs] or [max train examples, epochs, learning rate] (without one: the
    #: ``finetune_learning_rate``); measured on the bases with ``experiments/finetune_budget.py``
    #: (2026-11-25, fine-tuning seed 0 on the two bases: cMedQQ 2000 × 3 at 2e-3 reached dev 55.7 vs constant 50.4,
    #: at 5e-4 and 5e-3 it stayed constant; cMedQANER 800 × 4 reached 11.0 at 5e-4 and 0.0 at 2e-3; CHIP-STS
    #: learnt on the MLM base at 2000 × 3, 2e-3 (dev 46.9 vs 33.6) and on the ELECTRA base at none of 2000–4000 ×
    #: 2–3, 1e-3–5e-3: experiments/results/finetune_budget.jsonl). NER fine-tunes on its full training split
    #: (cMedQANER: 1,673 documents); its epochs and rate are read off the base's dev curve by
    #: ``experiments/finetune_protocol.py`` and recorded in the study's protocol file before any row runs.
    tasks: dict = field(
        default_factory=lambda: {
            "cmedqaner": [None, 4],
            "cehrner": [None, 4],
            "cmedqq": [2000, 3, 2e-3],
            "chip-sts": [2000, 3, 2e-3],
        }
    )
    max_eval_examples: int | None = None
    finetune_learning_rate: float = 5e-4
    finetune_batch_size: int = 32
    finetune_max_length: int = 128
    similarity_queries: int = 500
    similarity_pool: int = 5000  # same-type entities searched for hard negatives (kgplm's default)
    probes: int = 500
    bootstrap_resamples: int = 10_000
    smoke: bool = False
    #: "continued": every row continues pre-training for ``steps`` from one base encoder per family (MLM +
    #: SOP for the BERT-style methods, ELECTRA for the ELECTRA-style ones; :data:`BASE_RECIPES`), as the
    #: papers continue from BERT, PubMedBERT or ELECTRA; "scratch": every row trains from random weights
    protocol: str = "continued"
    base_steps: int = 2000
    base_batch_size: int = 32
    base_learning_rate: float = 5e-4

    def finetune_seeds_of(self, seed: int) -> tuple[int, ...]:
        """The fine-tuning seeds of pre-training seed ``seed``: ``(seed,)`` when paired, else ``finetune_seeds``."""
        return (seed,) if self.paired_finetune_seeds else tuple(self.finetune_seeds)

    def task_budget(self, task: str) -> tuple[int | None, int, float]:
        """(max train examples, epochs, learning rate) of fine-tuning on ``task``."""
        limit, epochs, *rate = self.tasks[task]
        if len(rate) > 1:
            raise ValueError(
                f"Budget.tasks[{task!r}] = {self.tasks[task]}: expected [examples, epochs] or "
                f"[examples, epochs, learning rate]"
            )
        return limit, epochs, float(rate[0]) if rate else self.finetune_learning_rate

    def describe(self) -> str:
        encoder = self.encoder
        protocol = (
            f'continued pre-training (protocol "continued"): one base per family, trained once with seed 0 '
            f"for {self.base_steps} steps × batch {self.base_batch_size} (lr {self.base_learning_rate:g}) on "
            f"the same text and vocabulary (MLM + SOP with token masking for the BERT-style methods and their "
            f"controls, ELECTRA for the ELECTRA-style ones), then every row continues from its family's base "
            f"with its own seed for "
            if self.protocol == "continued"
            else 'every row pre-trained from random weights (protocol "scratch"): '
        )
        return (
            protocol
            + f"pre-training {self.steps} steps × batch {self.batch_size} (lr {self.learning_rate:g}) of an encoder "
            f"with hidden {encoder['hidden_size']}, {encoder['num_hidden_layers']} layers, max length "
            f"{self.max_length}, an in-domain WordPiece vocabulary of {self.vocab_size}, on {self.facts} CMeKG "
            f"facts written as sentences + {self.dialogues} medical dialogues; KG embeddings "
            f"{self.kg_method or 'of each method'} (dim {self.entity_dim}, {self.kg_epochs} epochs); "
            f"pre-training seeds {list(self.seeds)}, fine-tuning seeds "
            + ("equal to the pre-training seed " if self.paired_finetune_seeds else f"{list(self.finetune_seeds)} ")
            + f"(lr {self.finetune_learning_rate:g}, batch {self.finetune_batch_size}, max length "
            f"{self.finetune_max_length}; "
            + ", ".join(
                f"{task} {limit or 'all'} train examples × {epochs} epochs"
                + (f" (lr {rate:g})" if rate != self.finetune_learning_rate else "")
                for task, (limit, epochs, rate) in ((task, self.task_budget(task)) for task in self.tasks)
            )
            + f"; dev/test {'all' if self.max_eval_examples is None else self.max_eval_examples} examples); "
            f"{self.similarity_queries} similarity queries per set (hard negatives from {self.similarity_pool} "
            f"same-type entities), {self.probes} probes; "
            f"{self.bootstrap_resamples} bootstrap resamples"
        )


SMOKE = Budget(
    steps=30,
    batch_size=8,
    learning_rate=2e-3,
    encoder={
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": 160,
    },
    max_length=64,
    vocab_size=2000,
    facts=300,
    dialogues=300,
    kg_method="transe",
    entity_dim=16,
    kg_epochs=1,
    seeds=(0, 1, 2),
    finetune_seeds=(0,),
    tasks={"cmedqaner": [120, 1], "cehrner": [40, 1], "cmedqq": [200, 1], "chip-sts": [200, 1]},
    max_eval_examples=60,
    finetune_learning_rate=2e-3,
    finetune_batch_size=32,
    finetune_max_length=64,
    similarity_queries=60,
    probes=60,
    bootstrap_resamples=1000,
    smoke=True,
    base_steps=20,
    base_batch_size=8,
    base_learning_rate=2e-3,
)
PROTOCOLS = ("continued", "scratch")


from _cells import key_hash  # noqa: E402,F401  (one hash for cache directories and cells)


#: the environment variable through which a run hands its commit to the worker processes it starts
RUN_COMMIT = "KGPLM_STUDY_RUN_COMMIT"


@functools.cache
def commit() -> str:
    """The commit of the code this run loaded: the repository's commit when the run (:func:`main`, which
    hands it to its worker processes in :data:`RUN_COMMIT`) or this process first asks, with ``+dirty`` when
    tracked files then differ from it; commits made while the run goes on do not change it."""
    if os.environ.get(RUN_COMMIT):
        return os.environ[RUN_COMMIT]

    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def cached_directory(parent: Path, name: str, key: dict) -> tuple[Path, bool]:
    """(directory for ``key``, whether it already holds a finished result); logs reuse across commits."""
    slug = "".join(c if c.isalnum() else "-" for c in name)[:60]
    directory = parent / f"{slug}-{key_hash(key)}"
    marker = directory / "key.json"
    if marker.is_file():
        stored = json.loads(marker.read_text(encoding="utf-8"))
        if stored.get("commit") != commit():
            logger.info("reusing %s computed at commit %s", directory.name, stored.get("commit"))
        return directory, True
    return directory, False


def mark_done(directory: Path, key: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "key.json").write_text(
        json.dumps({"key": key, "commit": commit()}, indent=1, default=str), encoding="utf-8"
    )


# -- rows ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Pretraining:
    """One pre-training configuration: rows with equal configurations share their runs."""

    method: str
    masking: str
    model_options: tuple[tuple[str, object], ...] = ()
    train_options: tuple[tuple[str, object], ...] = ()  # other kgplm.train arguments (an attribution row's)

    @classmethod
    def of(cls, method: str, masking: str | None = None, model_options=None, train_options=None) -> Pretraining:
        from kgplm.methods import get

        return cls(
            method,
            masking or get(method).default_masking,
            tuple(sorted(dict(model_options or {}).items())),
            tuple(sorted(dict(train_options or {}).items())),
        )

    def key(self) -> dict:
        key = {"method": self.method, "masking": self.masking, "model_options": dict(self.model_options)}
        return {**key, "train_options": dict(self.train_options)} if self.train_options else key


@dataclass(frozen=True)
class Row:
    """A row of the table. ``group``: the knowledge method whose family it belongs to (``None``: reference
    rows); ``control``: the name of the row it is compared with, paired by seed (a method row: its fair
    control; an ablation or "− knowledge at fine-tuning": the method row itself); the comparison counts
    in ``group``'s family (:mod:`_table`)."""

    name: str
    role: str  # method | no knowledge at fine-tuning | ablation | control | reference | any role an extra row names
    pretraining: Pretraining
    group: str | None = None
    control: str | None = None
    encoder_inputs: bool = True
    finetune_options: tuple[tuple[str, object], ...] = ()  # other kgplm.finetune arguments (an attribution row's)
    tasks: tuple[str, ...] | None = None  # the fine-tuning tasks of this row (None: every task of the budget)

    def fine_tunes(self, task: str) -> bool:
        return self.tasks is None or task in self.tasks


def _ablation_label(name: str) -> str:
    return name.replace("no_", "no ").replace("_", " ")


def control_row_name(name: str) -> str:
    control = study(name).control
    return (
        f"{name} control: {control.method}"
        + "".join(f", {k}={v}" for k, v in sorted(control.model_options.items()))
        + f" ({Pretraining.of(control.method, control.masking).masking} masking)"
    )


#: Builders of extra rows for a knowledge method (attribution rows, model-based baselines):
#: ``builder(name, spec, method_row, control_row) -> list[Row]``, called for every knowledge method
#: after its ablations. A builder returns ``[]`` for methods it does not concern; each row it returns
#: names the row it is compared with (``control``: the method's or the control's row name).
EXTRA_ROWS: list = []


def plan_rows(methods: Sequence[str] | None = None, *, primary: bool = False, base_rows: bool = False) -> list[Row]:
    """The table's rows from the registry (module docstring); ``methods`` restricts the knowledge methods.

    Per knowledge method: the method (compared with its control), "− knowledge at fine-tuning" when the
    method feeds its encoder extra inputs at fine-tuning, every ablation (both compared with the
    *method*: does the module contribute?), the rows of :data:`EXTRA_ROWS`, and its control.

    ``primary``: the primary table — per method its row, its control, "− knowledge at fine-tuning" and
    its attribution rows, each fine-tuned only on the method's primary-endpoint tasks; no ablations,
    no extra rows, no reference row.

    ``base_rows`` (protocol "continued"): per method also its family's base fine-tuned as it is, without
    continued pre-training (role ``"base"``, :func:`base_row_name`), and the control compared with it
    (does the continued pre-training lose ground?)."""
    rows = _all_rows(methods, primary=primary, base_rows=base_rows)
    if not primary:
        return rows
    from kgplm.evaluation.tasks import task_names

    known = set(task_names())
    return [
        dataclasses.replace(row, tasks=tuple(e.task for e in study(row.group).primary_endpoints if e.task in known))
        for row in rows
    ]


def base_itself(family: str) -> Pretraining:
    """A base row's configuration: the family's base recipe, marked as not pre-trained again, so it never
    equals a row that continues from the base with the same recipe (runs are shared by configuration)."""
    recipe = base_pretraining(family)
    return dataclasses.replace(recipe, train_options=(("continued_pretraining", False),))


def base_row_name(method: str) -> str:
    """The row of ``method``'s family base fine-tuned without continued pre-training."""
    return f"{method} family: the {base_family(method)} base, no continued pre-training"


def _all_rows(methods: Sequence[str] | None, *, primary: bool, base_rows: bool = False) -> list[Row]:
    from kgplm.methods import available, get

    rows = []
    for name in studied():
        spec, record = get(name), study(name)
        if record.control is None or (methods is not None and name not in methods):
            continue
        control = record.control
        control_row = control_row_name(name)
        own = Pretraining.of(name)
        method_row = Row(name, "method", own, name, control_row)
        rows.append(method_row)
        if spec.finetuning_inputs is not None:
            rows.append(
                Row(
                    f"{name} − knowledge at fine-tuning",
                    "no knowledge at fine-tuning",
                    own,
                    name,
                    name,
                    encoder_inputs=False,
                )
            )
        for ablation_name in () if primary else record.ablations:  # each compared with the method
            ablation = record.ablation(ablation_name)
            rows.append(
                Row(
                    f"{name} − {_ablation_label(ablation_name)}",
                    "ablation",
                    Pretraining.of(name, ablation.masking, ablation.model_options),
                    name,
                    name,
                )
            )
        control_pretraining = Pretraining.of(control.method, control.masking, control.model_options)
        rows.extend(attribution_rows(name, control_row, control_pretraining))
        for builder in () if primary else EXTRA_ROWS:
            rows.extend(builder(name, spec, method_row, control_row))
        if base_rows:
            rows.append(Row(control_row, "control", control_pretraining, name, base_row_name(name)))
            # the base's own recipe: it is never pre-trained again (run_all fine-tunes the base itself)
            rows.append(Row(base_row_name(name), "base", base_itself(base_family(name)), name))
        else:
            rows.append(Row(control_row, "control", control_pretraining, name))
    if "mlm" in available() and not primary:
        rows.append(Row("mlm (token masking, no SOP)", "reference", Pretraining.of("mlm")))
    names = [row.name for row in rows]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise RuntimeError(f"rows {duplicates} are planned twice (an EXTRA_ROWS builder repeats a name)")
    return rows


def attribution_rows(name: str, control_row: str, control_pretraining: Pretraining) -> list[Row]:
    """The rows a method's study record declares in ``attribution_rows`` (:class:`study.AttributionRow`)."""
    rows = []
    for label, declared in study(name).attribution_rows.items():
        base = Pretraining.of(name) if declared.base == "method" else control_pretraining
        pretraining = dataclasses.replace(
            base,
            model_options=tuple(sorted({**dict(base.model_options), **dict(declared.model_options)}.items())),
            train_options=tuple(sorted(dict(declared.train_options).items())),
        )
        rows.append(
            Row(
                f"{name}: {label}",
                "attribution",
                pretraining,
                name,
                name if declared.compare_with == "method" else control_row,
                finetune_options=tuple(sorted(dict(declared.finetune_options).items())),
            )
        )
    return rows


def reads_gazetteer_table(row: Row) -> bool:
    """Whether ``row`` fine-tunes with the typed gazetteer (``kgplm.finetune(mention_spans="typed")``), which
    reads the KG embedding table its family's method is trained with (:func:`gazetteer_table`)."""
    return dict(row.finetune_options).get("mention_spans") == "typed"


def gazetteer_table(work: Path, budget: Budget, method: str, shared_name: str) -> str:
    """The shared KG embeddings ``method`` (a row's family) reads, the directory :func:`prepopulate` gives its
    runs: the typed gazetteer's entity vectors."""
    from kgplm.methods import get
    from kgplm.training.run import RunDirectory

    return str(RunDirectory(work / shared_name).embeddings_dir(budget.kg_method or get(method).kg_embedding))


#: ``graph_shuffle`` → the graph control that builds a row's ``knowledge_graph`` (:mod:`graph_controls`)
GRAPH_SHUFFLES = {"all": shuffle_links, "within_types": shuffle_links_within_types}


def train_arguments(shared: Shared, options) -> dict:
    """The ``kgplm.train`` arguments of a row's ``train_options``: ``graph_shuffle_seed`` becomes
    ``knowledge_graph``, the shared store with its links shuffled by the control ``graph_shuffle`` names
    (:data:`GRAPH_SHUFFLES`: ``"all"``, the default, a derangement across all entities,
    :func:`graph_controls.shuffle_links`; ``"within_types"``, a derangement within each entity type,
    :func:`graph_controls.shuffle_links_within_types`); every other option is passed as it is."""
    arguments = dict(options)
    seed = arguments.pop("graph_shuffle_seed", None)
    kind = arguments.pop("graph_shuffle", None)
    if kind is not None and kind not in GRAPH_SHUFFLES:
        raise ConfigurationError(f"train option graph_shuffle={kind!r}: expected one of {sorted(GRAPH_SHUFFLES)}")
    if kind is not None and seed is None:
        raise ConfigurationError(f"train option graph_shuffle={kind!r} needs a graph_shuffle_seed beside it")
    if seed is not None:
        arguments["knowledge_graph"] = GRAPH_SHUFFLES[kind or "all"](shared.store, seed)
    return arguments


def results_versions(row: Row) -> dict[str, int]:
    """The results version of every method a row's numbers depend on: its pre-training method and the
    knowledge method whose family it is in (whose record defines the row)."""
    methods = [row.pretraining.method] + ([row.group] if row.group else [])
    return {method: study(method).results_version for method in methods}


def method_evaluation_columns(rows: Sequence[Row]) -> dict[str, tuple[str, object]]:
    """Column name → (method, :class:`kgplm.methods.MethodEvaluation`) for the methods in ``rows``."""
    from kgplm.methods import get

    columns = {}
    for group in dict.fromkeys(row.group for row in rows if row.group):
        for column, evaluation in get(group).evaluations.items():
            columns[f"{group}: {column}"] = (group, evaluation)
    return columns


# -- shared inputs: graph, text, vocabulary, KG artefacts, linked corpora ------------------------------------
@dataclass
class Shared:
    store: object
    graph: str
    corpus: Path
    tokenizer: Path
    kg: object  # RunDirectory holding the KG artefacts every row shares
    inputs: object  # StageInputs of the shared run
    corpora: dict = field(default_factory=dict)


#: The shared KG artefacts' settings beside the corpus file, which is named by facts and dialogues (PEPR's
#: neighbours, mode and seed are :data:`PEPR_SETTINGS`, keyed in every cell).
SHARED_FIELDS = ("vocab_size", "kg_method", "entity_dim", "kg_epochs")


#: PEPR's settings for the shared neighbour table (and a shuffled-graph row's own); ``seed`` is the shared
#: stages' seed (PEPR's sampling and the KG embeddings)
PEPR_SETTINGS = {"num_neighbors": 10, "pepr_mode": "fast", "seed": 0}


def shared_key(budget: Budget, corpus_name: str | None = None) -> dict:
    """``corpus_name``: the pre-training text's file (default: the mixed corpus of the budget's facts and
    dialogues; :func:`held_out_text_removed` names a filtered one after its filters)."""
    return {
        "corpus": corpus_name or f"corpus-{budget.facts}-{budget.dialogues}.txt",
        **{name: getattr(budget, name) for name in SHARED_FIELDS},
    }


def corpus_key(budget: Budget, knowledge: bool, whole_word: bool) -> dict:
    """The key of a shared linked corpus: the variant and every setting ``build_corpus`` reads from the budget
    (the tokenizer, graph and PEPR table are the shared directory's, named by :func:`shared_key`)."""
    return {"knowledge": knowledge, "whole_word": whole_word, "max_length": budget.max_length}


def shared_inputs(work: Path, budget: Budget, rows: Sequence[Row]) -> Shared:
    """Build once what does not depend on the pre-training seed, with kgplm's own stages."""
    from kgplm.methods import get
    from kgplm.training import stages
    from kgplm.training.run import RunDirectory

    store = cmekg_store(ROOT / ".cache")  # compiled once per machine, whatever --work is
    corpus = mixed_corpus(work / f"corpus-{budget.facts}-{budget.dialogues}.txt", store, budget.facts, budget.dialogues)
    corpus = held_out_text_removed(work, store, corpus, rows)
    key = shared_key(budget, corpus.name)
    kg = RunDirectory(work / f"shared-{key_hash(key)}")
    specs = [get(row.pretraining.method) for row in rows]
    specs += [get(row.group) for row in rows if reads_gazetteer_table(row)]  # the table it reads
    own_kind = "transr" if any(spec.kg_embedding == "transr" for spec in specs) else "transe"
    arguments = {
        "tokenizer": None,
        "text_model": None,
        "vocab_size": budget.vocab_size,
        "neighbor_table": None,
        "kg_embeddings": None,
        **PEPR_SETTINGS,
        "kg_method": budget.kg_method or own_kind,
        "entity_dim": budget.entity_dim,
        "kg_epochs": budget.kg_epochs,
        "max_length": budget.max_length,
    }
    if not kg.run_config_path.is_file():
        kg.write_run_config({"kgplm_run": 1, "shared_by": "experiments/replicate.py", **key})
    inputs = stages.StageInputs(arguments=arguments, store=store, corpus=corpus, corpus_options={}, progress=False)
    stages.prepare_tokenizer(kg, inputs)
    needed = set().union(*(spec.artefacts for spec in specs)) & {
        "entity_frequencies",
        "neighbor_table",
        "kg_embeddings",
    }
    stages.run_artefact_stages(needed, kg, inputs)
    return Shared(store, str(ROOT / ".cache" / "cmekg_store"), corpus, kg.tokenizer_dir, kg, inputs)


def shared_corpus(shared: Shared, budget: Budget, pretraining: Pretraining) -> Path:
    """The linked corpus a configuration reads, built once per variant (knowledge or text, whole-word or
    not) and keyed by :func:`corpus_key`: a changed ``max_length`` builds a new one."""
    from kgplm.methods import get
    from kgplm.text.masking import WORD_SCHEMES
    from kgplm.text.tokenization import load_tokenizer
    from kgplm.training import stages
    from kgplm.training.run import RunDirectory

    spec = get(pretraining.method)
    variant = (spec.needs("neighbor_table"), pretraining.masking in WORD_SCHEMES)  # word schemes need word_ids
    if variant not in shared.corpora:
        corpus_run = RunDirectory(
            shared.kg.path / f"corpus-{'knowledge' if variant[0] else 'text'}"
            f"{'-whole-word' if variant[1] else ''}-"
            f"{key_hash(corpus_key(budget, *variant))}"
        )
        artefacts = {"neighbor_table": shared.inputs.artefacts["neighbor_table"]} if variant[0] else {}
        inputs = dataclasses.replace(shared.inputs, artefacts=artefacts)
        stages.prepare_corpus(corpus_run, inputs, load_tokenizer(shared.tokenizer), masking=pretraining.masking)
        shared.corpora[variant] = corpus_run.corpus_dir
    return shared.corpora[variant]


def held_out_text_removed(work: Path, store, corpus: Path, rows: Sequence[Row]) -> Path:
    """``corpus`` without the lines the rows' own evaluations hold out (``MethodEvaluation.filter_text``), for
    every row alike; the same path when no evaluation filters."""
    filters = {}  # column → filter, each filter once
    for column, (_, evaluation) in method_evaluation_columns(rows).items():
        if evaluation.filter_text and evaluation.filter_text not in filters.values():
            filters[column] = evaluation.filter_text
    if not filters:
        return corpus
    path = corpus.with_name(f"{corpus.stem}-without-{key_hash({'filters': sorted(filters)})}{corpus.suffix}")
    if not path.is_file():
        lines = corpus.read_text(encoding="utf-8").splitlines()
        for column, keep in filters.items():
            before = len(lines)
            lines = keep(store, lines)
            logger.info(
                "%s: %d of %d pre-training text lines hold out its facts and are dropped",
                column,
                before - len(lines),
                before,
            )
        path.write_text("\n".join(lines), encoding="utf-8")
    return path


def evaluation_method_data(method: str) -> dict:
    """The ``method_data`` that ``method``'s own evaluations need of its pre-training (``MethodEvaluation``)."""
    from kgplm.methods import get

    data: dict = {}
    for evaluation in get(method).evaluations.values():
        data.update(evaluation.method_data)
    return data


def prepopulate(shared: Shared, budget: Budget, pretraining: Pretraining, run_dir: Path) -> dict:
    """Link the seed-independent stages (mention counts, the linked corpus) into a new run directory,
    and return the cached-artefact arguments of ``kgplm.train`` (PEPR table, KG embeddings)."""
    from kgplm.methods import get
    from kgplm.training.run import RunDirectory

    spec, run = get(pretraining.method), RunDirectory(run_dir)
    if pretraining.train_options:  # e.g. a shuffled graph: the run builds its own KG artefacts and corpus
        return {name: PEPR_SETTINGS[name] for name in ("pepr_mode", "num_neighbors")}  # as the shared table
    arguments = {}
    if spec.needs("neighbor_table"):
        arguments["neighbor_table"] = str(shared.kg.neighbor_table_path)
    if spec.needs("kg_embeddings"):
        arguments["kg_embeddings"] = str(shared.kg.embeddings_dir(budget.kg_method or spec.kg_embedding))
    corpus_dir = shared_corpus(shared, budget, pretraining)
    if not run.corpus_dir.exists():
        shutil.copytree(corpus_dir, run.corpus_dir, copy_function=os.link)
    if spec.needs("entity_frequencies") and not run.entity_frequencies_path.exists():
        run.kg_dir.mkdir(parents=True, exist_ok=True)
        os.link(shared.kg.entity_frequencies_path, run.entity_frequencies_path)
    return arguments


# -- pre-training, fine-tuning, probes -----------------------------------------------------------------------
#: The budget fields a pre-training run depends on (with the row's configuration, the seed and the shared inputs).
PRETRAINING_FIELDS = (
    "steps",
    "batch_size",
    "learning_rate",
    "warmup_steps",
    "encoder",
    "max_length",
    "vocab_size",
    "facts",
    "dialogues",
    "kg_method",
    "entity_dim",
    "kg_epochs",
)
#: The budget fields a fine-tuning run depends on beyond its task's (train limit, epochs) and its pre-trained model.
FINETUNING_FIELDS = ("max_eval_examples", "finetune_learning_rate", "finetune_batch_size", "finetune_max_length")


#: The budget fields a base encoder depends on (with its family's recipe and the shared inputs).
BASE_FIELDS = (
    "base_steps",
    "base_batch_size",
    "base_learning_rate",
    "encoder",
    "max_length",
    "vocab_size",
    "facts",
    "dialogues",
)
#: The base encoder of each family (protocol "continued"): what every row of the family continues from.
BASE_RECIPES = {"mlm": ("mlm", None, {"use_sop": True}), "electra": ("electra", None, {})}
BASE_SEED = 0
#: torch and numba threads of every base's training: float sums depend on the thread count, so a base rebuilds
#: bit for bit (its record's weights_sha256) only with the count it was first trained with
BASE_THREADS = 2


def registered_budget(budget: Budget, choices: Path, methods: Sequence[str]) -> Budget:
    """``budget`` with what a study protocol measured before any row ran (its ``*-choice.json`` files in
    ``choices``): each task's fine-tuning epochs and learning rate (``<method>-<task>-choice.json`` where the
    protocol gave a method's rows their own, else ``<family>-<task>-choice.json``; written by
    ``finetune_protocol.py``) and the continued pre-training's learning rate and warm-up
    (``<method>-control-choice.json``, written by ``control_protocol.py``), which must be one for all of
    ``methods``: a budget holds one pre-training rate and one fine-tuning budget per task, so methods whose
    choices differ run in separate invocations."""

    def read(name: str, made_by: str) -> dict:
        path = choices / name
        if not path.is_file():
            raise ArtifactError(f"{path}: no such choice; run experiments/{made_by} first")
        return json.loads(path.read_text(encoding="utf-8"))

    from finetune_protocol import choice_path

    for method in methods:  # a method given its own budget (the protocol's §4a) has it for every task
        own = [task for task in budget.tasks if (choices / f"{method}-{task}-choice.json").is_file()]
        if own and len(own) != len(budget.tasks):
            missing = sorted(set(budget.tasks) - set(own))
            raise ArtifactError(
                f"{choices}: {method} has its own fine-tuning budget for {own} but not for {missing}; "
                f"run experiments/finetune_protocol.py --name {method} for those first"
            )
    tasks = {}
    for task, (limit, *_) in budget.tasks.items():
        chosen = {
            method: read(choice_path(choices, task, method, base_family(method)).name, "finetune_protocol.py")
            for method in methods
        }
        picked = {(choice["epochs"], choice["learning_rate"]) for choice in chosen.values()}
        if len(picked) > 1:
            raise ConfigurationError(
                f"{task}: the methods' fine-tuning budgets differ ("
                + ", ".join(f"{m}: {c['epochs']} epochs at {c['learning_rate']:g}" for m, c in chosen.items())
                + "); run one --methods at a time"
            )
        [(epochs, learning_rate)] = picked
        tasks[task] = [limit, epochs, learning_rate]
    rates = {method: read(f"{method}-control-choice.json", "control_protocol.py") for method in methods}
    settings = {(choice["learning_rate"], choice["warmup_steps"]) for choice in rates.values()}
    if len(settings) > 1:
        raise ConfigurationError(
            "the controls chose different pre-training rates ("
            + ", ".join(
                f"{method}: lr {c['learning_rate']:g}, warm-up {c['warmup_steps']}" for method, c in rates.items()
            )
            + "); run one --methods at a time"
        )
    [(learning_rate, warmup_steps)] = settings
    return dataclasses.replace(budget, tasks=tasks, learning_rate=learning_rate, warmup_steps=warmup_steps)


def without_rows(rows: Sequence[Row], cut: Sequence[str]) -> list[Row]:
    """``rows`` without the rows named in ``cut`` (a study protocol's cut, when its run does not fit its
    budget); a name that is not a planned row, or a row another row is compared with, is refused."""
    names = {row.name for row in rows}
    unknown = sorted(set(cut) - names)
    if unknown:
        raise ConfigurationError(f"--cut-rows: {unknown} are not planned rows; the rows are {sorted(names)}")
    needed = sorted({row.control for row in rows if row.name not in cut and row.control in cut})
    if needed:
        raise ConfigurationError(f"--cut-rows: {needed} cannot be cut, other rows are compared with them")
    return [row for row in rows if row.name not in cut]


def base_family(method: str) -> str:
    """``"electra"`` for the methods built on ELECTRA's generator/discriminator pair, else ``"mlm"``."""
    from kgplm.methods import get
    from kgplm.models.electra import KgplmForReplacedTokenDetection

    return "electra" if issubclass(get(method).model_class, KgplmForReplacedTokenDetection) else "mlm"


def base_pretraining(family: str) -> Pretraining:
    method, masking, options = BASE_RECIPES[family]
    return Pretraining.of(method, masking, options)


def base_key(budget: Budget, family: str, shared_name: str) -> dict:

    recipe = base_pretraining(family)
    return {
        "family": family,
        **recipe.key(),
        "seed": BASE_SEED,
        "shared": shared_name,
        "results_version": study(recipe.method).results_version,
        **{name: getattr(budget, name) for name in BASE_FIELDS},
    }


def pretraining_key(budget: Budget, pretraining: Pretraining, seed: int, shared_name: str) -> dict:

    key = {
        **pretraining.key(),
        "seed": seed,
        "shared": shared_name,
        "results_version": study(pretraining.method).results_version,
        "method_data": evaluation_method_data(pretraining.method),
        **{name: getattr(budget, name) for name in PRETRAINING_FIELDS},
    }
    if budget.protocol == "continued":  # the scratch protocol's keys stay what they were
        key.update(protocol="continued", base=base_key(budget, base_family(pretraining.method), shared_name))
    return key


def row_pretraining_key(budget: Budget, row: Row, seed: int, shared_name: str) -> dict:
    """What a row's model for ``seed`` depends on: its pre-training's key, or for a base row (no continued
    pre-training) its base's key alone."""
    if row.role == "base":
        return {"base": base_key(budget, base_family(row.pretraining.method), shared_name)}
    return pretraining_key(budget, row.pretraining, seed, shared_name)


def finetuning_key(
    budget: Budget, pretrained: str, task: str, seed: int, encoder_inputs: bool, options: tuple = ()
) -> dict:
    limit, epochs, learning_rate = budget.task_budget(task)
    key = {
        "pretrained": pretrained,
        "task": task,
        "seed": seed,
        "encoder_inputs": encoder_inputs,
        "max_train_examples": limit,
        "epochs": epochs,
        **{name: getattr(budget, name) for name in FINETUNING_FIELDS},
        "finetune_learning_rate": learning_rate,
    }  # the task's own, where it has one
    return {**key, "finetune_options": dict(options)} if options else key


#: where each base's recipe, weights' SHA-256 and curves are recorded (committed; :func:`pretrain_base`)
BASES_RECORDS = ROOT / "results" / "bases"


def pretrain_base(work: Path, shared: Shared, budget: Budget, family: str, device: str) -> Path:
    """The family's base encoder (cached in ``work``), trained once with :data:`BASE_SEED`; its recipe,
    the SHA-256 of its weights and its curves (MLM loss and accuracy, SOP loss and accuracy, or ELECTRA's
    losses) go to ``BASES_RECORDS/<family>-<key hash>.json`` and the base itself (weights, config,
    tokenizer, metrics; the weights are git-ignored) to the directory of that name, so a machine that has
    them continues from that base instead of training it again (its weights' SHA-256 is checked against
    the record).
    The same recipe on the same code and CPU rebuilds the same weights (always trained with
    :data:`BASE_THREADS` threads, whatever ``--threads`` or ``OMP_NUM_THREADS`` say)."""
    import kgplm

    key = base_key(budget, family, shared.kg.path.name)
    directory, done = cached_directory(work / "base", family, key)
    records = work / "bases" if budget.smoke else BASES_RECORDS  # a smoke run's records stay in its work directory
    record_path = records / f"{family}-{key_hash(key)}.json"
    committed = record_path.with_suffix("")
    if not done and (committed / "model" / "model.safetensors").is_file():
        _restore_base(committed, directory, json.loads(record_path.read_text(encoding="utf-8")))
        mark_done(directory, key)
        done = True
    if done:
        if record_path.is_file() and not (committed / "model" / "model.safetensors").is_file():
            _export_base(directory, committed)
        return directory
    resumed_from_step = resumed_step(directory)  # the times below cover only the steps after it
    started, cpu_started = time.perf_counter(), time.process_time()
    recipe = base_pretraining(family)
    cached = prepopulate(shared, budget, recipe, directory)
    result = kgplm.train(
        recipe.method,
        graph=shared.graph,
        corpus=shared.corpus,
        output_dir=directory,
        text_model=dict(budget.encoder),
        tokenizer=shared.tokenizer,
        vocab_size=budget.vocab_size,
        masking=recipe.masking,
        model_options=dict(recipe.model_options),
        kg_method=budget.kg_method,
        entity_dim=budget.entity_dim,
        kg_epochs=budget.kg_epochs,
        max_steps=budget.base_steps,
        batch_size=budget.base_batch_size,
        learning_rate=budget.base_learning_rate,
        log_every=max(1, budget.base_steps // 40),
        checkpoint_every=max(1, budget.base_steps // 4),
        max_length=budget.max_length,
        seed=BASE_SEED,
        device=device,
        num_threads=BASE_THREADS,
        progress=False,
        **cached,
    )
    digest = _sha256(directory / "model" / "model.safetensors")
    record = {
        "family": family,
        "recipe": key,
        "commit": commit(),
        "weights_sha256": digest,
        "seconds": round(time.perf_counter() - started),
        "cpu_seconds": round(time.process_time() - cpu_started),
        "timed_steps": budget.base_steps - resumed_from_step,
        "resumed_from_step": resumed_from_step,
        "rebuild": "experiments/replicate.py builds it (pretrain_base) from this recipe; the same code on the same "
        "CPU gives the same weights_sha256",
        "num_threads": BASE_THREADS,
        "curve": result.metrics,
    }
    registered = write_base_record(record_path, record)
    logger.info("base %s: %d steps in %.0f s, weights %s…", family, budget.base_steps, record["seconds"], digest[:12])
    mark_done(directory, key)
    if registered:
        _export_base(directory, committed)
    else:  # rebuilt bit for bit: the registered files stay; only the (git-ignored) weights join them
        shutil.copy2(directory / "model" / "model.safetensors", committed / "model" / "model.safetensors")
    return directory


def resumed_step(directory: Path) -> int:
    """The step a run stopped part-way in ``directory`` resumes from (its last checkpoint), 0 when none."""
    from kgplm.training.checkpoints import latest_checkpoint

    checkpoint = latest_checkpoint(directory)
    return (
        0
        if checkpoint is None
        else int(json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))["step"])
    )


#: what a base directory needs to be continued from (``kgplm.train(init_from=...)``) and read back
BASE_FILES = ("model", "tokenizer", "run_config.json", "metrics.jsonl")


def write_base_record(record_path: Path, record: dict) -> bool:
    """Register a freshly trained base: write its record and return True. A record already there for the
    same recipe is the registered base every cell continues from: weights equal to it leave it as it is
    (False: a rebuild), weights that differ are refused (:class:`ArtifactError`) rather than silently
    registered in its place."""
    if record_path.is_file():
        registered = json.loads(record_path.read_text(encoding="utf-8"))
        if registered["weights_sha256"] == record["weights_sha256"]:
            logger.info("%s: rebuilt bit for bit; the registered record stays", record_path)
            return False
        raise ArtifactError(
            f"{record_path}: the rebuilt {record['family']} base has weights SHA-256 "
            f"{record['weights_sha256']}, but the registered base's are {registered['weights_sha256']} "
            f"(trained at commit {registered.get('commit')} with {registered.get('num_threads', 2)} threads); "
            "rebuild with that code and thread count, or delete the record to register a new base"
        )
    record_path.parent.mkdir(parents=True, exist_ok=True)
    temporary = record_path.with_suffix(".tmp")
    temporary.write_text(json.dumps(record, indent=1, ensure_ascii=False, default=str), encoding="utf-8")
    temporary.replace(record_path)
    return True


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _export_base(directory: Path, committed: Path) -> None:
    """Copy a trained base's model, tokenizer, config and curves beside its record (to be committed)."""
    temporary = committed.with_name(committed.name + ".tmp")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    for name in BASE_FILES:
        source = directory / name
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, temporary / name)
    shutil.rmtree(committed, ignore_errors=True)
    temporary.rename(committed)
    logger.info("base exported to %s", committed)


def _restore_base(committed: Path, directory: Path, record: dict) -> None:
    """Put a committed base into the work directory, after checking its weights against its record."""
    digest = _sha256(committed / "model" / "model.safetensors")
    if digest != record["weights_sha256"]:
        raise RuntimeError(
            f"{committed}: weights SHA-256 {digest} differs from its record's "
            f"{record['weights_sha256']}; delete the directory to train the base again"
        )
    directory.mkdir(parents=True, exist_ok=True)
    for name in BASE_FILES:
        source, target = committed / name, directory / name
        if target.exists():
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, target)
    logger.info("base restored from %s (weights %s…)", committed, digest[:12])


def pretrain(
    work: Path,
    shared: Shared,
    budget: Budget,
    pretraining: Pretraining,
    seed: int,
    device: str,
    base: Path | None = None,
) -> Path:
    """One row configuration's pre-training; under the continued protocol it starts from ``base``."""
    import kgplm

    key = pretraining_key(budget, pretraining, seed, shared.kg.path.name)
    directory, done = cached_directory(work / "pretrain", f"{pretraining.method}-s{seed}", key)
    if done:
        return directory
    if (budget.protocol == "continued") != (base is not None):
        raise RuntimeError(f"protocol {budget.protocol!r} with base {base}")
    started = time.perf_counter()
    cached = prepopulate(shared, budget, pretraining, directory)
    start = {"init_from": str(base)} if base is not None else {"text_model": dict(budget.encoder)}
    result = kgplm.train(
        pretraining.method,
        graph=shared.graph,
        corpus=shared.corpus,
        output_dir=directory,
        **start,
        tokenizer=shared.tokenizer,
        vocab_size=budget.vocab_size,
        masking=pretraining.masking,
        model_options=dict(pretraining.model_options),
        kg_method=budget.kg_method,
        entity_dim=budget.entity_dim,
        kg_epochs=budget.kg_epochs,
        max_steps=budget.steps,
        batch_size=budget.batch_size,
        learning_rate=budget.learning_rate,
        warmup_steps=budget.warmup_steps,
        log_every=max(1, budget.steps // 20),
        checkpoint_every=budget.steps,
        max_length=budget.max_length,
        seed=seed,
        device=device,
        progress=False,
        method_data=evaluation_method_data(pretraining.method) or None,
        **cached,
        **train_arguments(shared, pretraining.train_options),
    )
    curve = result.curve("loss")
    logger.info(
        "pre-trained %s seed %d: loss %.3f → %.3f in %.0f s",
        directory.name,
        seed,
        curve[0],
        curve[-1],
        time.perf_counter() - started,
    )
    mark_done(directory, key)
    return directory


def finetune(
    work: Path,
    budget: Budget,
    run: Path,
    task: str,
    seed: int,
    encoder_inputs: bool,
    device: str,
    options: tuple = (),
    kg_embeddings: str | None = None,
) -> tuple[dict, Path]:
    """Fine-tune ``run`` on ``task``; its per-example test outcomes (cached with their key) and its directory.
    ``kg_embeddings``: the typed gazetteer's table (:func:`gazetteer_table`; fixed by the run and the budget,
    so not a key of its own)."""
    import kgplm
    from _outcomes import scored_outcomes

    key = finetuning_key(budget, run.name, task, seed, encoder_inputs, options)
    directory, done = cached_directory(
        work / "finetune",
        f"{task}-f{seed}{'' if encoder_inputs else '-text'}"
        f"{'-' + '-'.join(name for name, _ in options) if options else ''}",
        key,
    )
    outcomes_path = directory / "outcomes.json"
    if done:
        return json.loads(outcomes_path.read_text(encoding="utf-8")), directory
    with exclusive(directory):  # two rows may ask for the same fine-tuning at once (each family's base row)
        if (directory / "key.json").is_file():  # the other process finished it while this one waited
            return json.loads(outcomes_path.read_text(encoding="utf-8")), directory
        limit, epochs, learning_rate = budget.task_budget(task)
        result = kgplm.finetune(
            model=run,
            task=task,
            data_dir=SHARED / "tasks",
            output_dir=directory,
            epochs=epochs,
            batch_size=budget.finetune_batch_size,
            learning_rate=learning_rate,
            max_length=budget.finetune_max_length,
            max_train_examples=limit,
            max_eval_examples=budget.max_eval_examples,
            seed=seed,
            encoder_inputs=encoder_inputs,
            device=device,
            progress=False,
            **dict(options),
            **({"kg_embeddings": kg_embeddings} if kg_embeddings else {}),
        )
        outcomes = scored_outcomes(directory, task, SHARED / "tasks", device=device)
        if abs(outcomes["score"] - result.test["main"]) > 1e-9:
            raise RuntimeError(
                f"{directory}: per-example outcomes give {outcomes['score']:.6f}, kgplm.finetune reported "
                f"{result.test['main']:.6f}; the outcome decoding no longer matches kgplm's scoring"
            )
        outcomes_path.write_text(json.dumps(outcomes), encoding="utf-8")
        mark_done(directory, key)
        return outcomes, directory


@contextlib.contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock beside ``directory`` (``<name>.lock``, ``fcntl.flock``) for the block: a second
    process that wants the same cached computation waits for the first, then finds it done."""
    import fcntl

    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f"{directory.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def intrinsic_key(budget: Budget, pretrained: str) -> dict:
    return {"pretrained": pretrained, **{name: getattr(budget, name) for name in INTRINSIC_FIELDS}}


def intrinsic(work: Path, budget: Budget, run: Path, similarity_sets, probe, device: str) -> dict:
    """Per-query similarity hits and per-probe hits of a pre-trained model (cached)."""
    from kgplm.evaluation.similarity import similarity_hits
    from kgplm.models import load_pretrained
    from kgplm.text.tokenization import load_tokenizer

    key = {**intrinsic_key(budget, run.name), "probe_queries": probe.fingerprint}
    directory, done = cached_directory(work / "intrinsic", run.name, key)
    if done:
        return json.loads((directory / "outcomes.json").read_text(encoding="utf-8"))
    model, tokenizer = load_pretrained(run / "model"), load_tokenizer(run / "tokenizer")
    outcomes = {
        name: hits.astype(int).tolist()
        for name, hits in similarity_hits(model, tokenizer, similarity_sets, device=device).items()
    }
    probe_hits = probe.hits(model, device=device)
    if probe_hits is not None:
        outcomes["probe"] = probe_hits.astype(int).tolist()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "outcomes.json").write_text(json.dumps(outcomes), encoding="utf-8")
    mark_done(directory, key)
    return outcomes


def own_evaluation(work: Path, run: Path, method_run: Path, column: str, evaluation, device: str) -> float:
    from kgplm.training.run import RunDirectory

    key = {"pretrained": run.name, "method_run": method_run.name, "column": column}
    directory, done = cached_directory(work / "own", f"{column}-{run.name}", key)
    if done:
        return json.loads((directory / "value.json").read_text(encoding="utf-8"))["value"]
    value = float(evaluation.run(run / "model", RunDirectory(method_run), device=device, progress=False))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "value.json").write_text(json.dumps({"value": value}), encoding="utf-8")
    mark_done(directory, key)
    return value


def similarity_sets_for(work: Path, shared: Shared, budget: Budget, corpus_lines: list[str]) -> dict:
    """SMedBERT's similarity sets D1–D3 on the graph and pre-training text (cached: building them takes minutes)."""
    from kgplm.evaluation.similarity import SimilarityQuery, build_similarity_sets

    key = {"corpus": shared.corpus.name, "queries": budget.similarity_queries, "pool": budget.similarity_pool}
    directory, done = cached_directory(work / "similarity", "sets", key)
    if done:
        stored = json.loads((directory / "sets.json").read_text(encoding="utf-8"))
        return {
            name: [
                SimilarityQuery(q["query"], tuple(q["candidates"]), q["query_entity"], q["positive_entity"])
                for q in queries
            ]
            for name, queries in stored.items()
        }
    sets = build_similarity_sets(
        shared.store,
        corpus_texts=corpus_lines,
        max_queries=budget.similarity_queries,
        pool_size=budget.similarity_pool,
        seed=0,
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sets.json").write_text(
        json.dumps(
            {name: [dataclasses.asdict(q) for q in queries] for name, queries in sets.items()}, ensure_ascii=False
        ),
        encoding="utf-8",
    )
    mark_done(directory, key)
    return sets


# -- cells ------------------------------------------------------------------------------------------------
#: Budget fields that change no cached run or cell, only which cells are read or how they are summarised.
TABLE_FIELDS = ("seeds", "finetune_seeds", "paired_finetune_seeds", "bootstrap_resamples", "smoke")
#: Budget fields of the pre-trained models' own measurements (similarity sets, probe), cached in ``--work``.
INTRINSIC_FIELDS = ("similarity_queries", "similarity_pool", "probes")


def run_key(budget: Budget) -> dict:
    """What every cell of a run shares (names ``<cells>/<run key>/``): pre-training and fine-tuning settings."""
    key = {name: getattr(budget, name) for name in (*PRETRAINING_FIELDS, *FINETUNING_FIELDS)}
    if budget.protocol == "continued":
        key.update(protocol=budget.protocol, **{name: getattr(budget, name) for name in BASE_FIELDS})
    return key


def run_directory_name(budget: Budget) -> str:
    return f"{'smoke' if budget.smoke else 'run'}-{key_hash(run_key(budget))}"


def _plain(value):
    """A JSON value for a cell key: numbers, strings, booleans and ``None`` as they are, anything else its repr."""
    return value if value is None or isinstance(value, (str, int, float, bool)) else repr(value)


def linker_settings() -> dict:
    """The entity linker's configuration (its constructor's defaults, which every linked corpus and fine-tuning
    lookup of the study uses: no row passes ``linking=``), read from the code so a changed default changes
    every cell key."""
    import inspect

    from kgplm.text.linking import EntityLinker

    return {
        name: _plain(parameter.default)
        for name, parameter in inspect.signature(EntityLinker.__init__).parameters.items()
        if name not in ("self", "store") and parameter.default is not inspect.Parameter.empty
    }


def _field_default(settings_class, name: str):
    return next(field.default for field in dataclasses.fields(settings_class) if field.name == name)


def optimisation_settings(budget: Budget, pretraining: Pretraining, task: str, *, continued: bool = True) -> dict:
    """Every optimisation setting a cell's numbers depend on, the budget's and kgplm's defaults the runner does
    not pass (read from the code): pre-training's learning rate, warm-up, weight decay, gradient clipping,
    accumulation, the method's loss weights (its configuration's ``*_weight`` defaults, overridden by the
    row's ``model_options``), batch and steps, the base's; fine-tuning's learning rate, warm-up ratio,
    weight decay, clipping, patience, batch and epochs. ``continued=False`` (a row fine-tuning the base
    itself): no continued pre-training settings."""
    import inspect

    import kgplm
    from kgplm.methods import get
    from kgplm.finetuning.loop import FineTuneSettings
    from kgplm.training.trainer import TrainerSettings

    train = inspect.signature(kgplm.train).parameters
    fine = inspect.signature(kgplm.finetune).parameters
    configuration = inspect.signature(get(pretraining.method).config_class.__init__).parameters
    loss_weights = {
        name: _plain(parameter.default) for name, parameter in configuration.items() if name.endswith("_weight")
    }
    loss_weights.update({name: _plain(v) for name, v in pretraining.model_options if name.endswith("_weight")})
    _, epochs, learning_rate = budget.task_budget(task)
    return {
        "pretraining": {
            "learning_rate": budget.learning_rate,
            "warmup_steps": budget.warmup_steps if budget.warmup_steps is not None else train["warmup_steps"].default,
            "weight_decay": train["weight_decay"].default,
            "max_grad_norm": _field_default(TrainerSettings, "max_grad_norm"),
            "gradient_accumulation_steps": train["gradient_accumulation_steps"].default,
            "loss_weights": loss_weights,
            "batch_size": budget.batch_size,
            "steps": budget.steps,
        }
        if continued
        else None,
        "base": {
            "learning_rate": budget.base_learning_rate,
            "batch_size": budget.base_batch_size,
            "steps": budget.base_steps,
        },
        "finetuning": {
            "learning_rate": learning_rate,
            "warmup_ratio": fine["warmup_ratio"].default,
            "weight_decay": fine["weight_decay"].default,
            "max_grad_norm": _field_default(FineTuneSettings, "max_grad_norm"),
            "patience": _plain(fine["patience"].default),
            "batch_size": budget.finetune_batch_size,
            "epochs": epochs,
        },
    }


def data_digests(task: str) -> dict:
    """SHA-256 of the data a cell reads: the task's files (those present under the shared tasks root), the
    CMeKG source and the pre-training corpus source (:func:`_cells.tree_sha256`)."""
    from _cells import file_sha256, tree_sha256

    from kgplm.evaluation.tasks import get_task

    root = SHARED / "tasks"
    files = {
        split: file_sha256(root / relative)
        for split, relative in sorted(get_task(task).files.items())
        if (root / relative).is_file()
    }
    trees = {"kg": SHARED / "kg" / "cmekg", "corpus": SHARED / "corpus"}
    return {"task": files, **{name: tree_sha256(path) if path.is_dir() else None for name, path in trees.items()}}


def cell_job(
    budget: Budget,
    row: Row,
    seed: int,
    task: str,
    finetune_seed: int,
    shared_name: str,
    pretrained: Path | None = None,
    *,
    base_weights_sha256: str | None = None,
    data: dict | None = None,
) -> "CellJob":  # noqa: F821  (imported below, from experiments/_cells.py)
    """The cell (row, pre-training seed, task, fine-tuning seed): its key holds every setting it depends on —
    the pre-training and fine-tuning keys, PEPR's settings (:data:`PEPR_SETTINGS`), the linker's
    (:func:`linker_settings`), the optimisation settings (:func:`optimisation_settings`), the data's digests
    (``data``, default :func:`data_digests`) and the base encoder's weights' SHA-256 (protocol continued)."""
    from _cells import CellJob

    versions = results_versions(row)
    fine = finetuning_key(budget, "<pretrained>", task, finetune_seed, row.encoder_inputs, row.finetune_options)
    del fine["pretrained"]
    key = {
        "row": row.name,
        "role": row.role,
        "pretraining": row_pretraining_key(budget, row, seed, shared_name),
        "finetuning": fine,
        "results_versions": versions,
        "pepr": dict(PEPR_SETTINGS),
        "linker": linker_settings(),
        "optimisation": optimisation_settings(budget, row.pretraining, task, continued=row.role != "base"),
        "data": data_digests(task) if data is None else data,
        "base_weights_sha256": base_weights_sha256,
    }
    return CellJob(
        row.name,
        seed,
        task,
        finetune_seed,
        key,
        versions,
        {
            "pretrained": None if pretrained is None else str(pretrained),
            "encoder_inputs": row.encoder_inputs,
            "finetune_options": list(row.finetune_options),
            **({"gazetteer_of": [row.group, shared_name]} if reads_gazetteer_table(row) else {}),
        },
    )


#: set in each process that computes cells (:func:`_init_cell_worker`)
_CELL_CONTEXT: dict = {}


def exit_with_parent(interval: float = 5.0) -> threading.Thread:
    """Stop this worker process when the runner that started it is gone: a killed runner's pool workers
    otherwise keep training, orphaned, and hold the machine's cores (seen here: two bases trained on for
    45 minutes after their runner was killed)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            if os.getppid() != parent:  # re-parented: the runner died
                logger.warning("the runner (process %d) is gone; this worker stops", parent)
                os._exit(1)
                return  # never reached in a process (a test's stand-in for os._exit returns)
            time.sleep(interval)

    thread = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    thread.start()
    return thread


def _init_cell_worker(work: str, budget: dict, device: str, threads: int | None) -> None:
    """Set up the cell context; in a worker process (not the runner itself, which computes the cells with one
    worker) also stop when the runner is gone."""
    import multiprocessing

    import torch

    if multiprocessing.parent_process() is not None:  # the runner's own process has no runner to outlive
        exit_with_parent()
    if threads:
        torch.set_num_threads(threads)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    _CELL_CONTEXT.update(work=Path(work), budget=Budget(**budget), device=device)


def compute_cell(job) -> dict:
    """Fine-tune the job's pre-trained model and return the cell's measurements: test outcomes, the dev
    score per epoch (``curve``) and the kept dev score beside the best constant predictor's (a run that does
    not beat it is ``degenerate``)."""
    from _outcomes import best_constant, chance_score, dev_kappa

    from kgplm.evaluation.tasks import load_task

    work, budget, device = _CELL_CONTEXT["work"], _CELL_CONTEXT["budget"], _CELL_CONTEXT["device"]
    outcomes, directory = finetune(
        work,
        budget,
        Path(job.inputs["pretrained"]),
        job.task,
        job.finetune_seed,
        job.inputs["encoder_inputs"],
        device,
        tuple(tuple(option) for option in job.inputs.get("finetune_options", ())),
        gazetteer_table(work, budget, *job.inputs["gazetteer_of"]) if "gazetteer_of" in job.inputs else None,
    )
    results = json.loads((directory / "results.json").read_text(encoding="utf-8"))
    splits = load_task(job.task, SHARED / "tasks")
    by_id = {example.id: example for example in splits["dev"]}
    dev = [by_id[i] for i in results["example_ids"]["dev"]]
    constant = best_constant(job.task, splits["train"], dev)
    return {
        "outcomes": outcomes,
        "curve": [  # the learning curve: dev score and training loss per epoch
            {"epoch": point["epoch"], "dev": point["dev_main"], "train_loss": point["train_loss"]}
            for point in results["history"]
        ],
        "dev": dev_record(
            float(results["dev"]["main"]),
            constant,
            chance=chance_score(job.task, splits["train"], dev),
            kappa=dev_kappa(directory, job.task, SHARED / "tasks", device=device),
        ),
    }


#: a dev score within this of the best constant predictor's (or chance) does not beat it
DEGENERATE_TOLERANCE = 1e-9


def dev_record(dev_score: float, constant: dict, *, chance: float | None = None, kappa: float | None = None) -> dict:
    """A run's dev score beside the best constant predictor's, chance and its dev Cohen's κ; ``degenerate``
    by :func:`kgplm.evaluation.degenerate.degenerate_reasons` (it does not beat the constant or chance, or
    its κ ≤ 0), ``reasons`` saying why."""
    from kgplm.evaluation.degenerate import degenerate_reasons

    reasons = degenerate_reasons(
        dev_score, constant=constant["score"], chance=chance, kappa=kappa, tolerance=DEGENERATE_TOLERANCE
    )
    return {
        "score": dev_score,
        "constant": constant["score"],
        "constant_prediction": constant["prediction"],
        "chance": chance,
        "kappa": kappa,
        "degenerate": bool(reasons),
        "reasons": reasons,
    }


def _pretrain_job(item) -> Path:
    pretraining, seed, base = item
    context = _CELL_CONTEXT
    if "shared" not in context:
        context["shared"] = shared_inputs(context["work"], context["budget"], context["rows"])
    if pretraining is None:  # a base: ``seed`` is the family's name
        return pretrain_base(context["work"], context["shared"], context["budget"], seed, context["device"])
    return pretrain(context["work"], context["shared"], context["budget"], pretraining, seed, context["device"], base)


def _init_pretrain_worker(work: str, budget: dict, device: str, threads: int | None, rows) -> None:
    _init_cell_worker(work, budget, device, threads)
    _CELL_CONTEXT["rows"] = rows


def pretrain_bases(
    work: Path, shared: Shared, budget: Budget, rows: Sequence[Row], device: str, jobs: int, threads: int | None
) -> dict[str, Path]:
    """Protocol "continued": the base of every family the rows need, in up to ``jobs`` processes (cached)."""
    if budget.protocol != "continued":
        return {}
    families = sorted({base_family(row.pretraining.method) for row in rows})
    paths = _run_pretraining(
        [(None, family, None) for family in families],
        work,
        shared,
        budget,
        rows,
        device,
        min(jobs, len(families)),
        threads,
    )
    return dict(zip(families, paths))


def _run_pretraining(
    items: list,
    work: Path,
    shared: Shared,
    budget: Budget,
    rows: Sequence[Row],
    device: str,
    jobs: int,
    threads: int | None,
) -> list[Path]:
    if jobs <= 1:
        return [_pretrain_here(item, work, shared, budget, device) for item in items]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(
        jobs,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_pretrain_worker,
        initargs=(str(work), dataclasses.asdict(budget), device, threads, list(rows)),
    ) as pool:
        return list(pool.map(_pretrain_job, items))


def _pretrain_here(item, work: Path, shared: Shared, budget: Budget, device: str) -> Path:
    pretraining, seed, base = item
    if pretraining is None:
        return pretrain_base(work, shared, budget, seed, device)
    return pretrain(work, shared, budget, pretraining, seed, device, base)


def pretrain_all(
    work: Path,
    shared: Shared,
    budget: Budget,
    rows: Sequence[Row],
    device: str,
    jobs: int,
    threads: int | None,
    seeds: Sequence[int] | None = None,
    bases: dict[str, Path] | None = None,
) -> dict[Pretraining, list[Path]]:
    """Every distinct pre-training configuration × seed (``seeds``, default the budget's), in ``jobs``
    processes (each run cached in ``--work``); under the continued protocol each starts from its family's
    base in ``bases``. A ``"base"`` row is not pre-trained: its run is the base itself."""
    seeds = budget.seeds if seeds is None else seeds
    bases = bases or {}
    items = list(
        dict.fromkeys(
            (row.pretraining, seed, bases.get(base_family(row.pretraining.method)))
            for row in rows
            if row.role != "base"  # fine-tuned from the base itself
            for seed in seeds
        )
    )
    paths = _run_pretraining(items, work, shared, budget, rows, device, jobs, threads)
    runs: dict[Pretraining, list[Path]] = {}
    for (pretraining, _, _), path in zip(items, paths):
        runs.setdefault(pretraining, []).append(path)
    for row in rows:
        if row.role == "base":
            runs[row.pretraining] = [bases[base_family(row.pretraining.method)]] * len(seeds)
    return runs


# -- the whole run ------------------------------------------------------------------------------------------
def run_all(
    work: Path,
    budget: Budget,
    rows: Sequence[Row],
    device: str,
    *,
    cells_root: Path,
    jobs: int = 1,
    threads: int | None = None,
    max_new_cells: int | None = None,
    intrinsic_columns: bool = True,
) -> dict:
    """Every measurement of the table, as the raw material :func:`_table.aggregate` summarises: the shared
    inputs, the bases (protocol "continued"), then seed by seed every pre-training (``jobs`` processes), its
    cells (read from ``cells_root`` where they exist, else computed in ``jobs`` processes and written as each
    finishes) and the methods' own evaluations (written beside the cells), so a run stopped after k seeds
    keeps k whole seeds; last the pre-trained models' similarity and probe measurements
    (``intrinsic_columns``)."""
    from _cells import run_cells
    from kgplm.evaluation.tasks import load_task

    started = time.perf_counter()
    shared = shared_inputs(work, budget, rows)
    for pretraining in dict.fromkeys(row.pretraining for row in rows):
        shared_corpus(shared, budget, pretraining)  # built here, before worker processes read them
    if budget.protocol == "continued":
        for family in {base_family(row.pretraining.method) for row in rows}:
            shared_corpus(shared, budget, base_pretraining(family))
    corpus_lines = shared.corpus.read_text(encoding="utf-8").splitlines()
    timings = {"shared inputs": time.perf_counter() - started}
    bases = pretrain_bases(work, shared, budget, rows, device, jobs, threads)
    timings["bases"] = time.perf_counter() - started - sum(timings.values())
    from _cells import file_sha256

    base_digests = {family: file_sha256(path / "model" / "model.safetensors") for family, path in bases.items()}
    digests = {task: data_digests(task) for task in budget.tasks}

    runs: dict[Pretraining, list[Path]] = {}
    cells, own = [], {}
    timings.update({"pre-training": 0.0, "fine-tuning": 0.0, "own evaluations": 0.0})
    budget_left = max_new_cells
    for seed in budget.seeds:  # seed-major: a stopped run holds whole seeds
        mark = time.perf_counter()
        for pretraining, paths in pretrain_all(
            work, shared, budget, rows, device, jobs, threads, seeds=[seed], bases=bases
        ).items():
            runs.setdefault(pretraining, []).extend(paths)
        timings["pre-training"] += time.perf_counter() - mark
        mark = time.perf_counter()
        seed_jobs = [
            cell_job(
                budget,
                row,
                seed,
                task,
                finetune_seed,
                shared.kg.path.name,
                runs[row.pretraining][-1],
                base_weights_sha256=base_digests.get(base_family(row.pretraining.method)),
                data=digests[task],
            )
            for row in rows
            for task in budget.tasks
            if row.fine_tunes(task)
            for finetune_seed in budget.finetune_seeds_of(seed)
        ]
        missing = sum(not job.path(cells_root).is_file() for job in seed_jobs)
        cells += run_cells(
            seed_jobs,
            compute_cell,
            cells_root,
            commit=commit(),
            workers=jobs,
            max_new=budget_left,
            initializer=_init_cell_worker,
            initargs=(str(work), dataclasses.asdict(budget), device, threads),
        )
        if budget_left is not None:
            budget_left -= missing
        timings["fine-tuning"] += time.perf_counter() - mark
        mark = time.perf_counter()
        for column, values in own_evaluations(
            work, budget, rows, runs, device, cells_root, shared.kg.path.name, seed
        ).items():
            for row_name, value in values.items():
                own.setdefault(column, {}).setdefault(row_name, []).append(value)
        timings["own evaluations"] += time.perf_counter() - mark

    measured = {
        "cells": cells,
        "own": own,
        "own_columns": method_evaluation_columns(rows),
        "splits": {task: load_task(task, SHARED / "tasks") for task in budget.tasks},
        "intrinsic": {},
        "similarity_sizes": {},
        "probe": None,
    }
    if intrinsic_columns:
        from _probe import HeldOutProbe
        from kgplm.text.tokenization import load_tokenizer

        mark = time.perf_counter()
        similarity_sets = similarity_sets_for(work, shared, budget, corpus_lines)
        probe = HeldOutProbe(shared.store, load_tokenizer(shared.tokenizer), corpus_lines, max_probes=budget.probes)
        measured.update(
            intrinsic={
                row.name: [
                    intrinsic(work, budget, run, similarity_sets, probe, device) for run in runs[row.pretraining]
                ]
                for row in rows
                if row.role != "no knowledge at fine-tuning"
            },
            similarity_sizes={name: len(queries) for name, queries in similarity_sets.items()},
            probe=probe,
        )
        timings["probes"] = time.perf_counter() - mark
    from kgplm.evaluation.baselines import linked_spans
    from kgplm.text.linking import EntityLinker

    measured.update(
        link=linked_spans(EntityLinker(shared.store), shared.store),  # the linker-as-NER baseline's
        timings=timings,
        bases={family: str(path) for family, path in bases.items()},
    )
    return measured


def own_evaluations(
    work: Path,
    budget: Budget,
    rows: Sequence[Row],
    runs: dict,
    device: str,
    cells_root: Path,
    shared_name: str,
    seed: int,
) -> dict[str, dict[str, float]]:
    """column → row → the methods' own evaluations (``MethodSpec.evaluations``) of ``seed``'s pre-trained
    models; each value is also written as a small JSON beside the cells (``cells_root/own/``), keyed like a
    cell, and read from there when present, so it survives the work directory."""
    from _cells import key_hash as hash_of
    from _cells import read_cell, write_cell

    values: dict[str, dict[str, float]] = {}
    for column, (method, evaluation) in method_evaluation_columns(rows).items():
        method_pretraining = next(row.pretraining for row in rows if row.name == method)
        for row in rows:
            if row.group != method or row.role == "no knowledge at fine-tuning":
                continue
            key = {
                "column": column,
                "row": row.name,
                "pretraining": row_pretraining_key(budget, row, seed, shared_name),
                "method_pretraining": pretraining_key(budget, method_pretraining, seed, shared_name),
                "results_versions": results_versions(row),
            }
            path = (
                cells_root
                / "own"
                / "".join(c if c.isalnum() else "-" for c in f"{column}-{row.name}")[:80]
                / (f"s{seed}-{hash_of(key)}.json")
            )
            if path.is_file():
                value = read_cell(path)["value"]
            else:
                value = own_evaluation(
                    work, runs[row.pretraining][-1], runs[method_pretraining][-1], column, evaluation, device
                )
                write_cell(
                    path,
                    {
                        "format": 1,
                        "row": row.name,
                        "seed": seed,
                        "task": column,
                        "finetune_seed": None,
                        "key": key,
                        "results_versions": key["results_versions"],
                        "commit": commit(),
                        "value": value,
                    },
                )
            values.setdefault(column, {})[row.name] = value
    return values


def describe_rows(rows: Sequence[Row]) -> str:
    """One line per row: its name, role, the row it is compared with, and what it pre-trains and fine-tunes with."""
    lines = []
    for row in rows:
        pretraining = row.pretraining
        options = ", ".join(f"{k}={v}" for k, v in pretraining.model_options + pretraining.train_options)
        finetune = ", ".join(
            [f"{k}={v}" for k, v in row.finetune_options] + ([] if row.encoder_inputs else ["the text only"])
        )
        trained = (
            f"the {base_family(pretraining.method)} base itself"
            if row.role == "base"
            else f"{pretraining.method} ({pretraining.masking} masking{'; ' + options if options else ''})"
        )
        lines.append(
            f"{row.name} [{row.role}{f', vs {row.control}' if row.control else ''}]: {trained}"
            + (f"; fine-tuned with {finetune}" if finetune else "")
            + (f"; tasks {', '.join(row.tasks)}" if row.tasks is not None else "")
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="the same pipeline at a tiny budget (checks the runner)")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--seeds", type=int, nargs="+", help="pre-training seeds (≥ 3 for a table that counts)")
    parser.add_argument("--finetune-seeds", type=int, nargs="+")
    parser.add_argument(
        "--paired-finetune-seeds",
        action="store_true",
        help="fine-tune pre-training seed s once, with fine-tuning seed s (--finetune-seeds unused)",
    )
    parser.add_argument("--facts", type=int)
    parser.add_argument("--dialogues", type=int)
    parser.add_argument(
        "--kg-method", choices=["transe", "transr", "own"], help="KG embeddings for every method, or each method's own"
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        help="fine-tuning tasks (default: the four headline tasks); a task "
        "with < 200 test units goes to the secondary table",
    )
    parser.add_argument("--methods", nargs="+", help="only these knowledge methods (default: every registered one)")
    parser.add_argument(
        "--primary",
        action="store_true",
        help="the primary table: per method its row, its control, − knowledge at fine-tuning and its "
        "attribution rows, fine-tuned on its primary endpoints' tasks only; no ablations, no "
        "similarity or probe columns",
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        help="continued (default): every row continues from one base per family; scratch: from random weights",
    )
    parser.add_argument(
        "--list-rows",
        action="store_true",
        help="print the planned rows (with --methods / --primary: those) — each with its role, what it is "
        "compared with, its pre-training and fine-tuning options — and stop",
    )
    parser.add_argument("--base-steps", type=int, help="steps of each family's base (protocol continued)")
    parser.add_argument(
        "--bases-only",
        action="store_true",
        help="train (or find) the families' bases, print where they are and stop (protocol continued)",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--threads",
        type=int,
        help="torch CPU threads (default: torch's; 1 with --smoke, which "
        "is much faster than several on a loaded machine)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="worker processes for pre-training and cells (1 while others share the machine)",
    )
    parser.add_argument("--work", type=Path)
    parser.add_argument(
        "--cells",
        type=Path,
        help="where cells accrue (default: experiments/results/cells; for --smoke the work directory's cells/)",
    )
    parser.add_argument(
        "--max-new-cells", type=int, help="compute at most this many new cells, then stop (resume by running again)"
    )
    parser.add_argument(
        "--choices",
        type=Path,
        help="a study protocol's measured choices (e.g. experiments/results/protocol): each task's fine-tuning "
        "epochs and rate and the controls' pre-training rate and warm-up (needs --methods)",
    )
    parser.add_argument(
        "--base-rows",
        action="store_true",
        help="per method also its family's base fine-tuned without continued pre-training, the control "
        "compared with it (needs the continued protocol and --paired-finetune-seeds)",
    )
    parser.add_argument(
        "--cut-rows",
        nargs="+",
        default=[],
        metavar="ROW",
        help="leave out these planned rows (by name, as --list-rows prints them): a protocol's cut",
    )
    parser.add_argument(
        "--secondary-endpoints",
        nargs="+",
        default=[],
        metavar="METHOD",
        help="report these methods' pre-registered endpoints as secondary tests: the protocol changed their "
        "family's budget after its first cells",
    )
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument(
        "--results-name",
        help="the results files' name (default: replicate, replicate-primary or replicate[-primary]-smoke)",
    )
    parser.add_argument(
        "--readme", action="store_true", help="also write the table into README.md's 'Does the knowledge help?' section"
    )
    args = parser.parse_args(argv)
    os.environ[RUN_COMMIT] = commit()  # before any work: the code this run loaded, for every worker too
    if args.list_rows:
        planned = plan_rows(args.methods, primary=args.primary, base_rows=args.base_rows)
        print(describe_rows(without_rows(planned, args.cut_rows)))
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import torch
    from _table import aggregate, render_markdown

    threads = args.threads or (1 if args.smoke else None)
    if threads:
        torch.set_num_threads(threads)
    budget = SMOKE if args.smoke else Budget()
    overrides = {name: getattr(args, name) for name in ("steps", "facts", "dialogues") if getattr(args, name)}
    if args.seeds:
        overrides["seeds"] = tuple(args.seeds)
    if args.finetune_seeds:
        overrides["finetune_seeds"] = tuple(args.finetune_seeds)
    if args.paired_finetune_seeds:
        overrides["paired_finetune_seeds"] = True
    if args.protocol:
        overrides["protocol"] = args.protocol
    if args.base_steps:
        overrides["base_steps"] = args.base_steps
    if args.kg_method:
        overrides["kg_method"] = None if args.kg_method == "own" else args.kg_method
    if args.tasks:
        overrides["tasks"] = {task: budget.tasks.get(task, [2000, 2]) for task in args.tasks}
    budget = dataclasses.replace(budget, **overrides)
    work = args.work or ROOT / ".cache" / ("replicate-smoke" if budget.smoke else "replicate")
    work.mkdir(parents=True, exist_ok=True)
    rows = without_rows(plan_rows(args.methods, primary=args.primary, base_rows=args.base_rows), args.cut_rows)
    unknown = sorted(set(args.secondary_endpoints) - {row.group for row in rows if row.role == "method"})
    if unknown:
        raise ConfigurationError(
            f"--secondary-endpoints {', '.join(unknown)}: not a method this run plans (its methods: "
            f"{', '.join(sorted({row.group for row in rows if row.role == 'method'}))})"
        )
    if args.primary and not args.tasks:  # the tasks of the rows' endpoints
        needed = {task for row in rows for task in row.tasks}
        budget = dataclasses.replace(
            budget, tasks={task: limits for task, limits in budget.tasks.items() if task in needed}
        )
    if args.base_rows and (budget.protocol != "continued" or not budget.paired_finetune_seeds):
        raise ConfigurationError(
            "--base-rows: the base rows need the continued protocol and --paired-finetune-seeds (the base is "
            "one model; only a fine-tuning seed paired with each pre-training seed makes its runs differ)"
        )
    if args.choices:
        if not args.methods:
            raise ConfigurationError("--choices: name the studied methods with --methods")
        budget = registered_budget(budget, args.choices, args.methods)
    cells_root = (args.cells or (work / "cells" if budget.smoke else ROOT / "results" / "cells")) / run_directory_name(
        budget
    )
    if not budget.smoke and len(budget.seeds) < MIN_PRIMARY_SEEDS:
        logger.warning(
            "%d pre-training seeds: the primary endpoints need at least %d; they will be labelled "
            "'too few seeds', not tested",
            len(budget.seeds),
            MIN_PRIMARY_SEEDS,
        )
    started = time.perf_counter()
    if args.bases_only:
        shared = shared_inputs(work, budget, rows)
        for pretraining in {base_pretraining(base_family(row.pretraining.method)) for row in rows}:
            shared_corpus(shared, budget, pretraining)
        for family, path in pretrain_bases(work, shared, budget, rows, args.device, args.jobs, threads).items():
            print(f"{family} base: {path} (shared inputs {shared.kg.path}, commit {commit()})")
        return
    measured = run_all(
        work,
        budget,
        rows,
        args.device,
        cells_root=cells_root,
        jobs=args.jobs,
        threads=threads,
        max_new_cells=args.max_new_cells,
        intrinsic_columns=not args.primary,
    )
    result = aggregate(
        rows,
        budget,
        measured,
        commit=commit(),
        device=f"{args.device}, {torch.get_num_threads()} torch threads",
        seconds=time.perf_counter() - started,
        secondary_endpoints={method: SECONDARY_REASON for method in args.secondary_endpoints},
    )
    args.results.mkdir(parents=True, exist_ok=True)
    stem = args.results_name or "replicate" + ("-primary" if args.primary else "") + ("-smoke" if budget.smoke else "")
    (args.results / f"{stem}.json").write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    markdown = render_markdown(result)
    (args.results / f"{stem}.md").write_text(markdown, encoding="utf-8")
    if args.readme:
        readme = ROOT.parent / "README.md"
        readme.write_text(
            between_markers(readme.read_text(encoding="utf-8"), render_markdown(result, 3)), encoding="utf-8"
        )
    print(markdown)
    print(f"written {args.results / stem}.json and .md in {time.perf_counter() - started:.0f} s")


#: why a method named by ``--secondary-endpoints`` has its endpoints reported as secondary tests
SECONDARY_REASON = "the protocol changed this family's budget after its first cells"


README_MARKERS = (
    "<!-- replication table: written by experiments/replicate.py --readme -->",
    "<!-- end of replication table -->",
)


def between_markers(text: str, table: str) -> str:
    """``text`` with what lies between :data:`README_MARKERS` replaced by ``table``."""
    start, end = (text.index(marker) for marker in README_MARKERS)
    return text[: start + len(README_MARKERS[0])] + "\n" + table.strip() + "\n" + text[end:]


if __name__ == "__main__":
    main()
