"""The numba linker against a plain-Python reference matcher written from the module docstring of
:mod:`kgplm.text.linking`, on random name sets and texts: overlaps, nested names, Latin word
boundaries, capitals-only abbreviations, characters that normalise to several codes, hyphen
variants and the name filters, in all three selection modes; and batches (``find_many``,
``link_many``) against the same texts one by one."""

from __future__ import annotations

import functools
import math
import random
import re
import unicodedata

import numpy as np
import pytest

from kgplm.text import EntityLinker
from kgplm.text.linking_filters import HYPHENS, resolve_stop_words
from kgplm.text.segmentation import NAME_FREQUENCY, jieba_dictionary

ASCII_ALNUM = set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
# fragments names and texts are drawn from: words of jieba's dictionary and parts of them (恢复视力:
# 复视 cuts a word), Latin words with their boundaries, capitals, full-width and compatibility forms
# (Ⅱ is two codes, ㎎ two, ㍻ is 平成: a name must not begin or end inside it), hyphen variants, numbers, stop and qualifier words
FRAGMENTS = [
    "糖尿病",
    "2型糖尿病",
    "高血压",
    "头痛",
    "复视",
    "视力",
    "恢复",
    "恢复视力",
    "降低",
    "低头",
    "头部",
    "防止",
    "止痛",
    "痛风",
    "和安",
    "安定",
    "肿瘤",
    "肿瘤医院",
    "手术",
    "做手术",
    "感冒",
    "维生素B",
    "维生素B12",
    "MRI",
    "mri",
    "ＭＲＩ",
    "MRIs",
    "AS",
    "as",
    "ALL",
    "All",
    "all",
    "Ⅱ型",
    "II型",
    "I型",
    "㎎",
    "mg",
    "COVID-19",
    "covid 19",
    "COVID‐19",
    "hearing loss",
    "hearing-loss",
    "Hearing–Loss",
    "277000",
    "1.5",
    "severe",
    "Severe asthma",
    "asthma",
    "İstanbul",
    "B12",
    "B1",
    "型",
    "病",
    "的",
    "了",
    "患者",
    "检查",
    "㍻",
    "平成",
    "成人",
    "平",
    "成",
    "㈠",
    "一)",
]
SEPARATORS = ["", "", "", " ", "，", "。", "-", "x", "2", "\n", "\x00"]


def fold(char: str) -> str:
    """NFKC, then lower case for each character whose lower case is one character."""
    compatible = unicodedata.normalize("NFKC", char) or char
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in compatible)


@functools.lru_cache(maxsize=None)
def character_codes(char: str, hyphens: bool) -> tuple[tuple[str, bool, bool, bool], ...]:
    """(code, starts the character, ends it, the character is a capital) per code of ``char``."""
    folded = fold(char)
    if hyphens:
        folded = "".join(" " if c in HYPHENS else c for c in folded)
    compatible = unicodedata.normalize("NFKC", char)
    capital = bool(compatible) and all("A" <= c <= "Z" for c in compatible)
    return tuple((c, k == 0, k == len(folded) - 1, capital) for k, c in enumerate(folded))


def normalized(text: str, hyphens: bool) -> list[tuple[str, int, bool, bool, bool]]:
    """(code, source character, starts the character, ends it, the character is a capital) per code."""
    return [
        (code, index, first, last, capital)
        for index, char in enumerate(text)
        for code, first, last, capital in character_codes(char, hyphens)
    ]


class Reference:
    """What the linker's docstring specifies, in plain Python (quadratic, for short texts)."""

    def __init__(
        self,
        names: dict[str, list[int]],
        *,
        min_length=2,
        stop_words="english",
        exclude_numeric=True,
        hyphen_variants=True,
        case_sensitive_abbreviations=True,
        word_boundaries="jieba",
        words=None,
    ):
        self.hyphens = hyphen_variants
        self.word_boundaries = word_boundaries
        pattern_of = lambda surface: "".join(code for code, *_ in normalized(surface, hyphen_variants))  # noqa: E731
        stop = {pattern_of(word) for word in resolve_stop_words(stop_words)} if stop_words else set()
        self.any_case: dict[str, list[int]] = {}
        self.capitals: dict[str, list[int]] = {}
        for surface, entities in names.items():
            surface = surface.strip()
            pattern = pattern_of(surface)
            no_letter = not any(unicodedata.category(c).startswith("L") for c in pattern)
            if len(pattern) < min_length or (exclude_numeric and no_letter):
                continue
            in_capitals = re.fullmatch(r"[A-Z]{2,4}", unicodedata.normalize("NFKC", surface)) is not None
            if pattern in stop and not in_capitals:
                continue
            bucket = self.capitals if case_sensitive_abbreviations and in_capitals else self.any_case
            bucket.setdefault(pattern, []).extend(entities)
        self.words: dict[str, int] = {}
        total = 1
        if word_boundaries == "jieba":
            self.words, total = words(hyphen_variants)
            total += NAME_FREQUENCY * sum(len(s.strip()) >= 2 and not re.search(r"\s", s.strip()) for s in names)
        self.name_weight = math.log(NAME_FREQUENCY) - math.log(total)
        self.unknown_weight = -math.log(total)
        self.log_total = math.log(total)
        self.longest = max(map(len, [*self.any_case, *self.capitals, *self.words, "x"]))

    def entry(self, codes, start: int, end: int):
        """The candidates (sorted) of the name ``codes[start:end]`` matches; None: no name; "cut": no match
        may end here."""
        if not codes[end - 1][3] or (
            codes[end - 1][0] in ASCII_ALNUM and end < len(codes) and codes[end][0] in ASCII_ALNUM
        ):
            return "cut"
        pattern = "".join(code for code, *_ in codes[start:end])
        if all(code[4] for code in codes[start:end]) and pattern in self.capitals:
            return tuple(sorted(set(self.capitals[pattern] + self.any_case.get(pattern, []))))
        if pattern in self.any_case:
            return tuple(sorted(set(self.any_case[pattern])))
        return None

    @staticmethod
    def may_start(codes, position: int) -> bool:
        return codes[position][2] and not (
            codes[position][0] in ASCII_ALNUM and position > 0 and codes[position - 1][0] in ASCII_ALNUM
        )

    def longest_at(self, codes, position: int, limit: int):
        for end in range(min(limit, position + self.longest), position, -1):
            found = self.entry(codes, position, end)
            if found not in (None, "cut"):
                return end, found
        return None

    def link(self, text: str, nested: bool = False) -> list[tuple[int, int, tuple[int, ...]]]:
        codes = normalized(text, self.hyphens)
        size = len(codes)
        matches = []
        if nested or self.word_boundaries is None:
            position = 0
            while position < size:
                if self.may_start(codes, position):
                    if nested:
                        for end in range(min(size, position + self.longest), position, -1):
                            found = self.entry(codes, position, end)
                            if found not in (None, "cut"):
                                matches.append((position, end, found))
                    else:
                        found = self.longest_at(codes, position, size)
                        if found:
                            matches.append((position, *found))
                            position = found[0]
                            continue
                position += 1
        else:  # the best segmentation path: Σ log-probabilities, ties to the longer word
            best = [0.0] * (size + 1)
            choice: list = [None] * (size + 1)
            for position in range(size - 1, -1, -1):
                if not codes[position][2]:
                    continue
                following = position + 1
                while following < size and not codes[following][2]:
                    following += 1
                best[position] = self.unknown_weight + best[following]
                choice[position] = (following, None)
                if not self.may_start(codes, position):
                    continue
                for end in range(position + 1, min(size, position + self.longest) + 1):
                    found = self.entry(codes, position, end)
                    if found == "cut":
                        continue
                    pattern = "".join(code for code, *_ in codes[position:end])
                    if found is not None:
                        weight = self.name_weight
                    elif pattern in self.words:
                        weight = np.log(np.float64(self.words[pattern])) - self.log_total
                    else:
                        continue
                    if weight + best[end] >= best[position]:
                        best[position] = weight + best[end]
                        choice[position] = (end, found)
            position = 0
            while position < size:
                if not codes[position][2]:
                    position += 1
                    continue
                word_end, found = choice[position]
                if found is not None:
                    matches.append((position, word_end, found))
                    position = word_end
                    continue
                inner = position  # names inside a word that is no name: leftmost-longest within it
                while inner < word_end:
                    hit = self.longest_at(codes, inner, word_end) if self.may_start(codes, inner) else None
                    if hit:
                        matches.append((inner, *hit))
                        inner = hit[0]
                    else:
                        inner += 1
                position = word_end
        return [(codes[start][1], codes[end - 1][1] + 1, found) for start, end, found in matches]


@pytest.fixture(scope="module")
def jieba_words():
    """hyphen_variants → (jieba's words normalised, with the largest frequency of those that coincide; total)."""
    frequencies, total = jieba_dictionary()
    normalized_words = {}

    def words(hyphens: bool) -> tuple[dict[str, int], int]:
        if hyphens not in normalized_words:
            table: dict[str, int] = {}
            for word, frequency in frequencies.items():
                pattern = "".join(code for char in word for code, *_ in character_codes(char, hyphens))
                if frequency > 0:
                    table[pattern] = max(frequency, table.get(pattern, 0))
            normalized_words[hyphens] = table
        return normalized_words[hyphens], total

    return words


def random_names(generator: random.Random) -> dict[str, list[int]]:
    names: dict[str, list[int]] = {}
    for _ in range(80):
        surface = "".join(generator.choice(FRAGMENTS) for _ in range(generator.choice((1, 1, 1, 2))))
        names.setdefault(surface, []).append(generator.randrange(30))
    return names


def random_text(generator: random.Random) -> str:
    return "".join(generator.choice(FRAGMENTS) + generator.choice(SEPARATORS) for _ in range(generator.randrange(12)))


CONFIGS = {
    "defaults": {},
    "filters off": dict(stop_words=None, exclude_numeric=False, hyphen_variants=False),
    "one character, lower-cased abbreviations": dict(min_length=1, case_sensitive_abbreviations=False),
    "leftmost-longest": dict(word_boundaries=None),
    "leftmost-longest, filters off": dict(
        word_boundaries=None, stop_words=None, exclude_numeric=False, hyphen_variants=False, min_length=1
    ),
}


@pytest.mark.parametrize("config", list(CONFIGS), ids=list(CONFIGS))
def test_linker_equals_the_reference_matcher_on_random_names_and_texts(config, jieba_words):
    generator = random.Random(f"linking reference {config}")
    options = CONFIGS[config]
    names = random_names(generator)
    linker = EntityLinker(names=names, **options)
    reference = Reference(names, words=jieba_words, **options)
    texts = [random_text(generator) for _ in range(200)]
    for nested in (False, True):
        expected = [reference.link(text, nested=nested) for text in texts]
        got = [
            [(m.start, m.end, tuple(sorted(m.candidates))) for m in mentions]
            for mentions in linker.link_many(texts, nested=nested)
        ]
        assert got == expected, config
        one_by_one = [linker.find(text, nested=nested) for text in texts]
        for batched, single in zip(linker.find_many(texts, nested=nested), one_by_one):
            assert all(np.array_equal(a, b) for a, b in zip(batched, single))
        assert sum(map(len, expected)) > 100  # the random texts do contain names


def test_batches_split_at_any_size_give_the_same_matches(monkeypatch, jieba_words):
    generator = random.Random("linking batches")
    names = random_names(generator)
    linker = EntityLinker(names=names)
    texts = [random_text(generator) for _ in range(50)] + ["", "\x00"]
    expected = [linker.find(text) for text in texts]
    monkeypatch.setattr(EntityLinker, "BATCH_CHARACTERS", 7)
    found = list(linker.find_many(iter(texts)))
    assert len(found) == len(texts)
    for batched, single in zip(found, expected):
        assert all(np.array_equal(a, b) for a, b in zip(batched, single))


def test_a_documents_matches_do_not_depend_on_the_documents_batched_with_it():
    # each document is normalised into the same scratch arrays: a shorter one after a longer one must
    # be matched on its own codes only (糖尿 + the stale 病 of 糖尿病患者 would link 糖尿病)
    linker = EntityLinker(names={"糖尿病": [0], "恢复": [1], "视力": [2], "复视": [3]})
    texts = ["糖尿病患者恢复视力", "糖尿", "恢复视", "", "恢复视力"]
    expected = [[], [], [(0, 2, 1)], [], [(0, 2, 1), (2, 4, 2)]]
    assert [[(m.start, m.end, m.entity_id) for m in linker.link(text)] for text in texts[1:]] == expected[1:]
    assert [[(m.start, m.end, m.entity_id) for m in mentions] for mentions in linker.link_many(texts)][1:] == expected[
        1:
    ]


def test_find_and_find_many_take_only_strings():
    from kgplm.exceptions import ConfigurationError

    linker = EntityLinker(names={"糖尿病": [0]}, word_boundaries=None)
    with pytest.raises(ConfigurationError, match="find_many.*bytes"):
        list(linker.find_many(["糖尿病", b"bytes"]))
    with pytest.raises(ConfigurationError, match="find.*list"):
        linker.find(["糖尿病"])
