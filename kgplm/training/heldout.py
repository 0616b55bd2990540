"""Held-out facts: triples kept out of pre-training so that a probe can ask about them honestly.

``kgplm.train(..., exclude_triples=path)`` reads a list of (head, relation, tail) triples — the
``exclude_from_training`` list of a probe file (:mod:`kgplm.evaluation.probing`) or a TSV of labelled
triples — and every stage honours it:

* text: each corpus document loses the sentences that verbalise an excluded fact, i.e. in which
  the two entities of an excluded triple co-occur (any name or alias of each, matched as a
  substring, also inside longer names; sentences end at 。！？!? or a line break). The tokenizer,
  the corpus mention counts and the linked corpus all read the filtered text. Co-occurrence is
  conservative: a sentence naming both entities for another reason is dropped too.
* KG embeddings (TransE/TransR) are trained on the graph's triples minus the excluded ones.
* PEPR neighbour tables lose the direct-link entries that are excluded triples (the seed's
  neighbour over that relation and direction); the PageRank scores themselves were computed on the
  whole graph, a second-order effect that is documented rather than removed.

A precomputed ``kg_embeddings`` cannot be checked and is refused together with ``exclude_triples``.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from kgplm._io import iter_lines, require_file
from kgplm.exceptions import ConfigurationError, DataFormatError

__all__ = ["HeldOutTriples", "read_labelled_triples", "EXCLUSION_KEY"]

logger = logging.getLogger(__name__)

#: The key of a JSON file's list of labelled triples to exclude.
EXCLUSION_KEY = "exclude_from_training"
_SENTENCE_END = re.compile(r"(?<=[。！？!?\n])")


def read_labelled_triples(path: str | os.PathLike) -> list[list[str]]:
    """Rows of (head, relation, tail) labels from a JSON file (``{"exclude_from_training": [...]}``)
    or a TSV/text file with three tab-separated columns."""
    path = require_file(path, "file of triples to exclude")
    if path.suffix.lower() == ".json":
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise DataFormatError(
                f"not valid JSON ({error.msg})",
                path=path,
                line=error.lineno,
                expected=f'an object with "{EXCLUSION_KEY}": [[head, relation, tail], ...]',
            ) from None
        rows = content.get(EXCLUSION_KEY) if isinstance(content, dict) else None
        if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 3 for r in rows):
            raise DataFormatError(
                f"no list {EXCLUSION_KEY!r} of [head, relation, tail] rows",
                path=path,
                expected=f'an object with "{EXCLUSION_KEY}": [[head, relation, tail], ...]',
            )
        return [[str(v) for v in row] for row in rows]
    rows = []
    for line_number, line in iter_lines(path):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise DataFormatError(
                f"{len(parts)} tab-separated fields", path=path, line=line_number, expected="head<TAB>relation<TAB>tail"
            )
        rows.append(parts)
    return rows


@dataclass
class HeldOutTriples:
    """Triples (ids of ``store``) to keep out of every pre-training stage (see the module docstring)."""

    store: object
    triples: np.ndarray  # (n, 3) int64
    statistics: dict[str, int] = field(
        default_factory=lambda: {"documents": 0, "sentences_removed": 0, "documents_emptied": 0}
    )

    @classmethod
    def load(cls, path: str | os.PathLike, store) -> "HeldOutTriples":
        triples = store.triple_ids(read_labelled_triples(path))
        if not len(triples):
            raise ConfigurationError(f"{path} lists no triple to exclude")
        return cls(store, np.unique(triples, axis=0))

    def __post_init__(self) -> None:
        self.triples = np.asarray(self.triples, dtype=np.int64).reshape(-1, 3)
        partners: dict[int, set[int]] = {}
        for head, _, tail in self.triples.tolist():
            partners.setdefault(head, set()).add(tail)
            partners.setdefault(tail, set()).add(head)
        self.partners = partners
        self._linker = None

    def __len__(self) -> int:
        return len(self.triples)

    # -- the graph ------------------------------------------------------------------------------------
    def kept_triples(self) -> np.ndarray:
        """The store's triples without the excluded ones, (m, 3)."""
        triples = np.asarray(self.store.triples, dtype=np.int64)
        excluded = np.isin(
            _keys(triples, self.store.num_entities, self.store.num_relations),
            _keys(self.triples, self.store.num_entities, self.store.num_relations),
        )
        return triples[~excluded]

    def filter_neighbor_table(self, table):
        """A copy of a PEPR :class:`~kgplm.kg.pepr.NeighborTable` without the excluded direct links."""
        num_entities, num_relations = self.store.num_entities, self.store.num_relations
        seeds = np.asarray(table.seeds, dtype=np.int64)[:, None]  # (rows, 1)
        neighbors, relations, directions = (
            np.asarray(a, dtype=np.int64) for a in (table.neighbors, table.relations, table.directions)
        )
        heads = np.where(directions == 1, neighbors, seeds)  # direction 1: the seed is the tail
        tails = np.where(directions == 1, seeds, neighbors)
        candidate = np.stack([heads, relations, tails], -1).reshape(-1, 3)
        drop = np.isin(
            _keys(candidate, num_entities, num_relations), _keys(self.triples, num_entities, num_relations)
        ).reshape(neighbors.shape)
        drop &= (neighbors >= 0) & (directions >= 0)
        if not drop.any():
            return table
        # keep each row's remaining neighbours in order, padded with −1 (scores 0) at the end
        order = np.argsort(drop, axis=1, kind="stable")
        columns = {}
        for name, array, empty in (
            ("neighbors", neighbors, -1),
            ("relations", relations, -1),
            ("directions", directions, -1),
            ("scores", np.asarray(table.scores), 0),
        ):
            moved = np.take_along_axis(array, order, 1)
            moved[np.take_along_axis(drop, order, 1)] = empty
            columns[name] = moved.astype(np.asarray(getattr(table, name)).dtype)
        logger.info("held-out triples: %d direct links removed from the neighbour table", int(drop.sum()))
        return replace(table, **columns, config={**table.config, "held_out_links_removed": int(drop.sum())})

    # -- the text -------------------------------------------------------------------------------------
    @property
    def linker(self):
        """A nested, single-character-aware linker over the names of the entities of excluded triples only."""
        if self._linker is None:
            from kgplm.text.linking import EntityLinker

            involved = set(self.partners)
            names: dict[str, list[int]] = {}
            for entity in sorted(involved):
                for text, _, _ in self.store.labels(entity):
                    names.setdefault(text, []).append(entity)
                names.setdefault(self.store.entity_name(entity), []).append(entity)
            self._linker = EntityLinker(names=names, min_length=1, nested=True)
        return self._linker

    def filter_text(self, text: str) -> tuple[str, int]:
        """(``text`` without the sentences that state an excluded fact, number of sentences removed)."""
        mentions = self.linker.link(text)
        if len(mentions) < 2:
            return text, 0
        sentences = [s for s in _SENTENCE_END.split(text) if s]
        bounds = np.cumsum([len(s) for s in sentences])  # end offset of each sentence
        entities: list[set[int]] = [set() for _ in sentences]
        for mention in mentions:
            entities[int(np.searchsorted(bounds, mention.start, side="right"))].update(mention.candidates)
        drop = [any(self.partners.get(e, set()) & found for e in found) for found in entities]
        if not any(drop):
            return text, 0
        return "".join(s for s, dropped in zip(sentences, drop) if not dropped), int(sum(drop))

    def filter_documents(self, documents: Iterable) -> Iterator:
        """:class:`~kgplm.text.corpus.Document` s without the sentences that state excluded facts
        (documents left empty are skipped); counts go to :attr:`statistics`."""
        for document in documents:
            text, removed = self.filter_text(document.text)
            self.statistics["documents"] += 1
            self.statistics["sentences_removed"] += removed
            if not text.strip():
                self.statistics["documents_emptied"] += 1
                continue
            yield replace(document, text=text) if removed else document


def _keys(triples: np.ndarray, num_entities: int, num_relations: int) -> np.ndarray:
    """One int64 per (head, relation, tail) row."""
    triples = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
    return (triples[:, 0] * num_relations + triples[:, 1]) * num_entities + triples[:, 2]
