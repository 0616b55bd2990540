"""Chinese word segmentation with jieba, the knowledge graph's names and aliases as a user dictionary.

Used for whole-word masking and by EMBERT. A private ``jieba.Tokenizer`` is used (never jieba's
global one), so two segmenters with different dictionaries do not interfere. Every name of the
store is added with frequency ``name_frequency``, high enough that jieba's maximum-probability
route keeps a KG name as one word. Segmentation is deterministic (jieba's dynamic programme and,
with ``hmm=True``, its Viterbi decoding of unknown words have no randomness).

Names jieba alone would split. ``jieba.Tokenizer.cut`` first cuts the text into blocks of the
characters of its regex ``[\\u4E00-\\u9FD5a-zA-Z0-9+#&._%-]`` and emits every other character as a
word of its own, before its dictionary is consulted: a name holding any other character can never
be one word (``α-干扰素`` → ``α|-|干扰素``; ``钾（K）``, ``维生素Ⅷ``, ``恶心、呕吐``, ``diabetes mellitus``).
On CMeKG that was 8,178 of the 122,786 names without spaces, and all 12,274 with one. Here the
block regex is widened by every character that occurs inside a dictionary name (Greek letters,
Roman numerals, brackets, full-width punctuation, inner spaces, CJK extension characters …), and a
block is then cut exactly as jieba cuts one (``Tokenizer.get_DAG`` and ``calc``: the
maximum-probability route over the dictionary; runs of single characters decoded by jieba's HMM
or, without HMM, Latin letters and digits joined). Inside such a run, the characters jieba's own
regex excludes are emitted as jieba emits them (one word each, ``\\r\\n`` together), so text that
holds no dictionary word containing one of the added characters is segmented exactly as
``jieba.Tokenizer.tokenize`` segments it.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["Segmenter", "JIEBA_BLOCK_CHARACTERS", "jieba_dictionary", "NAME_FREQUENCY"]

logger = logging.getLogger(__name__)

#: The character class of jieba 0.42's block regex (``jieba.re_han_default``).
JIEBA_BLOCK_CHARACTERS = "\u4e00-\u9fd5a-zA-Z0-9+#&\\._%\\-"
_JIEBA_BLOCK = re.compile(f"([{JIEBA_BLOCK_CHARACTERS}]+)")
_JIEBA_BLOCK_CHARACTER = re.compile(f"[{JIEBA_BLOCK_CHARACTERS}]")
_JIEBA_SKIP = re.compile(r"(\r\n|\s)")  # jieba.re_skip_default
_LATIN_OR_DIGIT = re.compile("[a-zA-Z0-9]")  # jieba.re_eng

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
    """jieba segmentation returning character spans ``(start, end)`` that tile the text.

    Args:
        store: its names and aliases (at least ``min_length`` characters) join the dictionary.
        extra_words: more dictionary words.
        name_frequency: the jieba frequency given to each added word.
        hmm: decode runs of unknown characters with jieba's HMM.
    """

    def __init__(
        self,
        store: "KGStore | None" = None,
        *,
        extra_words: Iterable[str] = (),
        name_frequency: int = NAME_FREQUENCY,
        hmm: bool = True,
        min_length: int = 2,
    ) -> None:
        import jieba
        import jieba.finalseg

        jieba.setLogLevel(logging.WARNING)
        self._tokenizer = jieba.Tokenizer()
        self._tokenizer.initialize()
        self._decode_unknown = jieba.finalseg.cut
        self.hmm = hmm
        words = list(extra_words)
        if store is not None:
            words += [name for name in store.name_index() if len(name.strip()) >= min_length]
        added = 0
        extra_characters: set[str] = set()
        for word in words:
            word = word.strip()
            if word:
                self._tokenizer.add_word(word, freq=name_frequency)
                extra_characters.update(char for char in word if not _JIEBA_BLOCK_CHARACTER.match(char))
                added += 1
        self.num_added_words = added
        #: characters outside jieba's block regex that occur in a dictionary word (sorted)
        self.extra_characters = "".join(sorted(extra_characters))
        escaped = "".join(re.escape(char) for char in self.extra_characters)
        self._blocks = re.compile(f"([{JIEBA_BLOCK_CHARACTERS}{escaped}]+)") if escaped else _JIEBA_BLOCK
        logger.info(
            "segmenter: %d KG names added to jieba's dictionary (%d characters added to its block regex)",
            added,
            len(self.extra_characters),
        )

    # -- jieba's cut with the widened block regex ---------------------------------------------------
    def _cut(self, text: str) -> Iterator[str]:
        """jieba's ``Tokenizer.cut`` (accurate mode) over the widened blocks (see the module docstring)."""
        for block in self._blocks.split(text):
            if not block:
                continue
            if self._blocks.match(block):
                yield from self._cut_block(block)
            else:
                yield from self._outside_blocks(block)

    @staticmethod
    def _outside_blocks(text: str) -> Iterator[str]:
        """What jieba yields for text between its blocks: whitespace runs by ``re_skip``, else one character each."""
        for part in _JIEBA_SKIP.split(text):
            if _JIEBA_SKIP.match(part):
                yield part
            else:
                yield from part

    def _cut_block(self, block: str) -> Iterator[str]:
        """The maximum-probability route over the dictionary (jieba's ``__cut_DAG`` / ``__cut_DAG_NO_HMM``)."""
        route: dict[int, tuple[float, int]] = {}
        self._tokenizer.calc(block, self._tokenizer.get_DAG(block), route)
        singles = ""  # a run of one-character words, decoded together
        position = 0
        while position < len(block):
            end = route[position][1] + 1
            word = block[position:end]
            if end - position == 1 and (self.hmm or _LATIN_OR_DIGIT.match(word)):
                singles += word
            else:
                if singles:
                    yield from self._flush(singles)
                    singles = ""
                yield word
            position = end
        if singles:
            yield from self._flush(singles)

    def _flush(self, singles: str) -> Iterator[str]:
        """A run of single characters: the parts inside jieba's own blocks as jieba decodes them, the rest as
        jieba emits characters outside its blocks."""
        for part in _JIEBA_BLOCK.split(singles):
            if not part:
                continue
            if not _JIEBA_BLOCK.match(part):
                yield from self._outside_blocks(part)
            elif not self.hmm:
                yield part  # jieba without HMM joins a run of Latin letters and digits
            elif len(part) == 1 or self._tokenizer.FREQ.get(part):
                yield from part
            else:
                yield from self._decode_unknown(part)

    # -- public -------------------------------------------------------------------------------------
    def segment(self, text: str) -> list[tuple[int, int]]:
        """Word spans covering ``text`` from 0 to ``len(text)`` in order."""
        spans = []
        start = 0
        for word in self._cut(text):
            spans.append((start, start + len(word)))
            start += len(word)
        return spans

    def words(self, text: str) -> list[str]:
        return [text[start:end] for start, end in self.segment(text)]
