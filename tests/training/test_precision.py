"""Mixed precision: bf16 autocast on CPU against fp32, the knowledge module's fp32 islands, fp16 scaler resume."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest
import torch

from kgplm.exceptions import ConfigurationError
from kgplm.methods.smedbert import SmedbertForPreTraining
from kgplm.training.precision import autocast, grad_scaler
from kgplm.training.trainer import TrainerSettings, train_loop
from tests.methods.conftest import tiny_config, toy_batch
from tests.training.test_trainer import Rows, _collator, _model


def _smedbert(**overrides):
    torch.manual_seed(0)
    return SmedbertForPreTraining(
        tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **overrides)
    ).eval()


@pytest.mark.parametrize("overrides", [{}, {"relational_encoder": "rgcn"}])
def test_bf16_autocast_on_cpu_stays_close_to_fp32(overrides):
    """Every SMedBERT loss under CPU bf16 autocast within 3% of fp32 on a tiny batch; gradients finite."""
    model = _smedbert(**overrides)
    batch = toy_batch()
    reference = model(**batch)
    with autocast("cpu", "bf16"):
        mixed = model(**batch)
    assert set(mixed.losses) == set(reference.losses) == {"mlm", "sop", "mnem", "mmem"}
    for name, loss in reference.losses.items():
        assert mixed.losses[name].dtype == torch.float32, name  # losses are computed in fp32
        assert float(mixed.losses[name]) == pytest.approx(float(loss), rel=3e-2), name
    mixed.loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_the_knowledge_module_normalises_its_attention_in_fp32_under_autocast():
    """Grouped softmaxes in bf16 would sum to 1 only within ~1e-2; in fp32 within 1e-6."""
    model = _smedbert()
    batch = toy_batch()
    with autocast("cpu", "bf16"):
        model(**batch)
    attention = model.hybrid_attention.node_attention.last_attention
    assert attention.dtype == torch.float32
    sums = torch.zeros(1).index_add_(0, batch["neighbor_mention"], attention)
    torch.testing.assert_close(sums, torch.ones(1), rtol=0, atol=1e-6)


def test_the_loop_in_bf16_follows_the_fp32_loop(tmp_path):
    runs = {}
    for mode in ("no", "bf16"):
        settings = TrainerSettings(
            max_steps=3, batch_size=8, learning_rate=1e-3, log_every=1, checkpoint_every=3, mixed_precision=mode
        )
        runs[mode] = train_loop(
            _model(), Rows(), _collator(), output_dir=tmp_path / mode, settings=settings, progress=False
        )
    for exact, mixed in zip(runs["no"], runs["bf16"]):
        assert mixed["mlm"] == pytest.approx(exact["mlm"], rel=3e-2)
        assert mixed["sop"] == pytest.approx(exact["sop"], rel=3e-2)


def test_an_fp16_run_saves_its_gradient_scaler_and_resumes_to_the_same_losses(tmp_path):
    settings = TrainerSettings(
        max_steps=4, batch_size=8, learning_rate=1e-3, log_every=1, checkpoint_every=2, mixed_precision="fp16"
    )
    whole = train_loop(_model(), Rows(), _collator(), output_dir=tmp_path / "whole", settings=settings, progress=False)
    middle = tmp_path / "whole" / "checkpoints" / "step-0000002"
    state = json.loads((middle / "trainer_state.json").read_text())
    assert state["grad_scaler"]["scale"] == grad_scaler("cpu", "fp16").get_scale()  # no overflow: 2**16 kept
    # a run that stopped after step 2: its checkpoint and its first two logged lines
    shutil.copytree(middle, tmp_path / "resumed" / "checkpoints" / middle.name)
    lines = (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()
    (tmp_path / "resumed" / "metrics.jsonl").write_text("\n".join(lines[:2]) + "\n")
    resumed = train_loop(
        _model(), Rows(), _collator(), output_dir=tmp_path / "resumed", settings=settings, progress=False
    )
    assert resumed == whole
    assert all(np.isfinite(record["loss"]) for record in whole)
    # the resumed run reads the scale from the checkpoint: at 2**100 fp16 gradients overflow, steps are skipped
    edited = tmp_path / "edited" / "checkpoints" / middle.name
    shutil.copytree(middle, edited)
    state["grad_scaler"]["scale"] = 2.0**100
    (edited / "trainer_state.json").write_text(json.dumps(state))
    checksums = json.loads((edited / "checksums.json").read_text())  # the edit is deliberate: record it
    checksums["trainer_state.json"] = hashlib.sha256((edited / "trainer_state.json").read_bytes()).hexdigest()
    (edited / "checksums.json").write_text(json.dumps(checksums))
    train_loop(_model(), Rows(), _collator(), output_dir=tmp_path / "edited", settings=settings, progress=False)
    final = json.loads((tmp_path / "edited" / "checkpoints" / "step-0000004" / "trainer_state.json").read_text())
    assert final["grad_scaler"]["scale"] == 2.0**98  # two overflowing steps, each halving the scale


def test_unknown_precision_fails_early():
    with pytest.raises(ConfigurationError, match="mixed_precision must be one of"):
        TrainerSettings(mixed_precision="fp8").validate()
