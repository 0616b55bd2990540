"""Checkpoints are byte-identical for the same state and load back exactly (tied weights included)."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil

import pytest
import torch
from safetensors.torch import load_file

from kgplm.exceptions import ArtifactError
from kgplm.training.checkpoints import CHECKPOINT_FILES, load_checkpoint, save_checkpoint, verify_checkpoint


def _tied_model(seed: int = 0):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=40,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
    )
    return BertForMaskedLM(config)  # the decoder's weight and bias are tied: safetensors cannot store them twice


def _trained_state(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    ids = torch.arange(12).reshape(2, 6)
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    scheduler.step()
    return optimizer, scheduler


def test_the_same_state_saves_the_same_bytes_and_loads_back(tmp_path):
    """safetensors writes a header's metadata in hash-map order; with the tied names in it (two keys for
    BERT's tied decoder) the same model saved twice differed byte-wise about every other time."""
    model = _tied_model()
    optimizer, scheduler = _trained_state(model)
    hashes = set()
    for index in range(12):
        path = save_checkpoint(tmp_path / f"run-{index}", model, optimizer, scheduler, {"step": 1}, keep=1)
        hashes.add(
            tuple(
                hashlib.sha256((path / name).read_bytes()).hexdigest()
                for name in ("model.safetensors", "optimizer.safetensors", "trainer_state.json")
            )
        )
    assert len(hashes) == 1

    other = _tied_model(seed=1)
    other_optimizer, other_scheduler = _trained_state(other)
    state = load_checkpoint(path, other, other_optimizer, other_scheduler)
    assert state == {"step": 1}
    expected, loaded = model.state_dict(), other.state_dict()
    assert expected.keys() == loaded.keys() and all(torch.equal(expected[name], loaded[name]) for name in expected)
    assert other.cls.predictions.decoder.weight.data_ptr() == other.bert.embeddings.word_embeddings.weight.data_ptr()


# -- damaged checkpoints: resume verifies the checksums and falls back to the one before ----------------------
def _fit_run(output_dir, **overrides):
    from kgplm.training.trainer import TrainerSettings, train_loop
    from tests.training.helpers import Fit, FitRows, fit_collate

    settings = TrainerSettings(
        **{
            **dict(
                max_steps=6,
                batch_size=4,
                learning_rate=0.1,
                log_every=1,
                checkpoint_every=2,
                keep_checkpoints=3,
                weight_decay=0.0,
            ),
            **overrides,
        }
    )
    return train_loop(Fit(), FitRows(), fit_collate, output_dir=output_dir, settings=settings, progress=False)


def _flip_a_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _cut_in_half(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("damage", ["flip model", "truncate optimizer", "truncate state", "legacy truncated model"])
def test_a_damaged_last_checkpoint_falls_back_to_the_previous_one(tmp_path, caplog, damage):
    reference = _fit_run(tmp_path / "whole")
    run = tmp_path / "run"
    _fit_run(run)
    shutil.rmtree(run / "checkpoints" / "step-0000006")  # killed during step 6: step 4 is the last checkpoint
    last = run / "checkpoints" / "step-0000004"
    if damage == "flip model":
        _flip_a_byte(last / "model.safetensors")
    elif damage == "truncate optimizer":
        _cut_in_half(last / "optimizer.safetensors")
    elif damage == "truncate state":
        _cut_in_half(last / "trainer_state.json")
    else:  # a checkpoint written before checksums: the load itself fails
        (last / "checksums.json").unlink()
        _cut_in_half(last / "model.safetensors")
    with caplog.at_level(logging.WARNING, logger="kgplm.training.checkpoints"):
        resumed = _fit_run(run)
    assert f"checkpoint {last} is damaged" in caplog.text and "falling back" in caplog.text
    assert resumed == reference  # from step 2, to the same losses
    weights = [
        load_file(str(path / "checkpoints" / "step-0000006" / "model.safetensors"))["w"]
        for path in (tmp_path / "whole", run)
    ]
    assert weights[0].tolist() == weights[1].tolist()


def test_a_run_whose_every_checkpoint_is_damaged_is_refused(tmp_path):
    _fit_run(tmp_path)
    for path in sorted((tmp_path / "checkpoints").iterdir()):
        _flip_a_byte(path / "optimizer.safetensors")
    with pytest.raises(ArtifactError, match="every checkpoint .* is damaged"):
        _fit_run(tmp_path, max_steps=8)


def test_a_checkpoint_records_the_checksum_of_each_file(tmp_path):
    model = _tied_model()
    optimizer, scheduler = _trained_state(model)
    path = save_checkpoint(tmp_path, model, optimizer, scheduler, {"step": 1}, keep=1)
    recorded = json.loads((path / "checksums.json").read_text())
    assert recorded == {name: hashlib.sha256((path / name).read_bytes()).hexdigest() for name in CHECKPOINT_FILES}
    verify_checkpoint(path)
    _flip_a_byte(path / "trainer_state.json")
    with pytest.raises(ArtifactError, match="trainer_state.json: its SHA-256 differs"):
        verify_checkpoint(path)


def test_checkpoints_written_before_checksums_resume_as_they_are(tmp_path, caplog):
    reference = _fit_run(tmp_path / "whole")
    run = tmp_path / "run"
    _fit_run(run)
    shutil.rmtree(run / "checkpoints" / "step-0000006")
    for path in (run / "checkpoints").iterdir():
        (path / "checksums.json").unlink()  # the format before checksums
    with caplog.at_level(logging.WARNING, logger="kgplm.training.checkpoints"):
        assert _fit_run(run) == reference
    assert "damaged" not in caplog.text
