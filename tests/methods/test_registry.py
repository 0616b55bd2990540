"""The method registry, and the generic test case every registered method must pass.

The generic case builds each method the way ``kgplm.train`` does — its artefacts through the
stages, its config and model from the registry, a batch from its own collator on a linked toy
corpus — and checks: every logged loss is finite and among the record's losses, gradients reach
every trainable parameter, save → load gives the same outputs, the fine-tuning model opens the
checkpoint and runs with the method's fine-tuning inputs.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

import kgplm
from kgplm.exceptions import ConfigurationError
from kgplm.methods import (
    MethodContext,
    MethodSpec,
    available,
    get,
    register,
    unregister,
)
from kgplm.models import TINY_TEXT_ENCODER, KgplmForFineTuning, load_pretrained
from kgplm.training import stages
from kgplm.training.run import RunDirectory
from kgplm.training.trainer import example_seeds

REPO_ROOT = Path(__file__).resolve().parents[2]
TOY_GRAPH = REPO_ROOT / "graphs" / "toy_medical.ttl"


def test_available_lists_the_baseline_and_smedbert():
    names = available()
    assert names[:2] == ["mlm", "smedbert"]
    assert kgplm.methods.available() == names


def test_unknown_method_lists_the_known_ones():
    with pytest.raises(ConfigurationError, match="available methods: mlm, smedbert"):
        get("bert")


def test_a_record_is_checked_when_it_is_made():
    base = dict(
        name="x",
        summary="",
        paper="",
        config_class=object,
        model_class=object,
        encoding=None,
        build_collator=lambda context: None,
        losses=("mlm",),
    )
    with pytest.raises(ConfigurationError, match="unknown artefacts"):
        MethodSpec(**base, artefacts=frozenset({"magic"}))
    with pytest.raises(ConfigurationError, match="kg_embedding"):
        MethodSpec(**base, artefacts=frozenset({"kg_embeddings"}))
    with pytest.raises(ConfigurationError, match="already registered"):
        register(get("mlm"))


def test_smedbert_record_says_what_the_pipeline_needs():
    spec = get("smedbert")
    assert spec.artefacts == {"entity_frequencies", "neighbor_table", "kg_embeddings"}
    assert spec.kg_embedding == "transr" and spec.default_masking == "whole_entity"
    assert set(spec.losses) == {"mlm", "sop", "mnem", "mmem"}
    assert not get("mlm").artefacts  # the baseline needs no PEPR table and no KG embeddings


# -- the generic case ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """A toy graph, a linked toy corpus and every KG artefact any registered method asks for."""
    from kgplm import KGStore

    work = tmp_path_factory.mktemp("generic")
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    names = [store.entity_name(e) for e in range(store.num_entities)]
    rng = random.Random(0)
    lines = []
    for _ in range(60):
        first, second, third = rng.sample(names, 3)
        lines.append(f"患者主诉{first}三天，伴有{second}，既往有{third}病史，建议复查。")
    corpus = work / "notes.txt"
    corpus.write_text("\n".join(lines), encoding="utf-8")
    run = RunDirectory(work / "run")
    run.path.mkdir()
    arguments = dict(
        tokenizer=None,
        text_model=None,
        vocab_size=300,
        pepr_mode="exact",
        num_neighbors=4,
        kg_method="transr",
        entity_dim=16,
        kg_epochs=5,
        seed=0,
        max_length=48,
        neighbor_table=None,
        kg_embeddings=None,
    )
    run.write_run_config({"kgplm_run": 1, **arguments})
    inputs = stages.StageInputs(arguments=arguments, store=store, corpus=corpus, corpus_options={}, progress=False)
    tokenizer = stages.prepare_tokenizer(run, inputs)
    needed = set().union(*(get(name).artefacts for name in available()))
    stages.run_artefact_stages(needed, run, inputs)
    dataset = stages.prepare_corpus(run, inputs, tokenizer, masking="whole_word")
    return {"store": store, "tokenizer": tokenizer, "inputs": inputs, "dataset": dataset, "run": run}


def _build(name, pipeline):
    spec = get(name)
    inputs = pipeline["inputs"]
    artefacts = {key: inputs.artefacts[key] for key in spec.artefacts}
    if spec.kg_embedding == "transe":
        from kgplm.kg.embeddings import KGEmbeddings

        artefacts["kg_embeddings"] = KGEmbeddings.load(
            pipeline["run"].embeddings_dir("transe"), store=pipeline["store"]
        )
    torch.manual_seed(0)
    model, checkpoint = stages.build_model(
        spec,
        pipeline["store"],
        pipeline["tokenizer"],
        text_model=dict(TINY_TEXT_ENCODER, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
        model_options={},
        max_length=48,
        entity_dim=16,
        artefacts=artefacts,
    )
    context = MethodContext(
        config=model.config,
        tokenizer=pipeline["tokenizer"],
        store=pipeline["store"],
        masking=spec.default_masking,
        seed=0,
        text_model_dir=checkpoint,
        artefacts=artefacts,
    )
    if spec.prepare_model is not None:
        spec.prepare_model(model, context)
    return spec, model, spec.build_collator(context)


def _richest_batch(collator, dataset, losses_of, tries: int = 20):
    """Among a few seeded batches of 16 rows, the one whose forward computes the most objectives."""
    best, best_count = None, -1
    rows = dataset[list(range(min(16, len(dataset))))]
    for step in range(tries):
        batch = collator(rows, example_seeds(0, step, np.arange(len(rows["input_ids"]))))
        count = len(losses_of(batch))
        if count > best_count:
            best, best_count = batch, count
    return best


@pytest.mark.parametrize("name", available())
def test_every_registered_method_trains_saves_and_fine_tunes(name, pipeline, tmp_path):
    spec, model, collator = _build(name, pipeline)
    assert isinstance(model.config, spec.config_class) and model.config.method == name

    def losses_of(batch):
        with torch.no_grad():
            return model(**batch).losses

    batch = _richest_batch(collator, pipeline["dataset"], losses_of)
    model.train()
    output = model(**batch)
    assert output.losses and set(output.losses) <= set(spec.losses)
    assert all(torch.isfinite(loss) for loss in output.losses.values())
    expected_total = sum(output.loss_weights[k] * v for k, v in output.losses.items())
    torch.testing.assert_close(output.loss, expected_total)
    for counted in batch.target_counts:
        assert counted in spec.losses
    output.loss.backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or not p.grad.any())]
    assert missing == [], f"{name}: no gradient reaches {missing}"

    model.eval()
    with torch.no_grad():
        before = model(**batch)
    model.save_pretrained(tmp_path / "model")
    loaded = load_pretrained(tmp_path / "model").eval()
    assert type(loaded) is type(model)
    with torch.no_grad():
        after = loaded(**batch)
    torch.testing.assert_close(after.prediction_logits, before.prediction_logits, rtol=1e-6, atol=1e-6)
    assert set(after.losses) == set(before.losses)

    # the fine-tuning model opens the pre-training checkpoint: the encoder loads, only the head is new
    config = loaded.config
    config.task_kind, config.task_name, config.label_names = "classification", "toy", ["a", "b"]
    tuned = KgplmForFineTuning.from_pretrained(tmp_path / "model", config=config).eval()
    encoder_inputs = {k: batch[k] for k in tuned.encoding.input_names if k in batch}
    with torch.no_grad():
        logits = tuned(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"],
            **encoder_inputs,
        ).logits
    assert logits.shape == (len(batch["input_ids"]), 2) and torch.isfinite(logits).all()
    shared = [k for k in loaded.state_dict() if k in tuned.state_dict() and not k.startswith("head.")]
    assert shared and all(torch.equal(loaded.state_dict()[k], tuned.state_dict()[k]) for k in shared)


def test_a_new_method_needs_no_edit_outside_its_own_code(pipeline, tmp_path):
    """Register a method from outside the package and train it through kgplm.train: dispatch is by record."""
    from kgplm.methods.mlm import MlmConfig, build_collator
    from kgplm.models.encoding import Encoding
    from kgplm.models.modules import KgplmPreTrainedModel, PretrainingOutput
    from kgplm.models.objectives import masked_lm_objective

    class TiedMlm(KgplmPreTrainedModel):
        config_class = MlmConfig

        def __init__(self, config):
            super().__init__(config)
            Encoding().build(self, config, pooler=False)
            self.post_init()

        def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None, **_):
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            logits = hidden @ self.bert.embeddings.word_embeddings.weight.T  # (batch, length, vocab)
            output = PretrainingOutput(prediction_logits=logits, losses={}, loss_weights={}, metrics={})
            output.add("tied", masked_lm_objective(logits, labels) if labels is not None else None)
            return output

    spec = MethodSpec(
        name="tied_mlm",
        summary="MLM read out through the input embeddings",
        paper="(test)",
        config_class=MlmConfig,
        model_class=TiedMlm,
        encoding=Encoding(),
        build_collator=build_collator,
        losses=("tied",),
    )
    register(spec)
    try:
        corpus = tmp_path / "c.txt"
        corpus.write_text("\n".join(["糖尿病患者口渴多尿，服用二甲双胍。"] * 20), encoding="utf-8")
        result = kgplm.train(
            "tied_mlm",
            graph=str(TOY_GRAPH),
            corpus=corpus,
            output_dir=tmp_path / "run",
            text_model=dict(TINY_TEXT_ENCODER),
            vocab_size=200,
            max_steps=4,
            batch_size=4,
            log_every=2,
            checkpoint_every=4,
            max_length=32,
            progress=False,
        )
        assert [set(r) for r in result.metrics] == [{"step", "loss", "tied", "tied_accuracy", "learning_rate"}] * 2
        assert not (tmp_path / "run" / "kg" / "neighbors.npz").exists()  # it asked for no PEPR table
        assert type(result.load_model()) is TiedMlm
    finally:
        unregister("tied_mlm")


def test_the_readme_method_table_is_the_registry_s():
    from kgplm.methods import method_table

    readme = (REPO_ROOT / "docs" / "methods" / "index.md").read_text(encoding="utf-8")
    start = readme.index("<!-- method table: generated by kgplm.methods.method_table() -->")
    end = readme.index("<!-- end of method table -->")
    table = readme[start:end].split("\n", 1)[1].strip()
    assert table == method_table()


def test_cli_lists_the_methods_and_train_offers_exactly_them(capsys, tmp_path):
    from kgplm.cli import main

    assert main(["methods"]) == 0
    listed = capsys.readouterr().out
    for name in available():
        assert f"\n{name} " in "\n" + listed
    assert "losses: mlm, sop, mnem, mmem; needs: entity_frequencies, kg_embeddings (transr), neighbor_table" in listed
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a line\n", encoding="utf-8")
    # the name is checked by kgplm.train before anything loads, with every registered method in the answer
    assert main(["train", "--method", "bert", "--corpus", str(corpus), "--output-dir", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err
    assert "unknown method 'bert'" in error and all(name in error for name in available())


def test_a_built_corpus_is_reused_only_with_the_settings_it_was_built_with(pipeline):
    import dataclasses

    from kgplm.exceptions import ArtifactError
    from kgplm.training import stages

    inputs, run, tokenizer = pipeline["inputs"], pipeline["run"], pipeline["tokenizer"]
    assert len(stages.prepare_corpus(run, inputs, tokenizer, masking="whole_word")) == len(pipeline["dataset"])
    longer = dataclasses.replace(inputs, arguments={**inputs.arguments, "max_length": 96})
    with pytest.raises(ArtifactError, match="max_length=48.*max_length=96"):
        stages.prepare_corpus(run, longer, tokenizer, masking="whole_word")
    with pytest.raises(ArtifactError, match="whole_word=True.*whole_word=False"):
        stages.prepare_corpus(run, inputs, tokenizer, masking="bert")


# -- mixed precision: every method ------------------------------------------------------------------------
#: bf16 keeps 8 significant bits (relative rounding 2^-9 ≈ 0.002 per op). Measured on this case (torch
#: CPU autocast, every method, before and after one SGD step): the largest relative loss difference is
#: 0.40 % (epplm's PAP at step 0, 4.0347 → 4.0507), the next 0.11 % (embert's CECP after the step); every
#: other loss is within 0.07 %. A loss must stay within 2 % + 0.01 of fp32 (5× the worst measured).
BF16_LOSS_RTOL, BF16_LOSS_ATOL = 0.02, 0.01


def _bf16_forward(model, batch):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return model(**batch)


def _force_detections(model):
    """KeBioLM: make the (untrained) detection head tag every candidate token B, so that fine-tuning and
    inference fuse entities on their own detections (the path the pre-training batch does not take)."""
    detection = getattr(model, "entity_detection", None)
    if detection is not None:
        with torch.no_grad():
            detection.weight.zero_()
            detection.bias.copy_(torch.tensor([0.0, 1.0, 0.0]))


@pytest.mark.parametrize("name", available())
def test_every_registered_method_takes_a_bf16_step_that_follows_fp32(name, pipeline, tmp_path):
    spec, model, collator = _build(name, pipeline)

    def losses_of(batch):
        with torch.no_grad():
            return model(**batch).losses

    batch = _richest_batch(collator, pipeline["dataset"], losses_of)
    model.train()
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}

    def step(precision):
        model.load_state_dict(initial)
        model.zero_grad(set_to_none=True)
        output = _bf16_forward(model, batch) if precision == "bf16" else model(**batch)
        output.loss.backward()
        gradients = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
        with torch.no_grad():
            for parameter in model.parameters():
                if parameter.grad is not None:
                    parameter -= 1e-2 * parameter.grad
            after = model(**batch)  # the stepped model, read in fp32
        return output, gradients, after

    reference, reference_gradients, reference_after = step("fp32")
    mixed, mixed_gradients, mixed_after = step("bf16")
    assert set(mixed.losses) == set(reference.losses)
    for key, value in reference.losses.items():
        assert mixed.losses[key].dtype == torch.float32, f"{name}: loss {key} is {mixed.losses[key].dtype}"
        torch.testing.assert_close(
            mixed.losses[key].detach(),
            value.detach(),
            rtol=BF16_LOSS_RTOL,
            atol=BF16_LOSS_ATOL,
            msg=lambda m, key=key: f"{name} {key} bf16 vs fp32: {m}",
        )
    assert set(mixed_gradients) == set(reference_gradients)
    assert all(torch.isfinite(g).all() for g in mixed_gradients.values())
    for key, value in reference_after.losses.items():
        torch.testing.assert_close(
            mixed_after.losses[key],
            value,
            rtol=BF16_LOSS_RTOL,
            atol=BF16_LOSS_ATOL,
            msg=lambda m, key=key: f"{name} {key} after a bf16 step: {m}",
        )

    # fine-tuning: one bf16 step of a classifier on the checkpoint (KeBioLM fuses its own detections)
    model.load_state_dict(initial)
    _force_detections(model)
    model.save_pretrained(tmp_path / "model")
    config = load_pretrained(tmp_path / "model").config
    config.task_kind, config.task_name, config.label_names = "classification", "toy", ["a", "b"]
    tuned = KgplmForFineTuning.from_pretrained(tmp_path / "model", config=config).train()
    encoder_inputs = {k: batch[k] for k in tuned.encoding.input_names if k in batch}
    inputs = dict(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        token_type_ids=batch["token_type_ids"],
        labels=torch.arange(len(batch["input_ids"])) % 2,
        **encoder_inputs,
    )
    with torch.no_grad():
        reference_loss = tuned(**inputs).loss
    mixed_output = _bf16_forward(tuned, inputs)
    mixed_output.loss.backward()
    torch.testing.assert_close(
        mixed_output.loss.float().detach(), reference_loss, rtol=BF16_LOSS_RTOL, atol=BF16_LOSS_ATOL
    )
    gradients = {n: p.grad for n, p in tuned.named_parameters() if p.grad is not None}
    assert any(n.startswith("head.") for n in gradients) and all(torch.isfinite(g).all() for g in gradients.values())
    if name == "kebiolm":  # the fused path ran: detections were found and the memory got a gradient
        assert tuned.entity_memory.weight.grad is not None and tuned.entity_memory.weight.grad.any()
