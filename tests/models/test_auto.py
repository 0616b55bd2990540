"""Hugging Face Auto classes open kgplm directories; transformers.Trainer fine-tunes a kgplm model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

import kgplm.methods  # noqa: F401  (registers the Auto classes)
from kgplm.methods.mlm import KgplmForMaskedLM, MlmConfig
from kgplm.methods.smedbert import SmedbertConfig
from kgplm.models import TINY_TEXT_ENCODER, KgplmForFineTuning, KgplmModel

LEGACY = Path(__file__).resolve().parents[1] / "data" / "legacy_v1"


def _inputs():
    return {k: v for k, v in load_file(str(LEGACY / "inputs.safetensors")).items() if k != "mention_entity_ids"}


def test_auto_classes_open_a_fine_tuned_smedbert_directory():
    directory = LEGACY / "smedbert_ner"
    assert type(AutoConfig.from_pretrained(directory)) is SmedbertConfig
    encoder = AutoModel.from_pretrained(directory).eval()
    tagger = AutoModelForTokenClassification.from_pretrained(directory).eval()
    assert isinstance(encoder, KgplmModel) and isinstance(tagger, KgplmForFineTuning)
    with torch.no_grad():
        logits = tagger(**_inputs()).logits
        hidden = encoder(**_inputs()).last_hidden_state
    # float32 round-off, not bitwise: the expected logits were written on another CPU (see test_legacy_checkpoints)
    torch.testing.assert_close(
        logits, load_file(str(LEGACY / "expected.safetensors"))["smedbert_ner.logits"], rtol=1e-5, atol=1e-6
    )
    assert torch.equal(hidden, tagger(**_inputs()).last_hidden_state)
    assert tagger.config.id2label == {0: "O", 1: "B-x", 2: "I-x"}
    assert tagger.config.label2id == {"O": 0, "B-x": 1, "I-x": 2}


def test_a_pre_trained_model_gets_a_new_head_sized_by_num_labels(tmp_path):
    torch.manual_seed(0)
    pretrained = KgplmForMaskedLM(MlmConfig(vocab_size=60, **TINY_TEXT_ENCODER))
    pretrained.save_pretrained(tmp_path)
    classifier = AutoModelForSequenceClassification.from_pretrained(tmp_path, num_labels=3)
    assert classifier.config.task_kind == "classification" and len(classifier.config.label_names) == 3
    assert torch.equal(
        classifier.bert.embeddings.word_embeddings.weight, pretrained.bert.embeddings.word_embeddings.weight
    )
    output = classifier(input_ids=torch.randint(5, 60, (2, 7)), labels=torch.tensor([0, 2]))
    assert output.logits.shape == (2, 3) and torch.isfinite(output.loss)


def test_transformers_trainer_fine_tunes_a_kgplm_model(tmp_path):
    """The documented recipe: AutoModelForSequenceClassification + transformers.Trainer on a plain task."""
    from transformers import Trainer, TrainingArguments

    torch.manual_seed(0)
    KgplmForMaskedLM(MlmConfig(vocab_size=60, **TINY_TEXT_ENCODER)).save_pretrained(tmp_path / "pre")
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "pre", num_labels=2)
    rng = np.random.default_rng(0)
    # label 1 iff token 7 occurs: learnable in a few steps
    examples = []
    for _ in range(64):
        ids = rng.integers(10, 60, size=8)
        label = int(rng.random() < 0.5)
        if label:
            ids[rng.integers(1, 7)] = 7
        examples.append({"input_ids": torch.tensor([2, *ids.tolist(), 3]), "labels": torch.tensor(label)})
    before = {k: v.clone() for k, v in model.state_dict().items()}
    arguments = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=16,
        num_train_epochs=4,
        learning_rate=3e-3,
        logging_steps=4,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=arguments, train_dataset=examples)
    result = trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert np.isfinite(result.training_loss) and losses[-1] < losses[0]
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert any(k.startswith("head.") for k in changed) and any(k.startswith("bert.") for k in changed)
