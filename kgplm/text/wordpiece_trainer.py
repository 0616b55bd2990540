"""A deterministic WordPiece vocabulary learner (BPE merges with a ``##`` continuing-subword prefix).

Why kgplm has its own: the ``tokenizers`` WordPiece trainer (a BPE trainer) numbers the ``##``
pieces in the order it walks a Rust hash map and breaks ties between equally frequent pairs by
those numbers, so two identical calls can learn different vocabularies (huggingface/tokenizers
#1794). Here every choice has a stated order, so the same texts and settings give the same
vocabulary — the same tokens with the same ids — in any process, on any machine.

The algorithm (the one of ``tokenizers``' ``BpeTrainer`` with ``continuing_subword_prefix="##"``,
which ``WordPieceTrainer`` wraps; Sennrich et al. 2016, "Neural machine translation of rare words
with subword units", §3.1, on words):

1. **Words.** Each text goes through the tokenizer's own normaliser and pre-tokeniser
   (:func:`count_words`); a word's count is how often it occurs.
2. **Alphabet.** A character's count is the summed count of the words it occurs in, per
   occurrence. When there are more than ``limit_alphabet`` characters, the ``limit_alphabet`` most
   frequent are kept, ties broken by the smaller code point (``tokenizers`` breaks them in hash
   order). A word is split into its characters: the first bare, every later one ``##``-prefixed
   (``"mri"`` → ``m ##r ##i``).
3. **Merges.** Repeatedly take the adjacent pair of symbols with the highest count (summed over
   the words holding it, per occurrence); ties are broken by the smaller pair
   ``(left, right)`` compared as strings by code point (``tokenizers`` compares ids whose order
   among the ``##`` pieces is hash order). Merge it in every word left to right without overlap;
   the new symbol is ``left + right`` with ``right``'s ``##`` dropped (``m`` + ``##r`` → ``mr``,
   ``##r`` + ``##i`` → ``##ri``). Pair counts are kept incrementally (pair → words holding it), so
   a merge costs the words it touches, not the corpus. Stop when the vocabulary holds
   ``vocab_size`` tokens, or the best pair is seen fewer than ``min_frequency`` times, or no pair
   is left.

Ids: the special tokens first (0, 1, …, in the order given), then the alphabet's bare characters
by code point, then the ``##`` characters (alphabet characters seen after a word's first
position) by code point, then merged tokens in the order they were first made.

Deviations from ``tokenizers`` (both on purpose):

* A word holding a character outside the alphabet takes no part in the merges. ``tokenizers``
  drops the character and merges across the gap, learning pieces no word is cut into: WordPiece
  maps a word with an unknown character to ``[UNK]`` whole.
* Ties are broken by the pieces' strings, as above; with no tie at any step both learn the same
  token set (``tests/text/test_wordpiece_trainer.py`` checks it against ``tokenizers``).

As in ``tokenizers``, the alphabet is never cut to fit ``vocab_size`` (a warning is logged when
it does not fit) and ``min_frequency`` applies to merges, not to single characters.
"""

from __future__ import annotations

import heapq
import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tqdm.auto import tqdm

from kgplm.exceptions import ConfigurationError

__all__ = ["PREFIX", "WordPieceVocabulary", "count_words", "learn_wordpiece"]

logger = logging.getLogger(__name__)

PREFIX = "##"


@dataclass(frozen=True)
class WordPieceVocabulary:
    """The learnt vocabulary: ``tokens`` in id order, and the merges made, each
    ``(left, right, new_token, count)`` in the order they were made."""

    tokens: tuple[str, ...]
    merges: tuple[tuple[str, str, str, int], ...]

    def as_dict(self) -> dict[str, int]:
        return {token: index for index, token in enumerate(self.tokens)}


def count_words(texts: Iterable[str], pipeline, *, show_progress: bool = False) -> Counter:
    """How often each word occurs: ``pipeline``'s normaliser, then its pre-tokeniser (a
    ``tokenizers.Tokenizer``, e.g. :func:`kgplm.text.tokenization.wordpiece_pipeline`'s)."""
    normalizer, pre_tokenizer = pipeline.normalizer, pipeline.pre_tokenizer
    counts: Counter = Counter()
    for text in tqdm(texts, desc="counting words", unit="text", disable=not show_progress):
        if normalizer is not None:
            text = normalizer.normalize_str(text)
        counts.update(word for word, _ in pre_tokenizer.pre_tokenize_str(text))
    return counts


def _alphabet(word_counts: Mapping[str, int], limit_alphabet: int | None) -> list[str]:
    char_counts: Counter = Counter()
    for word, count in word_counts.items():
        for char in word:
            char_counts[char] += count
    chars = sorted(char_counts)
    if limit_alphabet is not None and len(chars) > limit_alphabet:
        # the most frequent; among equally frequent, the smaller code point
        chars = sorted(sorted(chars, key=lambda c: (-char_counts[c], c))[:limit_alphabet])
    return chars


def _merge_word(symbols: list[str], left: str, right: str, new: str) -> list[str]:
    merged, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == left and symbols[i + 1] == right:
            merged.append(new)
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return merged


def learn_wordpiece(
    word_counts: Mapping[str, int],
    vocab_size: int,
    *,
    special_tokens: Sequence[str] = (),
    min_frequency: int = 1,
    limit_alphabet: int | None = None,
    show_progress: bool = False,
) -> WordPieceVocabulary:
    """Learn a WordPiece vocabulary from ``word_counts`` (word → count); see the module docstring."""
    if min_frequency < 1:
        raise ConfigurationError(f"min_frequency must be at least 1, got {min_frequency}")
    if limit_alphabet is not None and limit_alphabet < 0:
        raise ConfigurationError(f"limit_alphabet must be at least 0, got {limit_alphabet}")
    tokens: list[str] = []
    for token in special_tokens:
        if token not in tokens:
            tokens.append(token)
    alphabet = _alphabet(word_counts, limit_alphabet)
    allowed = set(alphabet)
    continuing = sorted({char for word in word_counts for char in word[1:] if char in allowed})
    for token in alphabet + [PREFIX + char for char in continuing]:
        if token not in tokens:
            tokens.append(token)
    known = set(tokens)
    if len(tokens) > vocab_size:
        logger.warning(
            "the %d special tokens and alphabet pieces exceed vocab_size=%d; no merges are learnt",
            len(tokens),
            vocab_size,
        )

    # words in a fixed order (sorted), each as its symbols; words with a character outside the alphabet sit out
    words: list[list[str]] = []
    counts: list[int] = []
    for word in sorted(word_counts):
        if len(word) > 1 and all(char in allowed for char in word):
            words.append([word[0]] + [PREFIX + char for char in word[1:]])
            counts.append(int(word_counts[word]))

    pair_counts: dict[tuple[str, str], int] = {}
    pair_words: dict[tuple[str, str], set[int]] = {}
    for index, symbols in enumerate(words):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] = pair_counts.get(pair, 0) + counts[index]
            pair_words.setdefault(pair, set()).add(index)
    # a max-heap by count, then the smaller (left, right); stale entries are skipped when popped
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)

    merges: list[tuple[str, str, str, int]] = []
    bar = tqdm(total=max(vocab_size - len(tokens), 0), desc="learning merges", unit="token", disable=not show_progress)
    while len(tokens) < vocab_size and heap:
        negative, pair = heapq.heappop(heap)
        count = -negative
        if pair_counts.get(pair, 0) != count:
            continue  # stale: the pair's current count was pushed when it changed
        if count < min_frequency:
            break
        left, right = pair
        new = left + (right[len(PREFIX) :] if right.startswith(PREFIX) else right)
        merges.append((left, right, new, count))
        if new not in known:
            known.add(new)
            tokens.append(new)
            bar.update(1)
        changed: set[tuple[str, str]] = set()
        for index in sorted(pair_words.pop(pair, ())):
            symbols = words[index]
            merged = _merge_word(symbols, left, right, new)
            if len(merged) == len(symbols):
                continue
            for old_pair in zip(symbols, symbols[1:]):
                pair_counts[old_pair] -= counts[index]
                changed.add(old_pair)
            for new_pair in zip(merged, merged[1:]):
                pair_counts[new_pair] = pair_counts.get(new_pair, 0) + counts[index]
                pair_words.setdefault(new_pair, set()).add(index)
                changed.add(new_pair)
            words[index] = merged
        for changed_pair in sorted(changed):
            current = pair_counts[changed_pair]
            if current > 0:
                heapq.heappush(heap, (-current, changed_pair))
            else:
                del pair_counts[changed_pair]
                pair_words.pop(changed_pair, None)
    bar.close()
    logger.info("learnt %d WordPiece tokens (%d merges) from %d words", len(tokens), len(merges), len(word_counts))
    return WordPieceVocabulary(tokens=tuple(tokens), merges=tuple(merges))
