"""The mention span indicator at fine-tuning: SMedBERT's linked spans, for any encoder (issue 26.5)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kgplm.exceptions import ConfigurationError
from kgplm.models import TINY_TEXT_ENCODER, KgplmConfig, KgplmForFineTuning, load_pretrained
from kgplm.models.finetuning import SPAN_INDICATOR_INPUT
from kgplm.finetuning.mention_inputs import MentionSpanLookup


def test_the_indicator_marks_exactly_the_spans_smedbert_receives(toy_turtle):
    from kgplm import KGStore
    from kgplm.kg.pepr import top_k_neighbors
    from kgplm.methods.smedbert import KnowledgeLookup
    from kgplm.text.linking import EntityLinker

    store = KGStore.from_rdf(toy_turtle)
    table = top_k_neighbors(store, None, k=2, show_progress=False)
    linker = EntityLinker(store)
    smedbert, spans_only = KnowledgeLookup(store, table, linker=linker), MentionSpanLookup(linker)
    text = "糖尿病患者口渴，服用二甲双胍"
    offsets = np.array([[0, 0]] + [[i, i + 1] for i in range(len(text))] + [[0, 0]])  # one token per character
    expected = smedbert.features(text, offsets)["mention_spans"]
    assert [text[s - 1 : e - 1] for s, e in expected.tolist()] == ["糖尿病", "口渴", "二甲双胍"]
    assert np.array_equal(spans_only.features(text, offsets)["mention_spans"], expected)
    # collated: one (row, position) per token inside a mention, by hand
    tokens = spans_only.collate(
        [
            {"mention_spans": np.array([[1, 4], [6, 7]])},
            {"mention_spans": np.zeros((0, 2))},
            {"mention_spans": np.array([[2, 3]])},
        ]
    )[SPAN_INDICATOR_INPUT]
    assert tokens.tolist() == [[0, 0, 0, 0, 2], [1, 2, 3, 6, 2]]


def _config(indicator: bool) -> KgplmConfig:
    config = KgplmConfig(method="mlm", vocab_size=60, mention_span_indicator=indicator, **TINY_TEXT_ENCODER)
    config.set_task("classification", "cmedic", ["0", "1"])
    return config


def test_the_indicator_adds_its_vector_to_mention_tokens_and_round_trips(tmp_path):
    torch.manual_seed(0)
    model = KgplmForFineTuning(_config(True)).eval()
    assert torch.equal(model.span_indicator.inside, torch.zeros(32))  # starts as the plain encoder
    input_ids = torch.randint(5, 60, (2, 9), generator=torch.Generator().manual_seed(1))
    inside = torch.tensor([[0, 0, 1], [2, 3, 4]])
    outside = torch.zeros((2, 0), dtype=torch.long)
    with torch.no_grad():
        model.span_indicator.inside.normal_()
        embeddings = model.bert.embeddings.word_embeddings(input_ids)
        marked = model.span_indicator(embeddings, inside)
        with_spans = model(input_ids=input_ids, **{SPAN_INDICATOR_INPUT: inside}).last_hidden_state
        without = model(input_ids=input_ids, **{SPAN_INDICATOR_INPUT: outside}).last_hidden_state
    changed = (marked != embeddings).any(-1)
    assert changed.nonzero().tolist() == [[0, 2], [0, 3], [1, 4]]
    assert torch.allclose(marked[0, 2] - embeddings[0, 2], model.span_indicator.inside)
    assert not torch.allclose(with_spans, without)
    model.save_pretrained(tmp_path / "model")
    loaded = load_pretrained(tmp_path / "model").eval()
    assert loaded.config.mention_span_indicator is True
    with torch.no_grad():
        again = loaded(input_ids=input_ids, **{SPAN_INDICATOR_INPUT: inside}).last_hidden_state
    assert torch.equal(again, with_spans)
    # the input and the option go together
    with pytest.raises(ConfigurationError, match="span indicator"):
        loaded(input_ids=input_ids)
    with pytest.raises(ConfigurationError, match="span indicator"):
        KgplmForFineTuning(_config(False))(input_ids=input_ids, **{SPAN_INDICATOR_INPUT: inside})
