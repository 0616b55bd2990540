"""Chinese word segmentation with jieba, the knowledge graph's names and aliases as a user dictionary.

Used for whole-word masking and by EMBERT. A private ``jieba.Tokenizer`` is used (never jieba's
global one), so two segmenters with different dictionaries do not interfere. Every name of the
store is added with frequency ``name_frequency``, high enough that jieba's maximum-probability
route keeps a KG name as one word. Segmentation is deterministic (jieba's dynamic programme and,
with ``hmm=True``, its Viterbi decoding of unknown words have no randomness).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["Segmenter", "jieba_dictionary", "NAME_FREQUENCY"]

logger = logging.getLogger(__name__)

#: The frequency a KG name gets in the segmenter's dictionary (high enough that jieba's route keeps it whole).
NAME_FREQUENCY = 20000


@functools.lru_cache(maxsize=1)
def jieba_dictionary() -> tuple[dict[str, int], int]:
    """jieba's main dictionary, the one :class:`Segmenter` starts from: ``{word: frequency}`` and the
    frequencies' total (jieba's route scores a word ``log(frequency) − log(total)``)."""
    import jieba

    frequencies: dict[str, int] = {}
    total = 0
    with jieba.get_dict_file() as handle:
        for raw in handle:
            word, frequency = raw.decode("utf-8").strip().split(" ")[:2]
            frequencies[word] = int(frequency)
            total += int(frequency)  # as jieba counts it: a repeated line counts twice
    return frequencies, total


class Segmenter:
    """jieba segmentation returning character spans ``(start, end)`` that tile the text."""

    def __init__(self, store: "KGStore | None" = None, *, extra_words: Iterable[str] = (),
                 name_frequency: int = NAME_FREQUENCY, hmm: bool = True, min_length: int = 2) -> None:
        import jieba

        jieba.setLogLevel(logging.WARNING)
        self._tokenizer = jieba.Tokenizer()
        self._tokenizer.initialize()
        self.hmm = hmm
        words = list(extra_words)
        if store is not None:
            words += [name for name in store.name_index() if len(name.strip()) >= min_length]
        added = 0
        for word in words:
            word = word.strip()
            # jieba's dictionary format cannot hold spaces; such names are left to the linker
            if word and not any(char.isspace() for char in word):
                self._tokenizer.add_word(word, freq=name_frequency)
                added += 1
        self.num_added_words = added
        logger.info("segmenter: %d KG names added to jieba's dictionary", added)

    def segment(self, text: str) -> list[tuple[int, int]]:
        """Word spans covering ``text`` from 0 to ``len(text)`` in order."""
        return [(start, end) for _word, start, end in self._tokenizer.tokenize(text, HMM=self.hmm)]

    def words(self, text: str) -> list[str]:
        return [text[start:end] for start, end in self.segment(text)]
