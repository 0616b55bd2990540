"""Readers of the task file formats (ChineseBLUE, CBLUE, BLURB) and the examples they produce.

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
``graded_ranking``      :class:`RankingExample` — a query, its documents, graded relevance 0–4
``relation_triples``    :class:`TripleExample` — text and ``(subject, predicate, object)`` triples
``relation``            :class:`RelationExample` — text without markers, the two entities'
                        character spans and the relation label
======================  ==========================================================================

Bad rows (broken JSON, a missing field, an offset outside the text) raise
:class:`~kgplm.exceptions.DataFormatError` with file and line. Two upstream defects of cMedQANER
are handled rather than fatal, and logged with their locations: mentions whose offset does not
point at the mention text (15 in train, all on line 367, whose offsets are shifted by one) are
dropped, and, for the flat BIO tasks, a span overlapping an earlier (longer or earlier-starting)
one is dropped (the char-BIO ``.txt`` files of ChineseBLUE drop the same ones). Mention text is
matched case-insensitively because the released texts are lower-cased after annotation.

The CBLUE test files carry no labels (the benchmark scores submissions). Their readers take
``require_labels=False`` for them: a record without its label field then gives an example whose
label (``spans``, ``triples``) is ``None``; a file mixing labelled and unlabelled records is an error.
"""

from __future__ import annotations

import ast
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from kgplm._io import iter_lines
from kgplm.exceptions import DataFormatError

__all__ = [
    "SpanExample",
    "TextExample",
    "PairExample",
    "RankingExample",
    "TripleExample",
    "RelationExample",
    "read_mention_json",
    "read_cmeee",
    "read_iob_tsv",
    "read_labelled_text",
    "read_labelled_pairs",
    "read_ranking",
    "read_graded_ranking",
    "read_sts_json",
    "read_query_json",
    "read_cmeie",
    "read_chemprot",
    "read_blurb_relation",
]

logger = logging.getLogger(__name__)


# -- examples ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpanExample:
    """NER: ``spans`` are ``(start, end, type)`` character offsets into ``text``, end exclusive."""

    id: str
    text: str
    spans: tuple[tuple[int, int, str], ...] | None


@dataclass(frozen=True)
class TextExample:
    """``source_id``: the record's own id where the file has one (CBLUE submissions are keyed by it)."""

    id: str
    text: str
    label: str | None
    source_id: str | None = None


@dataclass(frozen=True)
class PairExample:
    """``source_id``: the record's own id where the file has one; ``category`` the CHIP-STS disease category."""

    id: str
    text_a: str
    text_b: str
    label: str | None
    source_id: str | None = None
    category: str | None = None


@dataclass(frozen=True)
class RankingExample:
    """A query with its candidates; ``labels[i]`` is candidate i's relevance (0/1 for answer selection,
    a grade for graded ranking)."""

    id: str
    query: str
    candidates: tuple[str, ...]
    labels: tuple[int, ...]


@dataclass(frozen=True)
class TripleExample:
    id: str
    text: str
    triples: tuple[tuple[str, str, str], ...] | None


@dataclass(frozen=True)
class RelationExample:
    """Relation classification: ``head`` and ``tail`` are character spans ``(start, end)`` in ``text``."""

    id: str
    text: str
    head: tuple[int, int]
    tail: tuple[int, int]
    label: str


# -- shared parsing ------------------------------------------------------------------------------------------
def _json_lines(path: Path):
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as error:
            raise DataFormatError(
                f"broken JSON: {error.msg}",
                path=path,
                line=number,
                column=error.colno,
                expected="one JSON object per line",
            ) from None


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
        raise DataFormatError(
            f"broken JSON: {error.msg}",
            path=path,
            line=error.lineno,
            column=error.colno,
            expected="a JSON list of objects",
        ) from None
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


class _Labels:
    """Reads a record's label field, allowing its absence (an unlabelled CBLUE test file) when asked;
    a file must be wholly labelled or wholly unlabelled."""

    def __init__(self, path: Path, name: str, require: bool, expected: str = "a string") -> None:
        self.path, self.name, self.require, self.expected = path, name, require, expected
        self.labelled: int | None = None  # the first line with / without a label
        self.unlabelled: int | None = None

    def get(self, record, line: int):
        value = record.get(self.name) if isinstance(record, dict) else None
        if value is None or value == "":
            if self.require:
                raise DataFormatError(f"missing field {self.name!r}", path=self.path, line=line, expected=self.expected)
            self.unlabelled = self.unlabelled or line
            value = None
        else:
            self.labelled = self.labelled or line
        if self.labelled and self.unlabelled:
            raise DataFormatError(
                f"line {self.labelled} has a {self.name!r} field and line {self.unlabelled} has none",
                path=self.path,
                line=max(self.labelled, self.unlabelled),
                expected="every record labelled, or none (a test file without labels)",
            )
        return value


def _tab_rows(path: Path, columns: int):
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        parts = line.rstrip("\r\n").split("\t")
        if len(parts) != columns:
            raise DataFormatError(
                f"{len(parts)} tab-separated fields", path=path, line=number, expected=f"{columns} fields"
            )
        yield number, [part.strip() for part in parts]


@dataclass
class _Statistics:
    misaligned: list[str] = field(default_factory=list)
    overlapping: list[str] = field(default_factory=list)

    def report(self, path: Path) -> None:
        for what, where in (
            ("mentions whose offset does not point at the mention (dropped)", self.misaligned),
            ("overlapping mentions in a flat NER task (dropped)", self.overlapping),
        ):
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


# -- NER -----------------------------------------------------------------------------------------------------
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
                raise DataFormatError(
                    f"mention {surface!r} at offset {start} ends at {end}, outside the text of {len(text)} characters",
                    path=path,
                    line=line,
                )
            if text[start:end].lower() != surface.lower():
                statistics.misaligned.append(f"line {line}")
                continue
            spans.append((start, end, kind))
        if not nested:
            spans = _flat(spans, f"line {line}", statistics)
        examples.append(SpanExample(f"{path.name}:{line}", text, tuple(sorted(set(spans)))))
    statistics.report(path)
    return examples


def read_cmeee(path: Path, *, require_labels: bool = True) -> list[SpanExample]:
    """CBLUE CMeEE: a JSON list of ``{"text", "entities": [{"start_idx", "end_idx", "type", "entity"}]}``.

    CMeEE-V1 documents ``end_idx`` as inclusive; the CMeEE-V2 dev file holds it exclusive (all
    26,081 entities). Each entity's ``entity`` string decides which: exclusive when
    ``text[start:end]`` equals it, inclusive when ``text[start:end + 1]`` does, else an error.
    """
    examples = []
    labels = _Labels(path, "entities", require_labels, "a list of entities")
    for line, record in _json_records(path):
        text = _field(record, "text", path, line)
        entities = labels.get(record, line)
        if entities is None:
            examples.append(SpanExample(f"{path.name}:{line}", text, None))
            continue
        spans = []
        for entity in entities:
            try:
                start, end, kind = int(entity["start_idx"]), int(entity["end_idx"]), str(entity["type"])
                surface = str(entity["entity"])
            except (KeyError, TypeError, ValueError):
                raise DataFormatError(
                    f"entity {entity!r} lacks start_idx/end_idx/type/entity", path=path, line=line
                ) from None
            if start < 0 or end > len(text) or start >= end:
                raise DataFormatError(
                    f"entity span [{start}, {end}) outside the text of {len(text)} characters", path=path, line=line
                )
            if text[start:end] != surface:
                if text[start : end + 1] != surface:
                    raise DataFormatError(
                        f"entity {surface!r} does not match the text at [{start}, {end}] ({text[start : end + 1]!r})",
                        path=path,
                        line=line,
                    )
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


# -- classification, pairs, ranking --------------------------------------------------------------------------
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


def read_graded_ranking(path: Path) -> list[RankingExample]:
    """ChineseBLUE cMedIR: JSON lines ``{"query", "documents": [{"url", "label", "title"}]}``, graded 0–4.

    Each row holds two documents of one query; a query's rows form one example whose candidates
    are its distinct documents (by URL, in order of first appearance), each with its grade. The
    release holds every row twice, the second copy with a ``:`` glued to the front of one title
    (all 5,000 such titles in each file); a title is read without that ``:`` when it starts with one.
    A document graded differently in two rows of one query is an error.
    """
    queries: dict[str, tuple[int, dict[str, list]]] = {}
    for line, record in _json_lines(path):
        query = _field(record, "query", path, line)
        documents = _field(record, "documents", path, line, "a list of documents")
        if not isinstance(query, str) or not isinstance(documents, list):
            raise DataFormatError("'query' must be a string and 'documents' a list", path=path, line=line)
        _, by_url = queries.setdefault(query, (line, {}))
        for document in documents:
            try:
                url, title, grade = str(document["url"]), str(document["title"]), int(document["label"])
            except (KeyError, TypeError, ValueError):
                raise DataFormatError(
                    f"document {document!r} lacks url/title/an integer label", path=path, line=line
                ) from None
            title = title[1:] if title.startswith(":") else title
            seen = by_url.setdefault(url, [title, grade])
            if seen[1] != grade:
                raise DataFormatError(
                    f"document {url} of query {query!r} graded {seen[1]} and {grade}",
                    path=path,
                    line=line,
                    expected="one grade per document and query",
                )
    return [
        RankingExample(
            f"{path.name}:{line}",
            query,
            tuple(title for title, _ in by_url.values()),
            tuple(grade for _, grade in by_url.values()),
        )
        for query, (line, by_url) in queries.items()
    ]


def _optional_str(record: dict, key: str) -> str | None:
    return None if record.get(key) is None else str(record[key])


def read_sts_json(path: Path, *, require_labels: bool = True) -> list[PairExample]:
    """CBLUE CHIP-STS: a JSON list of ``{"text1", "text2", "label"}``."""
    labels = _Labels(path, "label", require_labels)
    examples = []
    for line, record in _json_records(path):
        label = labels.get(record, line)
        examples.append(
            PairExample(
                f"{path.name}:{line}",
                str(_field(record, "text1", path, line)),
                str(_field(record, "text2", path, line)),
                None if label is None else str(label),
                _optional_str(record, "id"),
                _optional_str(record, "category"),
            )
        )
    return examples


def read_query_json(path: Path, *, require_labels: bool = True) -> list[TextExample]:
    """CBLUE KUAKE-QIC: a JSON list of ``{"query", "label"}``."""
    labels = _Labels(path, "label", require_labels)
    examples = []
    for line, record in _json_records(path):
        label = labels.get(record, line)
        examples.append(
            TextExample(
                f"{path.name}:{line}",
                str(_field(record, "query", path, line)),
                None if label is None else str(label),
                _optional_str(record, "id"),
            )
        )
    return examples


# -- relations -----------------------------------------------------------------------------------------------
def read_cmeie(path: Path, *, require_labels: bool = True) -> list[TripleExample]:
    """CBLUE CMeIE: JSON lines ``{"text", "spo_list": [{"subject", "predicate", "object": {"@value"}}]}``."""
    examples = []
    labels = _Labels(path, "spo_list", require_labels, "a list of triples")
    for line, record in _json_lines(path):
        text = _field(record, "text", path, line)
        spo_list = labels.get(record, line)
        if spo_list is None:
            examples.append(TripleExample(f"{path.name}:{line}", text, None))
            continue
        triples = []
        for spo in spo_list:
            try:
                subject, predicate, value = spo["subject"], spo["predicate"], spo["object"]["@value"]
            except (KeyError, TypeError):
                raise DataFormatError(
                    f"triple {spo!r} lacks subject/predicate/object.@value", path=path, line=line
                ) from None
            triples.append((subject, predicate, value))
        examples.append(TripleExample(f"{path.name}:{line}", text, tuple(triples)))
    return examples


# ChemProt marks the two entities with "<< " … " >>" and "[[ " … " ]]", spaces included; an entity
# that the source text already brackets reads "[[[ name ]]]", so the markers are the ones that touch
# the spaces, not the first "[[" of the run.
_CHEMPROT_MARKERS = ((re.compile(r"<< (.+?) >>"), "<< … >>"), (re.compile(r"\[\[ (.+?) \]\]"), "[[ … ]]"))


def _strip_markers(text: str, markers, path: Path, line: int) -> tuple[str, tuple[int, int], tuple[int, int]]:
    """Remove two marker pairs; return the clean text and each entity's character span in it."""
    matches = []
    for pattern, shown in markers:
        found = list(pattern.finditer(text))
        if len(found) != 1:
            raise DataFormatError(
                f"entity markers {shown} {'not found' if not found else f'found {len(found)} times'}",
                path=path,
                line=line,
                expected="exactly one pair of each marker",
            )
        matches.append(found[0])
    spans: list[tuple[int, int]] = [(0, 0), (0, 0)]
    pieces, last, removed = [], 0, 0
    for index in sorted(range(len(matches)), key=lambda i: matches[i].start()):
        match = matches[index]
        if match.start() < last:
            raise DataFormatError("entity markers overlap", path=path, line=line, expected="two separate entities")
        inner = match.group(1)
        pieces += [text[last : match.start()], inner]
        start = match.start() - removed
        spans[index] = (start, start + len(inner))
        removed += len(match.group(0)) - len(inner)
        last = match.end()
    pieces.append(text[last:])
    return "".join(pieces), spans[0], spans[1]


def read_chemprot(path: Path) -> list[RelationExample]:
    """ChemProt JSON lines: ``{"text": "... << chemical-or-gene >> ... [[ other ]] ...", "label"}``."""
    examples = []
    for line, record in _json_lines(path):
        text = _field(record, "text", path, line)
        clean, head, tail = _strip_markers(text, _CHEMPROT_MARKERS, path, line)
        examples.append(
            RelationExample(f"{path.name}:{line}", clean, head, tail, str(_field(record, "label", path, line)))
        )
    return examples


def read_blurb_relation(path: Path) -> list[RelationExample]:
    """BLURB GAD/DDI: JSON lines ``{"text", "relation": [{"relation_type", "entity_1", "entity_1_idx", …}]}``.

    Entity spans come from ``entity_1_idx``/``entity_2_idx`` (end exclusive, checked against
    ``entity_1``/``entity_2``); the marked texts are not used because DDI marks a pair that is one
    mention as ``[E1-E2]…[/E1-E2]``.
    """
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
            raise DataFormatError(
                "'relation' lacks relation_type, entity_1/2 or entity_1/2_idx", path=path, line=line
            ) from None
        for (start, end), name in zip(spans, names):
            if not (0 <= start < end <= len(text)) or text[start:end] != name:
                raise DataFormatError(f"entity {name!r} not at [{start}, {end}) of the text", path=path, line=line)
        examples.append(RelationExample(f"{path.name}:{line}", text, spans[0], spans[1], label))
    return examples
