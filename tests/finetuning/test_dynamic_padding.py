"""Fine-tuning pads each batch to its own longest sequence (dynamic padding), and padding changes no logit:
a document's token logits in a batch padded to a longer neighbour equal its logits alone within 1e-6 —
for a plain encoder and for SMedBERT, whose batches also carry linked mentions and their neighbours."""

from __future__ import annotations

import numpy as np
import pytest

import kgplm
from kgplm.evaluation.tasks import get_task, load_task
from kgplm.methods import get
from kgplm.models import load_pretrained
from kgplm.text.tokenization import load_tokenizer
from kgplm.finetuning.encoding import TaskEncoder
from kgplm.finetuning.loop import predict
from kgplm.training.run import locate_model
from tests.test_api import toy_arguments, write_toy_corpus


@pytest.mark.parametrize("method", ["mlm", "smedbert"])
def test_padding_changes_no_logit_and_batches_are_padded_to_their_longest(method, shared_data, tmp_path):
    corpus = write_toy_corpus(tmp_path / "notes.txt")
    run = kgplm.train(method, **toy_arguments(corpus, tmp_path / "run", max_steps=3))
    fine = kgplm.finetune(
        model=run.output_dir,
        task="cmedqaner",
        data_dir=shared_data / "tasks",
        output_dir=tmp_path / "fine",
        epochs=1,
        batch_size=8,
        learning_rate=3e-3,
        max_length=64,
        max_train_examples=16,
        max_eval_examples=8,
        progress=False,
    )
    model_dir, tokenizer_dir, pretrained = locate_model(fine.output_dir)
    network = load_pretrained(str(model_dir))
    knowledge = get(method).finetuning_inputs(pretrained, False) if method == "smedbert" else None
    encoder = TaskEncoder(
        get_task("cmedqaner"),
        load_tokenizer(tokenizer_dir),
        label_names=network.config.label_names,
        max_length=64,
        knowledge=knowledge,
    )
    examples = load_task("cmedqaner", shared_data / "tasks", "test")[:40]
    features = sorted(encoder.encode(examples), key=lambda f: len(f["input_ids"]))
    short, long = features[0], features[-1]
    assert len(short["input_ids"]) < len(long["input_ids"])
    batch = encoder.collate([short, long])
    assert batch["input_ids"].shape[1] == len(long["input_ids"])  # the batch's own longest, not max_length
    assert encoder.collate([short])["input_ids"].shape[1] == len(short["input_ids"])
    if knowledge is not None:
        assert any(len(f["knowledge"]["mention_spans"]) for f in features)  # some documents carry mentions
    alone = [predict(network, encoder, [feature])[0] for feature in features]
    together = predict(network, encoder, features, batch_size=len(features))  # padded to the longest
    for single, padded in zip(alone, together):
        assert single.shape == padded.shape
        np.testing.assert_allclose(padded, single, atol=1e-6, rtol=0)
