"""The array-built linker dictionary and trie (issue 30.6) against a plain dict-and-list reference build.

The reference is the straightforward construction :mod:`kgplm.text.linking` specifies: a dict from
pattern to a list of entities per bucket (any case, capitals only) filled name by name, each list
ranked with ``sorted`` by (not the entity's own display name, −degree, id), and a trie of nested
dicts numbered breadth-first with siblings in code order. Every array the linker saves (patterns,
candidates, best entities, node rows, children, root table, word weights) must equal what the
reference gives, on random name sets (capitals and abbreviations, stop words, hyphen variants,
numeric names, NULs and spaces to strip, names equal after normalisation), on a generated
UMLS-shaped store with ``entity_types`` filters, and with explicit names over that store (ambiguous
names, some of them an entity's own display name).
"""

from __future__ import annotations

import math
import random
import re
import sys
import unicodedata
from collections import deque
from pathlib import Path

import numpy as np
import pytest

from kgplm import KGStore
from kgplm.text import EntityLinker
from kgplm.text import _linking_kernels as kernels
from kgplm.text._linking_trie import encode_strings, sort_strings
from kgplm.text.linking import normalize_for_matching
from kgplm.text.linking_filters import HYPHENS, allowed_entities, has_no_letter, resolve_stop_words
from kgplm.text.segmentation import NAME_FREQUENCY, jieba_dictionary

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import synthetic_umls  # noqa: E402

FRAGMENTS = [
    "糖尿病",
    "2型",
    "高血压",
    "头痛",
    "复视",
    "视力",
    "MRI",
    "mri",
    "ＭＲＩ",
    "AS",
    "as",
    "ALL",
    "All",
    "all",
    "Ⅱ型",
    "II型",
    "㎎",
    "mg",
    "COVID-19",
    "covid 19",
    "COVID‐19",
    "hearing",
    "loss",
    "-",
    "–",
    "277000",
    "1.5",
    "severe",
    "Severe",
    "İ",
    "B12",
    "B1",
    "的",
    " ",
    "  ",
    "\x00",
    "\t",
    "x",
    "ab",
    "AB",
    "ＡＢ",
    "Ab",
    "𠀀",
    "é",
    "é",
]


def random_names(rng: random.Random, count: int, num_entities: int) -> dict[str, list[int]]:
    names: dict[str, list[int]] = {}
    for _ in range(count):
        surface = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 3)))
        names[surface] = [rng.randrange(num_entities) for _ in range(rng.randint(1, 3))]
    return names


def reference_build(
    store,
    names,
    *,
    min_length=2,
    stop_words="english",
    exclude_numeric=True,
    hyphen_variants=True,
    case_sensitive_abbreviations=True,
    entity_types=None,
    word_boundaries="jieba",
):
    """(patterns, candidate rows, {node string: (terminal, terminal_capital, word weight)}, name weight,
    unknown weight) built with dicts and lists."""

    def normalize(text: str) -> str:
        folded = normalize_for_matching(text)
        return "".join(" " if c in HYPHENS else c for c in folded) if hyphen_variants else folded

    if names is None:
        names = store.name_index()
    allowed = allowed_entities(store, entity_types, None) if store is not None else None
    surfaces = [(s.strip(), list(names[s])) for s in names if "\x00" not in s]
    stop = {normalize(word) for word in resolve_stop_words(stop_words)}
    any_case: dict[str, list[int]] = {}
    capitals: dict[str, list[int]] = {}
    for name, entities in surfaces:
        pattern = normalize(name)
        if len(pattern) < min_length or (exclude_numeric and has_no_letter(pattern)):
            continue
        if allowed is not None:
            entities = [entity for entity in entities if allowed[entity]]
        if not entities:
            continue
        in_capitals = re.fullmatch(r"[A-Z]{2,4}", unicodedata.normalize("NFKC", name)) is not None
        if pattern in stop and not in_capitals:
            continue
        bucket = (capitals if case_sensitive_abbreviations and in_capitals else any_case).setdefault(pattern, [])
        bucket.extend(entity for entity in entities if entity not in bucket)
    for pattern, entities in capitals.items():
        entities.extend(entity for entity in any_case.get(pattern, ()) if entity not in entities)
    patterns = list(any_case) + list(capitals)
    degree = None
    if store is not None:
        out_degree, in_degree = store.degrees()
        degree = out_degree + in_degree

    def rank(pattern: str, entities: list[int]) -> tuple[int, ...]:
        def key(entity: int):
            own = store is not None and normalize_for_matching(store.entity_name(entity)) == pattern
            return (not own, -(int(degree[entity]) if degree is not None else 0), entity)

        return tuple(sorted(entities, key=key))

    rows = [rank(pattern, entities) for pattern, entities in zip(patterns, [*any_case.values(), *capitals.values()])]
    words: dict[str, int] = {}
    total = 1
    if word_boundaries == "jieba":
        frequencies, total = jieba_dictionary()
        for word, frequency in frequencies.items():
            if frequency > 0:
                words[normalize(word)] = max(frequency, words.get(normalize(word), 0))
        total += NAME_FREQUENCY * sum(len(n) >= 2 and not re.search(r"\s", n) for n, _ in surfaces)
    nodes: dict[str, list] = {}
    for entry, pattern in enumerate(patterns):
        nodes.setdefault(pattern, [-1, -1, None])[0 if entry < len(any_case) else 1] = entry
    for word, frequency in words.items():
        nodes.setdefault(word, [-1, -1, None])[2] = math.log(frequency) - math.log(total)
    return patterns, rows, nodes, math.log(NAME_FREQUENCY) - math.log(total), -math.log(total)


def reference_trie(strings) -> tuple[list[str], list[int], list[tuple[int, int]]]:
    """Nested dicts numbered breadth-first, siblings by code: (string of each node, code of each child slot,
    children range of each node)."""
    root: dict = {}
    for text in strings:
        node = root
        for char in text:
            node = node.setdefault(char, {})
    order, ranges, codes = [""], [], []
    queue = deque([("", root)])
    while queue:
        prefix, node = queue.popleft()
        start = len(codes)
        for char in sorted(node):
            codes.append(ord(char))
            order.append(prefix + char)
            queue.append((prefix + char, node[char]))
        ranges.append((start, len(codes)))
    return order, codes, ranges


def check_against_reference(linker: EntityLinker, directory: Path, store, names, **options) -> None:
    patterns, rows, expected_nodes, name_weight, unknown_weight = reference_build(store, names, **options)
    loaded = EntityLinker.load(linker.save(directory), store=store, mmap=False)  # what is saved
    for built in (linker, loaded):
        assert list(built.patterns) == patterns
        assert built._candidates[:] == rows
        assert built.best_entities(np.arange(len(rows))).tolist() == [row[0] for row in rows]
        assert built.num_names == len(set(patterns))
        root_children, nodes, children, capitals, word_weights = built._automaton
        order, codes, ranges = reference_trie(expected_nodes)
        assert len(nodes) == len(order) + 1  # a last row closes the table
        assert children.tolist() == codes
        starts = nodes["child_start"].tolist()
        assert list(zip(starts[:-1], starts[1:])) == ranges
        node_of = {text: node for node, text in enumerate(order)}
        assert root_children.tolist() == [node_of.get(chr(code), -1) for code in range(len(root_children))]
        assert len(root_children) == (max(codes[ranges[0][0] : ranges[0][1]]) + 1 if ranges[0][1] else 0)
        assert nodes["terminal"][-1] == -1
        entry, capital, word = (
            array_.tolist() for array_ in kernels.node_terminals(nodes[:-1], capitals, word_weights)
        )
        for node, text in enumerate(order):
            terminal, capital_terminal, weight = expected_nodes.get(text, (-1, -1, None))
            assert (entry[node], capital[node]) == (terminal, capital_terminal), text
            if terminal < 0:  # an entry's node counts as a name; any other word node carries its weight
                assert (word_weights[word[node]] if word[node] >= 0 else None) == weight, text
        assert len(capitals) == sum(c >= 0 for _, c, _ in expected_nodes.values())
        # one weight per distinct word frequency, ascending (log is increasing)
        assert word_weights.tolist() == sorted({w for _, _, w in expected_nodes.values() if w is not None})
        assert (built._name_weight, built._unknown_weight) == (name_weight, unknown_weight)


@pytest.fixture(scope="module")
def umls_store(tmp_path_factory) -> KGStore:
    directory = tmp_path_factory.mktemp("rrf")
    synthetic_umls.write_synthetic_umls(directory, 400, seed=3, chunk_size=150)
    return KGStore.from_umls_rrf(directory, show_progress=False)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"stop_words": None, "exclude_numeric": False, "hyphen_variants": False},
        {"case_sensitive_abbreviations": False, "min_length": 1},
        {"stop_words": ["as", "Severe", "english"], "min_length": 3},
    ],
)
def test_random_names_equal_the_reference(tmp_path: Path, seed: int, options: dict) -> None:
    names = random_names(random.Random(seed), 300, 40)
    linker = EntityLinker(names=names, word_boundaries=None, **options)
    check_against_reference(linker, tmp_path / "linker", None, names, word_boundaries=None, **options)


def test_jieba_words_equal_the_reference(tmp_path: Path, monkeypatch) -> None:
    """With the best-path dictionary: the segmentation words in the trie (a sample of jieba's, words equal to
    names, words equal after normalisation with different frequencies, words of frequency 0), their
    weights and the name count in the total."""
    import kgplm.text.segmentation as segmentation

    rng = random.Random(7)
    frequencies, total = jieba_dictionary()
    sample = dict(rng.sample(sorted(frequencies.items()), 3000))
    sample.update(
        {
            "MRI": 5,
            "mri": 9,
            "ＭＲＩ": 2,
            "hearing-loss": 4,
            "hearing loss": 3,
            "头痛": 0,
            "复视": 0,
            "高血压": 7,
            "ab": 1,
            "AB": 0,
        }
    )
    small = (sample, total)
    monkeypatch.setattr(segmentation, "jieba_dictionary", lambda: small)
    monkeypatch.setitem(globals(), "jieba_dictionary", lambda: small)
    names = random_names(rng, 300, 40)
    for options in ({}, {"hyphen_variants": False}):
        linker = EntityLinker(names=names, **options)
        check_against_reference(linker, tmp_path / f"linker{len(options)}", None, names, **options)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"entity_types": ["Disease or Syndrome", "Finding"]},
        {"case_sensitive_abbreviations": False, "stop_words": None},
    ],
)
def test_store_names_equal_the_reference(tmp_path: Path, umls_store: KGStore, options: dict) -> None:
    linker = EntityLinker(umls_store, word_boundaries=None, **options)
    check_against_reference(linker, tmp_path / "linker", umls_store, None, word_boundaries=None, **options)


def test_ambiguous_names_rank_own_display_name_then_degree(tmp_path: Path, umls_store: KGStore) -> None:
    """Explicit names over a store: display names shared with other entities, so the ranking's own-name and
    degree keys both decide (checked against the reference's ``sorted``)."""
    rng = random.Random(11)
    names: dict[str, list[int]] = {}
    for entity in rng.sample(range(umls_store.num_entities), 120):
        names.setdefault(umls_store.entity_name(entity), []).extend(
            [entity, *rng.sample(range(umls_store.num_entities), rng.randint(1, 4))]
        )
        names.setdefault(umls_store.entity_name(entity).upper()[:4], []).append(entity)
    linker = EntityLinker(umls_store, names=names, word_boundaries=None)
    rows = linker._candidates[:]
    assert sum(len(row) > 1 for row in rows) > 100
    own_first = sum(
        normalize_for_matching(umls_store.entity_name(row[0])) == pattern
        for pattern, row in zip(linker.patterns, rows)
        if len(row) > 1
    )
    assert own_first > 50  # the own-name key decided these
    check_against_reference(linker, tmp_path / "linker", umls_store, names, word_boundaries=None)


def test_sort_strings_is_a_stable_code_point_sort() -> None:
    rng = random.Random(0)
    alphabet = ["a", "b", "ab", "é", "中", "𠀀", "\ud800", "\uffff", "aaaaaaa", "aaaaaaab", " "]
    strings = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(2000)]
    flat, offsets = encode_strings(strings)
    assert sort_strings(flat, offsets).tolist() == sorted(range(len(strings)), key=lambda i: (strings[i], i))


def test_build_trie_gives_each_string_its_node() -> None:
    strings = ["abc", "ab", "b", "abd", "中文", "中", "ab", ""]
    child_ptr, codes, node_of = kernels.build_trie(strings)
    order, expected_codes, ranges = reference_trie(strings)
    assert codes.tolist() == expected_codes
    assert child_ptr.tolist() == [start for start, _ in ranges] + [ranges[-1][1]]  # the last entry closes the table
    assert [order[node] for node in node_of.tolist()] == strings


def test_child_codes_take_two_bytes_unless_a_name_leaves_the_basic_plane() -> None:
    """The trie's child codes are 16-bit when every name is in the Basic Multilingual Plane (issue 30.6:
    107 MB less at 1M concepts) and 32-bit when one is not, which still links."""
    plain = EntityLinker(names={"头痛": [0], "fever": [1]}, word_boundaries=None)
    wide = EntityLinker(names={"头痛": [0], "𠀀痛": [1], "\U0010fffd痛": [2]}, word_boundaries=None)
    assert plain._automaton[2].dtype == np.uint16 and wide._automaton[2].dtype == np.int32
    assert [(m.surface, m.entity_id) for m in plain.link("头痛, fever")] == [("头痛", 0), ("fever", 1)]
    assert [(m.surface, m.entity_id) for m in wide.link("头痛、𠀀痛、\U0010fffd痛、\u0000痛")] == [
        ("头痛", 0),
        ("𠀀痛", 1),
        ("\U0010fffd痛", 2),
    ]
