"""One-call pre-training, fine-tuning and evaluation: ``kgplm.train``, ``train_from_config``, ``finetune``, ``evaluate``.

``train`` runs the chain — graph, tokenizer, the KG-side artefacts the method's registry record asks
for (:mod:`kgplm.training.stages`), the linked corpus, the model, the training loop — reusing every
stage whose artefact is already in ``output_dir`` (laid out as :class:`~kgplm.training.run.RunDirectory`
describes). Nothing here names a method: everything method-specific comes from
:func:`kgplm.methods.get`. ``finetune``, ``evaluate`` and ``predict`` live in
:mod:`kgplm.finetuning.api` and are re-exported here.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from kgplm._io import atomic_directory, json_safe
from kgplm.arguments import PretrainingArguments, resolve, signature
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

    def plot(self, path: str | os.PathLike | None = None) -> Path:
        """Draw the loss curve of each objective (and the metrics) to a PNG (default ``output_dir/curves.png``)."""
        from kgplm.training.reporting import plot_run

        return plot_run(self.output_dir, path)

    def load_model(self):
        from kgplm.models import load_pretrained

        return load_pretrained(self.model_dir)

    def load_tokenizer(self):
        from kgplm.text.tokenization import load_tokenizer

        return load_tokenizer(self.tokenizer_dir)

    def __repr__(self) -> str:
        last = self.metrics[-1].get("loss", float("nan")) if self.metrics else float("nan")
        return f"TrainingResult(method={self.method!r}, steps={self.steps}, final loss {last:.4f}, {self.output_dir})"


def train(method: str, *, args: PretrainingArguments | None = None, **kwargs: Any) -> TrainingResult:
    """Pre-train ``method`` (a name from :func:`kgplm.methods.available`): its arguments are the fields of
    :class:`~kgplm.arguments.PretrainingArguments`, given as keywords (``corpus=``, ``output_dir=`` …), as
    ``args=``, or both (the keywords replace fields of ``args``).

    Every argument and input is checked before anything is written
    (:mod:`kgplm.training.preflight`), so a call that fails leaves ``output_dir`` free for its
    corrected call; a directory whose run completed no step is taken over by a call with other
    settings (logged as a warning).

    Under ``torchrun --nproc_per_node N`` (``WORLD_SIZE`` > 1) the run is data-parallel
    (:mod:`kgplm.training.distributed`): ``batch_size`` is the global batch, split over the
    processes; ``device="cuda"`` is each process's own GPU; rank 0 builds the artefacts while the
    others wait, and only rank 0 writes. ``run_config.json`` records the launch under
    ``stages.distributed`` (``world_size``, ``backend``), which is not a setting: a run may resume
    with another number of processes.

    Returns a :class:`TrainingResult`. Rerunning the same call resumes; a different call into
    the same ``output_dir`` raises :class:`~kgplm.exceptions.ArtifactError`. The call holds an
    advisory lock on ``output_dir`` (:mod:`kgplm.training.locking`): a second call into it while
    this one runs raises :class:`~kgplm.exceptions.RunDirectoryLockedError` naming this process.

    Extending a run: a call whose ``max_steps`` differs from that of a run in ``output_dir`` that has
    trained steps (checkpoints, loss curve or model) would change the learning-rate schedule of
    that run from its next step, and replace its ``model/``; it raises
    :class:`~kgplm.exceptions.ArtifactError` saying how to go on, unless ``resume_with_new_schedule=True``.
    Then the run resumes from its latest checkpoint under the schedule of the new ``max_steps`` (the
    same linear warmup and decay, recomputed: warmup over ``warmup_steps`` — by default 6% of the
    new ``max_steps`` — then a linear decay to 0 at the new ``max_steps``, so the rate rises at the
    resume step when the run had decayed), its finished ``model/`` is kept as ``model-step-N/`` (N the
    previous ``max_steps``), and ``run_config.json`` records the change under
    ``stages.schedule_changes`` (the step it resumed after, the previous and the new ``max_steps``,
    where the earlier model went). To train further under a fresh schedule instead, start a new run
    with ``init_from=`` the finished run and another ``output_dir``.
    """
    arguments = resolve(PretrainingArguments, args, kwargs, function="kgplm.train")
    return _train(method, **{item.name: getattr(arguments, item.name) for item in fields(arguments)})


train.__signature__ = signature(
    PretrainingArguments,
    leading=[inspect.Parameter("method", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="str")],
    returns="TrainingResult",
)


def _train(
    method: str,
    *,
    graph,
    corpus,
    output_dir,
    text_model,
    tokenizer,
    init_from,
    kg_embeddings,
    neighbor_table,
    knowledge_graph,
    corpus_options,
    vocab_size,
    max_length,
    num_neighbors,
    pepr_mode,
    pepr_budget_seconds,
    kg_method,
    entity_dim,
    kg_epochs,
    kg_seed,
    model_options,
    method_data,
    exclude_triples,
    linking,
    masking,
    max_steps,
    batch_size,
    gradient_accumulation_steps,
    learning_rate,
    warmup_steps,
    weight_decay,
    checkpoint_every,
    log_every,
    seed,
    device,
    mixed_precision,
    num_workers,
    num_threads,
    report_to,
    stop_signals,
    resume_with_new_schedule,
    progress,
) -> TrainingResult:
    """The body of :func:`train` over resolved arguments (the same names, in the same order, as
    :class:`~kgplm.arguments.PretrainingArguments`, so ``run_config.json`` records them in that order)."""
    arguments = {name: value for name, value in locals().items()}
    # the checks that need no model code run before torch and the methods load, so a refused call answers at once
    _check_call(
        method,
        corpus=corpus,
        exclude_triples=exclude_triples,
        counts=dict(
            max_steps=max_steps,
            batch_size=batch_size,
            gradient_accumulation_steps=gradient_accumulation_steps,
            checkpoint_every=checkpoint_every,
            log_every=log_every,
        ),
    )
    from kgplm.methods import MethodContext, get
    from kgplm.models.card import write_model_card
    from kgplm.text.masking import SCHEMES
    from kgplm.training import distributed, stages
    from kgplm.training.interrupts import StopRequest, check_stop_signals
    from kgplm.training.locking import RunDirectoryLock
    from kgplm.training.preflight import check_init_from, check_train_inputs
    from kgplm.training.reporting import check_report_to, open_reporters
    from kgplm.training.run import RunDirectory
    from kgplm.training.threads import check_num_threads, describe_threads, thread_limits
    from kgplm.training.trainer import TrainerSettings, train_loop

    spec = get(method)
    masking = masking or spec.default_masking
    if masking not in SCHEMES:
        raise ConfigurationError(f"masking must be one of {SCHEMES}, got {masking!r}")
    if kg_method is None:
        kg_method = spec.kg_embedding or "transe"
    from kgplm.text.linking_filters import linking_settings

    device = distributed.auto_device(device)
    report_to = check_report_to(report_to)
    stop_signals = check_stop_signals(stop_signals)
    num_threads = check_num_threads(num_threads)
    # what was used, so a replay does not depend on defaults (or, for the device, on the machine)
    arguments.update(
        kg_method=kg_method,
        masking=masking,
        linking=linking_settings(linking),
        device=device,
        report_to=list(report_to),
        stop_signals=list(stop_signals),
        num_threads=num_threads,
    )
    run = RunDirectory(output_dir)
    schedule_change = _schedule_change(run, max_steps, allowed=resume_with_new_schedule)
    arguments["graph"] = stages.recorded_graph(run, graph)
    arguments["knowledge_graph"] = stages.recorded_knowledge_graph(run, knowledge_graph)
    if warmup_steps is None:
        warmup_steps = int(0.06 * max_steps)
    settings = TrainerSettings(
        max_steps=max_steps,
        batch_size=batch_size,
        gradient_accumulation_steps=gradient_accumulation_steps,
        learning_rate=learning_rate,
        warmup_steps=warmup_steps,
        weight_decay=weight_decay,
        checkpoint_every=checkpoint_every,
        log_every=log_every,
        seed=seed,
        mixed_precision=mixed_precision,
        num_workers=num_workers,
    )
    settings.validate()
    if knowledge_graph is not None and (kg_embeddings, neighbor_table, exclude_triples) != (None, None, None):
        raise ConfigurationError(
            "knowledge_graph rebuilds the KG artefacts from its links; a given kg_embeddings or "
            "neighbor_table would bypass it, and exclude_triples names facts of the linking "
            "graph (leave all three None)"
        )
    context = distributed.initialize(device)
    lock = RunDirectoryLock(run.path)  # one writer per run directory (rank 0 holds it for all ranks)
    threads = contextlib.ExitStack()
    try:
        threads.enter_context(thread_limits(num_threads))
        settings.validate(context.world_size)
        main = context.is_main
        logger.info("pre-training %s on %s", method, context.device)
        # rank 0 builds every cached artefact; the other ranks wait, then load them
        import torch

        # numba's parallel kernels (linking, PEPR, KG embeddings) start OpenMP threads, which changes torch's
        # intra-op thread count; the loop runs with the count the call began with, as a resumed run (which
        # computes none of them) does, so that both compute with the same reductions
        torch_threads = torch.get_num_threads()
        with context.main_first("preparing the run's artefacts"):
            if main:
                lock.acquire()
            # every input is checked before anything is written (a failed call leaves nothing that blocks
            # its corrected call)
            init = None if init_from is None else check_init_from(init_from, text_model=text_model, tokenizer=tokenizer)
            if init is not None:
                stages.check_init_unchanged(run, init)
            prepared = check_train_inputs(
                spec,
                graph=stages.cached_graph(run, graph),
                corpus=corpus,
                corpus_options=dict(corpus_options or {}),
                text_model=text_model if init is None else init.text_fields,
                tokenizer=tokenizer if init is None else init.tokenizer,
                model_options=dict(model_options or {}),
                masking=masking,
                max_length=max_length,
                exclude_triples=exclude_triples,
                progress=progress and main,
            )
            if main:
                run.write_run_config(json_safe({"kgplm_run": 1, **arguments}))
                run.record_stage("distributed", context.describe())
                run.record_stage("device", str(context.device))
                run.record_stage("threads", describe_threads(num_workers))
                if prepared.hub:
                    run.record_stage("hub", prepared.hub)
                if schedule_change is not None:
                    _record_schedule_change(run, schedule_change)
            from kgplm.artefact_cache import default_cache

            cache = default_cache() if main else None
            store = linking_store = stages.prepare_store(run, prepared.store, graph, save=main, cache=cache)
            if knowledge_graph is not None:  # the saved store stays the linking one: text is linked with it
                store = stages.prepare_knowledge_store(run, knowledge_graph, store, save=main, cache=cache)
            # the stages read local paths (a hub id resolved to its snapshot)
            stage_arguments = {**arguments, "text_model": prepared.text_model, "tokenizer": prepared.tokenizer}
            inputs = stages.StageInputs(
                arguments=stage_arguments,
                store=store,
                linking_store=linking_store,
                corpus=corpus,
                corpus_options=dict(corpus_options or {}),
                progress=progress and main,
                held_out=_held_out(run, exclude_triples, store, record=main),
                cache=cache,
                run=run,
            )
            tokenizer_object = stages.prepare_tokenizer(run, inputs)
            stages.run_artefact_stages(spec.artefacts, run, inputs)
            dataset = stages.prepare_corpus(run, inputs, tokenizer_object, masking=masking)
        torch.set_num_threads(torch_threads)
        torch.manual_seed(seed)  # the model's initial weights
        model, checkpoint = stages.build_model(
            spec,
            store,
            tokenizer_object,
            text_model=prepared.text_model,
            model_options=dict(model_options or {}),
            max_length=max_length,
            entity_dim=entity_dim,
            artefacts=inputs.artefacts,
        )
        if init is not None:
            loaded = stages.load_init_weights(model, init)
            if main:
                run.record_stage("init_from", loaded)
        if main:
            stages.record_model_length(run, tokenizer_object, model.config.max_position_embeddings)
        method_context = MethodContext(
            config=model.config,
            tokenizer=tokenizer_object,
            store=store,
            masking=masking,
            seed=seed,
            text_model_dir=checkpoint if init is None else init.model_dir,
            artefacts=inputs.artefacts,
        )
        if spec.prepare_model is not None:
            spec.prepare_model(model, method_context)
        collator = spec.build_collator(method_context)
        # a stop signal after the last step (while the model is written) is held until the call completes: the
        # run is then finished, so the call ends normally (the loop installs its own handler for the steps)
        with StopRequest(stop_signals) as late_stop:
            with open_reporters(report_to, run.path, prefix="pretrain", step_key="step", enabled=main) as report:
                metrics = train_loop(
                    model,
                    dataset,
                    collator,
                    output_dir=run.path,
                    settings=settings,
                    progress=progress,
                    distributed=context,
                    report=report,
                    stop_signals=stop_signals,
                )
            if main:
                with atomic_directory(run.model_dir) as temporary:
                    model.save_pretrained(str(temporary))
                    write_model_card(temporary, model.config, arguments=run.read_run_config(), metrics=metrics)
                logger.info("saved the model to %s", run.model_dir)
        if late_stop.requested:
            logger.warning("%s arrived after the last step; the run completed first", late_stop.signal_name)
        context.barrier()
        return TrainingResult(
            output_dir=run.path, method=method, steps=max_steps, metrics=metrics, run_config=run.read_run_config()
        )
    finally:
        lock.release()
        threads.close()
        context.close()


def _schedule_change(run, max_steps: int, *, allowed: bool) -> dict[str, Any] | None:
    """How ``max_steps`` changes the schedule of the run in ``run`` that trained steps under another one
    (None when it does not); refused unless ``allowed`` (``resume_with_new_schedule``)."""
    from kgplm.exceptions import ArtifactError

    if not run.run_config_path.is_file():
        return None
    previous = run.read_run_config().get("max_steps")
    checkpoints = run.path / "checkpoints"
    trained = (
        run.model_dir.exists() or run.metrics_path.is_file() or (checkpoints.is_dir() and any(checkpoints.iterdir()))
    )
    if previous is None or previous == max_steps or not trained:
        return None
    last_step = 0
    if run.metrics_path.is_file():
        for line in run.metrics_path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                last_step = max(last_step, int(json.loads(line).get("step", 0)))
    change = {"after_step": last_step, "previous_max_steps": previous, "max_steps": max_steps}
    if not allowed:
        finished = "finished" if run.model_dir.exists() else f"logged up to step {last_step}"
        raise ArtifactError(
            f"{run.path} holds a run ({finished}) trained under a learning-rate schedule for max_steps={previous}; "
            f"max_steps={max_steps} would recompute that schedule from its next step and replace its model/. "
            f"To go on under the schedule for {max_steps} steps, pass resume_with_new_schedule=True (the finished "
            f"model/ is kept as model-step-{previous}/ and the change recorded in run_config.json); to train "
            f"further under a fresh schedule, start a new run with init_from={str(run.path)!r} and another "
            f"output_dir; to resume the run as it was, pass max_steps={previous}"
        )
    return change


def _record_schedule_change(run, change: dict[str, Any]) -> None:
    """Keep the finished model of the previous schedule and record the change (rank 0)."""
    change = dict(change, kept_model=None)
    if run.model_dir.exists():
        kept = run.path / f"model-step-{change['previous_max_steps']}"
        if kept.exists():
            from kgplm.exceptions import ArtifactError

            raise ArtifactError(f"{kept} exists already; move it away to keep the model of the earlier schedule")
        os.replace(run.model_dir, kept)
        change["kept_model"] = kept.name
    logger.warning(
        "%s: resuming after step %d under a schedule for %d steps instead of %d (resume_with_new_schedule)%s",
        run.path,
        change["after_step"],
        change["max_steps"],
        change["previous_max_steps"],
        f"; the earlier model is kept as {change['kept_model']}/" if change["kept_model"] else "",
    )
    recorded = run.read_run_config().get("stages", {}).get("schedule_changes", [])
    run.record_stage("schedule_changes", [*recorded, change])


#: The methods kgplm registers itself (:func:`kgplm.methods.available` before any other is registered),
#: known here without importing them (each imports torch).
BUILT_IN_METHODS = ("mlm", "smedbert", "kebiolm", "embert", "electra", "ehealth", "epplm")


def _check_call(method: str, *, corpus, exclude_triples, counts: dict[str, Any]) -> None:
    """What ``train`` can refuse without loading torch or a method: the method's name (the built-in ones
    unless :mod:`kgplm.methods` is loaded or an installed package declares methods, which the registry
    then loads), the input files and the counts."""
    import sys

    from kgplm.registry import method_plugins_installed

    from kgplm.exceptions import MissingFileError

    if "kgplm.methods" in sys.modules:
        sys.modules["kgplm.methods"].get(method)
    elif method not in BUILT_IN_METHODS and not method_plugins_installed():
        raise ConfigurationError(f"unknown method {method!r}; available methods: {', '.join(BUILT_IN_METHODS)}")
    for name, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
    if isinstance(corpus, (str, os.PathLike)) and not Path(corpus).is_file():
        raise MissingFileError(corpus, "corpus file")
    if exclude_triples is not None and not Path(exclude_triples).is_file():
        raise MissingFileError(exclude_triples, "exclude_triples file")


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
        raise ArtifactError(
            f"{run.path} was built with other held-out triples than {exclude_triples} lists now; "
            f"choose another output_dir or delete it"
        )
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


# fine-tuning, evaluation and prediction live in kgplm.finetuning.api; re-exported here
from kgplm.finetuning.api import (  # noqa: E402
    EVALUATION_SUBSET_SEED,  # noqa: F401  (re-exported for callers of kgplm.api)
    FineTuningResult,
    evaluate,
    finetune,
    predict,
)
