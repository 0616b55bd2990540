"""EMBERT through kgplm.train on real text (CMeKG facts as sentences + medical consultations, the full CMeKG
graph): MLM, CECP, ES and BEM all decrease; the run's model fine-tunes on cMedQANER through kgplm.finetune."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import kgplm
from kgplm.models import TINY_TEXT_ENCODER

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def embert_run(cmekg_store, shared_data, tmp_path_factory):
    from kgplm.demo import verbalize_triples

    with open(shared_data / "corpus" / "medical_dialogue" / "sample_IM_5000-6000.utf8.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))[:400]
    texts = verbalize_triples(cmekg_store, 400) + [(r["ask"] + r["answer"]).replace("\n", " ") for r in rows]
    work = tmp_path_factory.mktemp("embert")
    corpus = work / "medical.txt"
    corpus.write_text("\n".join(texts), encoding="utf-8")
    return kgplm.train("embert", graph=cmekg_store, corpus=corpus, output_dir=work / "run",
                       text_model=dict(TINY_TEXT_ENCODER), vocab_size=2000, max_steps=120, batch_size=16,
                       learning_rate=2e-3, log_every=20, checkpoint_every=120, max_length=128, progress=False)


def test_all_four_losses_decrease_on_real_text(embert_run):
    for name in ("loss", "mlm", "cecp", "es", "bem"):
        curve = embert_run.curve(name)
        assert len(curve) == 6 and curve[-1] < curve[0], (name, curve)
    assert embert_run.curve("mlm")[-1] < 0.8 * embert_run.curve("mlm")[0]
    assert embert_run.curve("bem")[-1] < 0.8 * embert_run.curve("bem")[0]
    assert embert_run.curve("es")[-1] < 0.8 * embert_run.curve("es")[0]
    assert embert_run.curve("cecp")[-1] < 0.95 * embert_run.curve("cecp")[0]
    kg = embert_run.output_dir / "kg"
    assert (kg / "thesaurus" / "thesaurus.json").is_file() and (kg / "entity_segments" / "segments.json").is_file()
    assert "sop" not in embert_run.metrics[0]


def test_fine_tunes_on_cmedqaner(embert_run, shared_data, tmp_path):
    result = kgplm.finetune(model=embert_run.output_dir, task="cmedqaner", data_dir=shared_data / "tasks",
                            output_dir=tmp_path / "ner", epochs=4, batch_size=16, learning_rate=3e-3,
                            max_train_examples=300, max_eval_examples=100, patience=10, progress=False)
    assert result.history[-1]["train_loss"] < 0.7 * result.history[0]["train_loss"]
    assert result.test["f1"] > 0.0, result.test
    config = json.loads((tmp_path / "ner" / "finetune_config.json").read_text(encoding="utf-8"))
    assert config["model"] == str(Path(embert_run.output_dir).resolve())
    tuned = result.load_model()
    pretrained = embert_run.load_model()
    assert tuned.config.method == "embert" and type(tuned).__name__ == "KgplmForFineTuning"
    # the encoder came from the pre-training run: same vocabulary and shapes, trained on from there
    assert tuned.bert.embeddings.word_embeddings.weight.shape == pretrained.bert.embeddings.word_embeddings.weight.shape
