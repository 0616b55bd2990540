"""The MLM baseline as a fair control: SOP on request, heads and inputs equal to Hugging Face's BertForPreTraining."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForPreTraining

from kgplm.methods.mlm import KgplmForMaskedLM, MlmConfig
from kgplm.methods.smedbert import SmedbertForPreTraining
from kgplm.models import TINY_TEXT_ENCODER
from kgplm.text.masking import Masker
from kgplm.training.collator import PretrainingCollator
from kgplm.training.stages import load_text_checkpoint
from tests.methods.conftest import tiny_config

CLS, SEP, PAD, MASK = 2, 3, 0, 4
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def _sop_batch(seed: int = 0):
    """SOP pairs, token types and masks from the pre-training collator."""
    rng = np.random.default_rng(seed)
    rows = {
        "input_ids": [[CLS, *rng.integers(5, 60, size=int(n)).tolist(), SEP] for n in (20, 13, 30, 2)],
        "mention_spans": [[[2, 5]], [], [[1, 3], [10, 14]], []],
    }
    masker = Masker("whole_entity", mask_token_id=MASK, vocab_size=60, special_token_ids=[PAD, 1, CLS, SEP])
    collator = PretrainingCollator(
        masker=masker, cls_token_id=CLS, sep_token_id=SEP, pad_token_id=PAD, sentence_order=True
    )
    return collator(rows, np.arange(4)[:, None] + 100 * seed)


@pytest.fixture()
def bert_checkpoint(tmp_path):
    torch.manual_seed(3)
    reference = BertForPreTraining(BertConfig(vocab_size=60, pad_token_id=PAD, **TINY_TEXT_ENCODER, **NO_DROPOUT))
    reference.save_pretrained(tmp_path / "bert")
    return reference.eval(), tmp_path / "bert"


@pytest.mark.parametrize("method", ["mlm", "smedbert"])
def test_a_bert_checkpoint_loads_every_head_and_sop_equals_hugging_face(method, bert_checkpoint):
    """Every weight of a BertForPreTraining lands in the model (MLM transform and LayerNorm, NSP as SOP),
    and on identical SOP batches the MLM logits, SOP logits and losses equal Hugging Face's."""
    reference, directory = bert_checkpoint
    torch.manual_seed(0)
    if method == "mlm":
        model = KgplmForMaskedLM(MlmConfig(vocab_size=60, use_sop=True, **TINY_TEXT_ENCODER, **NO_DROPOUT))
    else:
        model = SmedbertForPreTraining(tiny_config(**NO_DROPOUT))
    report = load_text_checkpoint(model, directory)
    assert torch.equal(model.cls.predictions.transform.dense.weight, reference.cls.predictions.transform.dense.weight)
    assert torch.equal(
        model.cls.predictions.transform.LayerNorm.weight, reference.cls.predictions.transform.LayerNorm.weight
    )
    assert torch.equal(model.cls.predictions.bias, reference.cls.predictions.bias)
    assert torch.equal(model.sop.weight, reference.cls.seq_relationship.weight)
    assert torch.equal(model.bert.pooler.dense.weight, reference.bert.pooler.dense.weight)
    assert report["unused"] == []
    assert not [name for name in report["new"] if name.startswith(("bert.", "cls.", "sop."))]
    batch = _sop_batch()
    model.eval()
    with torch.no_grad():
        ours = model(**batch)
        theirs = reference(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"],
            labels=batch["labels"],
            next_sentence_label=batch["sentence_order_label"],
        )
    torch.testing.assert_close(ours.prediction_logits, theirs.prediction_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours.sop_logits, theirs.seq_relationship_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours.losses["mlm"] + ours.losses["sop"], theirs.loss, rtol=1e-5, atol=1e-5)


def test_mlm_control_takes_sop_inputs_and_loss():
    torch.manual_seed(0)
    batch = _sop_batch()
    plain = KgplmForMaskedLM(MlmConfig(vocab_size=60, **TINY_TEXT_ENCODER))
    control = KgplmForMaskedLM(MlmConfig(vocab_size=60, use_sop=True, **TINY_TEXT_ENCODER))
    assert set(plain(**{k: v for k, v in batch.items() if k != "sentence_order_label"}).losses) == {"mlm"}
    output = control(**batch)
    assert set(output.losses) == {"mlm", "sop"}
    assert set(output.metrics) == {"mlm_accuracy", "sop_accuracy"}
    assert plain.sop is None and plain.bert.pooler is None


def test_sop_alone_learns_when_the_order_is_visible():
    """A wiring check: SOP's head, pooler and token types learn an order signal quickly on their own."""
    torch.manual_seed(0)
    model = KgplmForMaskedLM(MlmConfig(vocab_size=60, use_sop=True, **TINY_TEXT_ENCODER))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(120):
        first = rng.integers(10, 30, size=(16, 6))  # "first sentence" words
        second = rng.integers(30, 50, size=(16, 6))  # "second sentence" words
        swap = rng.random(16) < 0.5
        a = np.where(swap[:, None], second, first)
        b = np.where(swap[:, None], first, second)
        ids = np.concatenate([np.full((16, 1), CLS), a, np.full((16, 1), SEP), b, np.full((16, 1), SEP)], 1)
        types = np.concatenate([np.zeros((16, 8)), np.ones((16, 7))], 1)
        output = model(
            input_ids=torch.from_numpy(ids),
            token_type_ids=torch.from_numpy(types).long(),
            labels=torch.full(ids.shape, -100),
            sentence_order_label=torch.from_numpy(swap.astype(np.int64)),
        )
        assert set(output.losses) == {"sop"}  # no MLM target: the loss is SOP alone, not NaN
        optimizer.zero_grad()
        output.loss.backward()
        optimizer.step()
        losses.append(float(output.losses["sop"]))
    assert np.mean(losses[:10]) > 0.6 and np.mean(losses[-10:]) < 0.1


def test_a_version_one_mlm_config_had_no_sop_head():
    config = MlmConfig.from_dict({"method": "mlm", "use_sop": True, "vocab_size": 60, **TINY_TEXT_ENCODER})
    assert config.use_sop is False and config.config_version == 2
    current = MlmConfig.from_dict({"method": "mlm", "use_sop": True, "config_version": 2, "vocab_size": 60})
    assert current.use_sop is True
