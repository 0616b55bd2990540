"""What the ELECTRA-family real-text tests share: a short run on real dialogues linked to CMeKG, and
fine-tuning its discriminator on cMedQANER through ``kgplm.finetune``."""

from __future__ import annotations

import csv
from pathlib import Path

import torch

import kgplm
from kgplm.models import TINY_TEXT_ENCODER, KgplmForFineTuning


def train_on_dialogues(method: str, store, shared_data: Path, work: Path, **options):
    """80 steps of ``method`` on 120 consultations of the medical dialogue corpus (four logging windows)."""
    source = shared_data / "corpus" / "medical_dialogue" / "sample_IM_5000-6000.utf8.csv"
    with open(source, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))[:120]
    corpus = work / "dialogue.txt"
    corpus.write_text("\n".join((r["ask"] + r["answer"]).replace("\n", " ") for r in rows), encoding="utf-8")
    arguments = dict(
        text_model=dict(TINY_TEXT_ENCODER),
        vocab_size=1500,
        max_steps=80,
        batch_size=16,
        learning_rate=1e-3,
        log_every=20,
        checkpoint_every=80,
        max_length=64,
        progress=False,
    )
    return kgplm.train(method, graph=store, corpus=corpus, output_dir=work / "run", **{**arguments, **options})


def fine_tune_discriminator_on_cmedqaner(run, shared_data: Path, output_dir: Path):
    """Fine-tune ``run``'s model on cMedQANER; check that the encoder fine-tuning starts from is D, as saved."""
    result = kgplm.finetune(
        model=run.output_dir,
        task="cmedqaner",
        data_dir=shared_data / "tasks",
        output_dir=output_dir,
        epochs=1,
        batch_size=16,
        learning_rate=3e-3,
        max_train_examples=160,
        max_eval_examples=60,
        max_length=64,
        progress=False,
    )
    assert 0.0 <= result.test["f1"] <= 1.0 and result.history
    pretrained = run.load_model()
    config = pretrained.config
    config.task_kind, config.task_name, config.label_names = "ner", "cmedqaner", ["O", "B-x", "I-x"]
    tuned = KgplmForFineTuning.from_pretrained(run.model_dir, config=config)
    for name, tensor in pretrained.bert.state_dict().items():
        assert torch.equal(tuned.bert.state_dict()[name], tensor), name
    return result, pretrained
