"""GPU smoke tests of the CUDA paths (skipped without CUDA; run them on a GPU machine from the source tree).

``python -m pytest tests/training/test_gpu.py`` checks: SMedBERT's knowledge module makes no
host–device synchronisation on a collated batch (``torch.cuda.set_sync_debug_mode("error")``);
``kgplm.train`` on CUDA in bf16 with DataLoader workers and pinned memory follows the CPU fp32 run;
with two GPUs, ``torchrun`` on nccl equals one GPU.
"""

from __future__ import annotations

import json

import pytest
import torch

import kgplm
from kgplm.methods.smedbert import SmedbertForPreTraining
from kgplm.methods.smedbert.modeling import KNOWLEDGE_INDEX_INPUTS, KNOWLEDGE_INPUTS, SMEDBERT_ENCODING
from tests.methods.conftest import tiny_config
from tests.methods.test_smedbert_batching import _collator, _rows, _seeds
from tests.test_api import TOY_GRAPH, write_toy_corpus
from tests.training.test_distributed import TEXT_MODEL

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_the_knowledge_module_makes_no_host_device_synchronisation_on_cuda():
    batch = _collator(num_entity_types=2, relational=True)(_rows(), _seeds(3)).to("cuda")
    torch.manual_seed(0)
    model = SmedbertForPreTraining(
        tiny_config(neighbor_candidates="one_hop", num_entity_types=2, relational_encoder="rgcn")
    ).cuda()
    knowledge = {k: batch[k] for k in KNOWLEDGE_INPUTS + KNOWLEDGE_INDEX_INPUTS if k in batch}
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            encoded = SMEDBERT_ENCODING.encode(model, batch["input_ids"], None, batch["token_type_ids"], **knowledge)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert encoded.extras["mention_index"] is not None and torch.isfinite(encoded.last_hidden_state).all()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_toy_corpus(tmp_path_factory.mktemp("gpu") / "notes.txt")


def _train(corpus, output_dir, **overrides):
    arguments = dict(
        graph=str(TOY_GRAPH),
        corpus=str(corpus),
        output_dir=output_dir,
        text_model=TEXT_MODEL,
        vocab_size=300,
        entity_dim=16,
        kg_epochs=5,
        max_steps=4,
        batch_size=8,
        learning_rate=2e-3,
        checkpoint_every=4,
        log_every=1,
        max_length=64,
        progress=False,
    )
    return kgplm.train("smedbert", **{**arguments, **overrides})


def test_training_on_cuda_in_bf16_with_workers_follows_the_cpu(corpus, tmp_path):
    cpu = _train(corpus, tmp_path / "cpu")
    gpu = _train(corpus, tmp_path / "gpu", device="cuda", mixed_precision="bf16", num_workers=2)
    for a, b in zip(cpu.metrics, gpu.metrics):
        assert b["mlm"] == pytest.approx(a["mlm"], rel=5e-2)
        assert all(value == value for value in b.values())  # no NaN


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_two_gpus_on_nccl_equal_one(corpus, tmp_path):
    from tests.training.test_distributed import _launch

    one = _train(corpus, tmp_path / "one", device="cuda", max_steps=8, checkpoint_every=2)
    _launch({"work": tmp_path, "corpus": corpus}, tmp_path / "two", extra=("--device", "cuda"))
    two = [json.loads(line) for line in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    assert json.loads((tmp_path / "two" / "run_config.json").read_text())["stages"]["distributed"] == {
        "world_size": 2,
        "backend": "nccl",
    }
    for a, b in zip(one.metrics, two):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-4)
