"""KeBioLM through kgplm.train on real text (CMeKG facts as sentences + medical dialogues) and
kgplm.finetune on cMedQANER, where the encoder fuses the mentions it detects itself."""

from __future__ import annotations

import csv

import pytest
import torch

import kgplm
from kgplm.models import TINY_TEXT_ENCODER


@pytest.fixture(scope="module")
def kebiolm_run(cmekg_store, shared_data, tmp_path_factory):
    from kgplm.demo import verbalize_triples

    source = shared_data / "corpus" / "medical_dialogue" / "sample_IM_5000-6000.utf8.csv"
    with open(source, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))[:300]
    work = tmp_path_factory.mktemp("kebiolm_real")
    corpus = work / "text.txt"
    texts = verbalize_triples(cmekg_store, 300) + [(r["ask"] + r["answer"]).replace("\n", " ") for r in rows]
    corpus.write_text("\n".join(texts), encoding="utf-8")
    return kgplm.train(
        "kebiolm",
        graph=cmekg_store,
        corpus=corpus,
        output_dir=work / "run",
        text_model=dict(TINY_TEXT_ENCODER),
        vocab_size=2000,
        entity_dim=32,
        kg_epochs=1,
        max_steps=60,
        batch_size=16,
        learning_rate=2e-3,
        log_every=10,
        checkpoint_every=60,
        max_length=128,
        progress=False,
    )


@pytest.mark.slow
def test_mlm_detection_and_linking_losses_decrease_on_real_text(kebiolm_run):
    assert kebiolm_run.run_config["masking"] == "word_entity"  # words and mentions whole (§3.2)
    assert kebiolm_run.load_model().entity_memory.weight.shape[1] == 32  # the TransE table's size
    for name in ("loss", "mlm", "ed", "el"):
        curve = kebiolm_run.curve(name)
        assert len(curve) == 6 and curve[-1] < 0.9 * curve[0], (name, curve)


@pytest.mark.slow
def test_ner_fine_tuning_uses_the_encoder_s_own_detections(kebiolm_run, shared_data, tmp_path):
    from kgplm.evaluation.tasks import get_task, load_task
    from kgplm.methods.kebiolm.detection import candidate_positions, decode_spans
    from kgplm.models import load_pretrained
    from kgplm.finetuning.encoding import TaskEncoder

    result = kgplm.finetune(
        model=kebiolm_run.output_dir,
        task="cmedqaner",
        data_dir=shared_data / "tasks",
        output_dir=tmp_path / "ner",
        epochs=1,
        batch_size=16,
        learning_rate=5e-4,
        max_train_examples=96,
        max_eval_examples=32,
        max_length=96,
        progress=False,
    )
    assert 0.0 <= result.dev["main"] <= 1.0 and 0.0 <= result.test["main"] <= 1.0
    model = load_pretrained(result.model_dir).eval()
    assert model.encoding.input_names == ()  # no linker input at fine-tuning: nothing but the text
    examples = load_task("cmedqaner", shared_data / "tasks", "test")[:16]
    encoder = TaskEncoder(
        get_task("cmedqaner"), kebiolm_run.load_tokenizer(), label_names=model.config.label_names, max_length=96
    )
    batch = encoder.collate(encoder.encode(examples))
    batch.pop("labels")
    with torch.no_grad():
        extras = model.encoding.encode(model, **batch).extras
    expected_batch, expected_spans = decode_spans(
        extras["detection_logits"].argmax(-1), candidate_positions(batch["attention_mask"], batch["token_type_ids"])
    )
    assert len(expected_spans) > 0  # the pre-trained detector finds mentions in unseen NER text
    assert torch.equal(extras["mention_batch"], expected_batch) and torch.equal(extras["mention_spans"], expected_spans)
    assert extras["retrieved_ids"].shape == (len(expected_spans), model.config.num_retrieved)
