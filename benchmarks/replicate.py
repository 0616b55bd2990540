"""The replication table: does the knowledge help? Every registered method against its fair control.

Rows (from the method registry, :func:`plan_rows`): each knowledge method (a record with a
``control``), its fair control (the record's ``control``: plain MLM or plain ELECTRA with the same
masking and input format), every ablation it offers (``ablations``), for a method whose encoder
reads extra inputs at fine-tuning (``finetuning_inputs``, e.g. SMedBERT's linked mentions) a row
"no knowledge at fine-tuning" (the method's own pre-trained models fine-tuned on the text alone,
``kgplm.finetune(encoder_inputs=False)``), and plain token-masking MLM for reference. Every row
pre-trains on the same text (CMeKG facts written as sentences + Chinese medical dialogues) with the
same vocabulary, encoder size, steps, batch and learning rate; identical configurations are trained
once and shared between rows.

Seeds: every row is pre-trained with each of ``--seeds`` (≥ 3 for a table that counts) and every
pre-trained model fine-tuned with each of ``--finetune-seeds``; the same test examples for every
seed and row (full test splits, or one fixed subset — ``kgplm.finetune`` draws dev/test subsets
with a fixed seed — checked by example id). Cells are mean ± the 95% Student-t half-width over
pre-training seeds (fine-tuning seeds averaged within each); ``p`` is a paired bootstrap p-value
of the row against its method's control, resampling test examples with one draw shared by every
seed of both rows (:mod:`kgplm.evaluation.statistics` documents both).

Columns: fine-tuned test scores (cMedQANER and cEHRNER entity F1, cMedQQ accuracy, CHIP-STS
macro-F1; tasks with fewer than 200 scored test units go to a secondary table, e.g. cMedIC's 84
examples) and, on the pre-trained models, SMedBERT's similarity sets D1–D3 (Acc@1,
:mod:`kgplm.evaluation.similarity`), the cloze probe split into facts seen / not seen in the
pre-training text (:mod:`benchmarks._probe`), and each method's own evaluations
(``MethodSpec.evaluations``, e.g. a product-attribute AUC). Baseline rows: majority class
(all-O for NER), chance, and the probe's model-free baseline.

Caches under ``--work`` are keyed by every argument that changes a result (a hash of the settings
in each directory's ``key.json``): rerun to resume, change a setting to get new numbers. The code
version is not part of the key: clear ``--work`` after changing kgplm (a reused entry computed at
another commit is logged). Results go to ``benchmarks/results/replicate[-smoke].{json,md}`` with
the commit hash, the budget and the settings.

    .venv/bin/python benchmarks/replicate.py --smoke          # the runner at a tiny budget (minutes)
    .venv/bin/python benchmarks/replicate.py [--steps 400 --seeds 0 1 2 --finetune-seeds 0 1 --device cuda]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _data import SHARED, cmekg_store, mixed_corpus  # noqa: E402  (benchmarks/ is the script's directory)

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
    encoder: dict = field(default_factory=lambda: {"hidden_size": 128, "num_hidden_layers": 4,
                                                   "num_attention_heads": 4, "intermediate_size": 512,
                                                   "max_position_embeddings": 512})
    max_length: int = 128
    vocab_size: int = 8000
    facts: int = 3000
    dialogues: int = 3000
    kg_method: str | None = "transe"  # None: each method's own (SMedBERT: TransR from TransE)
    entity_dim: int = 64
    kg_epochs: int = 2
    seeds: tuple[int, ...] = (0, 1, 2)
    finetune_seeds: tuple[int, ...] = (0, 1)
    tasks: dict = field(default_factory=lambda: {"cmedqaner": [800, 4], "cehrner": [None, 4], "cmedqq": [2000, 2],
                                                 "chip-sts": [2000, 2]})  # task: [max train examples, epochs]
    max_eval_examples: int | None = None
    finetune_learning_rate: float = 5e-4
    finetune_batch_size: int = 32
    finetune_max_length: int = 128
    similarity_queries: int = 500
    similarity_pool: int = 5000  # same-type entities searched for hard negatives (kgplm's default)
    probes: int = 500
    bootstrap_resamples: int = 10_000
    smoke: bool = False

    def describe(self) -> str:
        encoder = self.encoder
        return (f"pre-training {self.steps} steps × batch {self.batch_size} (lr {self.learning_rate:g}) of an encoder "
                f"with hidden {encoder['hidden_size']}, {encoder['num_hidden_layers']} layers, max length "
                f"{self.max_length}, an in-domain WordPiece vocabulary of {self.vocab_size}, on {self.facts} CMeKG "
                f"facts written as sentences + {self.dialogues} medical dialogues; KG embeddings "
                f"{self.kg_method or 'of each method'} (dim {self.entity_dim}, {self.kg_epochs} epochs); "
                f"pre-training seeds {list(self.seeds)}, fine-tuning seeds {list(self.finetune_seeds)} "
                f"(lr {self.finetune_learning_rate:g}, batch {self.finetune_batch_size}, max length "
                f"{self.finetune_max_length}; " + ", ".join(
                    f"{task} {limit or 'all'} train examples × {epochs} epochs" for task, (limit, epochs)
                    in self.tasks.items())
                + f"; dev/test {'all' if self.max_eval_examples is None else self.max_eval_examples} examples); "
                f"{self.similarity_queries} similarity queries per set (hard negatives from {self.similarity_pool} "
                f"same-type entities), {self.probes} probes; "
                f"{self.bootstrap_resamples} bootstrap resamples")


SMOKE = Budget(steps=30, batch_size=8, learning_rate=2e-3,
               encoder={"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
                        "max_position_embeddings": 160},
               max_length=64, vocab_size=2000, facts=300, dialogues=300, kg_method="transe", entity_dim=16,
               kg_epochs=1, seeds=(0, 1, 2), finetune_seeds=(0,),
               tasks={"cmedqaner": [120, 1], "cehrner": [40, 1], "cmedqq": [200, 1], "chip-sts": [200, 1]},
               max_eval_examples=60, finetune_learning_rate=2e-3, finetune_batch_size=32, finetune_max_length=64,
               similarity_queries=60, probes=60, bootstrap_resamples=1000, smoke=True)


def key_hash(key: dict) -> str:
    return hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]


def commit() -> str:
    """The repository's commit, with ``+dirty`` when tracked files differ from it."""
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
    (directory / "key.json").write_text(json.dumps({"key": key, "commit": commit()}, indent=1, default=str),
                                        encoding="utf-8")


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

        return cls(method, masking or get(method).default_masking, tuple(sorted(dict(model_options or {}).items())),
                   tuple(sorted(dict(train_options or {}).items())))

    def key(self) -> dict:
        key = {"method": self.method, "masking": self.masking, "model_options": dict(self.model_options)}
        return {**key, "train_options": dict(self.train_options)} if self.train_options else key


@dataclass(frozen=True)
class Row:
    """A row of the table. ``group``: the knowledge method it belongs to (``None``: reference rows);
    ``control``: the name of the row it is tested against."""

    name: str
    role: str  # method | no knowledge at fine-tuning | ablation | control | reference
    pretraining: Pretraining
    group: str | None = None
    control: str | None = None
    encoder_inputs: bool = True
    finetune_options: tuple[tuple[str, object], ...] = ()  # other kgplm.finetune arguments (an attribution row's)


def _ablation_label(name: str) -> str:
    return name.replace("no_", "no ").replace("_", " ")


def plan_rows(methods: Sequence[str] | None = None) -> list[Row]:
    """The table's rows from the registry (module docstring); ``methods`` restricts the knowledge methods."""
    from kgplm.methods import available, get

    rows = []
    for name in available():
        spec = get(name)
        if spec.control is None or (methods is not None and name not in methods):
            continue
        control = spec.control
        control_row = (f"{name} control: {control.method}"
                       + "".join(f", {k}={v}" for k, v in sorted(control.model_options.items()))
                       + f" ({Pretraining.of(control.method, control.masking).masking} masking)")
        own = Pretraining.of(name)
        rows.append(Row(name, "method", own, name, control_row))
        if spec.finetuning_inputs is not None:
            rows.append(Row(f"{name} − knowledge at fine-tuning", "no knowledge at fine-tuning", own, name,
                            control_row, encoder_inputs=False))
        for ablation_name in spec.ablations:
            ablation = spec.ablation(ablation_name)
            rows.append(Row(f"{name} − {_ablation_label(ablation_name)}", "ablation",
                            Pretraining.of(name, ablation.masking, ablation.model_options), name, control_row))
        control_pretraining = Pretraining.of(control.method, control.masking, control.model_options)
        rows.extend(attribution_rows(name, spec, control_row, control_pretraining))
        rows.append(Row(control_row, "control", control_pretraining, name))
    if "mlm" in available():
        rows.append(Row("mlm (token masking, no SOP)", "reference", Pretraining.of("mlm")))
    return rows


def attribution_rows(name: str, spec, control_row: str, control_pretraining: Pretraining) -> list[Row]:
    """The rows a method's record declares in ``attribution_rows`` (:class:`kgplm.methods.AttributionRow`)."""
    rows = []
    for label, declared in spec.attribution_rows.items():
        base = Pretraining.of(name) if declared.base == "method" else control_pretraining
        pretraining = dataclasses.replace(base, train_options=tuple(sorted(dict(declared.train_options).items())))
        rows.append(Row(f"{name}: {label}", "attribution", pretraining, name,
                        name if declared.compare_with == "method" else control_row,
                        finetune_options=tuple(sorted(dict(declared.finetune_options).items()))))
    return rows


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


def shared_inputs(work: Path, budget: Budget, rows: Sequence[Row]) -> Shared:
    """Build once what does not depend on the pre-training seed, with kgplm's own stages."""
    from kgplm.methods import get
    from kgplm.training import stages
    from kgplm.training.run import RunDirectory

    store = cmekg_store(ROOT / ".cache")  # compiled once per machine, whatever --work is
    corpus = mixed_corpus(work / f"corpus-{budget.facts}-{budget.dialogues}.txt", store, budget.facts, budget.dialogues)
    corpus = held_out_text_removed(work, store, corpus, rows)
    key = {"corpus": corpus.name, "vocab_size": budget.vocab_size, "kg_method": budget.kg_method,
           "entity_dim": budget.entity_dim, "kg_epochs": budget.kg_epochs}
    kg = RunDirectory(work / f"shared-{key_hash(key)}")
    specs = [get(row.pretraining.method) for row in rows]
    own_kind = "transr" if any(spec.kg_embedding == "transr" for spec in specs) else "transe"
    arguments = {"tokenizer": None, "text_model": None, "vocab_size": budget.vocab_size, "neighbor_table": None,
                 "kg_embeddings": None, "num_neighbors": 10, "pepr_mode": "fast", "seed": 0,
                 "kg_method": budget.kg_method or own_kind, "entity_dim": budget.entity_dim,
                 "kg_epochs": budget.kg_epochs, "max_length": budget.max_length}
    if not kg.run_config_path.is_file():
        kg.write_run_config({"kgplm_run": 1, "shared_by": "benchmarks/replicate.py", **key})
    inputs = stages.StageInputs(arguments=arguments, store=store, corpus=corpus, corpus_options={}, progress=False)
    stages.prepare_tokenizer(kg, inputs)
    needed = set().union(*(spec.artefacts for spec in specs)) & {
        "entity_frequencies", "neighbor_table", "kg_embeddings"}
    stages.run_artefact_stages(needed, kg, inputs)
    return Shared(store, str(ROOT / ".cache" / "cmekg_store"), corpus, kg.tokenizer_dir, kg, inputs)


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
            logger.info("%s: %d of %d pre-training text lines hold out its facts and are dropped", column,
                        before - len(lines), before)
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
    from kgplm.text.masking import WORD_SCHEMES
    from kgplm.text.tokenization import load_tokenizer
    from kgplm.training import stages
    from kgplm.training.run import RunDirectory

    spec, run = get(pretraining.method), RunDirectory(run_dir)
    if pretraining.train_options:  # e.g. a shuffled graph: the run builds its own KG artefacts and corpus
        return {"pepr_mode": "fast", "num_neighbors": 10}  # as shared_inputs builds the shared table
    arguments = {}
    if spec.needs("neighbor_table"):
        arguments["neighbor_table"] = str(shared.kg.neighbor_table_path)
    if spec.needs("kg_embeddings"):
        arguments["kg_embeddings"] = str(shared.kg.embeddings_dir(budget.kg_method or spec.kg_embedding))
    variant = (spec.needs("neighbor_table"), pretraining.masking in WORD_SCHEMES)  # word schemes need word_ids
    if variant not in shared.corpora:
        corpus_run = RunDirectory(shared.kg.path / f"corpus-{'knowledge' if variant[0] else 'text'}"
                                                   f"{'-whole-word' if variant[1] else ''}")
        artefacts = {"neighbor_table": shared.inputs.artefacts["neighbor_table"]} if variant[0] else {}
        inputs = dataclasses.replace(shared.inputs, artefacts=artefacts)
        stages.prepare_corpus(corpus_run, inputs, load_tokenizer(shared.tokenizer), masking=pretraining.masking)
        shared.corpora[variant] = corpus_run.corpus_dir
    if not run.corpus_dir.exists():
        shutil.copytree(shared.corpora[variant], run.corpus_dir, copy_function=os.link)
    if spec.needs("entity_frequencies") and not run.entity_frequencies_path.exists():
        run.kg_dir.mkdir(parents=True, exist_ok=True)
        os.link(shared.kg.entity_frequencies_path, run.entity_frequencies_path)
    return arguments


# -- pre-training, fine-tuning, probes -----------------------------------------------------------------------
#: The budget fields a pre-training run depends on (with the row's configuration, the seed and the shared inputs).
PRETRAINING_FIELDS = ("steps", "batch_size", "learning_rate", "encoder", "max_length", "vocab_size", "facts",
                      "dialogues", "kg_method", "entity_dim", "kg_epochs")
#: The budget fields a fine-tuning run depends on beyond its task's (train limit, epochs) and its pre-trained model.
FINETUNING_FIELDS = ("max_eval_examples", "finetune_learning_rate", "finetune_batch_size", "finetune_max_length")


def pretraining_key(budget: Budget, pretraining: Pretraining, seed: int, shared_name: str) -> dict:
    return {**pretraining.key(), "seed": seed, "shared": shared_name,
            "method_data": evaluation_method_data(pretraining.method),
            **{name: getattr(budget, name) for name in PRETRAINING_FIELDS}}


def finetuning_key(budget: Budget, pretrained: str, task: str, seed: int, encoder_inputs: bool,
                   options: tuple = ()) -> dict:
    limit, epochs = budget.tasks[task]
    key = {"pretrained": pretrained, "task": task, "seed": seed, "encoder_inputs": encoder_inputs,
           "max_train_examples": limit, "epochs": epochs, **{name: getattr(budget, name) for name in FINETUNING_FIELDS}}
    return {**key, "finetune_options": dict(options)} if options else key


def pretrain(work: Path, shared: Shared, budget: Budget, pretraining: Pretraining, seed: int, device: str) -> Path:
    import kgplm

    key = pretraining_key(budget, pretraining, seed, shared.kg.path.name)
    directory, done = cached_directory(work / "pretrain", f"{pretraining.method}-s{seed}", key)
    if done:
        return directory
    started = time.perf_counter()
    cached = prepopulate(shared, budget, pretraining, directory)
    result = kgplm.train(pretraining.method, graph=shared.graph, corpus=shared.corpus, output_dir=directory,
                         text_model=dict(budget.encoder), tokenizer=shared.tokenizer, vocab_size=budget.vocab_size,
                         masking=pretraining.masking, model_options=dict(pretraining.model_options),
                         kg_method=budget.kg_method, entity_dim=budget.entity_dim, kg_epochs=budget.kg_epochs,
                         max_steps=budget.steps, batch_size=budget.batch_size, learning_rate=budget.learning_rate,
                         log_every=max(1, budget.steps // 20), checkpoint_every=budget.steps,
                         max_length=budget.max_length, seed=seed, device=device, progress=False,
                         method_data=evaluation_method_data(pretraining.method) or None, **cached,
                         **dict(pretraining.train_options))
    curve = result.curve("loss")
    logger.info("pre-trained %s seed %d: loss %.3f → %.3f in %.0f s", directory.name, seed, curve[0], curve[-1],
                time.perf_counter() - started)
    mark_done(directory, key)
    return directory


def finetune(work: Path, budget: Budget, run: Path, task: str, seed: int, encoder_inputs: bool, device: str,
             options: tuple = ()) -> dict:
    """Fine-tune ``run`` on ``task`` and return its per-example test outcomes (cached with their key)."""
    import kgplm
    from _outcomes import scored_outcomes

    limit, epochs = budget.tasks[task]
    key = finetuning_key(budget, run.name, task, seed, encoder_inputs, options)
    directory, done = cached_directory(work / "finetune", f"{task}-f{seed}{'' if encoder_inputs else '-text'}"
                                       f"{'-' + '-'.join(name for name, _ in options) if options else ''}", key)
    outcomes_path = directory / "outcomes.json"
    if done:
        return json.loads(outcomes_path.read_text(encoding="utf-8"))
    result = kgplm.finetune(model=run, task=task, data_dir=SHARED / "tasks", output_dir=directory, epochs=epochs,
                            batch_size=budget.finetune_batch_size, learning_rate=budget.finetune_learning_rate,
                            max_length=budget.finetune_max_length, max_train_examples=limit,
                            max_eval_examples=budget.max_eval_examples, seed=seed, encoder_inputs=encoder_inputs,
                            device=device, progress=False, **dict(options))
    outcomes = scored_outcomes(directory, task, SHARED / "tasks", device=device)
    if abs(outcomes["score"] - result.test["main"]) > 1e-9:
        raise RuntimeError(f"{directory}: per-example outcomes give {outcomes['score']:.6f}, kgplm.finetune reported "
                           f"{result.test['main']:.6f}; the outcome decoding no longer matches kgplm's scoring")
    outcomes_path.write_text(json.dumps(outcomes), encoding="utf-8")
    mark_done(directory, key)
    return outcomes


def intrinsic(work: Path, budget: Budget, run: Path, similarity_sets, probe, device: str) -> dict:
    """Per-query similarity hits and per-probe hits of a pre-trained model (cached)."""
    from kgplm.evaluation.similarity import similarity_hits
    from kgplm.models import load_pretrained
    from kgplm.text.tokenization import load_tokenizer

    key = {"pretrained": run.name, "similarity_queries": budget.similarity_queries,
           "similarity_pool": budget.similarity_pool, "probes": budget.probes}
    directory, done = cached_directory(work / "intrinsic", run.name, key)
    if done:
        return json.loads((directory / "outcomes.json").read_text(encoding="utf-8"))
    model, tokenizer = load_pretrained(run / "model"), load_tokenizer(run / "tokenizer")
    outcomes = {name: hits.astype(int).tolist()
                for name, hits in similarity_hits(model, tokenizer, similarity_sets, device=device).items()}
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
        return {name: [SimilarityQuery(q["query"], tuple(q["candidates"]), q["query_entity"], q["positive_entity"])
                       for q in queries] for name, queries in stored.items()}
    sets = build_similarity_sets(shared.store, corpus_texts=corpus_lines, max_queries=budget.similarity_queries,
                                 pool_size=budget.similarity_pool, seed=0)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sets.json").write_text(json.dumps({name: [dataclasses.asdict(q) for q in queries]
                                                     for name, queries in sets.items()}, ensure_ascii=False),
                                         encoding="utf-8")
    mark_done(directory, key)
    return sets


# -- the whole run ------------------------------------------------------------------------------------------
def run_all(work: Path, budget: Budget, rows: Sequence[Row], device: str) -> dict:
    """Every measurement of the table, as the raw material :func:`_table.aggregate` summarises."""
    from _probe import HeldOutProbe
    from kgplm.evaluation.tasks import load_task
    from kgplm.text.tokenization import load_tokenizer

    started = time.perf_counter()
    shared = shared_inputs(work, budget, rows)
    corpus_lines = shared.corpus.read_text(encoding="utf-8").splitlines()
    timings = {"shared inputs": time.perf_counter() - started}

    runs: dict[Pretraining, list[Path]] = {}
    for row in rows:
        if row.pretraining not in runs:
            runs[row.pretraining] = [pretrain(work, shared, budget, row.pretraining, seed, device)
                                     for seed in budget.seeds]
    timings["pre-training"] = time.perf_counter() - started - sum(timings.values())

    tasks = {}
    for row in rows:
        for task in budget.tasks:
            tasks.setdefault(task, {})[row.name] = [
                finetune(work, budget, run, task, finetune_seed, row.encoder_inputs, device, row.finetune_options)
                for run in runs[row.pretraining] for finetune_seed in budget.finetune_seeds]
    timings["fine-tuning"] = time.perf_counter() - started - sum(timings.values())

    similarity_sets = similarity_sets_for(work, shared, budget, corpus_lines)
    probe = HeldOutProbe(shared.store, load_tokenizer(shared.tokenizer), corpus_lines, max_probes=budget.probes)
    intrinsic_outcomes = {row.name: [intrinsic(work, budget, run, similarity_sets, probe, device)
                                     for run in runs[row.pretraining]]
                          for row in rows if row.role != "no knowledge at fine-tuning"}
    own = {}
    for column, (method, evaluation) in method_evaluation_columns(rows).items():
        method_runs = runs[next(row.pretraining for row in rows if row.name == method)]
        for row in rows:
            if row.group == method and row.role != "no knowledge at fine-tuning":
                own.setdefault(column, {})[row.name] = [own_evaluation(work, run, method_run, column, evaluation, device)
                                                        for run, method_run in zip(runs[row.pretraining], method_runs)]
    timings["probes and own evaluations"] = time.perf_counter() - started - sum(timings.values())

    splits = {task: load_task(task, SHARED / "tasks") for task in budget.tasks}
    from kgplm.evaluation.baselines import linked_spans
    from kgplm.text.linking import EntityLinker

    return {"tasks": tasks, "splits": splits, "intrinsic": intrinsic_outcomes, "own": own,
            "similarity_sizes": {name: len(queries) for name, queries in similarity_sets.items()},
            "probe": probe, "own_columns": method_evaluation_columns(rows), "timings": timings,
            "link": linked_spans(EntityLinker(shared.store), shared.store)}  # the linker-as-NER baseline's


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="the same pipeline at a tiny budget (checks the runner)")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--seeds", type=int, nargs="+", help="pre-training seeds (≥ 3 for a table that counts)")
    parser.add_argument("--finetune-seeds", type=int, nargs="+")
    parser.add_argument("--facts", type=int)
    parser.add_argument("--dialogues", type=int)
    parser.add_argument("--kg-method", choices=["transe", "transr", "own"],
                        help="KG embeddings for every method, or each method's own")
    parser.add_argument("--tasks", nargs="+", help="fine-tuning tasks (default: the four headline tasks); a task "
                                                   "with < 200 test units goes to the secondary table")
    parser.add_argument("--methods", nargs="+", help="only these knowledge methods (default: every registered one)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's; 1 with --smoke, which "
                                                    "is much faster than several on a loaded machine)")
    parser.add_argument("--work", type=Path)
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--readme", action="store_true", help="also write the table into README.md's "
                                                             "'Does the knowledge help?' section")
    args = parser.parse_args(argv)
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
    if args.kg_method:
        overrides["kg_method"] = None if args.kg_method == "own" else args.kg_method
    if args.tasks:
        overrides["tasks"] = {task: budget.tasks.get(task, [2000, 2]) for task in args.tasks}
    budget = dataclasses.replace(budget, **overrides)
    work = args.work or ROOT / ".cache" / ("replicate-smoke" if budget.smoke else "replicate")
    work.mkdir(parents=True, exist_ok=True)
    rows = plan_rows(args.methods)
    started = time.perf_counter()
    measured = run_all(work, budget, rows, args.device)
    result = aggregate(rows, budget, measured, commit=commit(), device=f"{args.device}, {torch.get_num_threads()} "
                                                                        f"torch threads",
                       seconds=time.perf_counter() - started)
    args.results.mkdir(parents=True, exist_ok=True)
    stem = "replicate-smoke" if budget.smoke else "replicate"
    (args.results / f"{stem}.json").write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    markdown = render_markdown(result)
    (args.results / f"{stem}.md").write_text(markdown, encoding="utf-8")
    if args.readme:
        readme = ROOT.parent / "README.md"
        readme.write_text(between_markers(readme.read_text(encoding="utf-8"), render_markdown(result, 3)),
                          encoding="utf-8")
    print(markdown)
    print(f"written {args.results / stem}.json and .md in {time.perf_counter() - started:.0f} s")


README_MARKERS = ("<!-- replication table: written by benchmarks/replicate.py --readme -->",
                  "<!-- end of replication table -->")


def between_markers(text: str, table: str) -> str:
    """``text`` with what lies between :data:`README_MARKERS` replaced by ``table``."""
    start, end = (text.index(marker) for marker in README_MARKERS)
    return text[: start + len(README_MARKERS[0])] + "\n" + table.strip() + "\n" + text[end:]


if __name__ == "__main__":
    main()
