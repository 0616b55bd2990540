"""Model-free baselines that expose shortcuts in a task.

``linker as NER``: SMedBERT receives the dictionary linker's mention spans at
fine-tuning, which mark entity boundaries for NER. How far do those spans go alone? The linker's
spans on each text, each labelled through a map from the linked entity's KG type to a task label
fitted on the train split (or left out, where that type's spans are mostly not gold entities),
scored with the task's entity F1.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

from kgplm.evaluation.metrics import entity_scores

__all__ = ["UNTYPED", "fit_type_label_map", "label_linked_spans", "linker_as_ner", "linked_spans"]

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
