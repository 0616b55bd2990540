"""Corpus → examples: read text, tokenize, link mentions, attach PEPR neighbours, write Arrow shards.

``read_corpus`` streams documents from text lines, a CSV (chosen columns) or JSON lines.
``build_corpus`` turns them into a memory-mapped Hugging Face ``datasets`` corpus: each example
is one chunk of at most ``max_length`` tokens of one document with

    input_ids, attention_mask        the tokenizer's, [CLS] … [SEP]
    word_ids                         jieba word index of each token (-1 for special tokens), for
                                     whole-word masking
    mention_spans                    (mentions, 2) token [start, end) per linked mention
    mention_entity_ids               (mentions,) entity id per mention
    neighbor_ids / neighbor_relations / neighbor_directions / neighbor_types
                                     (mentions, K) from the PEPR ``NeighborTable`` (-1 padded)
    document, chunk                  where the example came from

Mentions are linked on the document's characters and mapped to tokens exactly
(:mod:`kgplm.text.alignment`); a mention cut by a chunk boundary or truncation is dropped and
counted. The corpus also counts mentions per entity (``entity_frequencies.npy``), the corpus
frequencies PEPR can start from. Work is split into shards of ``shard_size`` documents, each
written to a temporary directory and renamed when complete, so an interrupted build resumes
where it stopped.
"""

from __future__ import annotations

import csv
import json
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from kgplm._io import atomic_directory, atomic_file, iter_lines, require_file
from kgplm.exceptions import ArtifactError, ConfigurationError, DataFormatError, EncodingError, MissingFileError
from kgplm.text.alignment import char_spans_to_token_spans, char_to_word_ids

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.pepr import NeighborTable
    from kgplm.kg.store import KGStore

__all__ = ["Document", "read_corpus", "build_corpus", "load_corpus", "CORPUS_FORMAT"]

logger = logging.getLogger(__name__)

CORPUS_FORMAT = "kgplm-linked-corpus"


@dataclass(frozen=True)
class Document:
    """One document: ``id`` is ``file:line`` (or the caller's id), ``line`` where it starts."""

    id: str
    text: str
    line: int | None = None


def _detect_format(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    suffix = suffixes[-1] if suffixes else ""
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    return "lines"


#: How a decoding error tells the reader to name the file's encoding (``kgplm.train`` passes
#: ``corpus_options`` to :func:`read_corpus`).
_ENCODING_OPTION_HINT = (
    "or read it in its own encoding with encoding= (kgplm.train: corpus_options={'encoding': 'gbk'}, for instance)"
)


def _check_encoding(encoding: str) -> str:
    """The codec's canonical name; the encoding must keep ASCII bytes as they are (lines split on b"\n")."""
    import codecs

    try:
        name = codecs.lookup(encoding).name
    except (LookupError, TypeError):
        raise ConfigurationError(
            f"encoding {encoding!r} is not a text encoding Python knows (e.g. 'utf-8', 'gbk', "
            f"'gb18030', 'big5', 'latin1')"
        ) from None
    if "\n,a".encode(name) != b"\n,a":
        raise ConfigurationError(
            f"encoding {encoding!r} does not keep ASCII as it is (as UTF-16 or UTF-32 do not); "
            f"convert the file to UTF-8 first"
        )
    return name


def _iter_lines(path: Path, encoding: str) -> Iterator[tuple[int, str]]:
    """``(line_number, line)`` as :func:`kgplm._io.iter_lines` yields them, in ``encoding``; a line that does
    not decode raises :class:`EncodingError` naming the file, the line and the ``encoding`` option."""
    if encoding == "utf-8":
        try:
            yield from iter_lines(path)
        except EncodingError as error:
            error.args = (f"{error.args[0]}; {_ENCODING_OPTION_HINT}",)
            raise
        return
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode(encoding)
            except UnicodeDecodeError as error:
                raise EncodingError(
                    f"not valid {encoding} ({error.reason} at byte {error.start} of the line)",
                    path=path,
                    line=line_number,
                    expected=f"a text file in the encoding given by encoding={encoding!r}",
                ) from None
            yield line_number, line.rstrip("\r\n")


def read_corpus(
    path: str | os.PathLike,
    *,
    format: str = "auto",
    columns: Sequence[str] | None = None,
    field: str = "text",
    separator: str = "\n",
    encoding: str = "utf-8",
) -> Iterator[Document]:
    """Stream documents from ``path``.

    format ``lines`` (default for ``.txt``): every non-empty line is a document.
    ``csv``: one document per row, the ``columns`` (default: all) joined by ``separator``; empty
    cells are skipped. ``jsonl``: one JSON object per line, its ``field`` is the document.
    ``encoding``: the file's text encoding (default UTF-8; e.g. ``"gbk"`` or ``"gb18030"`` for Chinese
    text that is not UTF-8); a line that does not decode raises :class:`EncodingError` with its file
    and line.
    """
    path = require_file(path, "corpus file")
    encoding = _check_encoding(encoding)
    format = _detect_format(path) if format == "auto" else format
    if format == "lines":
        for line_number, line in _iter_lines(path, encoding):
            if line.strip():
                yield Document(f"{path.name}:{line_number}", line, line_number)
    elif format == "jsonl":
        for line_number, line in _iter_lines(path, encoding):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataFormatError(
                    f"not valid JSON ({error.msg})",
                    path=path,
                    line=line_number,
                    column=error.colno,
                    expected="one JSON object per line",
                ) from None
            if not isinstance(record, dict) or not isinstance(record.get(field), str):
                raise DataFormatError(
                    f"no string field {field!r}",
                    path=path,
                    line=line_number,
                    expected=f'an object like {{"{field}": "..."}}',
                )
            if record[field].strip():
                yield Document(f"{path.name}:{line_number}", record[field], line_number)
    elif format == "csv":
        yield from _read_csv(path, columns, separator, encoding)
    else:
        raise ConfigurationError(f"format must be 'auto', 'lines', 'csv' or 'jsonl', got {format!r}")


def _read_csv(path: Path, columns: Sequence[str] | None, separator: str, encoding: str = "utf-8") -> Iterator[Document]:
    import gzip

    from kgplm._io import open_text

    try:
        with (
            open_text(path)
            if encoding == "utf-8"
            else gzip.open(path, "rt", encoding=encoding, errors="strict", newline="")
            if path.suffix == ".gz"
            else open(path, encoding=encoding, errors="strict", newline="")
        ) as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                return
            header = [name.lstrip("\ufeff") for name in header]
            wanted = list(header) if columns is None else list(columns)
            missing = [name for name in wanted if name not in header]
            if missing:
                raise ConfigurationError(f"{path}: no column {missing}; the columns are {header}")
            positions = [header.index(name) for name in wanted]
            start_line = reader.line_num + 1
            for row in reader:
                if len(row) != len(header):
                    raise DataFormatError(
                        f"{len(row)} fields",
                        path=path,
                        line=start_line,
                        expected=f"{len(header)} fields ({', '.join(header)})",
                    )
                text = separator.join(row[p] for p in positions if row[p].strip())
                if text.strip():
                    yield Document(f"{path.name}:{start_line}", text, start_line)
                start_line = reader.line_num + 1
    except UnicodeDecodeError as error:
        if encoding == "utf-8":
            raise EncodingError(
                f"not valid UTF-8 ({error.reason})", path=path, expected=f"a UTF-8 CSV file; {_ENCODING_OPTION_HINT}"
            ) from None
        raise EncodingError(
            f"not valid {encoding} ({error.reason})",
            path=path,
            expected=f"a CSV file in the encoding given by encoding={encoding!r}",
        ) from None


def _iter_documents(corpus, **reader_options) -> Iterator[Document]:
    if isinstance(corpus, (str, os.PathLike)):
        yield from read_corpus(corpus, **reader_options)
        return
    for index, item in enumerate(corpus):
        if isinstance(item, Document):
            yield item
        elif isinstance(item, str):
            yield Document(str(index), item)
        else:
            raise ConfigurationError(f"corpus items must be str or Document, got {type(item).__name__}")


# -- building ----------------------------------------------------------------------------------------
def _neighbor_rows(
    table: "NeighborTable | None", store: "KGStore", entity_ids: np.ndarray, primary_types: np.ndarray
) -> dict[str, np.ndarray]:
    if table is None:
        return {}
    rows = np.array([table.row_of(int(e)) for e in entity_ids], dtype=np.int64)
    neighbors = np.asarray(table.neighbors)[rows] if len(rows) else np.zeros((0, table.k), np.int64)
    types = np.where(neighbors >= 0, primary_types[np.maximum(neighbors, 0)], -1)
    return {
        "neighbor_ids": neighbors,
        "neighbor_relations": np.asarray(table.relations)[rows] if len(rows) else neighbors.copy(),
        "neighbor_directions": np.asarray(table.directions)[rows] if len(rows) else neighbors.copy(),
        "neighbor_types": types,
    }


def _encode_document(
    document: Document,
    mentions: tuple[np.ndarray, np.ndarray, np.ndarray],
    *,
    tokenizer,
    linker,
    segmenter,
    table,
    store,
    primary_types,
    max_length: int,
    stride: int,
    counts: np.ndarray,
    statistics: dict[str, int],
) -> list[dict[str, Any]]:
    """The examples of one document; ``mentions``: the linker's ``find`` of its text."""
    text = document.text
    starts, ends, entries = mentions
    entity_ids = linker.best_entities(entries)
    np.add.at(counts, entity_ids, 1)
    statistics["mentions_in_text"] += len(entity_ids)
    encoding = tokenizer(
        text,
        max_length=max_length,
        truncation=True,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        return_attention_mask=True,
        return_token_type_ids=False,
    )
    word_spans = segmenter.segment(text) if segmenter is not None else None
    examples = []
    for chunk, (input_ids, attention_mask, offsets) in enumerate(
        zip(encoding["input_ids"], encoding["attention_mask"], encoding["offset_mapping"])
    ):
        token_spans = char_spans_to_token_spans(offsets, np.stack([starts, ends], 1) if len(starts) else [])
        kept = np.flatnonzero(token_spans[:, 0] >= 0)
        example: dict[str, Any] = {
            "document": document.id,
            "chunk": chunk,
            "input_ids": np.asarray(input_ids, dtype=np.int32),
            "attention_mask": np.asarray(attention_mask, dtype=np.int8),
            "mention_spans": token_spans[kept].astype(np.int32),
            "mention_entity_ids": entity_ids[kept],
        }
        if word_spans is not None:
            example["word_ids"] = char_to_word_ids(offsets, word_spans, len(text)).astype(np.int32)
        example.update(_neighbor_rows(table, store, entity_ids[kept], primary_types))
        statistics["mentions_in_examples"] += len(kept)
        examples.append(example)
    # a mention counts as lost when no chunk holds it whole (chunks may overlap with stride)
    statistics["chunks"] += len(examples)
    return examples


def _features(has_words: bool, has_neighbors: bool):
    from datasets import Features, Sequence, Value

    features = {
        "document": Value("string"),
        "chunk": Value("int32"),
        "input_ids": Sequence(Value("int32")),
        "attention_mask": Sequence(Value("int8")),
        "mention_spans": Sequence(Sequence(Value("int32"), length=2)),
        "mention_entity_ids": Sequence(Value("int64")),
    }
    if has_words:
        features["word_ids"] = Sequence(Value("int32"))
    if has_neighbors:
        for name in ("neighbor_ids", "neighbor_relations", "neighbor_directions", "neighbor_types"):
            features[name] = Sequence(Sequence(Value("int64")))
    return Features(features)


def build_corpus(
    corpus: str | os.PathLike | Iterable[str | Document],
    *,
    store: "KGStore",
    tokenizer,
    output_dir: str | os.PathLike,
    neighbor_table: "NeighborTable | str | os.PathLike | None" = None,
    linker=None,
    segmenter=None,
    whole_word: bool = True,
    max_length: int = 128,
    stride: int = 0,
    shard_size: int = 5000,
    resume: bool = True,
    progress: bool = True,
    **reader_options,
):
    """Build (or resume building) a linked corpus in ``output_dir``; returns it as a ``datasets.Dataset``.

    ``corpus``: a file for :func:`read_corpus` (``reader_options`` such as ``columns=`` go to it)
    or an iterable of texts / :class:`Document`. ``tokenizer``: a fast tokenizer (see
    :func:`kgplm.text.build_vocab`). ``neighbor_table``: a PEPR table (or its ``.npz`` path) that
    covers the linked entities. ``linker`` defaults to ``EntityLinker(store)``; ``segmenter`` to
    ``Segmenter(store)`` when ``whole_word``. ``stride`` tokens overlap between chunks of long
    documents. Completed shards are kept and skipped when ``resume`` is true.
    """
    from datasets import Dataset

    from kgplm.kg.pepr import NeighborTable
    from kgplm.text.linking import EntityLinker
    from kgplm.text.segmentation import Segmenter

    if not getattr(tokenizer, "is_fast", False):
        raise ConfigurationError("build_corpus needs a fast tokenizer (offset mapping); use kgplm.text.load_tokenizer")
    if max_length < 8:
        raise ConfigurationError(f"max_length must be at least 8, got {max_length}")
    if shard_size < 1:
        raise ConfigurationError(f"shard_size must be positive, got {shard_size}")
    if isinstance(neighbor_table, (str, os.PathLike)):
        neighbor_table = NeighborTable.load(neighbor_table)
    output_dir = Path(output_dir)
    shards_dir = output_dir / "shards"
    config = {
        "max_length": max_length,
        "stride": stride,
        "shard_size": shard_size,
        "whole_word": whole_word,
        "vocab_size": len(tokenizer),
        "num_entities": store.num_entities,
        "neighbors": None if neighbor_table is None else int(neighbor_table.k),
        "corpus": str(corpus) if isinstance(corpus, (str, os.PathLike)) else "<iterable>",
        "reader_options": {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in reader_options.items()},
    }
    progress_path = output_dir / "build_config.json"
    if output_dir.exists() and progress_path.is_file():
        previous = json.loads(progress_path.read_text(encoding="utf-8"))
        if not resume or previous != config:
            raise ArtifactError(
                f"{output_dir} holds a corpus built with other settings ({previous}); "
                f"choose another output_dir or delete it"
            )
    else:
        output_dir.mkdir(parents=True, exist_ok=True)
        with atomic_file(progress_path, "w", encoding="utf-8") as handle:
            json.dump(config, handle, indent=1)
    shards_dir.mkdir(exist_ok=True)
    done = {p.name for p in shards_dir.iterdir() if p.is_dir() and not p.name.startswith(".")}

    linker = linker or EntityLinker(store)
    if whole_word and segmenter is None:
        segmenter = Segmenter(store)
    if not whole_word:
        segmenter = None
    primary_types = store.primary_type_ids()
    features = _features(segmenter is not None, neighbor_table is not None)

    def write_shard(index: int, documents: list[Document]) -> None:
        counts = np.zeros(store.num_entities, dtype=np.int64)
        statistics = {"documents": len(documents), "chunks": 0, "mentions_in_text": 0, "mentions_in_examples": 0}
        examples: list[dict[str, Any]] = []
        found = linker.find_many([document.text for document in documents])  # one kernel call per batch
        for document, mentions in zip(documents, found):
            examples += _encode_document(
                document,
                mentions,
                tokenizer=tokenizer,
                linker=linker,
                segmenter=segmenter,
                table=neighbor_table,
                store=store,
                primary_types=primary_types,
                max_length=max_length,
                stride=stride,
                counts=counts,
                statistics=statistics,
            )
        columns = {name: [example[name] for example in examples] for name in features}
        dataset = Dataset.from_dict(columns, features=features)
        with atomic_directory(shards_dir / f"shard-{index:05d}") as temporary:
            dataset.save_to_disk(str(temporary / "data"))
            np.save(temporary / "entity_frequencies.npy", counts)
            (temporary / "statistics.json").write_text(json.dumps(statistics), encoding="utf-8")

    bar = tqdm(desc="building corpus", unit="doc", disable=not progress)
    batch: list[Document] = []
    shard_index = 0
    for document in _iter_documents(corpus, **reader_options):
        batch.append(document)
        if len(batch) == shard_size:
            if f"shard-{shard_index:05d}" not in done:
                write_shard(shard_index, batch)
            bar.update(len(batch))
            batch, shard_index = [], shard_index + 1
    if batch:
        if f"shard-{shard_index:05d}" not in done:
            write_shard(shard_index, batch)
        bar.update(len(batch))
        shard_index += 1
    bar.close()
    if shard_index == 0:  # name the user's input, not the folder being built
        if isinstance(corpus, (str, os.PathLike)):
            raise DataFormatError(
                "holds no document (every line or record is empty)",
                path=corpus,
                expected="at least one non-empty line, CSV row or JSON record",
            )
        raise ConfigurationError("the corpus given to build_corpus holds no document")
    _finalize(output_dir, shard_index, store.num_entities, config)
    return load_corpus(output_dir)


def _finalize(output_dir: Path, num_shards: int, num_entities: int, config: dict) -> None:
    totals = {"documents": 0, "chunks": 0, "mentions_in_text": 0, "mentions_in_examples": 0}
    counts = np.zeros(num_entities, dtype=np.int64)
    names = []
    for index in range(num_shards):
        shard = output_dir / "shards" / f"shard-{index:05d}"
        statistics = json.loads((shard / "statistics.json").read_text(encoding="utf-8"))
        for key in totals:
            totals[key] += statistics[key]
        counts += np.load(shard / "entity_frequencies.npy")
        names.append(shard.name)
    with atomic_file(output_dir / "entity_frequencies.npy", "wb") as handle:
        np.save(handle, counts)
    manifest = {
        "format": CORPUS_FORMAT,
        "version": 1,
        "shards": names,
        "statistics": totals,
        "config": config,
        "entities_mentioned": int((counts > 0).sum()),
    }
    with atomic_file(output_dir / "manifest.json", "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=1, ensure_ascii=False)
    logger.info("corpus: %s", totals)


def load_corpus(directory: str | os.PathLike):
    """The examples of a built corpus as one memory-mapped ``datasets.Dataset``.

    ``dataset.info.description`` is left alone; the manifest (statistics, configuration) and
    ``entity_frequencies.npy`` lie in the directory (see :func:`corpus_manifest`).
    """
    from datasets import concatenate_datasets, load_from_disk

    directory = Path(directory)
    manifest_path = directory / "manifest.json"
    if not manifest_path.is_file():
        raise MissingFileError(manifest_path, "corpus manifest (was build_corpus finished?)")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if manifest.get("format") != CORPUS_FORMAT:
        raise ArtifactError(f"{manifest_path} is not a kgplm corpus manifest")
    parts = [load_from_disk(str(directory / "shards" / name / "data")) for name in manifest["shards"]]
    if not parts:
        raise ArtifactError(f"{directory} holds no shards: the corpus had no documents")
    return parts[0] if len(parts) == 1 else concatenate_datasets(parts)


def corpus_manifest(directory: str | os.PathLike) -> dict:
    return json.loads((Path(directory) / "manifest.json").read_text(encoding="utf-8"))


def entity_frequencies(directory: str | os.PathLike) -> np.ndarray:
    """Mentions per entity counted while building (PEPR's ``frequencies``)."""
    return np.load(Path(directory) / "entity_frequencies.npy", allow_pickle=False)
