"""Models saved before the method registry (one flat config class) load and compute what they computed.

Compared to float32 round-off (rtol 1e-5, atol 1e-6), not bitwise: the expected outputs were written on
another CPU, and kernels differ in summation order between instruction sets (1.5e-7 measured here). A weight
that is not loaded, or a head dropped on load, moves outputs by orders of magnitude more.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from kgplm.methods.mlm import KgplmForMaskedLM, MlmConfig
from kgplm.methods.smedbert import SmedbertConfig, SmedbertForPreTraining
from kgplm.models import KgplmForFineTuning, load_pretrained

LEGACY = Path(__file__).resolve().parents[1] / "data" / "legacy_v1"
ENCODER_INPUTS = (
    "input_ids",
    "attention_mask",
    "token_type_ids",
    "mention_batch",
    "mention_spans",
    "neighbor_mention",
    "neighbor_entity_ids",
    "neighbor_relation_ids",
    "neighbor_directions",
    "neighbor_type_ids",
)


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
    torch.testing.assert_close(output.last_hidden_state, expected["smedbert.last_hidden_state"], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(output.prediction_logits, expected["smedbert.prediction_logits"], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(output.sop_logits, expected["smedbert.sop_logits"], rtol=1e-5, atol=1e-6)


def test_a_legacy_mlm_checkpoint_gives_the_same_outputs(inputs, expected):
    model = load_pretrained(LEGACY / "mlm").eval()
    assert type(model) is KgplmForMaskedLM and type(model.config) is MlmConfig
    assert model.config.use_sop is False and model.sop is None
    with torch.no_grad():
        output = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
    torch.testing.assert_close(output.prediction_logits, expected["mlm.prediction_logits"], rtol=1e-5, atol=1e-6)


def test_a_legacy_fine_tuned_smedbert_gives_the_same_outputs(inputs, expected):
    model = load_pretrained(LEGACY / "smedbert_ner").eval()
    assert type(model) is KgplmForFineTuning and model.config.task_kind == "ner"
    with torch.no_grad():
        logits = model(**inputs).logits
    torch.testing.assert_close(logits, expected["smedbert_ner.logits"], rtol=1e-5, atol=1e-6)
