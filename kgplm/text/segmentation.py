"""Chinese word segmentation with jieba, the knowledge graph's names and aliases as a user dictionary.

Used for whole-word masking and by EMBERT. A private ``jieba.Tokenizer`` is used (never jieba's
global one), so two segmenters with different dictionaries do not interfere. Every name of the
store is added with frequency ``name_frequency``, high enough that jieba's maximum-probability
route keeps a KG name as one word. Segmentation is deterministic (jieba's dynamic programme and,
with ``hmm=True``, its Viterbi decoding of unknown words have no randomness).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["Segmenter"]

logger = logging.getLogger(__name__)


class Segmenter:
    """jieba segmentation returning character spans ``(start, end)`` that tile the text."""

    def __init__(self, store: "KGStore | None" = None, *, extra_words: Iterable[str] = (),
                 name_frequency: int = 20000, hmm: bool = True, min_length: int = 2) -> None:
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
