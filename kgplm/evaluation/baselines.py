"""Model-free baselines that expose shortcuts in a task.

``linker as NER``: SMedBERT receives the dictionary linker's mention spans at
fine-tuning, which mark entity boundaries for NER. How far do those spans go alone? The linker's
spans on each text, each labelled through a map from the linked entity's KG type to a task label
fitted on the train split (or left out, where that type's spans are mostly not gold entities),
scored with the task's entity F1.

``memorisation``: how far does remembering the training split go? For NER
(:func:`memorised_mentions`, :func:`memorisation_ner`) the training split's own mention strings,
each labelled with its majority type, matched leftmost-longest over the evaluation texts; for
pair tasks (:func:`nearest_pair_labels`) the label of the training pair whose texts overlap most
with the evaluated pair's. A fine-tuned model that does not beat these has not learnt more than
a lookup table of its training data.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

import numpy as np

from kgplm.evaluation.metrics import entity_scores
from kgplm.exceptions import ConfigurationError

__all__ = [
    "UNTYPED",
    "fit_type_label_map",
    "label_linked_spans",
    "linker_as_ner",
    "linked_spans",
    "memorised_mentions",
    "longest_matches",
    "memorisation_ner",
    "pair_overlap",
    "nearest_pair_labels",
]

#: The type key of a linked entity without a KG type.
UNTYPED = "<untyped>"


def fit_type_label_map(examples: Sequence, linked: Sequence[Sequence[tuple[int, int, str]]]) -> dict[str, str | None]:
    """Type → label, fitted on ``examples`` (NER :class:`~kgplm.evaluation.readers.SpanExample`).

    ``linked[i]``: ``(start, end, type)`` linked spans of ``examples[i].text``. Each linked span
    votes for the gold label of the gold span with exactly its boundaries, or for ``None`` (not an
    entity) when there is none; each type takes its majority vote (ties: ``None`` first, then the
    label that sorts first), so a type whose spans are mostly not gold entities predicts nothing.
    """
    votes: dict[str, Counter] = defaultdict(Counter)
    for example, spans in zip(examples, linked, strict=True):
        gold = {(start, end): label for start, end, label in example.spans or ()}
        for start, end, entity_type in spans:
            votes[entity_type][gold.get((start, end))] += 1
    return {
        entity_type: min(counter, key=lambda label: (-counter[label], label is not None, label or ""))
        for entity_type, counter in votes.items()
    }


def label_linked_spans(
    linked: Sequence[tuple[int, int, str]], label_of: dict[str, str | None]
) -> list[tuple[int, int, str]]:
    """The predicted ``(start, end, label)`` of one text: linked spans whose type maps to a label."""
    return [
        (start, end, label_of[entity_type])
        for start, end, entity_type in linked
        if label_of.get(entity_type) is not None
    ]


def linker_as_ner(train: Sequence, evaluation: Sequence, link: Callable[[str], Sequence[tuple[int, int, str]]]) -> dict:
    """Entity P/R/F1 on ``evaluation`` of the linker's spans labelled by the map fitted on ``train``.

    ``link(text)`` returns ``(start, end, type)`` character spans (see :func:`linked_spans`).
    Returns ``{"precision", "recall", "f1", "label_of_type"}``.
    """
    label_of = fit_type_label_map(train, [link(example.text) for example in train])
    predicted = [label_linked_spans(link(example.text), label_of) for example in evaluation]
    scores = entity_scores([example.spans or () for example in evaluation], predicted)
    return {**scores, "label_of_type": label_of}


def linked_spans(linker, store) -> Callable[[str], list[tuple[int, int, str]]]:
    """``link(text)`` for :func:`linker_as_ner`: the mentions an :class:`~kgplm.text.EntityLinker` finds
    (the ones SMedBERT's fine-tuning lookup injects), typed by their best entity's KG type."""

    def link(text: str) -> list[tuple[int, int, str]]:
        return [(m.start, m.end, store.entity_type(m.entity_id) or UNTYPED) for m in linker.link(text)]

    return link


# -- memorisation -----------------------------------------------------------------------------------------------
def memorised_mentions(train: Sequence) -> dict[str, str]:
    """Mention string → its majority label over the gold spans of ``train`` (NER
    :class:`~kgplm.evaluation.readers.SpanExample`); ties go to the label that sorts first."""
    votes: dict[str, Counter] = defaultdict(Counter)
    for example in train:
        for start, end, label in example.spans or ():
            if end > start:
                votes[example.text[start:end]][label] += 1
    return {string: min(counter, key=lambda label: (-counter[label], label)) for string, counter in votes.items()}


def longest_matches(text: str, lexicon: dict[str, str]) -> list[tuple[int, int, str]]:
    """Leftmost-longest, non-overlapping matches of ``lexicon``'s strings in ``text``: scanning from the left,
    at each position the longest string that starts there is taken (its label with it) and the scan resumes
    after it; a position where none starts is skipped."""
    longest = max(map(len, lexicon), default=0)
    matches, position = [], 0
    while position < len(text):
        for length in range(min(longest, len(text) - position), 0, -1):
            label = lexicon.get(text[position : position + length])
            if label is not None:
                matches.append((position, position + length, label))
                position += length
                break
        else:
            position += 1
    return matches


def memorisation_ner(train: Sequence, evaluation: Sequence) -> dict:
    """Entity P/R/F1 on ``evaluation`` of :func:`longest_matches` with :func:`memorised_mentions` of ``train``.
    Returns ``{"precision", "recall", "f1", "predicted"}`` (``predicted[i]``: the spans of ``evaluation[i]``)."""
    lexicon = memorised_mentions(train)
    predicted = [longest_matches(example.text, lexicon) for example in evaluation]
    scores = entity_scores([example.spans or () for example in evaluation], predicted)
    return {**scores, "predicted": predicted}


def _bigram_sets(texts: Sequence[str]) -> list[set[str]]:
    """Each text's set of character bigrams (a one-character text: its character; an empty one: nothing)."""
    return [{text[i : i + 2] for i in range(len(text) - 1)} if len(text) > 1 else set(text) for text in texts]


def _jaccard_matrix(queries: list[set[str]], references: list[set[str]], chunk: int = 512) -> np.ndarray:
    """|A ∩ B| / |A ∪ B| for every query × reference set (0 where both are empty), in chunks of queries."""
    from scipy.sparse import csr_matrix

    vocabulary: dict[str, int] = {}

    def matrix(sets: list[set[str]]):
        rows, columns = [], []
        for row, items in enumerate(sets):
            for item in items:
                rows.append(row)
                columns.append(vocabulary.setdefault(item, len(vocabulary)))
        return rows, columns

    reference_cells, query_cells = matrix(references), matrix(queries)
    width = len(vocabulary)

    def sparse(cells, count):
        rows, columns = cells
        return csr_matrix((np.ones(len(rows), np.float64), (rows, columns)), shape=(count, width))

    reference_matrix, query_matrix = sparse(reference_cells, len(references)), sparse(query_cells, len(queries))
    reference_sizes = np.asarray([len(items) for items in references], np.float64)
    result = np.zeros((len(queries), len(references)))
    for start in range(0, len(queries), chunk):
        block = query_matrix[start : start + chunk]
        shared = (block @ reference_matrix.T).toarray()
        sizes = np.asarray([len(items) for items in queries[start : start + chunk]], np.float64)
        union = sizes[:, None] + reference_sizes[None, :] - shared
        result[start : start + chunk] = np.divide(shared, union, out=np.zeros_like(shared), where=union > 0)
    return result


def pair_overlap(pair: tuple[str, str], other: tuple[str, str]) -> float:
    """The overlap of two text pairs that :func:`nearest_pair_labels` ranks by: the mean of the Jaccard
    indices of the character-bigram sets of the first texts and of the second texts,
    (J(a, a′) + J(b, b′)) / 2, J(X, Y) = |X ∩ Y| / |X ∪ Y| (0 when both are empty; a one-character text's
    set is its character)."""

    def jaccard(x: str, y: str) -> float:
        first, second = _bigram_sets([x, y])
        union = first | second
        return len(first & second) / len(union) if union else 0.0

    return (jaccard(pair[0], other[0]) + jaccard(pair[1], other[1])) / 2


def nearest_pair_labels(train: Sequence, evaluation: Sequence) -> list[str]:
    """For each pair of ``evaluation`` (:class:`~kgplm.evaluation.readers.PairExample`), the label of the
    training pair with the highest :func:`pair_overlap` (ties: the earliest training pair)."""
    if not train:
        raise ConfigurationError("nearest_pair_labels: the training split is empty; nothing to memorise")
    labels = [example.label for example in train]
    if any(label is None for label in labels):
        raise ConfigurationError("nearest_pair_labels: every training pair needs a label")
    overlap = (
        _jaccard_matrix(_bigram_sets([e.text_a for e in evaluation]), _bigram_sets([e.text_a for e in train]))
        + _jaccard_matrix(_bigram_sets([e.text_b for e in evaluation]), _bigram_sets([e.text_b for e in train]))
    ) / 2
    return [labels[int(index)] for index in overlap.argmax(1)]  # argmax: the first of the largest
