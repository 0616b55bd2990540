"""The training loop: exact gradient accumulation, what is logged, steps without targets, resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from kgplm.exceptions import ConfigurationError
from kgplm.methods.mlm import KgplmForMaskedLM, MlmConfig
from kgplm.models import TINY_TEXT_ENCODER
from kgplm.models.modules import PretrainingOutput
from kgplm.text.masking import Masker
from kgplm.training.collator import Batch, PretrainingCollator
from kgplm.training.trainer import TrainerSettings, train_loop

CLS, SEP, PAD, MASK = 2, 3, 0, 4


class Rows:
    """A tiny stand-in for a ``datasets.Dataset``: rows of ids, each a chunk of varying length."""

    def __init__(self, count: int = 40, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.ids = [[CLS, *rng.integers(5, 60, size=int(rng.integers(3, 30))).tolist(), SEP] for _ in range(count)]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, indices):
        return {"input_ids": [self.ids[i] for i in np.asarray(indices).tolist()]}


def _collator():
    masker = Masker("bert", mask_token_id=MASK, vocab_size=60, special_token_ids=[PAD, 1, CLS, SEP])
    return PretrainingCollator(masker=masker, cls_token_id=CLS, sep_token_id=SEP, pad_token_id=PAD, sentence_order=True)


def _model():
    torch.manual_seed(0)
    return KgplmForMaskedLM(
        MlmConfig(
            vocab_size=60, use_sop=True, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **TINY_TEXT_ENCODER
        )
    )


def test_accumulated_micro_batches_equal_one_batch(tmp_path):
    """8 examples per step as 1 × 8 or 4 × 2: the same losses and the same weights (up to float order).

    Micro-batches hold different numbers of MLM targets, so averaging their means equally would not
    give the batch mean; the loop weights each by its share of the step's targets.
    """
    runs = {}
    for accumulation in (1, 4):
        model = _model()
        settings = TrainerSettings(
            max_steps=6,
            batch_size=8,
            gradient_accumulation_steps=accumulation,
            learning_rate=1e-3,
            log_every=1,
            checkpoint_every=6,
        )
        metrics = train_loop(
            model, Rows(), _collator(), output_dir=tmp_path / str(accumulation), settings=settings, progress=False
        )
        runs[accumulation] = (metrics, model.state_dict())
    (one, weights_one), (four, weights_four) = runs[1], runs[4]
    for a, b in zip(one, four):
        for key in ("loss", "mlm", "sop"):
            assert a[key] == pytest.approx(b[key], rel=1e-5), (key, a, b)
    for name in weights_one:
        torch.testing.assert_close(weights_one[name], weights_four[name], rtol=1e-4, atol=1e-6)


def test_batch_size_must_split_into_the_micro_batches():
    with pytest.raises(ConfigurationError, match="multiple of gradient_accumulation_steps"):
        TrainerSettings(batch_size=10, gradient_accumulation_steps=4).validate()


class _Scripted(torch.nn.Module):
    """Loss "a" = 1 every step; loss "b" = 2 on even steps only; a learnable scalar to step."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(()))

    def forward(self, step):
        output = PretrainingOutput(losses={}, loss_weights={}, metrics={})
        if int(step) >= 0:
            output.add("a", self.w * 0 + 1.0)
        if int(step) >= 0 and int(step) % 2 == 0:
            output.add("b", self.w * 0 + 2.0)
        return output


class _StepRows:
    def __len__(self):
        return 100

    def __getitem__(self, indices):
        return {"index": np.asarray(indices)}


def _scripted_collator(no_target_steps=()):
    calls = {"n": 0}

    def collate(rows, seeds):
        step = calls["n"]
        calls["n"] += 1
        return Batch({"step": torch.tensor(-1 if step in no_target_steps else step)})

    return collate


def test_a_loss_absent_from_some_steps_is_averaged_over_the_steps_that_computed_it(tmp_path):
    settings = TrainerSettings(max_steps=4, batch_size=1, log_every=4, checkpoint_every=4)
    metrics = train_loop(
        _Scripted(), _StepRows(), _scripted_collator(), output_dir=tmp_path, settings=settings, progress=False
    )
    assert metrics[0]["a"] == pytest.approx(1.0)
    assert metrics[0]["b"] == pytest.approx(2.0)  # not (2 + 0 + 2 + 0) / 4
    assert metrics[0]["loss"] == pytest.approx((3 + 1 + 3 + 1) / 4)


def test_the_logged_learning_rate_is_the_one_the_step_used(tmp_path):
    settings = TrainerSettings(
        max_steps=6, batch_size=1, log_every=1, checkpoint_every=6, learning_rate=1.0, warmup_steps=4
    )
    metrics = train_loop(
        _Scripted(), _StepRows(), _scripted_collator(), output_dir=tmp_path, settings=settings, progress=False
    )
    # step s (0-based) uses min((s + 1) / 4, (6 - s) / 2): warm-up over 4 steps, then linear decay
    assert [m["learning_rate"] for m in metrics] == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0, 0.5])


def test_a_step_without_any_target_changes_no_weight_and_is_not_logged_as_zero(tmp_path, caplog):
    model = _Scripted()
    settings = TrainerSettings(max_steps=4, batch_size=1, log_every=2, checkpoint_every=4, weight_decay=0.5)
    metrics = train_loop(
        model,
        _StepRows(),
        _scripted_collator(no_target_steps={2, 3}),
        output_dir=tmp_path,
        settings=settings,
        progress=False,
    )
    assert "a" in metrics[0] and "a" not in metrics[1]  # the second window had no loss at all
    assert metrics[1]["learning_rate"] > 0
    assert "no objective had a target" in caplog.text
    state = json.loads((tmp_path / "checkpoints" / "step-0000004" / "trainer_state.json").read_text())
    assert state["step"] == 4


def test_a_resumed_run_removes_the_checkpoint_a_killed_run_left_half_written(tmp_path):
    """A run killed while writing a checkpoint leaves its temporary directory (as large as a checkpoint); the
    resumed run deletes it, keeps the finished checkpoints and resumes from the last of them."""
    settings = TrainerSettings(max_steps=4, batch_size=1, log_every=2, checkpoint_every=2, keep_checkpoints=2)
    train_loop(_Scripted(), _StepRows(), _scripted_collator(), output_dir=tmp_path, settings=settings, progress=False)
    checkpoints = tmp_path / "checkpoints"
    half_written = checkpoints / ".step-0000006.tmp-x1y2z3"
    half_written.mkdir()
    (half_written / "model.safetensors").write_bytes(b"\0" * 64)
    foreign = checkpoints / "notes"  # not the trainer's: left alone
    foreign.mkdir()
    longer = TrainerSettings(max_steps=6, batch_size=1, log_every=2, checkpoint_every=2, keep_checkpoints=2)
    metrics = train_loop(
        _Scripted(), _StepRows(), _scripted_collator(), output_dir=tmp_path, settings=longer, progress=False
    )
    assert [m["step"] for m in metrics] == [2, 4, 6]
    assert sorted(p.name for p in checkpoints.iterdir()) == ["notes", "step-0000004", "step-0000006"]
