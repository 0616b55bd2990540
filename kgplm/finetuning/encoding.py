"""Task examples → model inputs, and model outputs → task predictions: :class:`TaskEncoder`.

:class:`TaskEncoder` turns :mod:`kgplm.evaluation.tasks` examples into features (token ids, labels
and, for methods whose encoder reads more, the extra inputs of the method's provider
(``MethodSpec.finetuning_inputs``: SMedBERT's linked mentions with their PEPR neighbours)), batches them and turns model outputs back into task predictions:
character spans for NER, labels, candidate scores (:mod:`kgplm.finetuning.loop` trains on them).

Label handling: NER spans become token tags over every token they cover (WordPiece pieces
included), so a span whose boundary falls inside a token cannot be represented; it is left out of
the training labels (counted and logged) but stays in the gold set when scoring, so scores are
never flattered. Predicted token spans map back to characters through the tokenizer's offsets.
Long documents are read in overlapping windows and decoded back to document offsets (see
:class:`TaskEncoder`). Scores are computed in :mod:`kgplm.finetuning.scoring`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from kgplm.evaluation import metrics
from kgplm.evaluation.tasks import TaskSpec
from kgplm.exceptions import ConfigurationError
from kgplm.text.alignment import char_spans_to_token_spans

__all__ = [
    "TaskEncoder",
    "label_names_for",
    "TOKEN_KINDS",
    "RANKING_KINDS",
    "NO_RELATION",
    "STATISTICS",
]

logger = logging.getLogger(__name__)

TOKEN_KINDS = ("ner", "nested_ner")
RANKING_KINDS = ("qa_ranking", "graded_ranking")
#: Relation triples: the class of an entity pair that holds no predicate (index 0 of the label names).
NO_RELATION = "<no relation>"
ENTITY = "ENT"  # the one entity type a relation-triple model tags


def _merge_mentions(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


def label_names_for(spec: TaskSpec, train_examples: Sequence, tagging: str = "bio") -> list[str] | None:
    """Class names in index order: the sorted training labels, the tag set for NER, and for relation
    triples :data:`NO_RELATION` followed by the training predicates (the entity tags are fixed)."""
    if spec.kind in TOKEN_KINDS:
        return metrics.tag_names(sorted({span[2] for example in train_examples for span in example.spans}), tagging)
    if spec.kind in RANKING_KINDS:
        return None
    if spec.kind == "relation_triples":
        return [NO_RELATION] + sorted({triple[1] for example in train_examples for triple in example.triples})
    return sorted({example.label for example in train_examples})


def _layers(spans: Sequence[tuple[int, int, str]]) -> tuple[list, list, int]:
    """Split nested spans into an outer flat layer and an inner flat layer; count those left over."""
    outer, inner, lost, end = [], [], 0, -1
    ordered = sorted(set(spans), key=lambda s: (s[0], -s[1], s[2]))
    for span in ordered:
        if span[0] >= end:
            outer.append(span)
            end = span[1]
    outer_set = set(outer)
    remaining = [span for span in ordered if span not in outer_set]
    end = -1
    for span in remaining:
        if span[0] >= end:
            inner.append(span)
            end = span[1]
        else:
            lost += 1
    return outer, inner, lost


def _covering(offsets: np.ndarray, spans) -> np.ndarray:
    """Token ``[first, end)`` of the tokens overlapping each char span; ``-1, -1`` when none does."""
    real = offsets[:, 1] > offsets[:, 0]
    result = []
    for start, end in spans:
        inside = np.flatnonzero(real & (offsets[:, 1] > start) & (offsets[:, 0] < end))
        result.append((inside[0], inside[-1] + 1) if len(inside) else (-1, -1))
    return np.asarray(result, np.int64).reshape(-1, 2)


def _first_pieces(word_ids: np.ndarray) -> np.ndarray:
    """True on the first token of each word (``word_ids``: the word of each token, −1 for none)."""
    word_ids = np.asarray(word_ids)
    previous = np.concatenate([[-2], word_ids[:-1]])
    return (word_ids >= 0) & (word_ids != previous)


def _inside_words(offsets: np.ndarray, word_ids: np.ndarray, spans) -> int:
    """How many ``(start, end, type)`` character spans start or end strictly inside a word."""
    first = _first_pieces(word_ids)
    starts = set(offsets[first, 0].tolist())
    last = np.concatenate([word_ids[1:] != word_ids[:-1], [True]]) & (word_ids >= 0)
    ends = set(offsets[last, 1].tolist())
    return sum(1 for start, end, *_ in spans if start not in starts or end not in ends)


#: What :attr:`TaskEncoder.statistics` counts.
STATISTICS = (
    "long_documents",
    "windows",
    "spans_not_on_token_boundaries",
    "spans_not_on_word_boundaries",
    "spans_truncated",
    "nested_spans_lost",
    "unseen_labels",
    "relation_entities_cut",
    "triples_unreachable",
)


class TaskEncoder:
    """Features, batches and decoding for one task kind.

    Long documents (token tasks): a document longer than ``max_length − 2`` tokens is encoded as
    windows of ``max_length − 2`` tokens, each starting half a window after the previous one (the
    last one ends at the document's end). Every token is *scored* in exactly one window, the one
    where it has most context on both sides: two overlapping windows split their overlap in the
    middle (BERT's "max context" rule for SQuAD). Labels outside a window's scored range are
    ignored (−100), so each token is trained once, and decoding concatenates the scored ranges back
    into the document's token sequence, whose offsets are the document's own: predicted spans are
    exact character offsets of the whole text.

    Relations: the window holds both entities (centred on them) when the text is longer than one
    window. When the two entities lie further apart than a window, the example is *cut*: counted
    in ``relation_entities_cut``, left out of training, and scored as no prediction (a miss).

    Relation triples (CMeIE): one window per text (the CMeIE texts have ≤ 300 characters); every
    occurrence of a subject or object string is tagged as an entity (longest first where they
    overlap), and every ordered pair of distinct entity strings, each at its first tagged
    occurrence, is a pair to classify into a predicate or :data:`NO_RELATION`. Triples the encoding
    cannot represent (an entity truncated away or overlapped by a longer one, a second predicate of
    the same pair, a predicate unseen in training) are counted in ``triples_unreachable`` and stay
    in the gold set when scoring.

    Labels unseen in training (a dev/test label, an entity type) are counted in ``unseen_labels``;
    such an example is left out of training and its gold label stays, so it is scored as an error.

    ``statistics`` sums the counts over every :meth:`encode` call, ``last_statistics`` holds the last call's.
    """

    def __init__(
        self,
        spec: TaskSpec,
        tokenizer,
        *,
        label_names: list[str] | None,
        max_length: int = 512,
        tagging: str = "bio",
        knowledge=None,
    ) -> None:
        if tagging not in metrics.TAG_SCHEMES:
            raise ConfigurationError(f"tagging must be one of {metrics.TAG_SCHEMES}, got {tagging!r}")
        if max_length < 3:
            raise ConfigurationError(f"max_length must leave room for [CLS], [SEP] and a token, got {max_length}")
        self.spec, self.kind, self.tokenizer = spec, spec.kind, tokenizer
        self.label_names = label_names
        self.label_index = {name: index for index, name in enumerate(label_names or ())}
        self.entity_tags = metrics.tag_names([ENTITY], tagging) if self.kind == "relation_triples" else None
        self.max_length, self.tagging, self.knowledge = max_length, tagging, knowledge
        self.statistics = dict.fromkeys(STATISTICS, 0)
        self.last_statistics = dict.fromkeys(STATISTICS, 0)

    def _count(self, key: str, amount: int = 1) -> None:
        self.statistics[key] += int(amount)
        self.last_statistics[key] += int(amount)

    # -- features ------------------------------------------------------------------------------------
    def _attach_knowledge(self, feature: dict[str, Any], texts: Sequence[str]) -> dict[str, Any]:
        if self.knowledge is not None:
            sequence = np.asarray(feature["token_type_ids"])
            parts = []
            for index, part_text in enumerate(texts):
                offsets = feature["offsets"].copy()
                offsets[sequence != index] = 0  # tokens of the other text are skipped like special tokens
                parts.append(self.knowledge.features(part_text, offsets))
            feature["knowledge"] = _merge_mentions(parts)
        return feature

    def _tokenize(self, text: str, pair: str | None = None) -> dict[str, Any]:
        """One truncated sequence (classification, pairs, ranking candidates)."""
        encoding = self.tokenizer(
            text,
            pair,
            max_length=self.max_length,
            truncation=True,
            return_offsets_mapping=True,
            return_token_type_ids=True,
        )
        feature = {
            "input_ids": np.asarray(encoding["input_ids"], np.int64),
            "token_type_ids": np.asarray(encoding["token_type_ids"], np.int64),
            "offsets": np.asarray(encoding["offset_mapping"], np.int64).reshape(-1, 2),
        }
        return self._attach_knowledge(feature, [text] if pair is None else [text, pair])

    def _document(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The ids and character offsets of every token of ``text``, without special tokens or truncation."""
        ids, offsets, _ = self._document_words(text)
        return ids, offsets

    def _document_words(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_document` and the word index of each token (the tokenizer's pre-tokenizer words:
        whitespace- and punctuation-separated, one CJK character each)."""
        encoding = self.tokenizer(text, add_special_tokens=False, truncation=False, return_offsets_mapping=True)
        words = encoding.word_ids() if hasattr(encoding, "word_ids") else None
        ids = np.asarray(encoding["input_ids"], np.int64)
        word_ids = (
            np.arange(len(ids), dtype=np.int64)
            if words is None
            else np.asarray([-1 if w is None else w for w in words], np.int64)
        )
        return ids, np.asarray(encoding["offset_mapping"], np.int64).reshape(-1, 2), word_ids

    def _window(self, text: str, ids: np.ndarray, offsets: np.ndarray, start: int, end: int) -> dict[str, Any]:
        """[CLS] tokens[start:end] [SEP] of a document (offsets stay the document's)."""
        special = np.zeros((1, 2), np.int64)
        feature = {
            "input_ids": np.concatenate(
                [[self.tokenizer.cls_token_id], ids[start:end], [self.tokenizer.sep_token_id]]
            ).astype(np.int64),
            "token_type_ids": np.zeros(end - start + 2, np.int64),
            "offsets": np.concatenate([special, offsets[start:end], special]),
        }
        return self._attach_knowledge(feature, [text])

    def _windows(self, length: int) -> list[tuple[int, int, int, int]]:
        """``(start, end, scored_start, scored_end)`` token ranges of a document's windows (class docstring)."""
        size = self.max_length - 2
        if length <= size:
            return [(0, length, 0, length)]
        starts = list(range(0, length - size, max(1, size // 2))) + [length - size]
        windows = []
        for index, start in enumerate(starts):
            scored_start = 0 if index == 0 else windows[-1][3]
            scored_end = length if index == len(starts) - 1 else (starts[index + 1] + start + size) // 2
            windows.append((start, start + size, scored_start, scored_end))
        return windows

    def _label(self, label: str | None) -> int:
        """The class index of ``label``; −100 (not trained on) when unlabelled or unseen in training (counted)."""
        if label is None:
            return -100
        if label not in self.label_index:
            self._count("unseen_labels")
            return -100
        return self.label_index[label]

    def _tag_ids(self, offsets: np.ndarray, spans) -> np.ndarray:
        """Tag ids of a document's tokens (no special tokens) for flat ``spans``; −100 on unseen types."""
        token_spans = char_spans_to_token_spans(offsets, [(s, e) for s, e, _ in spans])
        kept = []
        for (start, end), span in zip(token_spans.tolist(), spans):
            if start < 0:
                self._count("spans_not_on_token_boundaries")
            else:
                kept.append((start, end, span[2]))
        self._count("unseen_labels", sum(f"B-{kind}" not in self.label_index for _, _, kind in kept))
        tags = metrics.tags_from_spans(len(offsets), kept, self.tagging)
        return np.array([self.label_index.get(tag, -100) for tag in tags], np.int64).reshape(len(offsets))

    def _encode_spans(self, index: int, example) -> list[dict[str, Any]]:
        """Word-aligned tags: a word's tag sits on its first word piece and the other pieces are not trained
        (−100); :meth:`predicted_spans` reads each word's first piece, so a span never starts or ends
        inside a word. A gold span that starts or ends inside a word is counted in
        ``spans_not_on_word_boundaries`` (it is kept for scoring)."""
        ids, offsets, word_ids = self._document_words(example.text)
        if example.spans is None:  # unlabelled (a CBLUE test file)
            tags = np.full((len(ids),) + ((2,) if self.kind == "nested_ner" else ()), -100, np.int64)
        elif self.kind == "ner":
            tags = self._tag_ids(offsets, example.spans)
        else:
            outer, inner, lost = _layers(example.spans)
            self._count("nested_spans_lost", lost)
            tags = np.stack([self._tag_ids(offsets, outer), self._tag_ids(offsets, inner)], 1)  # (tokens, 2)
        first_pieces = _first_pieces(word_ids)
        if example.spans is not None:
            self._count("spans_not_on_word_boundaries", _inside_words(offsets, word_ids, example.spans))
        tags = np.where(first_pieces.reshape((-1,) + (1,) * (tags.ndim - 1)), tags, -100)
        windows = self._windows(len(ids))
        if len(windows) > 1:
            self._count("long_documents")
        self._count("windows", len(windows))
        features = []
        for start, end, scored_start, scored_end in windows:
            feature = self._window(example.text, ids, offsets, start, end)
            labels = np.full((end - start + 2,) + tags.shape[1:], -100, np.int64)
            scored = (1 + scored_start - start, 1 + scored_end - start)  # positions after [CLS]
            labels[scored[0] : scored[1]] = tags[scored_start:scored_end]
            window_words = np.concatenate([[-1], word_ids[start:end], [-1]])
            feature.update(labels=labels, example_index=index, scored=scored, word_ids=window_words)
            features.append(feature)
        return features

    def _encode_relation(self, index: int, example) -> dict[str, Any]:
        ids, offsets = self._document(example.text)
        spans = char_spans_to_token_spans(offsets, [example.head, example.tail])
        inexact = spans[:, 0] < 0  # an entity boundary inside a token: take the tokens covering it
        spans[inexact] = _covering(offsets, np.asarray([example.head, example.tail])[inexact])
        size = self.max_length - 2
        first, last = int(spans[:, 0].min()), int(spans[:, 1].max())
        cut = bool((spans[:, 0] < 0).any()) or (len(ids) > size and last - first > size)
        if len(ids) <= size:
            start = 0
        elif cut:
            start = max(0, min(int(spans[0, 0]), len(ids) - size))
        else:  # centre the window on the two entities
            start = min(max(0, (first + last - size) // 2), len(ids) - size)
        end = min(len(ids), start + size)
        feature = self._window(example.text, ids, offsets, start, end)
        label = self._label(example.label)
        if cut:  # the model cannot see both entities: not trained on, scored as no prediction
            self._count("relation_entities_cut")
            spans = np.array([[start, start + 1], [start, start + 1]])  # unused: score() ignores this output
            label = -100
        feature["head_spans"], feature["tail_spans"] = spans[0] - start + 1, spans[1] - start + 1
        feature.update(labels=label, example_index=index, cut=cut)
        return feature

    def _encode_triples(self, index: int, example) -> dict[str, Any]:
        ids, offsets = self._document(example.text)
        size = self.max_length - 2
        feature = self._window(example.text, ids, offsets, 0, min(len(ids), size))
        window_offsets = feature["offsets"]
        tag_index = {name: i for i, name in enumerate(self.entity_tags)}
        feature.update(
            labels=np.full(len(window_offsets), -100, np.int64),
            example_index=index,
            text=example.text,
            entity_pairs=np.zeros((0, 4), np.int64),
            pair_labels=np.zeros(0, np.int64),
        )
        if example.triples is None:  # unlabelled (a CBLUE test file)
            return feature
        names = list(dict.fromkeys(name for s, _, o in example.triples for name in (s, o)))
        occurrences = []
        for name in names:
            position = example.text.find(name)
            while position >= 0 and name:
                occurrences.append((position, position + len(name), ENTITY))
                position = example.text.find(name, position + len(name))
        tagged, _, _ = _layers(occurrences)
        tagged.sort()
        token_spans = char_spans_to_token_spans(window_offsets, [(s, e) for s, e, _ in tagged])
        representable = [(span, tokens) for span, tokens in zip(tagged, token_spans.tolist()) if tokens[0] >= 0]
        self._count("spans_truncated", sum(e > window_offsets[:, 1].max() for _, e, _ in tagged))
        tags = metrics.tags_from_spans(
            len(window_offsets), [(t0, t1, ENTITY) for _, (t0, t1) in representable], self.tagging
        )
        labels = np.array([tag_index[tag] for tag in tags], np.int64)
        labels[window_offsets[:, 1] <= window_offsets[:, 0]] = -100
        first: dict[str, tuple[int, int]] = {}
        for (start, end, _), tokens in representable:
            first.setdefault(example.text[start:end], tuple(tokens))
        predicates: dict[tuple[str, str], int] = {}
        for subject, predicate, obj in dict.fromkeys(example.triples):  # a triple listed twice is one triple
            known = predicate in self.label_index
            if not known:
                self._count("unseen_labels")
            if subject not in first or obj not in first or (subject, obj) in predicates or not known:
                self._count("triples_unreachable")
                continue
            predicates[(subject, obj)] = self.label_index[predicate]
        pairs = [(subject, obj) for subject in first for obj in first if subject != obj]
        feature.update(
            labels=labels,
            entity_pairs=np.array([first[s] + first[o] for s, o in pairs], np.int64).reshape(-1, 4),
            pair_labels=np.array([predicates.get(pair, 0) for pair in pairs], np.int64),
        )
        return feature

    def encode(self, examples: Sequence) -> list[dict[str, Any]]:
        """Features: one per window for token tasks, one per candidate for ranking, else one per example.

        Every feature carries ``example_index``, its example's position in ``examples``;
        ``skip_training`` marks those that cannot be trained on (unseen label, cut relation).
        """
        self.last_statistics = dict.fromkeys(STATISTICS, 0)
        features = []
        for index, example in enumerate(examples):
            if self.kind in TOKEN_KINDS:
                for feature in self._encode_spans(index, example):
                    feature["skip_training"] = bool(np.all(feature["labels"] == -100))
                    features.append(feature)
                continue
            if self.kind in RANKING_KINDS:
                for candidate, label in zip(example.candidates, example.labels):
                    feature = self._tokenize(example.query, candidate)
                    feature.update(labels=label, candidate_group=index, example_index=index)
                    features.append(feature)
                continue
            if self.kind == "relation":
                feature = self._encode_relation(index, example)
            elif self.kind == "relation_triples":
                feature = self._encode_triples(index, example)
            else:
                feature = (
                    self._tokenize(example.text)
                    if self.kind == "classification"
                    else self._tokenize(example.text_a, example.text_b)
                )
                feature.update(labels=self._label(example.label), example_index=index)
            feature["skip_training"] = bool(np.all(np.asarray(feature["labels"]) == -100))
            features.append(feature)
        if any(self.last_statistics.values()):
            logger.info("%s: %s", self.spec.name, {k: v for k, v in self.last_statistics.items() if v})
        return features

    # -- batches -------------------------------------------------------------------------------------
    def collate(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        size, length = len(features), max(len(f["input_ids"]) for f in features)
        input_ids = np.full((size, length), self.tokenizer.pad_token_id, np.int64)
        token_type_ids = np.zeros((size, length), np.int64)
        attention_mask = np.zeros((size, length), np.int64)
        for row, feature in enumerate(features):
            n = len(feature["input_ids"])
            input_ids[row, :n], token_type_ids[row, :n], attention_mask[row, :n] = (
                feature["input_ids"],
                feature["token_type_ids"],
                1,
            )
        batch = {
            "input_ids": torch.from_numpy(input_ids),
            "token_type_ids": torch.from_numpy(token_type_ids),
            "attention_mask": torch.from_numpy(attention_mask),
        }
        if "labels" in features[0]:
            if self.kind in TOKEN_KINDS or self.kind == "relation_triples":
                shape = (size, length) + np.asarray(features[0]["labels"]).shape[1:]
                labels = np.full(shape, -100, np.int64)
                for row, feature in enumerate(features):
                    labels[row, : len(feature["labels"])] = feature["labels"]
                batch["labels"] = torch.from_numpy(labels)
            else:
                batch["labels"] = torch.tensor([f["labels"] for f in features], dtype=torch.long)
        if self.kind == "relation":
            batch["head_spans"] = torch.from_numpy(np.stack([f["head_spans"] for f in features]))
            batch["tail_spans"] = torch.from_numpy(np.stack([f["tail_spans"] for f in features]))
        if self.kind in RANKING_KINDS:
            batch["candidate_group"] = torch.tensor([f["candidate_group"] for f in features], dtype=torch.long)
        if self.kind == "relation_triples" and "entity_pairs" in features[0]:
            rows = [np.full((len(f["entity_pairs"]), 1), row, np.int64) for row, f in enumerate(features)]
            pairs = np.concatenate([np.concatenate([r, f["entity_pairs"]], 1) for r, f in zip(rows, features)])
            batch["entity_pairs"] = torch.from_numpy(pairs.reshape(-1, 5))  # (pairs, [row, s0, s1, o0, o1])
            batch["pair_labels"] = torch.from_numpy(np.concatenate([f["pair_labels"] for f in features]))
        if self.knowledge is not None:
            batch.update(self.knowledge.collate([f["knowledge"] for f in features]))
        return batch

    # -- decoding ------------------------------------------------------------------------------------
    def _tag_spans(
        self, offsets: np.ndarray, tag_ids: np.ndarray, names: Sequence[str], word_ids: np.ndarray | None = None
    ) -> list[tuple[int, int, str]]:
        """Character spans of the tag sequence ``tag_ids`` over tokens with character ``offsets``.

        With ``word_ids`` (the word of each token, −1 for special tokens) the tags are read per word —
        each word takes its first piece's tag and spans from its first piece's start to its last
        piece's end — so no span starts or ends inside a word."""
        real = offsets[:, 1] > offsets[:, 0]
        if word_ids is None:
            tags = [names[i] if is_real else "O" for i, is_real in zip(tag_ids.tolist(), real.tolist())]
            return [
                (int(offsets[start, 0]), int(offsets[end - 1, 1]), kind)
                for start, end, kind in metrics.spans_from_tags(tags)
            ]
        first = _first_pieces(word_ids) & real
        starts = np.flatnonzero(first)
        # each word's extent: from its first piece to the last real piece before the next word
        word_of_token = np.cumsum(first) - 1
        ends = np.zeros(len(starts), np.int64)
        for token in np.flatnonzero(real & (word_of_token >= 0)):
            ends[word_of_token[token]] = offsets[token, 1]
        tags = [names[i] for i in tag_ids[starts].tolist()]
        return [
            (int(offsets[starts[start], 0]), int(ends[end - 1]), kind)
            for start, end, kind in metrics.spans_from_tags(tags)
        ]

    def predicted_spans(
        self, examples: Sequence, features: list[dict], outputs: list[np.ndarray]
    ) -> list[set[tuple[int, int, str]]]:
        """Character spans per example: each window's scored tokens, put back in document order, decoded.

        ``outputs[i]`` are feature i's logits, (length, [streams,] tags) unpadded.
        """
        scored: list[list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]] = [[] for _ in examples]
        for feature, logits in zip(features, outputs):
            start, end = feature["scored"]
            words = feature.get("word_ids")
            scored[feature["example_index"]].append(
                (feature["offsets"][start:end], logits[start:end], None if words is None else words[start:end])
            )
        predicted = []
        for pieces in scored:
            offsets = np.concatenate([offsets for offsets, _, _ in pieces])  # (document tokens, 2)
            logits = np.concatenate([logits for _, logits, _ in pieces])  # (document tokens, [streams,] tags)
            word_ids = None if any(w is None for _, _, w in pieces) else np.concatenate([w for _, _, w in pieces])
            streams = logits[:, None] if logits.ndim == 2 else logits  # (document tokens, streams, tags)
            spans = set()
            for stream in range(streams.shape[1]):
                spans.update(self._tag_spans(offsets, streams[:, stream].argmax(-1), self.label_names, word_ids))
            predicted.append(spans)
        return predicted

    def entity_candidates(self, text: str, feature: dict, tag_logits: np.ndarray) -> list[tuple[str, tuple[int, int]]]:
        """Relation triples: the distinct entity strings tagged in one feature of ``text``, each with the
        token span ``[start, end)`` of its first occurrence (what a pair is classified from)."""
        found: dict[str, tuple[int, int]] = {}
        offsets = feature["offsets"]
        token_spans = char_spans_to_token_spans(
            offsets, [(s, e) for s, e, _ in self._tag_spans(offsets, tag_logits.argmax(-1), self.entity_tags)]
        )
        for start, end in token_spans.tolist():
            found.setdefault(text[int(offsets[start, 0]) : int(offsets[end - 1, 1])], (start, end))
        return list(found.items())


# -- prediction ----------------------------------------------------------------------------------------------
