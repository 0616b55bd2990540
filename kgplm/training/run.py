"""``RunDirectory``: where a ``kgplm.train`` run keeps its files, and how a model directory finds its run.

::

    run_config.json          the arguments; kgplm.train_from_config(path) replays the run
    kg/                      store/ (when the graph was not a saved store), entity_frequencies.npy,
                             neighbors.npz (PEPR table), transe/ and embeddings/ (KGEmbeddings),
                             linker/ (the entity linker, when the KG artefact cache is on)
    tokenizer/               the tokenizer (tokenizer.json, vocab.txt)
    corpus/                  the linked corpus (Arrow shards)
    checkpoints/             the last checkpoints (resume)
    metrics.jsonl            the loss curve
    model/                   the final model (save_pretrained, safetensors)
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from kgplm._io import atomic_file
from kgplm.exceptions import ArtifactError, MissingFileError

__all__ = ["RunDirectory", "locate_model"]

logger = logging.getLogger(__name__)

#: run_config.json keys that may differ when a run is resumed (they do not change its result so far).
#: ``stages`` holds what the stages decided and the launch (``stages.distributed``: world size and
#: backend of the latest launch; a run may resume with another number of processes).
RESUMABLE_KEYS = (
    "max_steps",
    "progress",
    "stages",
    "num_workers",
    "report_to",
    "stop_signals",
    "num_threads",
    "resume_with_new_schedule",
)

#: Arguments added after runs were first written, with the value that reproduces those runs:
#: an older run_config.json without them resumes under these values.
ADDED_ARGUMENTS = {"mixed_precision": "no", "num_workers": 0, "kg_seed": None}


class RunDirectory:
    """The files of one pre-training run (see the module docstring)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDirectory({str(self.path)!r})"

    # -- paths ---------------------------------------------------------------------------------
    @property
    def run_config_path(self) -> Path:
        return self.path / "run_config.json"

    @property
    def kg_dir(self) -> Path:
        return self.path / "kg"

    @property
    def store_dir(self) -> Path:
        return self.kg_dir / "store"

    @property
    def entity_frequencies_path(self) -> Path:
        return self.kg_dir / "entity_frequencies.npy"

    @property
    def neighbor_table_path(self) -> Path:
        return self.kg_dir / "neighbors.npz"

    @property
    def linker_dir(self) -> Path:
        """The entity linker the run linked its corpus with, when the KG artefact cache is on."""
        return self.kg_dir / "linker"

    def embeddings_dir(self, method: str) -> Path:
        """TransE lives in ``kg/transe`` (it also initialises TransR); TransR in ``kg/embeddings``."""
        return self.kg_dir / ("transe" if method == "transe" else "embeddings")

    @property
    def tokenizer_dir(self) -> Path:
        return self.path / "tokenizer"

    @property
    def corpus_dir(self) -> Path:
        return self.path / "corpus"

    @property
    def model_dir(self) -> Path:
        return self.path / "model"

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    # -- run configuration -----------------------------------------------------------------------
    def read_run_config(self) -> dict[str, Any]:
        if not self.run_config_path.is_file():
            raise MissingFileError(self.run_config_path, "run configuration (run_config.json)")
        config = json.loads(self.run_config_path.read_text(encoding="utf-8"))
        if config.get("kgplm_run") != 1:
            raise ArtifactError(f"{self.run_config_path} is not a kgplm run configuration")
        return config

    def write_run_config(self, run_config: dict[str, Any]) -> None:
        """Write ``run_config``; refuse when the directory holds a run with other settings."""
        if self.run_config_path.is_file():
            previous = json.loads(self.run_config_path.read_text(encoding="utf-8"))
            previous = {**{k: v for k, v in ADDED_ARGUMENTS.items() if k in run_config}, **previous}
            changed = sorted(
                k
                for k in set(previous) | set(run_config)
                if previous.get(k) != run_config.get(k) and k not in RESUMABLE_KEYS
            )
            completed = self.completed_steps()
            if changed and completed:
                raise ArtifactError(
                    f"{self.path} holds a run with other settings ({', '.join(changed)} differ) "
                    f"and its completed steps ({', '.join(completed)}); choose another output_dir "
                    f"or delete it"
                )
            if changed:  # a run that failed before completing a step: its corrected call takes the directory over
                logger.warning(
                    "%s holds a run with other settings (%s differ) that completed no step; this run "
                    "takes the directory over",
                    self.path,
                    ", ".join(changed),
                )
                self.discard_partial_files()
            else:
                run_config = {**run_config, "stages": {**previous.get("stages", {}), **run_config.get("stages", {})}}
        self.path.mkdir(parents=True, exist_ok=True)
        with atomic_file(self.run_config_path, "w", encoding="utf-8") as handle:
            json.dump(run_config, handle, indent=1, ensure_ascii=False)

    def completed_steps(self) -> list[str]:
        """The artefacts of the run that are complete (each is written under a temporary name and renamed,
        so a present one is whole): the saved graph, the tokenizer, KG artefacts, the linked corpus,
        checkpoints, the loss curve and the model."""
        found = [
            str(path.relative_to(self.path))
            for path in (
                self.store_dir / "manifest.json",
                self.tokenizer_dir / "tokenizer.json",
                self.entity_frequencies_path,
                self.neighbor_table_path,
                self.corpus_dir / "manifest.json",
                self.metrics_path,
                self.model_dir,
            )
            if path.exists()
        ]
        found += [
            str(path.relative_to(self.path))
            for path in sorted(self.kg_dir.glob("*/"))
            if path.is_dir() and path != self.store_dir and any(path.iterdir())
        ]
        checkpoints = self.path / "checkpoints"
        if checkpoints.is_dir() and any(checkpoints.iterdir()):
            found.append("checkpoints")
        return found

    def discard_partial_files(self) -> None:
        """Remove what a run that completed no step left (its run configuration and empty folders)."""
        self.run_config_path.unlink(missing_ok=True)
        for directory in sorted((p for p in self.path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            if not any(directory.iterdir()):
                directory.rmdir()

    def record_stage(self, name: str, value: Any) -> None:
        """Add what a stage decided (e.g. the PEPR mode used) under ``run_config["stages"]``."""
        config = json.loads(self.run_config_path.read_text(encoding="utf-8"))
        config.setdefault("stages", {})[name] = value
        with atomic_file(self.run_config_path, "w", encoding="utf-8") as handle:
            json.dump(config, handle, indent=1, ensure_ascii=False)

    # -- artefacts -------------------------------------------------------------------------------
    def open_store(self, *, progress: bool = False):
        """The graph the run used: its saved copy, else what ``run_config["graph"]`` names."""
        from kgplm.kg import KGStore, open_store

        if (self.store_dir / "manifest.json").is_file():
            return KGStore.load(self.store_dir)
        return open_store(self.read_run_config()["graph"], show_progress=progress)


def locate_model(model: str | os.PathLike) -> tuple[Path, Path, RunDirectory | None]:
    """(model directory, tokenizer directory, pre-training run or None) of a kgplm model path.

    ``model`` may be a ``kgplm.train`` or ``kgplm.finetune`` output directory or its ``model/``.
    For a fine-tuned model the run is the pre-training run it started from
    (``finetune_config.json``'s ``model``), whose graph and artefacts its encoder may need.
    """
    path = Path(model)
    if (path / "model" / "config.json").is_file():
        model_dir, owner = path / "model", path
    elif (path / "config.json").is_file():
        model_dir, owner = path, path.parent if (path.parent / "tokenizer").is_dir() else None
    else:
        raise MissingFileError(path, "kgplm model (a train/finetune output directory or a save_pretrained directory)")
    tokenizer_dir = None
    for candidate in ((owner / "tokenizer") if owner else None, model_dir):
        if candidate is not None and ((candidate / "tokenizer.json").is_file() or (candidate / "vocab.txt").is_file()):
            tokenizer_dir = candidate
            break
    if tokenizer_dir is None:
        raise MissingFileError(model_dir, "tokenizer next to the model (tokenizer/ or tokenizer.json)")
    run = None
    if owner is not None and (owner / "finetune_config.json").is_file():
        source = json.loads((owner / "finetune_config.json").read_text(encoding="utf-8"))["model"]
        run = locate_model(source)[2]
    elif owner is not None and (owner / "run_config.json").is_file():
        run = RunDirectory(owner)
    return model_dir, tokenizer_dir, run
