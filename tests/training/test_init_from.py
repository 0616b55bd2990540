"""Continued pre-training (``kgplm.train(init_from=...)``, issue 28.1): a run starts from another
kgplm run's weights, sizes and tokenizer; the method's own modules start fresh."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

import kgplm
from kgplm.exceptions import ArtifactError, ConfigurationError, MissingFileError
from tests.helpers import replace_weights
from tests.test_api import toy_arguments, write_toy_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_toy_corpus(tmp_path_factory.mktemp("corpus") / "notes.txt")


@pytest.fixture(scope="module")
def mlm_base(corpus, tmp_path_factory):
    return kgplm.train(
        "mlm",
        **toy_arguments(corpus, tmp_path_factory.mktemp("mlm-base"), max_steps=10, model_options={"use_sop": True}),
    )


@pytest.fixture(scope="module")
def electra_base(corpus, tmp_path_factory):
    return kgplm.train("electra", **toy_arguments(corpus, tmp_path_factory.mktemp("electra-base"), max_steps=10))


def _continued(method, base, corpus, output_dir, **overrides):
    # a learning rate of 1e-12 leaves the weights where the run started, so the saved model shows its start
    arguments = toy_arguments(
        corpus,
        output_dir,
        text_model=None,
        init_from=str(base.output_dir),
        max_steps=1,
        learning_rate=1e-12,
        warmup_steps=0,
    )
    arguments.update(overrides)
    return kgplm.train(method, **arguments)


def _shared_tensors(base_dir, run_dir):
    base = load_file(str(base_dir / "model" / "model.safetensors"))
    run = load_file(str(run_dir / "model" / "model.safetensors"))
    return base, run, sorted(set(base) & set(run))


@pytest.mark.parametrize("method", ["smedbert", "kebiolm"])
def test_a_bert_style_method_continues_from_the_mlm_base(method, mlm_base, corpus, tmp_path):
    run = _continued(method, mlm_base, corpus, tmp_path / method)
    base, ours, shared = _shared_tensors(mlm_base.output_dir, run.output_dir)
    assert any("encoder.layer.3" in name for name in shared) or any("encoder.layer.1" in name for name in shared)
    assert any(name.startswith("mlm") or ".mlm" in name or "predictions" in name for name in shared), shared
    for name in shared:
        torch.testing.assert_close(ours[name], base[name], rtol=0, atol=1e-6, msg=name)
    record = run.run_config["stages"]["init_from"]
    assert (
        record["sha256"]
        == hashlib.sha256((mlm_base.output_dir / "model" / "model.safetensors").read_bytes()).hexdigest()
    )
    assert record["loaded"] == len(shared)
    assert record["new"], "the method's own modules start fresh"
    assert set(record["new"]).isdisjoint(shared)
    # the tied MLM decoder (the word embeddings) and its bias were loaded through their other names
    assert not any(name.startswith("cls.predictions") for name in record["new"]), record["new"]
    # the base's vocabulary, not one trained anew
    assert (run.output_dir / "tokenizer" / "vocab.txt").read_text(encoding="utf-8") == (
        mlm_base.output_dir / "tokenizer" / "vocab.txt"
    ).read_text(encoding="utf-8")
    assert json.loads((run.output_dir / "run_config.json").read_text())["init_from"] == str(mlm_base.output_dir)


def test_a_run_from_scratch_differs_from_the_base(mlm_base, corpus, tmp_path):
    """The check above can fail: without init_from the same call does not start at the base's weights."""
    run = kgplm.train(
        "smedbert",
        **toy_arguments(corpus, tmp_path / "scratch", max_steps=1, learning_rate=1e-12, warmup_steps=0, vocab_size=300),
    )
    base, ours, shared = _shared_tensors(mlm_base.output_dir, run.output_dir)
    differing = [
        name
        for name in shared
        if ours[name].shape == base[name].shape and not torch.allclose(ours[name], base[name], atol=1e-6)
    ]
    assert differing


def test_the_electra_family_continues_generator_and_discriminator(electra_base, corpus, tmp_path):
    run = _continued("ehealth", electra_base, corpus, tmp_path / "ehealth")
    base, ours, shared = _shared_tensors(electra_base.output_dir, run.output_dir)
    assert any(name.startswith("generator.") for name in shared)
    assert any("encoder.layer" in name and not name.startswith("generator.") for name in shared)
    for name in shared:
        torch.testing.assert_close(ours[name], base[name], rtol=0, atol=1e-6, msg=name)


def test_continuing_then_training_moves_away_from_the_base(mlm_base, corpus, tmp_path):
    run = _continued(
        "mlm", mlm_base, corpus, tmp_path / "moves", learning_rate=1e-3, max_steps=3, model_options={"use_sop": True}
    )
    base, ours, shared = _shared_tensors(mlm_base.output_dir, run.output_dir)
    assert set(base) == set(ours)
    assert any(not torch.allclose(ours[name], base[name]) for name in shared)


def test_a_continued_run_resumes_only_from_the_weights_it_started_from(mlm_base, corpus, tmp_path):
    """Called again after the model it continued was replaced at the same path, a run that has trained
    refuses (its checkpoints and model descend from the earlier weights); with them back it goes on."""
    base = tmp_path / "base"
    shutil.copytree(mlm_base.output_dir, base)
    arguments = dict(init_from=str(base), model_options={"use_sop": True}, max_steps=2, checkpoint_every=1)
    first = _continued("mlm", mlm_base, corpus, tmp_path / "run", **arguments)
    weights = base / "model" / "model.safetensors"
    original = replace_weights(weights)
    with pytest.raises(ArtifactError, match="Put the earlier weights back"):
        _continued("mlm", mlm_base, corpus, tmp_path / "run", **arguments)
    assert _continued("mlm", mlm_base, corpus, tmp_path / "other", **arguments).output_dir.is_dir()
    weights.write_bytes(original)
    again = _continued("mlm", mlm_base, corpus, tmp_path / "run", **arguments)
    assert again.metrics == first.metrics


def test_bad_init_from_fails_before_anything_is_written(mlm_base, corpus, tmp_path):
    with pytest.raises(MissingFileError, match="init_from"):
        _continued("smedbert", mlm_base, corpus, tmp_path / "a", init_from=str(tmp_path / "nowhere"))
    with pytest.raises(ConfigurationError, match="text_model must be None"):
        _continued("smedbert", mlm_base, corpus, tmp_path / "b", text_model={"hidden_size": 32})
    from kgplm.text.tokenization import build_vocab

    build_vocab(
        ["患者主诉头痛三天"], vocab_size=12, min_frequency=1, output_dir=tmp_path / "small", show_progress=False
    )
    with pytest.raises(ConfigurationError, match="vocabulary"):
        _continued("smedbert", mlm_base, corpus, tmp_path / "c", tokenizer=str(tmp_path / "small"))
    # the same size, other pieces: two tokens of the base's vocabulary swapped
    pieces = (mlm_base.output_dir / "tokenizer" / "vocab.txt").read_text(encoding="utf-8").splitlines()
    pieces[10], pieces[11] = pieces[11], pieces[10]
    (tmp_path / "swapped").mkdir()
    (tmp_path / "swapped" / "vocab.txt").write_text("\n".join(pieces) + "\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="numbers 2 pieces differently"):
        _continued("smedbert", mlm_base, corpus, tmp_path / "d", tokenizer=str(tmp_path / "swapped"))
    # the base's own tokenizer passed explicitly is accepted (experiments/replicate.py passes the shared one)
    _continued(
        "mlm",
        mlm_base,
        corpus,
        tmp_path / "e",
        tokenizer=str(mlm_base.output_dir / "tokenizer"),
        model_options={"use_sop": True},
    )
    for name in "abcd":
        assert not (tmp_path / name / "run_config.json").exists()
