"""Readers for medical fine-tuning tasks: ChineseBLUE, CBLUE and BLURB formats.

Every task is a :class:`TaskSpec` in :data:`TASKS`; :func:`load_task` reads one split of it from
a directory laid out like ``../shared/data/tasks`` (``zh/chineseblue/cMedQANER/train.json`` …)
or from a user's directory holding the same files directly (``my_dir/train.json``).

Examples are plain frozen dataclasses, one kind per task family:

======================  ==========================================================================
kind                    example
======================  ==========================================================================
``ner``                 :class:`SpanExample` — text and character spans ``(start, end, type)``,
                        end exclusive; flat (non-overlapping) spans
``nested_ner``          :class:`SpanExample` with nested spans allowed (CMeEE)
``classification``      :class:`TextExample` — text and label
``pair``                :class:`PairExample` — two texts and a label
``qa_ranking``          :class:`RankingExample` — a question, its candidate answers, 0/1 labels
``relation_triples``    :class:`TripleExample` — text and ``(subject, predicate, object)`` triples
``relation``            :class:`RelationExample` — text without markers, the two entities'
                        character spans and the relation label
======================  ==========================================================================

Missing splits (documented, seeded, see :func:`derive_splits`): when only a dev file exists it is
split 80/10/10 into train/dev/test; when dev and test exist but no train (cMedQA, GAD), dev is
split 90/10 into train/dev; when train and dev exist but no test (CHIP-STS), the dev file becomes
the test split and 10 % of train becomes dev. The permutation uses ``numpy.random.default_rng(
SPLIT_SEED)``, so every user gets the same split.

Bad rows (broken JSON, a missing field, an offset outside the text, a label outside the task's
label set) raise :class:`~kgplm.exceptions.DataFormatError` with file and line. Two upstream
defects of cMedQANER are handled rather than fatal, and logged with their locations: mentions
whose offset does not point at the mention text (15 in train, all on line 367, whose offsets are
shifted by one) are dropped,
and, for the flat BIO tasks, a span overlapping an earlier (longer or earlier-starting) one is
dropped (the char-BIO ``.txt`` files of ChineseBLUE drop the same ones). Mention text is matched
case-insensitively because the released texts are lower-cased after annotation.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kgplm._io import iter_lines
from kgplm.exceptions import ConfigurationError, DataFormatError, MissingFileError

__all__ = [
    "SpanExample", "TextExample", "PairExample", "RankingExample", "TripleExample", "RelationExample",
    "TaskSpec", "TASKS", "SPLITS", "SPLIT_SEED", "load_task", "task_names", "derive_splits", "get_task",
]

logger = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
SPLIT_SEED = 20_230_901  # fixed: a derived split must be the same for every user


# -- examples ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpanExample:
    """NER: ``spans`` are ``(start, end, type)`` character offsets into ``text``, end exclusive."""

    id: str
    text: str
    spans: tuple[tuple[int, int, str], ...]


@dataclass(frozen=True)
class TextExample:
    id: str
    text: str
    label: str


@dataclass(frozen=True)
class PairExample:
    id: str
    text_a: str
    text_b: str
    label: str


@dataclass(frozen=True)
class RankingExample:
    """A question with its candidate answers; ``labels[i]`` is 1 when candidate i answers it."""

    id: str
    query: str
    candidates: tuple[str, ...]
    labels: tuple[int, ...]


@dataclass(frozen=True)
class TripleExample:
    id: str
    text: str
    triples: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class RelationExample:
    """Relation classification: ``head`` and ``tail`` are character spans ``(start, end)`` in ``text``."""

    id: str
    text: str
    head: tuple[int, int]
    tail: tuple[int, int]
    label: str


# -- readers: each yields examples of one file -------------------------------------------------------------
def _json_lines(path: Path):
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as error:
            raise DataFormatError(f"broken JSON: {error.msg}", path=path, line=number, column=error.colno,
                                  expected="one JSON object per line") from None


def _json_records(path: Path):
    """A JSON list (CBLUE) or JSON lines; yields (line, record). Lines of a list are the record's start line."""
    with open(path, encoding="utf-8") as handle:
        head = handle.read(64).lstrip()
    if not head.startswith("["):
        yield from _json_lines(path)
        return
    text = path.read_text(encoding="utf-8")
    try:
        records = json.loads(text)
    except json.JSONDecodeError as error:
        raise DataFormatError(f"broken JSON: {error.msg}", path=path, line=error.lineno, column=error.colno,
                              expected="a JSON list of objects") from None
    # the line a record starts on, for error messages: the n-th top-level "{" of the list
    decoder, position, line_of = json.JSONDecoder(), text.index("[") + 1, []
    line, counted = 1, 0
    for _ in records:
        while text[position] in " \t\r\n,":
            position += 1
        line += text.count("\n", counted, position)
        counted = position
        line_of.append(line)
        _, position = decoder.raw_decode(text, position)
    yield from zip(line_of, records)


def _field(record, name: str, path: Path, line: int, expected: str = "a string"):
    if not isinstance(record, dict) or name not in record:
        raise DataFormatError(f"missing field {name!r}", path=path, line=line, expected=expected)
    return record[name]


def _tab_rows(path: Path, columns: int):
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        parts = line.rstrip("\r\n").split("\t")
        if len(parts) != columns:
            raise DataFormatError(f"{len(parts)} tab-separated fields", path=path, line=number,
                                  expected=f"{columns} fields")
        yield number, [part.strip() for part in parts]


@dataclass
class _Statistics:
    misaligned: list[str] = field(default_factory=list)
    overlapping: list[str] = field(default_factory=list)

    def report(self, path: Path) -> None:
        for what, where in (("mentions whose offset does not point at the mention (dropped)", self.misaligned),
                            ("overlapping mentions in a flat NER task (dropped)", self.overlapping)):
            if where:
                logger.warning("%s: %d %s, e.g. %s", path, len(where), what, ", ".join(where[:5]))


def _flat(spans: list[tuple[int, int, str]], where: str, statistics: _Statistics) -> list[tuple[int, int, str]]:
    """Keep spans left to right, longer first at the same start; drop any that overlaps a kept one."""
    kept: list[tuple[int, int, str]] = []
    end = -1
    for span in sorted(set(spans), key=lambda s: (s[0], -s[1], s[2])):
        if span[0] < end:
            statistics.overlapping.append(where)
            continue
        kept.append(span)
        end = span[1]
    return kept


def read_mention_json(path: Path, *, nested: bool = False, type_key: str | None = None) -> list[SpanExample]:
    """ChineseBLUE NER JSON lines: ``{"text", "mention_data": [{"mention", "type"|"label", "offset"}]}``."""
    statistics = _Statistics()
    examples = []
    for line, record in _json_lines(path):
        text = _field(record, "text", path, line)
        mentions = _field(record, "mention_data", path, line, "a list of mentions")
        if not isinstance(text, str) or not isinstance(mentions, list):
            raise DataFormatError("'text' must be a string and 'mention_data' a list", path=path, line=line)
        spans = []
        for mention in mentions:
            kind = mention.get(type_key) if type_key else mention.get("type", mention.get("label"))
            surface = mention.get("mention")
            try:
                start = int(mention["offset"])
            except (KeyError, TypeError, ValueError):
                raise DataFormatError(f"mention {mention!r} has no integer offset", path=path, line=line) from None
            if not isinstance(kind, str) or not isinstance(surface, str) or not surface:
                raise DataFormatError(f"mention {mention!r} lacks a type or a mention string", path=path, line=line)
            end = start + len(surface)
            if start < 0 or end > len(text):
                raise DataFormatError(f"mention {surface!r} at offset {start} ends at {end}, outside the text of "
                                      f"{len(text)} characters", path=path, line=line)
            if text[start:end].lower() != surface.lower():
                statistics.misaligned.append(f"line {line}")
                continue
            spans.append((start, end, kind))
        if not nested:
            spans = _flat(spans, f"line {line}", statistics)
        examples.append(SpanExample(f"{path.name}:{line}", text, tuple(sorted(set(spans)))))
    statistics.report(path)
    return examples


def read_cmeee(path: Path) -> list[SpanExample]:
    """CBLUE CMeEE: a JSON list of ``{"text", "entities": [{"start_idx", "end_idx", "type", "entity"}]}``.

    CMeEE-V1 documents ``end_idx`` as inclusive; the CMeEE-V2 dev file holds it exclusive (all
    26,081 entities). Each entity's ``entity`` string decides which: exclusive when
    ``text[start:end]`` equals it, inclusive when ``text[start:end + 1]`` does, else an error.
    """
    examples = []
    for line, record in _json_records(path):
        text = _field(record, "text", path, line)
        spans = []
        for entity in _field(record, "entities", path, line, "a list of entities"):
            try:
                start, end, kind = int(entity["start_idx"]), int(entity["end_idx"]), str(entity["type"])
                surface = str(entity["entity"])
            except (KeyError, TypeError, ValueError):
                raise DataFormatError(f"entity {entity!r} lacks start_idx/end_idx/type/entity", path=path,
                                      line=line) from None
            if start < 0 or end > len(text) or start >= end:
                raise DataFormatError(f"entity span [{start}, {end}) outside the text of {len(text)} characters",
                                      path=path, line=line)
            if text[start:end] != surface:
                if text[start:end + 1] != surface:
                    raise DataFormatError(f"entity {surface!r} does not match the text at [{start}, {end}] "
                                          f"({text[start:end + 1]!r})", path=path, line=line)
                end += 1
            spans.append((start, end, kind))
        examples.append(SpanExample(f"{path.name}:{line}", text, tuple(sorted(set(spans)))))
    return examples


def read_iob_tsv(path: Path) -> list[SpanExample]:
    """BLURB NER: ``token<TAB>tag`` lines, a blank line between sentences; text = tokens joined by spaces."""
    examples, tokens, tags, first = [], [], [], None

    def flush():
        if not tokens:
            return
        starts, position = [], 0
        for token in tokens:
            starts.append(position)
            position += len(token) + 1
        spans, open_span = [], None
        for index, tag in enumerate(tags + ["O"]):
            prefix, _, kind = tag.partition("-")
            if open_span is not None and (prefix != "I" or kind != open_span[1]):
                spans.append((starts[open_span[0]], starts[index - 1] + len(tokens[index - 1]), open_span[1]))
                open_span = None
            if prefix == "B" or (prefix == "I" and open_span is None):
                open_span = (index, kind)
        examples.append(SpanExample(f"{path.name}:{first}", " ".join(tokens), tuple(spans)))

    for number, line in iter_lines(path):
        stripped = line.rstrip("\r\n")
        if not stripped.strip():
            flush()
            tokens, tags, first = [], [], None
            continue
        parts = stripped.split("\t")
        if len(parts) != 2 or not parts[0]:
            raise DataFormatError("not a token<TAB>tag line", path=path, line=number, expected="token<TAB>tag")
        token, tag = parts
        if tag != "O" and (tag[:2] not in ("B-", "I-") or len(tag) < 3):
            raise DataFormatError(f"tag {tag!r}", path=path, line=number, expected="O, B-TYPE or I-TYPE")
        first = first or number
        tokens.append(token)
        tags.append(tag)
    flush()
    return examples


def read_labelled_text(path: Path) -> list[TextExample]:
    """ChineseBLUE classification: ``label<TAB>text``."""
    return [TextExample(f"{path.name}:{n}", text, label) for n, (label, text) in _tab_rows(path, 2)]


def read_labelled_pairs(path: Path) -> list[PairExample]:
    """ChineseBLUE cMedQQ: ``label<TAB>text_a<TAB>text_b``."""
    return [PairExample(f"{path.name}:{n}", a, b, label) for n, (label, a, b) in _tab_rows(path, 3)]


def read_ranking(path: Path) -> list[RankingExample]:
    """ChineseBLUE cMedQA: ``label<TAB>question<TAB>answer`` rows (shuffled); rows of one question form a group.

    Groups keep the order of their first row. Questions whose candidates hold no correct answer
    (677 of 895 in dev) stay in the data but Acc@1 is computed over the others.
    """
    groups: dict[str, tuple[int, list[str], list[int]]] = {}
    for number, (label, question, answer) in _tab_rows(path, 3):
        if label not in ("0", "1"):
            raise DataFormatError(f"label {label!r}", path=path, line=number, expected="0 or 1")
        group = groups.setdefault(question, (number, [], []))
        group[1].append(answer)
        group[2].append(int(label))
    return [RankingExample(f"{path.name}:{n}", q, tuple(a), tuple(labels)) for q, (n, a, labels) in groups.items()]


def read_sts_json(path: Path) -> list[PairExample]:
    """CBLUE CHIP-STS: a JSON list of ``{"text1", "text2", "label"}``."""
    return [PairExample(f"{path.name}:{line}", str(_field(r, "text1", path, line)), str(_field(r, "text2", path, line)),
                        str(_field(r, "label", path, line))) for line, r in _json_records(path)]


def read_query_json(path: Path) -> list[TextExample]:
    """CBLUE KUAKE-QIC: a JSON list of ``{"query", "label"}``."""
    return [TextExample(f"{path.name}:{line}", str(_field(r, "query", path, line)), str(_field(r, "label", path, line)))
            for line, r in _json_records(path)]


def read_cmeie(path: Path) -> list[TripleExample]:
    """CBLUE CMeIE: JSON lines ``{"text", "spo_list": [{"subject", "predicate", "object": {"@value"}}]}``."""
    examples = []
    for line, record in _json_lines(path):
        text = _field(record, "text", path, line)
        triples = []
        for spo in _field(record, "spo_list", path, line, "a list of triples"):
            try:
                subject, predicate, value = spo["subject"], spo["predicate"], spo["object"]["@value"]
            except (KeyError, TypeError):
                raise DataFormatError(f"triple {spo!r} lacks subject/predicate/object.@value", path=path,
                                      line=line) from None
            triples.append((subject, predicate, value))
        examples.append(TripleExample(f"{path.name}:{line}", text, tuple(triples)))
    return examples


def _strip_markers(text: str, markers: tuple[tuple[str, str], tuple[str, str]], path: Path, line: int):
    """Remove two pairs of entity markers; return the clean text and each entity's character span."""
    spans = []
    for opening, closing in markers:
        start = text.find(opening)
        end = text.find(closing, start + len(opening)) if start >= 0 else -1
        if start < 0 or end < 0:
            raise DataFormatError(f"entity markers {opening} … {closing} not found", path=path, line=line)
        inner = text[start + len(opening): end]
        stripped = inner.strip()
        left = start + len(opening) + (len(inner) - len(inner.lstrip()))
        text = text[:start] + text[left: left + len(stripped)] + text[end + len(closing):]
        # shift the spans found earlier that lie after this marker pair
        removed_before = left - start
        removed_total = len(opening) + len(closing) + len(inner) - len(stripped)
        spans = [(s - (removed_total if s > end else removed_before if s > start else 0),
                  e - (removed_total if e > end else removed_before if e > start else 0)) for s, e in spans]
        spans.append((start, start + len(stripped)))
    return text, spans[0], spans[1]


def read_chemprot(path: Path) -> list[RelationExample]:
    """ChemProt JSON lines: ``{"text": "... << chemical-or-gene >> ... [[ other ]] ...", "label"}``."""
    examples = []
    for line, record in _json_lines(path):
        text = _field(record, "text", path, line)
        clean, head, tail = _strip_markers(text, (("<<", ">>"), ("[[", "]]")), path, line)
        examples.append(RelationExample(f"{path.name}:{line}", clean, head, tail, str(_field(record, "label", path, line))))
    return examples


def read_blurb_relation(path: Path) -> list[RelationExample]:
    """BLURB GAD/DDI: JSON lines ``{"text", "relation": [{"relation_type", "entity_1", "entity_1_idx", …}]}``.

    Entity spans come from ``entity_1_idx``/``entity_2_idx`` (end exclusive, checked against
    ``entity_1``/``entity_2``); the marked texts are not used because DDI marks a pair that is one
    mention as ``[E1-E2]…[/E1-E2]``.
    """
    import ast

    examples = []
    for line, record in _json_lines(path):
        text = _field(record, "text", path, line)
        relation = _field(record, "relation", path, line, "a relation list")
        if isinstance(relation, str):  # the BLURB release stores it as a Python-literal string
            try:
                relation = ast.literal_eval(relation)
            except (ValueError, SyntaxError):
                raise DataFormatError("unreadable 'relation' field", path=path, line=line) from None
        try:
            first = relation[0]
            label = str(first["relation_type"])
            spans = [tuple(int(v) for v in first[f"entity_{k}_idx"]) for k in (1, 2)]
            names = [first[f"entity_{k}"] for k in (1, 2)]
        except (IndexError, KeyError, TypeError, ValueError):
            raise DataFormatError("'relation' lacks relation_type, entity_1/2 or entity_1/2_idx", path=path,
                                  line=line) from None
        for (start, end), name in zip(spans, names):
            if not (0 <= start < end <= len(text)) or text[start:end] != name:
                raise DataFormatError(f"entity {name!r} not at [{start}, {end}) of the text", path=path, line=line)
        examples.append(RelationExample(f"{path.name}:{line}", text, spans[0], spans[1], label))
    return examples


# -- the registry --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskSpec:
    """A task: its kind, the reader, where each split lives (relative to a tasks root) and its metric."""

    name: str
    kind: str
    reader: Callable[[Path], list]
    files: dict[str, str]
    metric: str
    language: str = "zh"
    description: str = ""


def _chineseblue(task: str, extension: str, splits=SPLITS) -> dict[str, str]:
    return {split: f"zh/chineseblue/{task}/{split}.{extension}" for split in splits}


def _blurb_ner(task: str) -> dict[str, str]:
    return {"train": f"en/blurb_ner/{task}-IOB/train.tsv", "dev": f"en/blurb_ner/{task}-IOB/devel.tsv",
            "test": f"en/blurb_ner/{task}-IOB/test.tsv"}


TASKS: dict[str, TaskSpec] = {spec.name: spec for spec in (
    TaskSpec("cmedqaner", "ner", read_mention_json, _chineseblue("cMedQANER", "json"), "entity_f1",
             description="ChineseBLUE cMedQANER: NER in medical questions, 11 types"),
    TaskSpec("cehrner", "ner", read_mention_json, _chineseblue("cEHRNER", "json"), "entity_f1",
             description="ChineseBLUE cEHRNER: NER in electronic health records, 7 types"),
    TaskSpec("cmeee", "nested_ner", read_cmeee, {"dev": "zh/cblue/CMeEE-V2_dev.json"}, "entity_f1",
             description="CBLUE CMeEE-V2: nested NER, 9 types (dev only: split 80/10/10)"),
    TaskSpec("cmedqq", "pair", read_labelled_pairs, _chineseblue("cMedQQ", "txt"), "accuracy",
             description="ChineseBLUE cMedQQ: question-question matching"),
    TaskSpec("chip-sts", "pair", read_sts_json, {"train": "zh/cblue/CHIP-STS_train.json",
                                                  "dev": "zh/cblue/CHIP-STS_dev.json"}, "macro_f1",
             description="CBLUE CHIP-STS: question similarity (dev file used as test)"),
    TaskSpec("cmedqa", "qa_ranking", read_ranking, _chineseblue("cMedQA", "txt", ("dev", "test")), "acc@1",
             description="ChineseBLUE cMedQA: answer selection, Acc@1 over each question's candidates"),
    TaskSpec("cmedic", "classification", read_labelled_text, _chineseblue("cMedIC", "txt"), "accuracy",
             description="ChineseBLUE cMedIC: query intent, 3 classes"),
    TaskSpec("cmedtc", "classification", read_labelled_text, _chineseblue("cMedTC", "txt"), "macro_f1",
             description="ChineseBLUE cMedTC: clinical trial criteria, 44 classes"),
    TaskSpec("kuake-qic", "classification", read_query_json, {"dev": "zh/cblue/KUAKE-QIC_dev.json"}, "accuracy",
             description="CBLUE KUAKE-QIC: query intent, 11 classes (dev only: split 80/10/10)"),
    TaskSpec("cmeie", "relation_triples", read_cmeie, {"dev": "zh/cblue/CMeIE-V2_dev.json"}, "triple_f1",
             description="CBLUE CMeIE-V2: relation triples, 43 predicates (dev only: split 80/10/10)"),
    TaskSpec("bc5cdr", "ner", read_iob_tsv, _blurb_ner("BC5CDR"), "entity_f1", "en", "BLURB BC5CDR chemical+disease"),
    TaskSpec("bc5cdr-chem", "ner", read_iob_tsv, _blurb_ner("BC5CDR-chem"), "entity_f1", "en", "BLURB BC5CDR-chem"),
    TaskSpec("bc5cdr-disease", "ner", read_iob_tsv, _blurb_ner("BC5CDR-disease"), "entity_f1", "en",
             "BLURB BC5CDR-disease"),
    TaskSpec("ncbi-disease", "ner", read_iob_tsv, _blurb_ner("NCBI-disease"), "entity_f1", "en", "BLURB NCBI-disease"),
    TaskSpec("chemprot", "relation", read_chemprot, {s: f"en/chemprot/{s}.jsonl" for s in SPLITS}, "micro_f1", "en",
             "ChemProt relation classification (13 labels, positives only)"),
    TaskSpec("gad", "relation", read_blurb_relation, {"dev": "en/blurb_re/GAD_BLURB/dev_0.json",
                                                      "test": "en/blurb_re/GAD_BLURB/test_0.json"}, "micro_f1", "en",
             "BLURB GAD gene-disease relations (no train: dev split 90/10)"),
    TaskSpec("ddi", "relation", read_blurb_relation, {"dev": "en/blurb_re/DDI_BLURB/dev_0.json"}, "micro_f1", "en",
             "BLURB DDI drug-drug interactions (dev only: split 80/10/10)"),
)}


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


def derive_splits(files: dict[str, list], seed: int = SPLIT_SEED) -> dict[str, list]:
    """Fill the missing splits as the module docstring says; ``files`` maps the present splits to examples."""
    present = set(files)
    if present == set(SPLITS):
        return files

    def cut(examples: list, fractions: tuple[float, ...]) -> list[list]:
        order = np.random.default_rng(seed).permutation(len(examples))
        bounds = np.cumsum([0] + [round(f * len(examples)) for f in fractions[:-1]] + [len(examples)])
        bounds[-1] = len(examples)
        return [[examples[i] for i in order[a:b]] for a, b in zip(bounds[:-1], bounds[1:])]

    if present == {"dev"}:
        train, dev, test = cut(files["dev"], (0.8, 0.1, 0.1))
        return {"train": train, "dev": dev, "test": test}
    if present == {"dev", "test"}:
        train, dev = cut(files["dev"], (0.9, 0.1))
        return {"train": train, "dev": dev, "test": files["test"]}
    if present == {"train", "dev"}:
        train, dev = cut(files["train"], (0.9, 0.1))
        return {"train": train, "dev": dev, "test": files["dev"]}
    raise ConfigurationError(f"cannot derive train/dev/test from the splits {sorted(present)}")


def load_task(name: str, data_dir: str | os.PathLike, split: str | None = None) -> dict[str, list] | list:
    """Read task ``name`` from ``data_dir``: all three splits as a dict, or one split's examples.

    ``data_dir`` is a tasks root (``…/tasks`` or ``…/tasks/zh``) or the directory holding the task's
    files themselves.
    """
    spec = get_task(name)
    if split is not None and split not in SPLITS:
        raise ConfigurationError(f"split must be one of {SPLITS}, got {split!r}")
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise MissingFileError(data_dir, f"data directory of task {spec.name}")
    located = {s: _locate(data_dir, relative) for s, relative in spec.files.items()}
    missing = [spec.files[s] for s, path in located.items() if path is None]
    if missing:
        raise MissingFileError(data_dir / missing[0], f"{spec.name} file ({', '.join(missing)} under {data_dir})")
    read = {s: spec.reader(path) for s, path in located.items()}
    splits = derive_splits(read)
    return splits if split is None else splits[split]
