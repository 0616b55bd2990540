"""kgplm.finetune / kgplm.evaluate end to end: real cMedQANER with a tiny model, and SMedBERT's knowledge path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import kgplm
from kgplm.exceptions import ConfigurationError, MissingFileError
from kgplm.methods.mlm import KgplmForMaskedLM, MlmConfig
from kgplm.models import TINY_TEXT_ENCODER
from tests.test_api import toy_arguments, write_toy_corpus


@pytest.fixture(scope="module")
def tiny_chinese_model(shared_data, tmp_path_factory) -> Path:
    """A randomly initialised tiny encoder with the bert-base-chinese vocabulary, laid out like a train run."""
    from kgplm.text.tokenization import load_tokenizer, save_tokenizer

    root = tmp_path_factory.mktemp("tiny")
    tokenizer = load_tokenizer(shared_data / "vocab" / "bert-base-chinese" / "vocab.txt")
    save_tokenizer(tokenizer, root / "tokenizer")
    torch.manual_seed(0)
    KgplmForMaskedLM(MlmConfig(**TINY_TEXT_ENCODER, vocab_size=len(tokenizer))).save_pretrained(root / "model")
    return root


@pytest.fixture(scope="module")
def cmedqaner_run(tiny_chinese_model, shared_data, tmp_path_factory):
    return kgplm.finetune(
        model=tiny_chinese_model,
        task="cmedqaner",
        data_dir=shared_data / "tasks",
        output_dir=tmp_path_factory.mktemp("ner"),
        epochs=6,
        batch_size=16,
        learning_rate=3e-3,
        max_train_examples=400,
        max_eval_examples=200,
        patience=10,
        progress=False,
    )


def test_tiny_model_beats_the_majority_label_baseline_on_cmedqaner(cmedqaner_run):
    # the majority label is O everywhere: no entity predicted, entity F1 = 0
    assert cmedqaner_run.test["f1"] > 0.1, cmedqaner_run.test
    assert cmedqaner_run.history[-1]["train_loss"] < 0.5 * cmedqaner_run.history[0]["train_loss"]
    assert cmedqaner_run.dev["main"] == max(h["dev_main"] for h in cmedqaner_run.history)  # best epoch kept


def test_finetune_writes_results_and_evaluate_reproduces_them(cmedqaner_run, shared_data):
    out = cmedqaner_run.output_dir
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["test"]["f1"] == pytest.approx(cmedqaner_run.test["f1"])
    assert results["examples"] == {"train": 400, "dev": 175, "test": 200}
    card = (out / "model" / "README.md").read_text(encoding="utf-8")
    assert "fine-tuned on cmedqaner" in card and f"{results['test']['f1']:.4g}" in card and "B-" in card
    from kgplm.text.tokenization import load_tokenizer

    assert load_tokenizer(out / "tokenizer").model_max_length == 160
    config = json.loads((out / "finetune_config.json").read_text(encoding="utf-8"))
    assert config["task"] == "cmedqaner" and config["max_train_examples"] == 400
    # the official cMedQANER files hold all three splits; the default length is the model's (160 positions)
    assert results["derived_splits"] == []
    assert config["max_length"] == 160
    scores = kgplm.evaluate(model=out, data_dir=shared_data / "tasks", split="test", max_examples=200, progress=False)
    assert scores["f1"] == pytest.approx(cmedqaner_run.test["f1"], abs=1e-9)
    with pytest.raises(ConfigurationError, match="ner task"):
        kgplm.evaluate(model=out, task="cmedqq", data_dir=shared_data / "tasks", progress=False)


def test_dev_and_test_subsets_do_not_depend_on_the_training_seed(tiny_chinese_model, shared_data, tmp_path):
    """Issue 22: every seed (and every model) must be scored on the same examples."""
    runs = [
        kgplm.finetune(
            model=tiny_chinese_model,
            task="cmedic",
            data_dir=shared_data / "tasks",
            output_dir=tmp_path / f"seed{seed}",
            epochs=1,
            batch_size=16,
            learning_rate=1e-3,
            max_train_examples=300,
            max_eval_examples=40,
            seed=seed,
            progress=False,
        )
        for seed in (0, 1)
    ]
    # evaluate's default subset is the one finetune scored, whatever the training seed was
    scores = kgplm.evaluate(
        model=runs[1].output_dir, data_dir=shared_data / "tasks", split="test", max_examples=40, progress=False
    )
    assert scores["accuracy"] == pytest.approx(runs[1].test["accuracy"], abs=1e-12)
    ids = [json.loads((run.output_dir / "results.json").read_text(encoding="utf-8"))["example_ids"] for run in runs]
    assert ids[0] == ids[1] and len(ids[0]["test"]) == 40 and len(set(ids[0]["test"])) == 40


def test_bad_arguments_fail_early(tiny_chinese_model, shared_data, tmp_path):
    with pytest.raises(MissingFileError, match="kgplm model"):
        kgplm.finetune(model=tmp_path, task="cmedic", data_dir=shared_data / "tasks", output_dir=tmp_path / "o")
    with pytest.raises(ConfigurationError, match="unknown task"):
        kgplm.finetune(
            model=tiny_chinese_model, task="cmedicc", data_dir=shared_data / "tasks", output_dir=tmp_path / "o"
        )
    with pytest.raises(ConfigurationError, match="pre-trained model without a task head"):
        kgplm.evaluate(model=tiny_chinese_model, task="cmedic", data_dir=shared_data / "tasks", progress=False)


def test_smedbert_is_fine_tuned_with_linked_mentions_and_neighbours(tmp_path):
    """A toy SMedBERT run, then a classification task in a user's directory whose texts name graph entities."""
    from kgplm import KGStore
    from kgplm.evaluation.tasks import get_task
    from kgplm.text.tokenization import load_tokenizer
    from kgplm.finetuning.encoding import TaskEncoder
    from tests.test_api import TOY_GRAPH

    corpus = write_toy_corpus(tmp_path / "notes.txt")
    run = kgplm.train("smedbert", **toy_arguments(corpus, tmp_path / "run", max_steps=5))
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    names = [store.entity_name(e) for e in range(store.num_entities)]
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    for split, count in (("train", 24), ("dev", 8), ("test", 8)):
        lines = [f"{i % 2}\t患者有{names[i % len(names)]}，伴{names[(i + 1) % len(names)]}" for i in range(count)]
        (task_dir / f"{split}.txt").write_text("\n".join(lines), encoding="utf-8")
    result = kgplm.finetune(
        model=run.output_dir,
        task="cmedic",
        data_dir=task_dir,
        output_dir=tmp_path / "fine",
        epochs=2,
        batch_size=8,
        max_length=64,
        progress=False,
    )
    assert 0.0 <= result.test["accuracy"] <= 1.0
    # no rate given: a 32-wide encoder gets the small-encoder rate, recorded with the run
    assert result.config["learning_rate"] == 3e-3
    assert json.loads((tmp_path / "fine" / "finetune_config.json").read_text())["learning_rate"] == 3e-3
    model = result.load_model()
    assert "neighbor_entity_ids" in model.encoding.input_names and model.config.method == "smedbert"
    # the batches carry mentions and neighbours: the encoder links the same way pre-training did
    from kgplm.methods import get
    from kgplm.training.run import RunDirectory

    encoder = TaskEncoder(
        get_task("cmedic"),
        load_tokenizer(run.output_dir / "tokenizer"),
        label_names=["0", "1"],
        max_length=64,
        knowledge=get("smedbert").finetuning_inputs(RunDirectory(run.output_dir), False),
    )
    from kgplm.evaluation.tasks import load_task

    batch = encoder.collate(encoder.encode(load_task("cmedic", task_dir, "test")))
    assert len(batch["mention_spans"]) >= 8 and len(batch["neighbor_mention"]) > 0
    scores = kgplm.evaluate(model=tmp_path / "fine", data_dir=task_dir, progress=False)
    assert scores["accuracy"] == pytest.approx(result.test["accuracy"])

    # "no knowledge at fine-tuning": the same pre-trained model fine-tuned on the text alone
    plain = kgplm.finetune(
        model=run.output_dir,
        task="cmedic",
        data_dir=task_dir,
        output_dir=tmp_path / "plain",
        epochs=2,
        batch_size=8,
        learning_rate=1e-3,
        max_length=64,
        encoder_inputs=False,
        progress=False,
    )
    assert (
        json.loads((plain.output_dir / "finetune_config.json").read_text(encoding="utf-8"))["encoder_inputs"] is False
    )
    plain_encoder = TaskEncoder(
        get_task("cmedic"),
        load_tokenizer(run.output_dir / "tokenizer"),
        label_names=["0", "1"],
        max_length=64,
        knowledge=None,
    )
    assert not set(plain_encoder.collate(plain_encoder.encode(load_task("cmedic", task_dir, "test")))) & set(
        model.encoding.input_names
    )
    # evaluate follows the setting the model was fine-tuned with, unless told otherwise
    assert kgplm.evaluate(model=plain.output_dir, data_dir=task_dir, progress=False)["accuracy"] == pytest.approx(
        plain.test["accuracy"]
    )
    with_inputs = kgplm.evaluate(model=plain.output_dir, data_dir=task_dir, encoder_inputs=True, progress=False)
    assert 0.0 <= with_inputs["accuracy"] <= 1.0


def test_smedbert_trained_with_a_given_neighbour_table_can_be_fine_tuned(tmp_path):
    """A run given ``neighbor_table=`` (a cached PEPR table) holds no kg/neighbors.npz of its own; its
    fine-tuning inputs must come from the table it was trained with."""
    from kgplm.kg.pepr import NeighborTable
    from kgplm.methods import get
    from kgplm.training.run import RunDirectory

    corpus = write_toy_corpus(tmp_path / "notes.txt")
    first = kgplm.train("smedbert", **toy_arguments(corpus, tmp_path / "first", max_steps=2))
    table_path = RunDirectory(first.output_dir).neighbor_table_path
    second = kgplm.train(
        "smedbert", **toy_arguments(corpus, tmp_path / "second", max_steps=2, neighbor_table=str(table_path))
    )
    assert not RunDirectory(second.output_dir).neighbor_table_path.exists()
    lookup = get("smedbert").finetuning_inputs(RunDirectory(second.output_dir), False)
    assert np.array_equal(lookup.neighbors, NeighborTable.load(table_path).neighbors)
    # built once per graph and table: a second fine-tuning of the same run reuses it, another graph does not
    assert get("smedbert").finetuning_inputs(RunDirectory(second.output_dir), False) is lookup
    assert get("smedbert").finetuning_inputs(RunDirectory(first.output_dir), False) is not lookup


def test_cli_finetune_then_evaluate(tiny_chinese_model, shared_data, tmp_path, capsys):
    from kgplm.cli import main

    out = tmp_path / "cmedic"
    assert (
        main(
            [
                "finetune",
                "--model",
                str(tiny_chinese_model),
                "--task",
                "cmedic",
                "--data-dir",
                str(shared_data / "tasks"),
                "--output-dir",
                str(out),
                "--epochs",
                "1",
                "--max-train-examples",
                "64",
                "--max-eval-examples",
                "40",
                "--no-encoder-inputs",
                "--no-progress",
            ]
        )
        == 0
    )
    assert "cmedic: dev" in capsys.readouterr().out
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert json.loads((out / "finetune_config.json").read_text(encoding="utf-8"))["encoder_inputs"] is False
    assert (
        main(
            [
                "evaluate",
                "--model",
                str(out),
                "--data-dir",
                str(shared_data / "tasks"),
                "--split",
                "dev",
                "--max-examples",
                "40",
                "--no-progress",
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    assert printed["accuracy"] == pytest.approx(results["dev"]["accuracy"])


@pytest.mark.parametrize(
    ("task", "metric"), [("cmeie", "f1"), ("cmedir", "pairwise_accuracy"), ("kuake-qic", "accuracy")]
)
def test_dev_only_and_new_tasks_fine_tune_and_report_derived_splits(
    tiny_chinese_model, shared_data, tmp_path, task, metric
):
    result = kgplm.finetune(
        model=tiny_chinese_model,
        task=task,
        data_dir=shared_data / "tasks",
        output_dir=tmp_path / task,
        epochs=2,
        batch_size=16,
        learning_rate=3e-3,
        max_train_examples=60,
        max_eval_examples=30,
        progress=False,
    )
    results = json.loads((tmp_path / task / "results.json").read_text(encoding="utf-8"))
    assert results["derived_splits"] == ["train", "dev", "test"]  # the shared data has no official train file
    assert 0.0 <= result.test[metric] <= 1.0 and result.test["main"] == result.test[metric]
    assert set(results["encoding"]) == {"train", "dev", "test"}
    scores = kgplm.evaluate(model=tmp_path / task, data_dir=shared_data / "tasks", max_examples=30, progress=False)
    assert scores["main"] == pytest.approx(result.test["main"])


def test_cli_predict_writes_one_line_per_document_with_exact_offsets(cmedqaner_run, shared_data, tmp_path):
    """kgplm predict on all of cMedQANER test: one line per document; every span is text[start:end]; the
    records score what kgplm.evaluate scores."""
    from kgplm.cli import main
    from kgplm.evaluation import metrics
    from kgplm.evaluation.tasks import load_task

    output = tmp_path / "predictions"
    assert (
        main(
            [
                "predict",
                "--model",
                str(cmedqaner_run.output_dir),
                "--data-dir",
                str(shared_data / "tasks"),
                "--output-dir",
                str(output),
                "--no-progress",
            ]
        )
        == 0
    )
    written = output / "cmedqaner-test.jsonl"  # <task>-<split>.jsonl in --output-dir
    records = [json.loads(line) for line in written.read_text(encoding="utf-8").splitlines()]
    documents = load_task("cmedqaner", shared_data / "tasks", "test")
    assert len(records) == len(documents) == 215
    assert sum(len(r["predicted"]) for r in records) > 0
    for record, document in zip(records, documents):
        assert record["text"] == document.text
        for span in record["predicted"] + record["gold"]:
            assert record["text"][span["start"] : span["end"]] == span["mention"]
        assert {(s["start"], s["end"], s["type"]) for s in record["gold"]} == set(document.spans)
    from_records = metrics.entity_scores(
        [{(s["start"], s["end"], s["type"]) for s in r["gold"]} for r in records],
        [{(s["start"], s["end"], s["type"]) for s in r["predicted"]} for r in records],
    )
    scores = kgplm.evaluate(
        model=cmedqaner_run.output_dir, data_dir=shared_data / "tasks", split="test", progress=False
    )
    assert from_records["f1"] == pytest.approx(scores["f1"], abs=1e-12)


def test_the_default_fine_tuning_rate_follows_the_encoder_size():
    from kgplm.finetuning.defaults import FINE_TUNING_DEFAULTS, default_learning_rate, fine_tuning_defaults

    assert default_learning_rate(768) == default_learning_rate(1023) == 5e-5  # BERT-base
    assert default_learning_rate(1024) == 2e-5  # BERT-large
    assert default_learning_rate(312) == 1e-3 and default_learning_rate(128) == default_learning_rate(32) == 3e-3
    assert (fine_tuning_defaults(128).epochs, fine_tuning_defaults(768).epochs) == (10, 3)
    widths = [row.min_hidden_size for row in FINE_TUNING_DEFAULTS]
    assert widths == sorted(widths, reverse=True) and widths[-1] == 0  # every width has a row


def test_default_arguments_beat_the_constant_predictor_on_dev(tiny_chinese_model, shared_data, tmp_path):
    """With default arguments (learning rate, epochs and patience all "auto"), the tiny encoder fine-tuned on
    400 cMedQANER documents finds entities on dev: entity F1 above the best constant predictor's, which is 0
    (the constant all-O tagging finds none). The resolved values are recorded."""
    result = kgplm.finetune(
        model=tiny_chinese_model,
        task="cmedqaner",
        data_dir=shared_data / "tasks",
        output_dir=tmp_path / "ner",
        max_train_examples=400,
        max_eval_examples=100,
        device="cpu",
        progress=False,
    )
    assert result.dev["main"] > 0.05, result.history
    assert result.warnings == []
    config = json.loads((tmp_path / "ner" / "finetune_config.json").read_text(encoding="utf-8"))
    assert config["auto"] == {"hidden_size": 32, "learning_rate": 3e-3, "epochs": 10, "patience": 4}
    assert (config["learning_rate"], config["epochs"], config["patience"]) == (3e-3, 10, 4)
    # an explicit value wins; the arguments left at "auto" still resolve
    explicit = kgplm.finetune(
        model=tiny_chinese_model,
        task="cmedqaner",
        data_dir=shared_data / "tasks",
        output_dir=tmp_path / "explicit",
        learning_rate=1e-4,
        epochs=1,
        max_train_examples=16,
        max_eval_examples=8,
        device="cpu",
        progress=False,
    )
    assert (explicit.config["learning_rate"], explicit.config["epochs"]) == (1e-4, 1)
    assert explicit.config["auto"] == {"hidden_size": 32, "patience": 4}
    with pytest.raises(ConfigurationError, match="learning_rate must be a number or 'auto'"):
        kgplm.finetune(
            model=tiny_chinese_model,
            task="cmedqaner",
            data_dir=shared_data / "tasks",
            output_dir=tmp_path / "bad",
            learning_rate="fast",
            progress=False,
        )


def test_default_arguments_find_entities_on_ncbi_disease_with_a_tiny_english_model(shared_data, tmp_path):
    """A tiny English encoder (random weights, a WordPiece vocabulary of the NCBI-disease training text)
    fine-tuned with default arguments on 400 sentences finds diseases on dev, although its first epochs
    find none: early stopping waits until the dev score has risen above 0."""
    from kgplm.text import build_vocab
    from kgplm.text.tokenization import save_tokenizer

    words, sentences = [], []
    for line in (
        (shared_data / "tasks/en/blurb_ner/NCBI-disease-IOB/train.tsv").read_text(encoding="utf-8").splitlines()
    ):
        if line.strip():
            words.append(line.split("\t")[0])
        elif words:
            sentences.append(" ".join(words))
            words = []
    tokenizer = build_vocab(sentences, 4000, show_progress=False)
    save_tokenizer(tokenizer, tmp_path / "tiny" / "tokenizer")
    torch.manual_seed(0)
    KgplmForMaskedLM(MlmConfig(**TINY_TEXT_ENCODER, vocab_size=len(tokenizer))).save_pretrained(
        tmp_path / "tiny" / "model"
    )
    result = kgplm.finetune(
        model=tmp_path / "tiny",
        task="ncbi-disease",
        data_dir=shared_data / "tasks",
        output_dir=tmp_path / "ncbi",
        max_train_examples=400,
        max_eval_examples=100,
        device="cpu",
        progress=False,
    )
    assert result.dev["main"] > 0.05, result.history
    assert result.history[0]["dev_main"] == 0.0  # nothing found at first, and the run went on


def test_a_control_is_fine_tuned_with_the_linked_mention_spans(tmp_path):
    """``mention_spans=True``: an mlm run gets SMedBERT's linked spans as an indicator, recorded and replayed
    by ``evaluate``; the indicator is learned."""
    import torch

    from kgplm import KGStore
    from tests.test_api import TOY_GRAPH

    corpus = write_toy_corpus(tmp_path / "notes.txt")
    run = kgplm.train("mlm", **toy_arguments(corpus, tmp_path / "run", max_steps=2))
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    names = [store.entity_name(e) for e in range(store.num_entities)]
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    for split, count in (("train", 16), ("dev", 8), ("test", 8)):
        lines = [f"{i % 2}\t患者有{names[i % len(names)]}，伴{names[(i + 1) % len(names)]}" for i in range(count)]
        (task_dir / f"{split}.txt").write_text("\n".join(lines), encoding="utf-8")
    result = kgplm.finetune(
        model=run.output_dir,
        task="cmedic",
        data_dir=task_dir,
        output_dir=tmp_path / "fine",
        epochs=1,
        batch_size=8,
        max_length=64,
        mention_spans=True,
        progress=False,
    )
    assert json.loads((tmp_path / "fine" / "finetune_config.json").read_text())["mention_spans"] is True
    model = result.load_model()
    assert model.config.mention_span_indicator is True
    assert torch.any(model.span_indicator.inside != 0)  # learned from zero
    scores = kgplm.evaluate(model=tmp_path / "fine", data_dir=task_dir, progress=False)
    assert scores["accuracy"] == pytest.approx(result.test["accuracy"])


def test_a_fine_tune_that_learned_nothing_says_so(tiny_chinese_model, shared_data, tmp_path, caplog):
    import logging

    from kgplm.evaluation.degenerate import constant_prediction

    # hand-made records: all-O tagging, one class, and predictions that vary
    assert (
        constant_prediction([{"predicted": []}, {"predicted": []}], "ner")
        == "no entity on any of the 2 examples (all O)"
    )
    assert constant_prediction([{"predicted": "1"}] * 3, "single") == "the label '1' for all 3 examples"
    assert constant_prediction([{"predicted": "1"}, {"predicted": "0"}], "single") is None
    assert constant_prediction([{"predicted": []}, {"predicted": [{"start": 0}]}], "ner") is None
    # a tagger trained on text whose entities are (all but one) unlabelled learns to say O everywhere: a
    # constant prediction on dev, whatever the random trajectory (a rate far too high collapses it only
    # sometimes: it may as well settle on wrong spans, which is not constant)
    source = shared_data / "tasks" / "zh" / "chineseblue" / "cMedQANER"
    task_dir = tmp_path / "cmedqaner"
    task_dir.mkdir()
    train = source.joinpath("train.json").read_text(encoding="utf-8").splitlines()[:64]
    train = train[:1] + [json.dumps({**json.loads(line), "mention_data": []}, ensure_ascii=False) for line in train[1:]]
    task_dir.joinpath("train.json").write_text("\n".join(train) + "\n", encoding="utf-8")
    for split in ("dev", "test"):
        lines = source.joinpath(f"{split}.json").read_text(encoding="utf-8").splitlines()[:32]
        task_dir.joinpath(f"{split}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="kgplm.api"):
        result = kgplm.finetune(
            model=tiny_chinese_model,
            task="cmedqaner",
            data_dir=task_dir,
            output_dir=tmp_path / "ner",
            epochs=1,
            batch_size=16,
            learning_rate=3e-3,
            device="cpu",
            progress=False,
        )
    assert result.dev["main"] == 0.0
    assert len(result.warnings) == 1 and "no entity on any of the" in result.warnings[0]
    assert "learning rate" in result.warnings[0] and "epochs" in result.warnings[0]
    assert result.warnings[0] in caplog.text and "WARNING" in repr(result)
    assert json.loads((tmp_path / "ner" / "results.json").read_text())["warnings"] == result.warnings


def test_a_model_that_learned_says_nothing(cmedqaner_run):
    assert cmedqaner_run.warnings == []


def test_evaluate_and_predict_return_result_objects_that_replay(cmedqaner_run, shared_data, tmp_path):
    """evaluate's result reads as its scores and replays from its arguments; predict's names its file, and
    predict(output=FILE), the earlier spelling, warns and still writes that file."""
    evaluation = kgplm.evaluate(
        model=cmedqaner_run.output_dir, data_dir=shared_data / "tasks", max_examples=20, progress=False
    )
    assert (evaluation.task, evaluation.split, evaluation.examples) == ("cmedqaner", "test", 20)
    assert dict(evaluation) == evaluation.scores and evaluation["main"] == evaluation.scores["f1"]
    assert kgplm.evaluate(args=evaluation.arguments).scores == evaluation.scores
    assert kgplm.evaluate(args=evaluation.arguments, split="dev").split == "dev"

    predicted = kgplm.predict(
        model=cmedqaner_run.output_dir,
        data_dir=shared_data / "tasks",
        output_dir=tmp_path / "predictions",
        max_examples=20,
        progress=False,
    )
    assert predicted.path == tmp_path / "predictions" / "cmedqaner-test.jsonl"
    assert predicted.examples == len(predicted.records()) == 20
    with open(predicted, encoding="utf-8") as handle:  # the result is path-like
        assert len(handle.read().splitlines()) == 20

    with pytest.warns(FutureWarning, match="the keyword argument 'output' is deprecated"):
        legacy = kgplm.predict(
            model=cmedqaner_run.output_dir,
            data_dir=shared_data / "tasks",
            output=tmp_path / "legacy.jsonl",
            max_examples=20,
            progress=False,
        )
    assert legacy.path == tmp_path / "legacy.jsonl"
    assert legacy.path.read_bytes() == predicted.path.read_bytes()
