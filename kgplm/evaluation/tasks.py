"""The task registry and its splits: ChineseBLUE, CBLUE and BLURB tasks.

Every task is a :class:`TaskSpec` in :data:`TASKS`; :func:`load_task` reads one split of it (or
all three) from a directory laid out like the official releases under one root
(``zh/chineseblue/cMedQANER/train.json`` …) or from a user's directory holding the same files
directly (``my_dir/train.json``, ``my_dir/CMeEE-V2_train.json``). The file formats and the example
classes are in :mod:`kgplm.evaluation.readers`.

Official files. Each task registers the file names of its official release for train, dev and
test: ChineseBLUE's ``{train,dev,test}.{json,txt}``, CBLUE's ``<TASK>_{train,dev,test}.json``
(``CMeEE-V2_train.json`` …), BLURB's ``{train,devel,test}.tsv`` for NER and
``{train,dev,test}_0.json`` for GAD/DDI. The CBLUE test files carry no labels: they are read as
unlabelled (see :attr:`TaskSplits.unlabelled`), usable for predictions but not for scores.

Derived splits, only for a file that is absent (documented, seeded, logged as a warning and
reported in :attr:`TaskSplits.derived`, which ``kgplm.finetune`` writes to ``results.json``):

* only dev: dev is split 80/10/10 into train/dev/test;
* dev and test, no train: dev is split 90/10 into train/dev;
* train and dev, no test: the dev file becomes the test split and 10 % of train becomes dev;
* grouped tasks (cMedQA, cMedIR: :attr:`TaskSpec.split_key` is the query): examples with the
  same query always land in one split. When the present files share queries — upstream cMedQA's
  dev and test files share 892 of their ~896 questions, with different candidates, and cMedIR's
  share 1,093 queries — a split drawn from dev would put test questions into training, so the
  files are pooled and split 80/10/10 by query, and all three splits count as derived.

The permutation uses ``numpy.random.default_rng(SPLIT_SEED)``, so every user gets the same split.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kgplm.evaluation.readers import (
    PairExample,
    RankingExample,
    RelationExample,
    SpanExample,
    TextExample,
    TripleExample,
    read_blurb_relation,
    read_chemprot,
    read_cmeee,
    read_cmeie,
    read_graded_ranking,
    read_iob_tsv,
    read_labelled_pairs,
    read_labelled_text,
    read_mention_json,
    read_query_json,
    read_ranking,
    read_sts_json,
)
from kgplm.exceptions import ConfigurationError, MissingFileError

__all__ = [
    "SpanExample",
    "TextExample",
    "PairExample",
    "RankingExample",
    "TripleExample",
    "RelationExample",
    "TaskSpec",
    "TaskSplits",
    "TASKS",
    "SPLITS",
    "SPLIT_SEED",
    "load_task",
    "load_task_splits",
    "task_names",
    "derive_splits",
    "get_task",
    "read_mention_json",
    "read_chemprot",
    "read_ranking",
]

logger = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
SPLIT_SEED = 20_230_901  # fixed: a derived split must be the same for every user


@dataclass(frozen=True)
class TaskSpec:
    """A task: its kind, the reader, its official files per split (relative to a tasks root) and its metric.

    ``split_key`` maps an example to the group it must share a split with (the query of a ranking
    task); ``hidden_test_labels`` marks benchmarks whose official test file has no labels (CBLUE).
    """

    name: str
    kind: str
    reader: Callable[..., list]
    files: dict[str, str]
    metric: str
    language: str = "zh"
    description: str = ""
    split_key: Callable[[object], str] | None = None
    hidden_test_labels: bool = False


@dataclass(frozen=True)
class TaskSplits:
    """What :func:`load_task_splits` read: the three splits and how each came about.

    ``derived``: the splits drawn from other files (a file was absent, or grouped files overlapped);
    ``unlabelled``: splits read from a file without labels (the CBLUE test files);
    ``files``: the files actually read, by the split they were registered for.
    """

    task: str
    splits: dict[str, list]
    derived: tuple[str, ...]
    unlabelled: tuple[str, ...]
    files: dict[str, Path]


def _chineseblue(task: str, extension: str) -> dict[str, str]:
    return {split: f"zh/chineseblue/{task}/{split}.{extension}" for split in SPLITS}


def _cblue(task: str) -> dict[str, str]:
    return {split: f"zh/cblue/{task}_{split}.json" for split in SPLITS}


def _blurb_ner(task: str) -> dict[str, str]:
    return {
        "train": f"en/blurb_ner/{task}-IOB/train.tsv",
        "dev": f"en/blurb_ner/{task}-IOB/devel.tsv",
        "test": f"en/blurb_ner/{task}-IOB/test.tsv",
    }


def _blurb_relation(task: str) -> dict[str, str]:
    return {split: f"en/blurb_re/{task}_BLURB/{split}_0.json" for split in SPLITS}


def _query(example: RankingExample) -> str:
    return example.query


TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec(
            "cmedqaner",
            "ner",
            read_mention_json,
            _chineseblue("cMedQANER", "json"),
            "entity_f1",
            description="ChineseBLUE cMedQANER: NER in medical questions, 11 types",
        ),
        TaskSpec(
            "cehrner",
            "ner",
            read_mention_json,
            _chineseblue("cEHRNER", "json"),
            "entity_f1",
            description="ChineseBLUE cEHRNER: NER in electronic health records, 7 types",
        ),
        TaskSpec(
            "cmeee",
            "nested_ner",
            read_cmeee,
            _cblue("CMeEE-V2"),
            "entity_f1",
            hidden_test_labels=True,
            description="CBLUE CMeEE-V2: nested NER, 9 types",
        ),
        TaskSpec(
            "cmedqq",
            "pair",
            read_labelled_pairs,
            _chineseblue("cMedQQ", "txt"),
            "accuracy",
            description="ChineseBLUE cMedQQ: question-question matching",
        ),
        TaskSpec(
            "chip-sts",
            "pair",
            read_sts_json,
            _cblue("CHIP-STS"),
            "macro_f1",
            hidden_test_labels=True,
            description="CBLUE CHIP-STS: question similarity",
        ),
        TaskSpec(
            "cmedqa",
            "qa_ranking",
            read_ranking,
            _chineseblue("cMedQA", "txt"),
            "acc@1",
            split_key=_query,
            description="ChineseBLUE cMedQA: answer selection, Acc@1 over each question's candidates "
            "(split by question)",
        ),
        TaskSpec(
            "cmedir",
            "graded_ranking",
            read_graded_ranking,
            _chineseblue("cMedIR", "json"),
            "pairwise_accuracy",
            split_key=_query,
            description="ChineseBLUE cMedIR: ranking a query's documents by graded relevance (0-4); pairwise "
            "accuracy, NDCG (split by query)",
        ),
        TaskSpec(
            "cmedic",
            "classification",
            read_labelled_text,
            _chineseblue("cMedIC", "txt"),
            "accuracy",
            description="ChineseBLUE cMedIC: query intent, 3 classes",
        ),
        TaskSpec(
            "cmedtc",
            "classification",
            read_labelled_text,
            _chineseblue("cMedTC", "txt"),
            "macro_f1",
            description="ChineseBLUE cMedTC: clinical trial criteria, 44 classes",
        ),
        TaskSpec(
            "kuake-qic",
            "classification",
            read_query_json,
            _cblue("KUAKE-QIC"),
            "accuracy",
            hidden_test_labels=True,
            description="CBLUE KUAKE-QIC: query intent, 11 classes",
        ),
        TaskSpec(
            "cmeie",
            "relation_triples",
            read_cmeie,
            _cblue("CMeIE-V2"),
            "triple_f1",
            hidden_test_labels=True,
            description="CBLUE CMeIE-V2: relation triples, 43 predicates",
        ),
        TaskSpec(
            "bc5cdr", "ner", read_iob_tsv, _blurb_ner("BC5CDR"), "entity_f1", "en", "BLURB BC5CDR chemical+disease"
        ),
        TaskSpec("bc5cdr-chem", "ner", read_iob_tsv, _blurb_ner("BC5CDR-chem"), "entity_f1", "en", "BLURB BC5CDR-chem"),
        TaskSpec(
            "bc5cdr-disease",
            "ner",
            read_iob_tsv,
            _blurb_ner("BC5CDR-disease"),
            "entity_f1",
            "en",
            "BLURB BC5CDR-disease",
        ),
        TaskSpec(
            "ncbi-disease", "ner", read_iob_tsv, _blurb_ner("NCBI-disease"), "entity_f1", "en", "BLURB NCBI-disease"
        ),
        TaskSpec(
            "chemprot",
            "relation",
            read_chemprot,
            {s: f"en/chemprot/{s}.jsonl" for s in SPLITS},
            "micro_f1",
            "en",
            "ChemProt relation classification (13 labels, positives only)",
        ),
        TaskSpec(
            "gad",
            "relation",
            read_blurb_relation,
            _blurb_relation("GAD"),
            "micro_f1",
            "en",
            "BLURB GAD gene-disease relations",
        ),
        TaskSpec(
            "ddi",
            "relation",
            read_blurb_relation,
            _blurb_relation("DDI"),
            "micro_f1",
            "en",
            "BLURB DDI drug-drug interactions",
        ),
    )
}


def task_names() -> list[str]:
    return sorted(TASKS)


def get_task(name: str) -> TaskSpec:
    key = name.lower()
    if key not in TASKS:
        import difflib

        close = difflib.get_close_matches(key, TASKS, n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ConfigurationError(f"unknown task {name!r}{hint}; known tasks: {', '.join(task_names())}")
    return TASKS[key]


def _locate(data_dir: Path, relative: str) -> Path | None:
    parts = Path(relative).parts
    candidates = [data_dir / relative, data_dir.joinpath(*parts[1:]), data_dir / Path(relative).name]
    if len(parts) > 2:
        candidates.append(data_dir.joinpath(*parts[2:]))
    return next((candidate for candidate in candidates if candidate.is_file()), None)


# -- derived splits ------------------------------------------------------------------------------------------
def _cut(examples: list, fractions: tuple[float, ...], seed: int, key: Callable | None) -> list[list]:
    """Split ``examples`` by a seeded permutation of their groups (one group per example without ``key``)."""
    if key is None:
        groups = [[example] for example in examples]
    else:
        by_key: dict[object, list] = {}
        for example in examples:
            by_key.setdefault(key(example), []).append(example)
        groups = list(by_key.values())
    order = np.random.default_rng(seed).permutation(len(groups))
    bounds = np.cumsum([0] + [round(f * len(groups)) for f in fractions[:-1]] + [len(groups)])
    bounds[-1] = len(groups)
    return [[example for i in order[a:b] for example in groups[i]] for a, b in zip(bounds[:-1], bounds[1:])]


def _derive(files: dict[str, list], seed: int, key: Callable | None) -> tuple[dict[str, list], tuple[str, ...], str]:
    """(splits, the derived ones, how) — the rules of the module docstring."""
    present = set(files)
    if key is not None and len(present) > 1:
        keys = {split: {key(example) for example in examples} for split, examples in files.items()}
        shared = {(a, b): len(keys[a] & keys[b]) for a in sorted(present) for b in sorted(present) if a < b}
        if any(shared.values()):
            pooled = [example for split in SPLITS if split in files for example in files[split]]
            train, dev, test = _cut(pooled, (0.8, 0.1, 0.1), seed, key)
            overlap = ", ".join(f"{a}/{b} share {n}" for (a, b), n in shared.items() if n)
            return (
                {"train": train, "dev": dev, "test": test},
                SPLITS,
                f"the files share groups ({overlap}): pooled and split 80/10/10 by group",
            )
    if present == set(SPLITS):
        return dict(files), (), ""
    if present == {"dev"}:
        train, dev, test = _cut(files["dev"], (0.8, 0.1, 0.1), seed, key)
        return {"train": train, "dev": dev, "test": test}, SPLITS, "dev split 80/10/10 into train/dev/test"
    if present == {"dev", "test"}:
        train, dev = _cut(files["dev"], (0.9, 0.1), seed, key)
        return {"train": train, "dev": dev, "test": files["test"]}, ("train", "dev"), "dev split 90/10 into train/dev"
    if present == {"train", "dev"}:
        train, dev = _cut(files["train"], (0.9, 0.1), seed, key)
        return (
            {"train": train, "dev": dev, "test": files["dev"]},
            ("dev", "test"),
            "the dev file is the test split; 10 % of train is dev",
        )
    raise ConfigurationError(f"cannot derive train/dev/test from the splits {sorted(present)}")


def derive_splits(files: dict[str, list], seed: int = SPLIT_SEED, key: Callable | None = None) -> dict[str, list]:
    """Fill the missing splits as the module docstring says; ``files`` maps the present splits to examples."""
    return _derive(files, seed, key)[0]


def _is_unlabelled(examples: list) -> bool:
    """Whether a split was read from a file without labels (its readers give ``None`` labels then)."""
    for attribute in ("label", "spans", "triples"):
        if examples and hasattr(examples[0], attribute):
            return getattr(examples[0], attribute) is None
    return False


def load_task_splits(name: str, data_dir: str | os.PathLike) -> TaskSplits:
    """Read task ``name`` from ``data_dir`` (a tasks root such as ``…/tasks`` or the task's own
    directory): the official files that are present, with the absent splits derived."""
    spec = get_task(name)
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise MissingFileError(data_dir, f"data directory of task {spec.name}")
    located = {split: _locate(data_dir, relative) for split, relative in spec.files.items()}
    found = {split: path for split, path in located.items() if path is not None}
    if not found:
        expected = ", ".join(spec.files.values())
        raise MissingFileError(data_dir / spec.files["dev"], f"{spec.name} files (any of {expected} under {data_dir})")
    read, unlabelled = {}, []
    for split, path in found.items():
        hidden = split == "test" and spec.hidden_test_labels
        read[split] = spec.reader(path, require_labels=False) if hidden else spec.reader(path)
        if hidden and _is_unlabelled(read[split]):
            unlabelled.append(split)
            logger.info(
                "%s: %s has no labels (the benchmark scores submissions); it is kept for predictions", spec.name, path
            )
    splits, derived, how = _derive(read, SPLIT_SEED, spec.split_key)
    if derived:
        absent = [Path(spec.files[split]).name for split in SPLITS if split not in found]
        logger.warning(
            "%s: %s under %s; %s; derived splits: %s (seed %d)",
            spec.name,
            f"no {', '.join(absent)}" if absent else "every official file",
            data_dir,
            how,
            ", ".join(derived),
            SPLIT_SEED,
        )
    return TaskSplits(spec.name, splits, tuple(derived), tuple(s for s in unlabelled if s not in derived), found)


def load_task(name: str, data_dir: str | os.PathLike, split: str | None = None) -> dict[str, list] | list:
    """Read task ``name`` from ``data_dir``: all three splits as a dict, or one split's examples.

    ``data_dir`` is a tasks root (``…/tasks`` or ``…/tasks/zh``) or the directory holding the task's
    files themselves. :func:`load_task_splits` also says which splits were derived.
    """
    if split is not None and split not in SPLITS:
        raise ConfigurationError(f"split must be one of {SPLITS}, got {split!r}")
    splits = load_task_splits(name, data_dir).splits
    return splits if split is None else splits[split]
