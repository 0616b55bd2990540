"""KeBioLM's attribution switches: detection alone ("control + silver NER": ``entity_linking=False,
entity_fusion=False``) and detection + linking without fusion (``entity_fusion=False``)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import kgplm
from kgplm.exceptions import ConfigurationError
from kgplm.methods.kebiolm import KebiolmForPreTraining
from kgplm.methods.kebiolm.modeling import KEBIOLM_ENCODING
from kgplm.models import KgplmForFineTuning, load_pretrained
from tests.methods.test_kebiolm import tiny_batch, tiny_config
from tests.test_api import toy_arguments, write_toy_corpus

SILVER_NER = {"entity_linking": False, "entity_fusion": False}
NO_FUSION = {"entity_fusion": False}
KNOWLEDGE_MODULES = ("mention_projection", "entity_memory", "entity_fusion")


def _labels(batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    labels = torch.full((2, 8), -100)
    labels[0, 1:3] = batch["input_ids"][0, 1:3]
    detection = torch.tensor([[-100, 1, 2, 0, 0, 1, 2, -100], [-100, 0, 0, -100, -100, -100, -100, -100]])
    return labels, detection


def _plain_text_states(model, batch: dict) -> torch.Tensor:
    """The states of the model's own BERT run as a plain BERT (every layer, no knowledge anywhere)."""
    return model.bert(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"]
    ).last_hidden_state


def test_silver_ner_keeps_detection_and_drops_linking_and_fusion():
    torch.manual_seed(0)
    model = KebiolmForPreTraining(tiny_config(**SILVER_NER)).eval()
    assert not any(hasattr(model, name) for name in KNOWLEDGE_MODULES)
    assert not any(name.startswith(KNOWLEDGE_MODULES) for name, _ in model.named_parameters())
    assert hasattr(model, "entity_detection")
    batch = tiny_batch()
    labels, detection = _labels(batch)
    output = model(**batch, labels=labels, detection_labels=detection)
    assert set(output.losses) == {"mlm", "ed"}  # the gold entities are given, and not used
    logits = KEBIOLM_ENCODING.encode(model, batch["input_ids"], batch["attention_mask"]).extras["detection_logits"]
    torch.testing.assert_close(output.losses["ed"], F.cross_entropy(logits.flatten(0, 1), detection.flatten()))
    with torch.no_grad():  # the text representation is BERT's own: nothing is added after detection
        torch.testing.assert_close(output.last_hidden_state, _plain_text_states(model, batch))
    model.train()
    model(**batch, labels=labels, detection_labels=detection).loss.backward()
    assert model.entity_detection.weight.grad.abs().sum() > 0


def test_linking_without_fusion_trains_the_entity_table_and_leaves_the_text_states_alone():
    torch.manual_seed(0)
    model = KebiolmForPreTraining(tiny_config(**NO_FUSION)).eval()
    assert hasattr(model, "mention_projection") and hasattr(model, "entity_memory")
    assert not hasattr(model, "entity_fusion")
    batch = tiny_batch()
    labels, detection = _labels(batch)
    with torch.no_grad():
        before = model(**batch, labels=labels, detection_labels=detection)
        assert set(before.losses) == {"mlm", "ed", "el"}
        torch.testing.assert_close(
            before.losses["el"],
            F.cross_entropy(before.mention_vectors @ model.entity_memory.weight.T, batch["mention_entity_ids"]),
        )
        torch.testing.assert_close(before.last_hidden_state, _plain_text_states(model, batch))
        model.entity_memory.weight.mul_(-3.0).add_(0.5)  # other entity vectors
        after = model(**batch, labels=labels, detection_labels=detection)
    assert torch.equal(after.last_hidden_state, before.last_hidden_state)
    assert torch.equal(after.losses["mlm"], before.losses["mlm"])
    assert not torch.allclose(after.losses["el"], before.losses["el"])  # the table is read, by linking only
    # the same change moves the full model's states: the check above can see a dependence
    full = KebiolmForPreTraining(tiny_config()).eval()
    with torch.no_grad():
        first = full(**batch).last_hidden_state
        full.entity_memory.weight.mul_(-3.0).add_(0.5)
        assert not torch.allclose(full(**batch).last_hidden_state, first)
    # outside pre-training's linking loss nothing reads the retrieval: it is not run, the detections still are
    with torch.no_grad():
        extras = KEBIOLM_ENCODING.encode(model, batch["input_ids"], batch["attention_mask"]).extras
    assert extras["mention_vectors"] is None and extras["retrieved_ids"] is None
    assert extras["mention_spans"] is not None and extras["detection_logits"].shape == (2, 8, 3)
    model.train()
    model(**batch, labels=labels, detection_labels=detection).loss.backward()
    assert (
        model.entity_memory.weight.grad.abs().sum() > 0 and model.mention_projection.linear.weight.grad.abs().sum() > 0
    )


def test_fusion_needs_linking_and_the_switches_are_booleans():
    with pytest.raises(ConfigurationError, match="entity_fusion=True needs entity_linking"):
        KebiolmForPreTraining(tiny_config(entity_linking=False))
    with pytest.raises(ConfigurationError, match="entity_fusion must be True or False"):
        KebiolmForPreTraining(tiny_config(entity_fusion="no"))


@pytest.mark.parametrize("options", [SILVER_NER, NO_FUSION], ids=["silver_ner", "no_fusion"])
def test_a_training_step_saves_a_model_that_fine_tunes(options, tmp_path):
    corpus = write_toy_corpus(tmp_path / "notes.txt", lines=24)
    run = kgplm.train(
        "kebiolm",
        **toy_arguments(corpus, tmp_path / "run", max_steps=2, log_every=1, kg_epochs=2, model_options=options),
    )
    assert run.steps == 2 and len(run.curve("ed")) == 2 and all(map(math.isfinite, run.curve("loss")))
    assert bool(run.curve("el")) == options.get("entity_linking", True)
    pretrained = load_pretrained(run.output_dir / "model")
    assert all(getattr(pretrained.config, name) == value for name, value in options.items())
    names = {name.split(".")[0] for name, _ in pretrained.named_parameters()}
    assert ("entity_memory" in names) == options.get("entity_linking", True) and "entity_fusion" not in names
    config = pretrained.config
    config.set_task("ner", "toy", ["O", "B-x", "I-x"])
    network = KgplmForFineTuning.from_pretrained(str(run.output_dir / "model"), config=config).eval()
    batch = tiny_batch()
    with torch.no_grad():
        states = network(input_ids=batch["input_ids"].clamp(max=config.vocab_size - 1)).last_hidden_state
    assert states.shape == (2, 8, config.hidden_size) and torch.isfinite(states).all()
