"""Character spans → token spans through a fast tokenizer's offset mapping.

A mention found at characters ``[start, end)`` maps to tokens ``[first, last + 1)`` where
``first`` is the first token overlapping it and ``last`` the last one. The mapping is kept only
when it is *exact*: the first token starts at ``start`` and the last ends at ``end``, so the
tokens cover precisely the mention's characters. Otherwise (a token straddles the mention's
boundary, or truncation cut the mention) the mention is dropped and counted. Word pieces are never
joined back into strings: the SMedBERT reference code did that and lost every name containing
Latin letters or digits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["char_spans_to_token_spans", "char_to_word_ids"]


def char_spans_to_token_spans(
    offsets: Sequence[Sequence[int]] | np.ndarray, spans: Sequence[Sequence[int]] | np.ndarray
) -> np.ndarray:
    """``(len(spans), 2)`` int array of token ``[first, end)`` per char span, ``-1, -1`` where not exact.

    ``offsets``: the tokenizer's ``offset_mapping`` for one sequence, ``(start, end)`` per token;
    special tokens (``(0, 0)``) are skipped.
    """
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    spans = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    result = np.full((len(spans), 2), -1, dtype=np.int64)
    if not len(spans):
        return result
    real = np.flatnonzero(offsets[:, 1] > offsets[:, 0])
    if not len(real):
        return result
    token_starts, token_ends = offsets[real, 0], offsets[real, 1]
    first = np.searchsorted(token_ends, spans[:, 0], side="right")  # first token ending after start
    last = np.searchsorted(token_starts, spans[:, 1], side="left") - 1  # last token starting before end
    present = (first <= last) & (first < len(real)) & (last >= 0)
    first_clipped = np.minimum(first, len(real) - 1)
    last_clipped = np.maximum(last, 0)
    exact = present & (token_starts[first_clipped] == spans[:, 0]) & (token_ends[last_clipped] == spans[:, 1])
    result[exact, 0] = real[first_clipped[exact]]
    result[exact, 1] = real[last_clipped[exact]] + 1
    return result


def char_to_word_ids(
    offsets: Sequence[Sequence[int]] | np.ndarray, word_spans: Sequence[Sequence[int]], text_length: int
) -> np.ndarray:
    """The index of the word (e.g. a jieba segment) each token starts in; -1 for special tokens."""
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    char_words = np.full(text_length + 1, -1, dtype=np.int64)
    for index, (start, end) in enumerate(word_spans):
        char_words[start:end] = index
    word_ids = char_words[np.minimum(offsets[:, 0], text_length)]
    word_ids[offsets[:, 1] <= offsets[:, 0]] = -1
    return word_ids
