"""EMBERT through kgplm.train on real text (CMeKG facts as sentences + medical consultations, the full CMeKG
graph): MLM, ES and BEM decrease, CECP stays at chance (see its test); the run's model fine-tunes on cMedQANER
through kgplm.finetune."""

from __future__ import annotations

import csv
import json
import math
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


def test_mlm_es_bem_decrease_on_real_text(embert_run):
    # measured (steps 20 -> 120): loss 13.87 -> 11.55, mlm 7.39 -> 6.21, es 0.675 -> 0.445, bem 7.44 -> 6.13
    for name, ratio in (("loss", 0.9), ("mlm", 0.9), ("es", 0.8), ("bem", 0.9)):
        curve = embert_run.curve(name)
        assert len(curve) == 6 and curve[-1] < ratio * curve[0] and min(curve) < curve[0], (name, curve)
    kg = embert_run.output_dir / "kg"
    assert (kg / "thesaurus" / "thesaurus.json").is_file() and (kg / "entity_segments" / "segments.json").is_file()
    assert "sop" not in embert_run.metrics[0]


def test_cecp_label_is_not_given_away_by_the_surface(embert_run):
    """CECP stays at chance in a short run from scratch: consistent and inconsistent replacements are
    surfaces of equally common entities of the same type, so only knowing which name belongs to the
    context separates them, which 120 steps do not teach (300 steps of benchmarks/real_text_losses.py
    do not either). The loss sits at ln 2 and the accuracy at 1/2: labels balanced and not readable off
    the replacement's surface (a surface cue would let the head fall below ln 2 without the context).
    This documents a gap against the issue's acceptance (CECP decreasing), not the goal."""
    curve, accuracy = embert_run.curve("cecp"), embert_run.curve("cecp_accuracy")
    assert len(curve) == 6 and all(abs(value - math.log(2)) < 0.05 for value in curve), curve
    assert 0.42 < sum(accuracy) / len(accuracy) < 0.58, accuracy


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
