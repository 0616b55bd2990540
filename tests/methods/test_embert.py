"""EMBERT's model: each head's loss against a hand computation (float64 numpy), the weighted total,
ablations, the registry record, save → load."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import erf

from kgplm.exceptions import ConfigurationError
from kgplm.methods import get
from kgplm.methods.embert import BidirectionalMaskingHead, EmbertConfig, EmbertForPreTraining
from kgplm.models import TINY_TEXT_ENCODER, load_pretrained


def tiny_config(**overrides) -> EmbertConfig:
    fields = dict(
        vocab_size=40,
        bem_position_dim=8,
        bem_max_positions=6,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        **TINY_TEXT_ENCODER,
    )
    fields.update(overrides)
    return EmbertConfig(**fields)


def tiny_batch() -> dict[str, torch.Tensor]:
    """Two sequences of 9 tokens. Row 0: a replaced mention [2, 4) (consistent) and a BEM mention [5, 8) whose
    atomic part [7, 8) is masked; row 1: a replaced mention [1, 3) (inconsistent), the second row padded."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, 40, (2, 9), generator=generator)
    input_ids[:, 0] = 2
    labels = torch.full((2, 9), -100)
    labels[0, 7] = input_ids[0, 7]
    labels[1, 4] = input_ids[1, 4]
    input_ids[0, 7] = input_ids[1, 4] = 4  # [MASK]
    es_labels = torch.full((2, 9), -100)
    es_labels[0, 2:4] = torch.tensor([0, 1])
    es_labels[0, 5:8] = torch.tensor([0, 1, 1])
    es_labels[1, 1:3] = torch.tensor([0, 1])
    return dict(
        input_ids=input_ids,
        attention_mask=torch.tensor([[1] * 9, [1] * 7 + [0] * 2]),
        token_type_ids=torch.zeros(2, 9, dtype=torch.long),
        labels=labels,
        cecp_batch=torch.tensor([0, 1]),
        cecp_spans=torch.tensor([[2, 4], [1, 3]]),
        cecp_labels=torch.tensor([1, 0]),
        es_labels=es_labels,
        bem_batch=torch.tensor([0]),
        bem_context_spans=torch.tensor([[5, 7]]),
        bem_target_spans=torch.tensor([[7, 8]]),
    )


def numpy_of(module: torch.nn.Module) -> dict[str, np.ndarray]:
    return {name: value.detach().double().numpy() for name, value in module.state_dict().items()}


def gelu(x):
    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * weight + bias


def cross_entropy(logits, targets):
    shifted = logits - logits.max(-1, keepdims=True)
    log_probabilities = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return -log_probabilities[np.arange(len(targets)), targets].mean()


@pytest.fixture()
def model_and_output():
    torch.manual_seed(0)
    model = EmbertForPreTraining(tiny_config()).eval()
    batch = tiny_batch()
    with torch.no_grad():
        output = model(**batch)
    return model, batch, output


def test_consistency_loss_is_eq_1_to_3(model_and_output):
    model, batch, output = model_and_output
    x = output.last_hidden_state.double().numpy()
    head, eps = numpy_of(model.consistency), model.config.layer_norm_eps
    h = np.concatenate([x[[0, 1], [1, 0]], x[[0, 1], [4, 3]]], axis=1)  # [x_{s−1}; x_{e+1}]
    y = layer_norm(gelu(h @ head["transform.weight"].T), head["norm.weight"], head["norm.bias"], eps)
    expected = cross_entropy(y @ head["classifier.weight"].T, np.array([1, 0]))
    assert output.losses["cecp"].item() == pytest.approx(expected, rel=1e-5)


def test_segmentation_loss_is_eq_4_and_5(model_and_output):
    model, batch, output = model_and_output
    x = output.last_hidden_state.double().numpy()
    head, eps = numpy_of(model.segmentation), model.config.layer_norm_eps
    rows, columns = np.nonzero(batch["es_labels"].numpy() >= 0)
    assert len(rows) == 7
    inner = layer_norm(gelu(x[rows, columns] @ head["transform.weight"].T), head["norm.weight"], head["norm.bias"], eps)
    y = np.tanh(inner @ head["dense.weight"].T + head["dense.bias"])
    expected = cross_entropy(y @ head["classifier.weight"].T, batch["es_labels"].numpy()[rows, columns])
    assert output.losses["es"].item() == pytest.approx(expected, rel=1e-5)


def test_bidirectional_masking_loss_is_eq_6_to_9(model_and_output):
    model, batch, output = model_and_output
    x = output.last_hidden_state.double().numpy()
    head, eps = numpy_of(model.bidirectional_masking), model.config.layer_norm_eps
    embeddings = model.bert.embeddings.word_embeddings.weight.detach().double().numpy()
    # the atomic part [7, 8) is masked; the adjective part [5, 7) is visible: x_{s_o} = x_5, x_{e_o} = x_6, j − s_m = 0
    h0 = np.concatenate([x[0, 5], x[0, 6], head["positions.weight"][0]])[None]
    h1 = layer_norm(gelu(h0 @ head["first.weight"].T), head["first_norm.weight"], head["first_norm.bias"], eps)
    y = layer_norm(gelu(h1 @ head["second.weight"].T), head["second_norm.weight"], head["second_norm.bias"], eps)
    expected = cross_entropy(y @ embeddings.T, batch["labels"].numpy()[[0], [7]])
    assert output.losses["bem"].item() == pytest.approx(expected, rel=1e-5)


def test_total_is_mlm_plus_weighted_tasks(model_and_output):
    model, batch, output = model_and_output
    assert set(output.losses) == {"mlm", "cecp", "es", "bem"}
    assert output.loss_weights == {"mlm": 1.0, "cecp": 2.0, "es": 2.0, "bem": 0.5}
    logits = output.prediction_logits.double().numpy()
    labels = batch["labels"].numpy()
    rows, columns = np.nonzero(labels >= 0)
    mlm = cross_entropy(logits[rows, columns], labels[rows, columns])
    assert output.losses["mlm"].item() == pytest.approx(mlm, rel=1e-5)
    expected = mlm + 2 * output.losses["cecp"] + 2 * output.losses["es"] + 0.5 * output.losses["bem"]
    assert output.loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert set(output.metrics) == {"mlm_accuracy", "cecp_accuracy", "es_accuracy", "bem_accuracy"}


def test_gradients_reach_every_head(model_and_output):
    model, batch, _ = model_and_output
    model.train()
    model(**batch).loss.backward()
    missing = [name for name, p in model.named_parameters() if p.requires_grad and (p.grad is None or not p.grad.any())]
    assert missing == []


def test_relative_positions_past_the_table_use_its_last_row():
    torch.manual_seed(0)
    head = BidirectionalMaskingHead(tiny_config()).eval()
    states = torch.randn(3, 32)
    near, far = head(states, states, torch.tensor([5, 5, 5])), head(states, states, torch.tensor([5, 9, 60]))
    torch.testing.assert_close(near, far)


def test_ablations_drop_the_head_and_the_loss():
    torch.manual_seed(0)
    batch = tiny_batch()
    for switch, head, loss in (
        ("use_cecp", "consistency", "cecp"),
        ("use_es", "segmentation", "es"),
        ("use_bem", "bidirectional_masking", "bem"),
    ):
        model = EmbertForPreTraining(tiny_config(**{switch: False})).eval()
        assert getattr(model, head) is None
        assert not any(name.startswith(head) for name, _ in model.named_parameters())
        with torch.no_grad():
            assert loss not in model(**batch).losses


def test_batches_without_targets_leave_the_task_out():
    torch.manual_seed(0)
    model = EmbertForPreTraining(tiny_config()).eval()
    batch = tiny_batch()
    batch.update(
        cecp_batch=torch.zeros(0, dtype=torch.long),
        cecp_spans=torch.zeros(0, 2, dtype=torch.long),
        cecp_labels=torch.zeros(0, dtype=torch.long),
        es_labels=torch.full((2, 9), -100),
        bem_batch=torch.zeros(0, dtype=torch.long),
        bem_context_spans=torch.zeros(0, 2, dtype=torch.long),
        bem_target_spans=torch.zeros(0, 2, dtype=torch.long),
    )
    with torch.no_grad():
        output = model(**batch)
    assert set(output.losses) == {"mlm"} and torch.isfinite(output.loss)


def test_record_and_bad_fields():
    spec = get("embert")
    assert spec.artefacts == {"thesaurus", "entity_segments", "entity_frequencies"}
    assert spec.losses == ("mlm", "sop", "cecp", "es", "bem") and spec.default_masking == "bert"
    assert spec.encoding.input_names == ()
    assert set(EmbertConfig.option_names()) >= {
        "cecp_weight",
        "es_weight",
        "bem_weight",
        "use_cecp",
        "use_es",
        "use_bem",
    }
    with pytest.raises(ConfigurationError, match="cecp_rate"):
        EmbertForPreTraining(tiny_config(cecp_rate=1.5))
    with pytest.raises(ConfigurationError, match="bem_position_dim"):
        EmbertForPreTraining(tiny_config(bem_position_dim=0))


def test_save_and_load_give_the_same_model(model_and_output, tmp_path):
    model, batch, output = model_and_output
    model.save_pretrained(tmp_path / "model")
    loaded = load_pretrained(tmp_path / "model").eval()
    assert type(loaded) is EmbertForPreTraining and loaded.config.bem_position_dim == 8
    with torch.no_grad():
        again = loaded(**batch)
    for name, loss in output.losses.items():
        torch.testing.assert_close(again.losses[name], loss)
    torch.testing.assert_close(again.prediction_logits, output.prediction_logits)
