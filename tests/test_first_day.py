"""A user's first day (issue 29): retried runs, hub ids, an explicit graph, device="auto", TensorBoard
and plots, a fine-tune that learned nothing."""

from __future__ import annotations


import inspect
import json
import logging
from pathlib import Path

import pytest

import kgplm
from kgplm.exceptions import ArtifactError, ConfigurationError, MissingFileError
from kgplm.models import TINY_TEXT_ENCODER

ENGLISH = [
    "the patient reports severe headache and nausea since monday",
    "blood pressure was high and the fever persisted for two days",
    "she was given paracetamol for the pain and advised to rest",
    "no rash was seen on the arms or the legs at the visit",
] * 6


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "notes.txt"
    path.write_text("\n".join(ENGLISH) + "\n", encoding="utf-8")
    return path


def mlm_arguments(corpus: Path, output_dir: Path, **overrides) -> dict:
    arguments = dict(
        corpus=str(corpus),
        output_dir=str(output_dir),
        text_model=dict(TINY_TEXT_ENCODER),
        vocab_size=120,
        max_steps=4,
        batch_size=4,
        checkpoint_every=2,
        log_every=1,
        max_length=32,
        device="cpu",
        progress=False,
    )
    arguments.update(overrides)
    return arguments


def _tiny_bert(directory: Path) -> Path:
    """A BERT checkpoint with its vocabulary, as save_pretrained writes it."""
    import torch
    from transformers import BertConfig, BertForPreTraining

    words = sorted({w for line in ENGLISH for w in line.split()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    torch.manual_seed(0)
    BertForPreTraining(BertConfig(**{**TINY_TEXT_ENCODER, "vocab_size": len(vocab)})).save_pretrained(directory)
    return directory


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    """A Hugging Face hub cache holding org/tiny-bert at one revision; the hub offline."""
    cache = tmp_path / "hub"
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / "models--org--tiny-bert"
    _tiny_bert(repo / "snapshots" / revision)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision, encoding="utf-8")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


# -- 29.2 runs that can be retried ------------------------------------------------------------------------
def test_a_failed_call_leaves_the_directory_to_its_corrected_call(corpus, tmp_path, hub_cache):
    output_dir = tmp_path / "run"
    with pytest.raises(MissingFileError, match="Hugging Face hub"):
        kgplm.train("mlm", **mlm_arguments(corpus, output_dir, text_model="no-such-org/no-such-model"))
    assert not (output_dir / "run_config.json").exists()  # failed before any stage wrote anything
    result = kgplm.train("mlm", **mlm_arguments(corpus, output_dir))
    assert result.steps == 4 and (output_dir / "model" / "model.safetensors").is_file()


def test_a_run_that_completed_no_step_is_taken_over(corpus, tmp_path, monkeypatch, caplog):
    from kgplm.training import stages

    def fail(*args, **kwargs):
        raise ConfigurationError("the tokenizer stage failed")

    output_dir = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(stages, "prepare_tokenizer", fail)
        with pytest.raises(ConfigurationError, match="tokenizer stage"):
            kgplm.train("mlm", **mlm_arguments(corpus, output_dir, learning_rate=1e-3))
    assert json.loads((output_dir / "run_config.json").read_text())["learning_rate"] == 1e-3
    with caplog.at_level(logging.WARNING, logger="kgplm.training.run"):
        result = kgplm.train("mlm", **mlm_arguments(corpus, output_dir, learning_rate=2e-3))
    assert result.run_config["learning_rate"] == 2e-3
    assert "takes the directory over" in caplog.text and "learning_rate" in caplog.text
    # a run with a completed step is still protected
    with pytest.raises(ArtifactError, match="learning_rate differ"):
        kgplm.train("mlm", **mlm_arguments(corpus, output_dir, learning_rate=3e-3))


def test_bad_inputs_fail_before_anything_is_written(corpus, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    cases = [
        (dict(corpus_file=empty), "empty.txt.*holds no document"),
        (dict(model_options={"no_such_option": 1}), "unknown model_options"),
        (dict(max_length=4096), "max_position_embeddings"),
        (dict(exclude_triples=str(tmp_path / "missing.tsv")), "missing.tsv"),
    ]
    for index, (override, message) in enumerate(cases):
        output_dir = tmp_path / f"run{index}"
        with pytest.raises(kgplm.KgplmError, match=message):
            kgplm.train("mlm", **mlm_arguments(override.pop("corpus_file", corpus), output_dir, **override))
        assert not output_dir.exists() or not any(output_dir.iterdir()), override


# -- 29.3 hub checkpoints --------------------------------------------------------------------------------
def test_a_hub_id_resolves_through_the_hub_cache(corpus, tmp_path, hub_cache):
    from kgplm.training.preflight import resolve_pretrained

    resolved = resolve_pretrained("org/tiny-bert", argument="text_model")
    assert resolved.path.resolve() == next((hub_cache / "models--org--tiny-bert" / "snapshots").iterdir()).resolve()
    result = kgplm.train("mlm", **mlm_arguments(corpus, tmp_path / "run", text_model="org/tiny-bert"))
    assert result.run_config["text_model"] == "org/tiny-bert"
    assert result.run_config["stages"]["hub"]["text_model"]["snapshot"] == resolved.path.name
    # the checkpoint's own vocabulary (not one trained on the corpus) and its weights were used
    vocabulary = (resolved.path / "vocab.txt").read_text(encoding="utf-8").split()
    assert len(result.load_tokenizer()) == len(vocabulary)


def test_an_unreachable_hub_id_fails_before_any_stage_and_says_how_to_pass_a_directory(corpus, tmp_path, hub_cache):
    output_dir = tmp_path / "run"
    with pytest.raises(MissingFileError) as error:
        kgplm.train("mlm", **mlm_arguments(corpus, output_dir, text_model="org/absent@v1"))
    message = str(error.value)
    assert "Hugging Face hub" in message and "HF_HUB_OFFLINE" in message and "local directory" in message
    assert not output_dir.exists()
    with pytest.raises(MissingFileError, match="tokenizer"):
        kgplm.train("mlm", **mlm_arguments(corpus, output_dir, tokenizer="org/absent"))


# -- 29.8 an explicit graph --------------------------------------------------------------------------------
def test_knowledge_methods_require_a_graph_and_text_only_methods_load_none(corpus, tmp_path):
    from kgplm.methods import available, get

    needs = {name: get(name).needs_graph() for name in available()}
    assert needs["smedbert"] and needs["kebiolm"] and not needs["mlm"] and not needs["electra"]
    assert get("mlm").needs_graph("whole_entity")  # the fair control masks linked mentions
    with pytest.raises(ConfigurationError, match="pass graph="):
        kgplm.train("smedbert", **mlm_arguments(corpus, tmp_path / "kg"))
    assert not (tmp_path / "kg").exists()
    result = kgplm.train("mlm", **mlm_arguments(corpus, tmp_path / "mlm"))
    assert result.run_config["graph"] is None and not (tmp_path / "mlm" / "kg").exists()
    assert result.load_model().config.num_entities == 0


def test_the_cli_train_requires_graph_for_knowledge_methods(corpus, tmp_path, capsys):
    from kgplm.cli import build_parser, main

    assert build_parser().parse_args(["train", "--method", "mlm"]).graph is None
    assert main(["train", "--method", "kebiolm", "--corpus", str(corpus), "--output-dir", str(tmp_path / "x")]) == 2
    assert "pass graph=" in capsys.readouterr().err


# -- 29.6 device="auto" ----------------------------------------------------------------------------------
def test_device_defaults_to_auto_everywhere_and_is_recorded(corpus, tmp_path, monkeypatch):
    import torch

    from kgplm.cli import build_parser
    from kgplm.training.distributed import auto_device

    for function in (kgplm.train, kgplm.finetune, kgplm.evaluate, kgplm.predict):
        assert inspect.signature(function).parameters["device"].default == "auto", function.__name__
    parser = build_parser()
    for command in (
        ["train"],
        ["finetune", "--model", "m", "--task", "t", "--data-dir", "d", "--output-dir", "o"],
        ["evaluate", "--model", "m", "--data-dir", "d"],
        ["predict", "--model", "m", "--data-dir", "d", "--output-dir", "o"],
    ):
        assert parser.parse_args(command).device == "auto", command
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert auto_device("auto") == "cuda" and auto_device("cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert auto_device("auto") == "cpu"
    # one vocabulary for both runs (WordPiece training on this tiny corpus breaks ties differently per call)
    vocabulary = _tiny_bert(tmp_path / "bert") / "vocab.txt"
    arguments = mlm_arguments(corpus, tmp_path / "auto", tokenizer=str(vocabulary))
    del arguments["device"]
    automatic = kgplm.train("mlm", **arguments)
    explicit = kgplm.train("mlm", **mlm_arguments(corpus, tmp_path / "cpu", tokenizer=str(vocabulary)))
    assert automatic.run_config["device"] == "cpu" and automatic.run_config["stages"]["device"] == "cpu"
    assert automatic.metrics == explicit.metrics  # "auto" on a CPU machine: the artefacts of device="cpu"


# -- 29.7 watching training ------------------------------------------------------------------------------
def test_tensorboard_holds_every_logged_value_and_the_plot_is_a_png(corpus, tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from kgplm.cli import main

    result = kgplm.train("mlm", **mlm_arguments(corpus, tmp_path / "run", report_to=("tensorboard",)))
    events = EventAccumulator(str(result.output_dir / "tensorboard"))
    events.Reload()
    for name in ("loss", "mlm", "mlm_accuracy", "learning_rate"):
        scalars = events.Scalars(f"pretrain/{name}")
        assert [s.step for s in scalars] == [r["step"] for r in result.metrics]
        assert [s.value for s in scalars] == pytest.approx([r[name] for r in result.metrics], rel=1e-6)
    png = result.plot()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    other = tmp_path / "curves" / "cli.png"
    assert main(["plot", str(result.output_dir), "--output", str(other)]) == 0
    assert other.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and str(other) in capsys.readouterr().out
    with pytest.raises(ConfigurationError, match="report_to"):
        kgplm.train("mlm", **mlm_arguments(corpus, tmp_path / "bad", report_to=("wandb",)))


# -- 29.10 small things ----------------------------------------------------------------------------------
def test_a_gbk_corpus_error_names_the_file_and_the_iconv_fix(tmp_path):
    from kgplm.exceptions import EncodingError

    corpus = tmp_path / "notes_gbk.txt"
    corpus.write_bytes("患者主诉头痛三天\n".encode("gbk"))
    with pytest.raises(EncodingError) as error:
        kgplm.train("mlm", **mlm_arguments(corpus, tmp_path / "run"))
    message = str(error.value)
    assert f"{corpus}:1" in message and f"iconv -f gbk -t utf-8 {corpus} > {corpus}.utf8" in message
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9 \xff\xfe\n")
    with pytest.raises(EncodingError, match="iconv -f latin1"):
        kgplm.train("mlm", **mlm_arguments(latin, tmp_path / "run2"))


def test_a_gbk_corpus_reads_with_the_encoding_option_and_a_text_method_warns_of_no_graph(tmp_path, caplog):
    """corpus_options={"encoding": "gbk"} reads a GBK corpus; the UTF-8 error names that option; a text-only
    method run without a graph logs no warning about the graph it does not read."""
    import logging

    from kgplm.exceptions import EncodingError

    corpus = tmp_path / "notes_gbk.txt"
    corpus.write_bytes("\n".join(ENGLISH[:4] + ["患者主诉头痛三天"] * 4).encode("gbk"))
    with pytest.raises(EncodingError) as error:
        kgplm.train("mlm", **mlm_arguments(corpus, tmp_path / "refused"))
    assert f"{corpus}:5" in str(error.value) and "corpus_options={'encoding'" in str(error.value)
    with caplog.at_level(logging.WARNING, logger="kgplm"):
        result = kgplm.train("mlm", **mlm_arguments(corpus, tmp_path / "run", corpus_options={"encoding": "gbk"}))
    assert result.steps == 4 and result.run_config["corpus_options"] == {"encoding": "gbk"}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    tokens = json.loads((tmp_path / "run" / "tokenizer" / "tokenizer.json").read_text(encoding="utf-8"))
    assert "患" in tokens["model"]["vocab"]  # the GBK text was read as Chinese, not as replacement characters


def test_an_empty_corpus_error_names_the_input_file(tmp_path):
    from kgplm.exceptions import DataFormatError
    from kgplm.kg.collector import GraphCollector
    from kgplm.text import build_corpus

    empty = tmp_path / "empty.txt"
    empty.write_text("\n   \n", encoding="utf-8")
    vocabulary = _tiny_bert(tmp_path / "bert") / "vocab.txt"
    from kgplm.text.tokenization import load_tokenizer

    with pytest.raises(DataFormatError) as error:
        build_corpus(
            empty,
            store=GraphCollector(source="test").build(allow_empty=True),
            tokenizer=load_tokenizer(vocabulary),
            output_dir=tmp_path / "out" / "corpus",
            whole_word=False,
        )
    assert str(error.value).startswith(str(empty)) and "holds no document" in str(error.value)
    assert "shards" not in str(error.value)


def test_transformers_load_report_is_silenced_where_kgplm_checks_the_loading(tmp_path, caplog):
    import torch

    from kgplm.methods.mlm import KgplmForMaskedLM, MlmConfig
    from kgplm.models import KgplmConfig, KgplmForFineTuning
    from kgplm.models.loading import load_under_task_head

    torch.manual_seed(0)
    KgplmForMaskedLM(MlmConfig(**TINY_TEXT_ENCODER, vocab_size=50)).save_pretrained(tmp_path / "model")

    def config():
        loaded = KgplmConfig.from_pretrained(str(tmp_path / "model"))
        loaded.set_task("classification", "toy", ["a", "b"], "bio")
        return loaded

    with caplog.at_level(logging.INFO):
        KgplmForFineTuning.from_pretrained(str(tmp_path / "model"), config=config())
    assert "LOAD REPORT" in caplog.text  # what transformers prints by itself
    caplog.clear()
    with caplog.at_level(logging.INFO):
        model = load_under_task_head(KgplmForFineTuning, tmp_path / "model", config=config())
    assert "LOAD REPORT" not in caplog.text and "new (task head, pooler) tensors" in caplog.text
    reference = KgplmForMaskedLM.from_pretrained(str(tmp_path / "model"))
    assert all(
        torch.equal(value, reference.state_dict()[name])
        for name, value in model.state_dict().items()
        if name in reference.state_dict()
    )


def test_make_demo_says_how_long_it_takes():
    import subprocess

    root = Path(__file__).resolve().parents[1]
    dry = subprocess.run(["make", "-n", "demo", "VENV=/nonexistent-venv"], cwd=root, capture_output=True, text=True)
    assert "about 15 minutes" in dry.stdout
    from kgplm.demo import EXPECTED_DURATION

    assert "15 minutes" in EXPECTED_DURATION


def test_a_stop_signal_while_the_finished_model_is_saved_ends_the_call_normally(corpus, tmp_path, monkeypatch):
    """A preemption signal that lands after the last step, while the model is written, neither kills the
    process nor leaves a half-written model: the call completes (the soak benchmark found the window)."""
    from kgplm import api
    from tests.helpers import stop_signal_while_saving

    with stop_signal_while_saving(monkeypatch, api) as delivered:
        result = kgplm.train("mlm", **mlm_arguments(corpus, tmp_path / "run"))
    assert delivered == []  # kgplm held the signal through the save
    assert result.steps == 4 and (result.model_dir / "model.safetensors").is_file()
