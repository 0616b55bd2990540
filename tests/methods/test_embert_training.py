"""EMBERT's training: CECP is learnable (a positive control whose inconsistent replacements share one surface,
and a toy corpus whose label only the context fixes), and through kgplm.train on real text (CMeKG facts as
sentences + medical consultations, the full CMeKG graph) MLM, ES and BEM decrease and the run's model fine-tunes
on cMedQANER through kgplm.finetune.

CECP from scratch on real text stays at chance in a short run (issue 27.12): the shipped negatives are
surfaces of equally common entities of the same type, so the label is a pairing of the context with a
name that a small encoder trained for a few hundred steps does not know; the real construction from a
pre-trained base belongs to the replication run. The learnability tests below show that the head, its
positions and its labels work, and that CECP leaves chance when the context fixes the answer."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import kgplm
from kgplm.methods.embert import EmbertConfig, EmbertForPreTraining
from kgplm.models import TINY_TEXT_ENCODER

CLS, SEP = 2, 3
FILLER = range(5, 25)  # ordinary tokens
FIXED_SURFACE = (26, 27)  # the positive control's one inconsistent surface
FIRST_NAME = 30  # entity e's two names: (30 + 4e, 31 + 4e) and (32 + 4e, 33 + 4e)


#: (entities, steps), each measured to leave chance: held-out accuracy 1.00 and 0.94 (at half the steps
#: 0.58 and 0.54); the fixed-surface control reaches 1.00 at 150 steps
SWEEP = [(2, 200), (4, 400)]


def consistency_batch(rng: np.random.Generator, entities: int, size: int, fixed_surface: bool) -> dict:
    """Sequences that name an entity X and, in apposition ("X（Y）"), a replaced mention Y between fillers
    of random length: Y is X's entity's other name (consistent, label 1) or a name of another entity
    (inconsistent, 0) — or, with ``fixed_surface``, always the same surface (the positive control). Every
    name is as often a consistent as an inconsistent Y, so only X (the context) fixes the label."""
    sequences, spans, labels = [], [], []
    for _ in range(size):
        entity = int(rng.integers(entities))
        names = [
            [FIRST_NAME + 4 * entity, FIRST_NAME + 1 + 4 * entity],
            [FIRST_NAME + 2 + 4 * entity, FIRST_NAME + 3 + 4 * entity],
        ]
        first, label = int(rng.integers(2)), int(rng.random() < 0.5)
        if label:
            replacement = names[1 - first]
        elif fixed_surface:
            replacement = list(FIXED_SURFACE)
        else:
            other = int(rng.integers(entities - 1))
            other += other >= entity
            replacement = [FIRST_NAME + 4 * other + 2 * int(rng.integers(2)) + k for k in range(2)]
        sequence = [CLS, *rng.choice(FILLER, int(rng.integers(1, 4))).tolist(), *names[first]]
        spans.append((len(sequence), len(sequence) + 2))
        sequence += [*replacement, *rng.choice(FILLER, int(rng.integers(1, 3))).tolist(), SEP]
        sequences.append(sequence)
        labels.append(label)
    input_ids = torch.zeros(size, max(map(len, sequences)), dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for row, sequence in enumerate(sequences):
        input_ids[row, : len(sequence)], attention_mask[row, : len(sequence)] = torch.tensor(sequence), 1
    return dict(
        input_ids=input_ids,
        attention_mask=attention_mask,
        token_type_ids=torch.zeros_like(input_ids),
        cecp_batch=torch.arange(size),
        cecp_spans=torch.tensor(spans),
        cecp_labels=torch.tensor(labels),
    )


def train_consistency(entities: int, steps: int, fixed_surface: bool, seed: int = 0) -> tuple[float, float]:
    """CECP alone (no MLM targets, ES and BEM off) on the tiny encoder; held-out (loss, accuracy) on 512 sequences."""
    torch.manual_seed(seed)
    config = EmbertConfig(
        vocab_size=FIRST_NAME + 4 * entities,
        use_es=False,
        use_bem=False,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        **TINY_TEXT_ENCODER,
    )
    model = EmbertForPreTraining(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        output = model(**consistency_batch(rng, entities, 32, fixed_surface))
        optimizer.zero_grad()
        output.loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        output = model(**consistency_batch(np.random.default_rng(seed + 1000), entities, 512, fixed_surface))
    return output.losses["cecp"].item(), output.metrics["cecp_accuracy"].item()


def test_cecp_learns_a_fixed_surface_positive_control():
    """Every inconsistent replacement is the same surface: the head, its positions (the states just outside
    the mention) and its labels must learn it (chance: loss ln 2, accuracy 1/2 ± 0.022 on 512)."""
    loss, accuracy = train_consistency(entities=2, steps=150, fixed_surface=True)
    assert accuracy > 0.9 and loss < 0.3, (loss, accuracy)


@pytest.mark.parametrize(("entities", "steps"), SWEEP)
def test_cecp_leaves_chance_when_the_context_fixes_the_answer(entities, steps):
    """Each entity is named twice and the second mention is replaced: the label is fixed by the first."""
    loss, accuracy = train_consistency(entities, steps, fixed_surface=False)
    assert accuracy > 0.75 and loss < 0.55, (entities, steps, loss, accuracy)


@pytest.fixture(scope="module")
def embert_run(cmekg_store, shared_data, tmp_path_factory):
    from kgplm.demo import verbalize_triples

    with open(shared_data / "corpus" / "medical_dialogue" / "sample_IM_5000-6000.utf8.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))[:400]
    texts = verbalize_triples(cmekg_store, 400) + [(r["ask"] + r["answer"]).replace("\n", " ") for r in rows]
    work = tmp_path_factory.mktemp("embert")
    corpus = work / "medical.txt"
    corpus.write_text("\n".join(texts), encoding="utf-8")
    return kgplm.train(
        "embert",
        graph=cmekg_store,
        corpus=corpus,
        output_dir=work / "run",
        text_model=dict(TINY_TEXT_ENCODER),
        vocab_size=2000,
        max_steps=120,
        batch_size=16,
        learning_rate=2e-3,
        log_every=20,
        checkpoint_every=120,
        max_length=128,
        progress=False,
    )


@pytest.mark.slow
def test_mlm_es_bem_decrease_on_real_text(embert_run):
    # measured (steps 20 -> 120): loss 13.87 -> 11.55, mlm 7.39 -> 6.21, es 0.675 -> 0.445, bem 7.44 -> 6.13
    for name, ratio in (("loss", 0.9), ("mlm", 0.9), ("es", 0.8), ("bem", 0.9)):
        curve = embert_run.curve(name)
        assert len(curve) == 6 and curve[-1] < ratio * curve[0] and min(curve) < curve[0], (name, curve)
    kg = embert_run.output_dir / "kg"
    assert (kg / "thesaurus" / "thesaurus.json").is_file() and (kg / "entity_segments" / "segments.json").is_file()
    assert "sop" not in embert_run.metrics[0]


@pytest.mark.slow
def test_fine_tunes_on_cmedqaner(embert_run, shared_data, tmp_path):
    result = kgplm.finetune(
        model=embert_run.output_dir,
        task="cmedqaner",
        data_dir=shared_data / "tasks",
        output_dir=tmp_path / "ner",
        epochs=4,
        batch_size=16,
        learning_rate=3e-3,
        max_train_examples=300,
        max_eval_examples=100,
        patience=10,
        progress=False,
    )
    assert result.history[-1]["train_loss"] < 0.7 * result.history[0]["train_loss"]
    assert result.test["f1"] > 0.0, result.test
    config = json.loads((tmp_path / "ner" / "finetune_config.json").read_text(encoding="utf-8"))
    assert config["model"] == str(Path(embert_run.output_dir).resolve())
    tuned = result.load_model()
    pretrained = embert_run.load_model()
    assert tuned.config.method == "embert" and type(tuned).__name__ == "KgplmForFineTuning"
    # the encoder came from the pre-training run: same vocabulary and shapes, trained on from there
    assert tuned.bert.embeddings.word_embeddings.weight.shape == pretrained.bert.embeddings.word_embeddings.weight.shape
