"""Checkpoints are byte-identical for the same state and load back exactly (tied weights included)."""

from __future__ import annotations

import hashlib

import torch

from kgplm.training.checkpoints import load_checkpoint, save_checkpoint


def _tied_model(seed: int = 0):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                        max_position_embeddings=16)
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
        hashes.add(tuple(hashlib.sha256((path / name).read_bytes()).hexdigest()
                         for name in ("model.safetensors", "optimizer.safetensors", "trainer_state.json")))
    assert len(hashes) == 1

    other = _tied_model(seed=1)
    other_optimizer, other_scheduler = _trained_state(other)
    state = load_checkpoint(path, other, other_optimizer, other_scheduler)
    assert state == {"step": 1}
    expected, loaded = model.state_dict(), other.state_dict()
    assert expected.keys() == loaded.keys() and all(torch.equal(expected[name], loaded[name]) for name in expected)
    assert other.cls.predictions.decoder.weight.data_ptr() == other.bert.embeddings.word_embeddings.weight.data_ptr()
