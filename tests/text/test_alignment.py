"""Char spans → token spans: hand cases, truncation, and a property test over mixed scripts."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgplm.text import EntityLinker, char_spans_to_token_spans, char_to_word_ids


def test_hand_computed_spans():
    # [CLS] "ab"(0,2) "##c"(2,3) "中"(4,5) "国"(5,6) [SEP]
    offsets = [(0, 0), (0, 2), (2, 3), (4, 5), (5, 6), (0, 0)]
    result = char_spans_to_token_spans(offsets, [(0, 3), (4, 6), (5, 6), (0, 2), (1, 3), (6, 8)])
    assert result.tolist() == [[1, 3], [3, 5], [4, 5], [1, 2], [-1, -1], [-1, -1]]
    assert char_spans_to_token_spans(offsets, []).shape == (0, 2)


def test_word_ids_follow_the_token_start():
    offsets = [(0, 0), (0, 1), (1, 2), (2, 4), (0, 0)]
    assert char_to_word_ids(offsets, [(0, 2), (2, 4)], 4).tolist() == [-1, 0, 0, 1, -1]


def test_truncation_drops_a_cut_mention(chinese_tokenizer):
    text = "口服阿司匹林"
    encoding = chinese_tokenizer(text, max_length=6, truncation=True, return_offsets_mapping=True)
    # [CLS] 口 服 阿 司 [SEP]: the mention 阿司匹林 (2, 6) is cut
    assert char_spans_to_token_spans(encoding["offset_mapping"], [(2, 6), (0, 2)]).tolist() == [[-1, -1], [1, 3]]


PIECES = [
    "糖尿病",
    "2型",
    "MRI",
    "mri",
    "ＭＲＩ",
    "B12",
    "维生素",
    "COVID-19",
    "阿司匹林",
    "检查",
    "高血压",
    "IHC",
    "TSHR",
    "抗体",
    "１２",
    "mg",
    " ",
    "  ",
    "，",
    "。",
    "-",
    "(",
    ")",
    "a",
    "x",
    "7",
    "中",
    "ab",
    "Ⅱ",
]
NAMES = {
    "糖尿病": [0],
    "2型糖尿病": [1],
    "MRI": [2],
    "维生素B12": [3],
    "B12": [4],
    "COVID-19": [5],
    "阿司匹林": [6],
    "MRI检查": [7],
    "高血压": [8],
    "IHC": [9],
    "TSHR抗体": [10],
    "12mg": [11],
    "ab": [12],
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(PIECES) | st.text(alphabet="abcXYZ0123456789 中文病,.", max_size=3), max_size=25))
def test_every_linked_span_maps_to_tokens_covering_exactly_its_characters(chinese_tokenizer, pieces):
    text = "".join(pieces)
    encoding = chinese_tokenizer(text, return_offsets_mapping=True)
    offsets = np.asarray(encoding["offset_mapping"])
    linker = _LINKER
    for nested in (False, True):
        mentions = linker.link(text, nested=nested)
        token_spans = char_spans_to_token_spans(offsets, [(m.start, m.end) for m in mentions])
        for mention, (first, end) in zip(mentions, token_spans.tolist()):
            assert first >= 0, (text, mention, offsets.tolist())
            covered = offsets[first:end]
            assert covered[0][0] == mention.start and covered[-1][1] == mention.end
            assert all(mention.start <= s < e <= mention.end for s, e in covered.tolist())
            # and the tokens just outside do not reach into the mention
            if first > 0:
                assert offsets[first - 1][1] <= mention.start
            if end < len(offsets):
                assert offsets[end][0] >= mention.end or offsets[end][1] == 0


_LINKER = EntityLinker(names=NAMES, min_length=1)
