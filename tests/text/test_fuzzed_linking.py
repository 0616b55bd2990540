"""The linker and the tokenizer on arbitrary Unicode: exact, in-bounds offsets and no exception."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgplm import KGStore
from kgplm.text import EntityLinker

TOY_GRAPH = Path(__file__).resolve().parents[2] / "graphs" / "toy_medical.ttl"
FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def linker_and_names():
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    names = sorted({alias for i in range(store.num_entities) for alias in [store.entity_name(i), *store.aliases(i)]})
    return EntityLinker(store), names, store.num_entities


def _texts(names):
    """Arbitrary Unicode (combining marks, surrogates' neighbours, CJK, controls) with the store's names in it."""
    return st.lists(
        st.one_of(
            st.text(max_size=12),
            st.sampled_from(names),
            st.sampled_from(names).map(str.upper),
            st.sampled_from(["\u0301", "\ufeff", "\u200d", "\r\n", "\t", "。", " "]),
        ),
        max_size=12,
    ).map("".join)


@given(data=st.data())
@FUZZ
def test_linked_mentions_are_exact_spans_of_arbitrary_text(linker_and_names, data):
    linker, names, num_entities = linker_and_names
    text = data.draw(_texts(names))
    mentions = linker.link(text)
    previous_end = 0
    for mention in mentions:
        assert 0 <= mention.start < mention.end <= len(text)
        assert text[mention.start : mention.end] == mention.surface
        assert 0 <= mention.entity_id < num_entities and mention.entity_id in mention.candidates
        assert mention.start >= previous_end or linker.nested  # flat linking never overlaps
        previous_end = mention.end


@given(text=st.text(max_size=40))
@FUZZ
def test_the_tokenizer_gives_in_bounds_offsets_for_arbitrary_text(shared_data, text):
    from kgplm.text.tokenization import load_tokenizer

    tokenizer = _tokenizer(shared_data, load_tokenizer)
    encoding = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    assert len(encoding["input_ids"]) == len(encoding["offset_mapping"])
    for start, end in encoding["offset_mapping"]:
        assert 0 <= start <= end <= len(text)
    assert all(0 <= i < len(tokenizer) for i in encoding["input_ids"])


_LOADED = {}


def _tokenizer(shared_data, load_tokenizer):
    if "tokenizer" not in _LOADED:
        _LOADED["tokenizer"] = load_tokenizer(shared_data / "vocab" / "bert-base-chinese" / "vocab.txt")
    return _LOADED["tokenizer"]
