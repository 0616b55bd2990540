"""EMBERT's rule-based entity segmentation: sub-entities, and the atomic and adjective terms of long entities.

Cai et al. (2021), §3.2–3.3 and the appendix ("Entity Segmentation", "Long and Short Entity
Detection"). The paper builds an entity vocabulary (AutoPhrase phrases + KG entities) and a
*cut-point* character set (the characters most frequent at the start or end of AutoPhrase's
segments of the entities, top 100 checked by hand); a long entity (more than three characters)
is split at its cut-point characters, each part is segmented by jieba with the short entities as
user dictionary, entities cut into too many single characters are corrected with AutoPhrase's
model, and a long entity that cannot be split is a short one. The KG is the only vocabulary here
(no AutoPhrase, no hand checking), and the rules read:

Sub-entities of a name ``s`` with ``len(s) > long_length`` (3):

1. *KG sub-entities*: the KG names found inside ``s`` by the entity linker's nested matching
   (``EntityLinker(store, nested=True)``: every name and alias, at least two characters, Latin
   words whole), except ``s`` itself. Among them the non-overlapping set with the largest sum of
   squared lengths is chosen (long sub-entities win over tilings by short ones: 病毒|心肌炎, not
   病毒|性心|肌炎 although 性心 is a CMeKG name; 冠状病毒|肺炎 in 新型冠状病毒肺炎, cf. the paper's
   introduction), ties going to fewer pieces, then to leaving a character uncovered (病毒|性|心肌炎,
   not 病|毒性|心肌炎), then to the longer match — a dynamic programme over the matches.
2. *The rest* — each stretch of ``s`` no chosen sub-entity covers — is cut after every cut-point
   character and each part is segmented by jieba with the KG's *short* names (at most
   ``long_length`` characters) as user dictionary, as in the paper (:class:`kgplm.text.Segmenter`;
   with the long names in it, jieba would return a long name whole).
3. *Attachment*: a piece from step 2 that is a single cut-point character, or holds only spaces or
   closing/other punctuation, joins the piece before it (再生障碍 + 性 → 再生障碍性: cut-point
   characters close the modifier they end); one that holds only opening brackets joins the piece
   after it (白术 + （ + 炒） → 白术|（炒）).
4. *Too many single characters* (the paper's correction step, without AutoPhrase): when more than
   half of the pieces are single characters, each run of adjacent single-character pieces from
   step 2 becomes one piece.
5. A name left in one piece is *short* (no split). Names of at most ``long_length`` characters are
   one piece.

The cut-point set is derived from the KG's names, standing in for the paper's AutoPhrase
statistics: over every name longer than ``long_length``, each nested KG name that is a proper
prefix or suffix of it marks a segment boundary inside it (再生障碍性|贫血: 贫血 is a suffix
name; 糖尿病|肾病: both sides are). For each character c, ``ends[c]`` counts the boundaries right
after an occurrence of c and ``inner[c]`` its occurrences before a name's last character; the cut
points are the ``max_cut_points`` (100, as in the paper) characters with the most ``ends`` among
those with ``ends[c] ≥ min_cut_count`` and ``ends[c] / inner[c] ≥ min_cut_rate`` (0.5: a boundary
follows c at least every other time) — the rate stands in for the paper's manual check (it drops
characters such as 血 or 病 that end segments often but begin words such as 血管 or 病毒 as often).
ASCII letters, digits and spaces are never cut points. On CMeKG the set begins
性 酸 于 素 部 儿 管 菌 痛 炎 道 热 肤 型 度 ：.

Atomic and adjective terms (bidirectional entity masking): the atomic term of a long name is its
last sub-entity when that is a KG sub-entity (step 1: "the core KG entity it ends with", 贫血 in
再生障碍性贫血) and something precedes it; the adjective term is everything before it. Other
names have no atomic/adjective split.
"""

from __future__ import annotations

import logging
import os
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from kgplm.methods.embert.files import read_artefact, write_artefact

__all__ = ["EntitySegmenter", "EntitySegments", "build_entity_segments", "derive_cut_points", "kg_names"]

logger = logging.getLogger(__name__)

SEGMENTS_FORMAT = "kgplm-entity-segments"


def kg_names(store, min_length: int = 2) -> list[str]:
    """Every distinct name and alias of ``store`` (stripped, at least ``min_length`` characters), sorted."""
    return sorted({name.strip() for name in store.name_index() if len(name.strip()) >= min_length})


def _inner_matches(linker, name: str) -> list[tuple[int, int]]:
    """The linker's nested matches inside ``name``, without ``name`` itself."""
    starts, ends, _ = linker.find(name, nested=True)
    return [(start, end) for start, end in zip(starts.tolist(), ends.tolist()) if end - start < len(name)]


def derive_cut_points(
    names: Iterable[str],
    linker,
    *,
    long_length: int = 3,
    max_cut_points: int = 100,
    min_cut_count: int = 20,
    min_cut_rate: float = 0.5,
) -> str:
    """The cut-point characters of a set of KG names (see the module docstring), most frequent first."""
    ends: Counter = Counter()
    inner: Counter = Counter()
    for name in names:
        if len(name) <= long_length:
            continue
        boundaries = set()
        for start, end in _inner_matches(linker, name):
            if start > 0 and end == len(name):
                boundaries.add(start)
            if start == 0 and end < len(name):
                boundaries.add(end)
        ends.update(name[position - 1] for position in boundaries)
        inner.update(name[:-1])
    eligible = [
        char
        for char, count in ends.items()
        if count >= min_cut_count
        and count / inner[char] >= min_cut_rate
        and not char.isspace()
        and not (char.isascii() and char.isalnum())
    ]
    eligible.sort(key=lambda char: (-ends[char], char))
    return "".join(eligible[:max_cut_points])


def _is_opening(text: str) -> bool:
    return all(unicodedata.category(char) == "Ps" for char in text)


def _is_trailing(text: str) -> bool:
    """Spaces and punctuation that close what precedes them (closing brackets, commas, dashes …)."""
    return all(
        char.isspace() or (unicodedata.category(char).startswith("P") and unicodedata.category(char) != "Ps")
        for char in text
    )


class EntitySegmenter:
    """Splits KG names into sub-entities (see the module docstring).

    Args:
        linker: an :class:`~kgplm.text.EntityLinker` over the KG's names (nested matching is
            requested per call).
        segmenter: a :class:`~kgplm.text.Segmenter` with the KG's short names as dictionary.
        cut_points: the cut-point characters (:func:`derive_cut_points`).
        long_length: names longer than this many characters are split.
    """

    def __init__(self, linker, segmenter, cut_points: str, *, long_length: int = 3) -> None:
        self.linker = linker
        self.segmenter = segmenter
        self.cut_points = cut_points
        self._cut_points = frozenset(cut_points)
        self.long_length = long_length

    @staticmethod
    def _largest_cover(matches: Sequence[tuple[int, int]], length: int) -> list[tuple[int, int]]:
        """Non-overlapping matches with the largest sum of squared lengths, then the fewest; on a tie the
        character stays uncovered, else the longer match wins."""
        ending_at: dict[int, list[int]] = {}
        for start, end in sorted(matches):
            ending_at.setdefault(end, []).append(start)  # longest first
        # best[i]: (Σ length², −pieces) over [0, i), and the start of the match ending at i (None: i−1 uncovered)
        best: list[tuple[int, int]] = [(0, 0)] * (length + 1)
        came_from: list[int | None] = [None] * (length + 1)
        for position in range(1, length + 1):
            candidate, source = best[position - 1], None
            for start in ending_at.get(position, ()):
                score, pieces = best[start]
                option = (score + (position - start) ** 2, pieces - 1)
                if option > candidate:
                    candidate, source = option, start
            best[position], came_from[position] = candidate, source
        chosen = []
        position = length
        while position > 0:
            start = came_from[position]
            if start is None:
                position -= 1
            else:
                chosen.append((start, position))
                position = start
        return chosen[::-1]

    def _split_rest(self, text: str) -> list[str]:
        """Cut after cut-point characters, then jieba."""
        parts, current = [], ""
        for char in text:
            current += char
            if char in self._cut_points:
                parts.append(current)
                current = ""
        if current:
            parts.append(current)
        return [word for part in parts for word in self.segmenter.words(part)]

    def pieces(self, name: str) -> list[tuple[int, int, bool]]:
        """``(start, end, is_kg_name)`` of each sub-entity of ``name``, tiling it."""
        if len(name) <= self.long_length:
            return [(0, len(name), False)]
        pieces: list[list] = []  # [start, end, is_kg_name]
        position = 0
        for start, end in self._largest_cover(_inner_matches(self.linker, name), len(name)) + [(len(name), None)]:
            if start > position:
                for word in self._split_rest(name[position:start]):
                    pieces.append([position, position + len(word), False])
                    position += len(word)
            if end is not None:
                pieces.append([start, end, True])
                position = end
        # attachment (rule 3)
        attached: list[list] = []
        pending_opening = None
        for piece in pieces:
            text = name[piece[0] : piece[1]]
            if pending_opening is not None:
                piece = [pending_opening, piece[1], piece[2]]
                pending_opening = None
            if not piece[2] and _is_opening(text):
                pending_opening = piece[0]
                continue
            if attached and not piece[2] and (_is_trailing(text) or (len(text) == 1 and text in self._cut_points)):
                attached[-1][1] = piece[1]
                continue
            attached.append(piece)
        if pending_opening is not None:  # an opening bracket at the very end
            if attached:
                attached[-1][1] = len(name)
            else:
                attached.append([pending_opening, len(name), False])
        # too many single characters (rule 4)
        singles = sum(1 for start, end, _ in attached if end - start == 1)
        if len(attached) > 1 and 2 * singles > len(attached):
            merged: list[list] = []  # [start, end, is_kg_name, is a run of single characters]
            for start, end, is_name in attached:
                single = end - start == 1 and not is_name
                if merged and single and merged[-1][3]:
                    merged[-1][1] = end
                else:
                    merged.append([start, end, is_name, single])
            attached = [piece[:3] for piece in merged]
        return [(start, end, bool(is_name)) for start, end, is_name in attached]

    def atomic_start(self, pieces: Sequence[tuple[int, int, bool]]) -> int:
        """Where the atomic term begins (its last piece, when a KG sub-entity with something before it); −1."""
        if len(pieces) >= 2 and pieces[-1][2]:
            return pieces[-1][0]
        return -1


class EntitySegments:
    """Sub-entity boundaries and atomic/adjective splits of a table of names (CSR arrays).

    ``names[k]``'s sub-entities end at the character offsets ``piece_ends[piece_ptr[k]:piece_ptr[k + 1]]``
    (the last is ``len(names[k])``); ``atomic_start[k]`` is where its atomic term begins, −1 when it
    has no atomic/adjective split.
    """

    def __init__(
        self, names: list[str], piece_ptr: np.ndarray, piece_ends: np.ndarray, atomic_start: np.ndarray, config: dict
    ) -> None:
        self.names = names
        self.piece_ptr = np.asarray(piece_ptr, dtype=np.int64)
        self.piece_ends = np.asarray(piece_ends, dtype=np.int64)
        self.atomic_start = np.asarray(atomic_start, dtype=np.int64)
        self.config = config
        self._index: dict[str, int] | None = None

    def index(self, name: str) -> int:
        """The row of ``name`` (−1 when absent)."""
        if self._index is None:
            self._index = {text: row for row, text in enumerate(self.names)}
        return self._index.get(name, -1)

    def ends(self, row: int) -> list[int]:
        return self.piece_ends[self.piece_ptr[row] : self.piece_ptr[row + 1]].tolist()

    def pieces(self, name: str) -> list[str]:
        """The sub-entities of ``name`` as strings (``[name]`` for unknown or short names)."""
        row = self.index(name)
        if row < 0:
            return [name]
        ends = self.ends(row)
        return [name[start:end] for start, end in zip([0] + ends[:-1], ends)]

    def split(self, name: str) -> tuple[str, str] | None:
        """``(adjective, atomic)`` of ``name``, or None."""
        row = self.index(name)
        if row < 0 or self.atomic_start[row] < 0:
            return None
        cut = int(self.atomic_start[row])
        return name[:cut], name[cut:]

    def describe(self) -> dict:
        counts = np.diff(self.piece_ptr)
        return {
            "names": len(self.names),
            "split_names": int((counts >= 2).sum()),
            "atomic_splits": int((self.atomic_start >= 0).sum()),
            "cut_points": self.config.get("cut_points", ""),
        }

    def save(self, directory: str | os.PathLike) -> Path:
        return write_artefact(
            directory,
            "segments",
            SEGMENTS_FORMAT,
            {"piece_ptr": self.piece_ptr, "piece_ends": self.piece_ends, "atomic_start": self.atomic_start},
            {"config": self.config, "names": self.names},
        )

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "EntitySegments":
        manifest, arrays = read_artefact(
            directory, "segments", SEGMENTS_FORMAT, "kgplm entity-segment table (EMBERT's sub-entities)"
        )
        return cls(
            manifest["names"], arrays["piece_ptr"], arrays["piece_ends"], arrays["atomic_start"], manifest["config"]
        )


def build_entity_segments(
    store,
    *,
    linker=None,
    segmenter=None,
    long_length: int = 3,
    min_length: int = 2,
    max_cut_points: int = 100,
    min_cut_count: int = 20,
    min_cut_rate: float = 0.5,
    progress: bool = False,
) -> EntitySegments:
    """Segment every name of ``store`` (:func:`kg_names`) with the rules of the module docstring."""
    from kgplm.text.linking import EntityLinker
    from kgplm.text.segmentation import Segmenter

    linker = linker if linker is not None else EntityLinker(store, min_length=min_length)
    names = kg_names(store, min_length)
    if segmenter is None:
        segmenter = Segmenter(extra_words=[name for name in names if len(name) <= long_length])
    cut_points = derive_cut_points(
        names,
        linker,
        long_length=long_length,
        max_cut_points=max_cut_points,
        min_cut_count=min_cut_count,
        min_cut_rate=min_cut_rate,
    )
    splitter = EntitySegmenter(linker, segmenter, cut_points, long_length=long_length)
    piece_ptr, piece_ends, atomic = [0], [], []
    for name in tqdm(names, desc="segmenting KG names", unit=" names", disable=not progress, leave=False):
        pieces = splitter.pieces(name)
        piece_ends.extend(end for _, end, _ in pieces)
        piece_ptr.append(len(piece_ends))
        atomic.append(splitter.atomic_start(pieces))
    config = {
        "long_length": long_length,
        "min_length": min_length,
        "cut_points": cut_points,
        "max_cut_points": max_cut_points,
        "min_cut_count": min_cut_count,
        "min_cut_rate": min_cut_rate,
    }
    segments = EntitySegments(
        names, np.asarray(piece_ptr), np.asarray(piece_ends, dtype=np.int64), np.asarray(atomic, dtype=np.int64), config
    )
    logger.info("entity segments: %s", segments.describe())
    return segments
