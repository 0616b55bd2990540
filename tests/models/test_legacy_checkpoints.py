"""Models saved before the method registry (one flat config class) load and compute what they computed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from kgplm.methods.mlm import KgplmForMaskedLM, MlmConfig
from kgplm.methods.smedbert import SmedbertConfig, SmedbertForPreTraining
from kgplm.models import KgplmForFineTuning, load_pretrained

LEGACY = Path(__file__).resolve().parents[1] / "data" / "legacy_v1"
ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "mention_batch", "mention_spans",
                  "neighbor_mention", "neighbor_entity_ids", "neighbor_relation_ids", "neighbor_directions",
                  "neighbor_type_ids")


@pytest.fixture(scope="module")
def inputs():
    return {k: v for k, v in load_file(str(LEGACY / "inputs.safetensors")).items() if k in ENCODER_INPUTS}


@pytest.fixture(scope="module")
def expected():
    return load_file(str(LEGACY / "expected.safetensors"))


def test_a_legacy_smedbert_checkpoint_gives_the_same_outputs(inputs, expected):
    model = load_pretrained(LEGACY / "smedbert").eval()
    assert type(model) is SmedbertForPreTraining and type(model.config) is SmedbertConfig
    assert model.config.neighbor_candidates == "any"  # version 1 learned the "related" relation
    with torch.no_grad():
        output = model(**inputs)
    assert torch.equal(output.last_hidden_state, expected["smedbert.last_hidden_state"])
    assert torch.equal(output.prediction_logits, expected["smedbert.prediction_logits"])
    assert torch.equal(output.sop_logits, expected["smedbert.sop_logits"])


def test_a_legacy_mlm_checkpoint_gives_the_same_outputs(inputs, expected):
    model = load_pretrained(LEGACY / "mlm").eval()
    assert type(model) is KgplmForMaskedLM and type(model.config) is MlmConfig
    assert model.config.use_sop is False and model.sop is None
    with torch.no_grad():
        output = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
    assert torch.equal(output.prediction_logits, expected["mlm.prediction_logits"])


def test_a_legacy_fine_tuned_smedbert_gives_the_same_outputs(inputs, expected):
    model = load_pretrained(LEGACY / "smedbert_ner").eval()
    assert type(model) is KgplmForFineTuning and model.config.task_kind == "ner"
    with torch.no_grad():
        logits = model(**inputs).logits
    assert torch.equal(logits, expected["smedbert_ner.logits"])
