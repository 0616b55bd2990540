"""kgplm.train end to end on the toy graph: artefacts, replay, resume after SIGKILL, errors, real text."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import kgplm
from kgplm.exceptions import ArtifactError, ConfigurationError
from kgplm.models import TINY_TEXT_ENCODER

REPO_ROOT = Path(__file__).resolve().parents[1]
TOY_GRAPH = REPO_ROOT / "graphs" / "toy_medical.ttl"


def write_toy_corpus(path: Path, lines: int = 80) -> Path:
    """Clinical-note-like sentences naming three random entities of the toy graph each."""
    from kgplm import KGStore

    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    names = [store.entity_name(e) for e in range(store.num_entities)]
    rng = random.Random(0)
    text = []
    for _ in range(lines):
        first, second, third = rng.sample(names, 3)
        text.append(f"患者主诉{first}三天，伴有{second}，既往有{third}病史，建议复查并随访观察。")
    path.write_text("\n".join(text), encoding="utf-8")
    return path


def toy_arguments(corpus: Path, output_dir: Path, **overrides) -> dict:
    arguments = dict(
        graph=str(TOY_GRAPH),
        corpus=str(corpus),
        output_dir=str(output_dir),
        text_model=dict(TINY_TEXT_ENCODER),
        vocab_size=300,
        entity_dim=16,
        kg_epochs=20,
        max_steps=20,
        batch_size=8,
        learning_rate=2e-3,
        checkpoint_every=5,
        log_every=5,
        max_length=64,
        progress=False,
    )
    arguments.update(overrides)
    return arguments


@pytest.fixture(scope="module")
def toy_corpus(tmp_path_factory) -> Path:
    return write_toy_corpus(tmp_path_factory.mktemp("corpus") / "notes.txt")


@pytest.fixture(scope="module")
def toy_run(toy_corpus, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("run")
    return kgplm.train("smedbert", **toy_arguments(toy_corpus, output_dir))


def test_train_writes_every_artefact(toy_run):
    out = toy_run.output_dir
    for relative in (
        "run_config.json",
        "metrics.jsonl",
        "model/config.json",
        "model/model.safetensors",
        "tokenizer/tokenizer.json",
        "tokenizer/vocab.txt",
        "kg/neighbors.npz",
        "kg/entity_frequencies.npy",
        "kg/embeddings",
        "corpus/manifest.json",
    ):
        assert (out / relative).exists(), relative
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [5, 10, 15, 20]
    for record in records:
        assert {"step", "loss", "mlm", "sop", "mnem", "learning_rate", "mlm_accuracy", "sop_accuracy"} <= set(record)
    assert any("mmem" in record for record in records)  # only steps with a masked mention compute MMeM
    assert records == toy_run.metrics
    assert toy_run.curve("mnem")[-1] < toy_run.curve("mnem")[0]
    assert toy_run.curve("loss")[-1] < toy_run.curve("loss")[0]
    model = toy_run.load_model()
    assert model.config.method == "smedbert" and model.config.hidden_size == 32
    tokenizer = toy_run.load_tokenizer()
    assert len(tokenizer) == model.config.vocab_size
    assert tokenizer.model_max_length == model.config.max_position_embeddings == 160
    card = (out / "model" / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\nlibrary_name: kgplm") and "Zhang et al. (2021)" in card
    assert "## Last logged losses" in card and " mnem " in card and str(TOY_GRAPH) in card
    assert "| max_steps | 20 |" in card


def test_pepr_auto_mode_is_exact_within_the_budget_and_recorded(toy_run, toy_corpus, tmp_path):
    from kgplm.kg.pepr import NeighborTable, top_k_neighbors

    stages = json.loads((toy_run.output_dir / "run_config.json").read_text())["stages"]
    assert stages["pepr_mode_used"] == "exact"  # the toy graph's exact PEPR fits the 120 s default
    assert stages["pepr_exact_seconds_estimate"] < 120
    table = NeighborTable.load(toy_run.output_dir / "kg" / "neighbors.npz")
    frequencies = np.load(toy_run.output_dir / "kg" / "entity_frequencies.npy")
    store = kgplm.KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    exact = top_k_neighbors(
        store, np.flatnonzero(frequencies > 0), k=10, mode="exact", frequencies=frequencies, show_progress=False
    )
    assert (table.neighbors == exact.neighbors).all()
    # a zero budget leaves exact mode out
    fast_run = kgplm.train(
        "smedbert", **toy_arguments(toy_corpus, tmp_path / "fast", max_steps=1, pepr_budget_seconds=0.0)
    )
    stages = json.loads((fast_run.output_dir / "run_config.json").read_text())["stages"]
    assert stages["pepr_mode_used"] == "fast"


def _file_hashes(directory: Path) -> dict[str, str]:
    import hashlib

    return {
        path.relative_to(directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def toy_corpus_with_latin(toy_corpus, tmp_path_factory) -> Path:
    """The toy notes plus lines of Latin abbreviations as often as each other: the vocabulary learnt from
    it has count ties to break (tokenizers' trainer broke them in hash-map order)."""
    rng = random.Random(1)
    words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(2, 5))) for _ in range(40)]
    latin = [f"复查{' '.join(words[i : i + 4])}指标" for i in range(0, 40, 4)] * 3
    path = tmp_path_factory.mktemp("corpus_latin") / "notes.txt"
    path.write_text(toy_corpus.read_text(encoding="utf-8") + "\n" + "\n".join(latin), encoding="utf-8")
    return path


def test_the_same_call_on_a_slower_machine_builds_identical_artefacts(toy_corpus_with_latin, tmp_path, monkeypatch):
    """The same call, once under a clock 10⁶ times faster (every perf_counter / process_time / time read
    advances 1,000 s: a heavily loaded machine), writes byte-identical artefacts: vocabulary (learnt from a
    corpus with count ties), graph store, PEPR table (pepr_mode="auto" decides from the graph and records
    the same reason), KG embeddings, corpus shards, checkpoint, model and metrics. The one difference
    allowed: run_config.json's ``output_dir`` (the two runs are written to two directories). There is no
    log file in a run directory; TensorBoard events (off by default) would be logs and are not written here."""
    import time

    from safetensors.numpy import load_file

    from kgplm.kg.pepr import NeighborTable

    arguments = dict(max_steps=3, log_every=1, checkpoint_every=3)
    quiet = kgplm.train("smedbert", **toy_arguments(toy_corpus_with_latin, tmp_path / "quiet", **arguments))
    clock = {"now": 0.0}

    def slow(*_):
        clock["now"] += 1000.0
        return clock["now"]

    monkeypatch.setattr(time, "perf_counter", slow)
    monkeypatch.setattr(time, "process_time", slow)
    monkeypatch.setattr(time, "time", slow)
    loaded = kgplm.train("smedbert", **toy_arguments(toy_corpus_with_latin, tmp_path / "loaded", **arguments))
    monkeypatch.undo()
    assert clock["now"] > 0  # the slow clock was read
    stages_of = [json.loads((run.output_dir / "run_config.json").read_text())["stages"] for run in (quiet, loaded)]
    assert stages_of[0] == stages_of[1] and stages_of[0]["pepr_mode_used"] == "exact"
    assert "modelled" in stages_of[0]["pepr_mode_reason"]
    tables = [NeighborTable.load(run.output_dir / "kg" / "neighbors.npz") for run in (quiet, loaded)]
    assert tables[0].config == tables[1].config
    for column in ("seeds", "neighbors", "relations", "directions", "scores"):
        np.testing.assert_array_equal(getattr(tables[0], column), getattr(tables[1], column))
    weights = [load_file(run.output_dir / "model" / "model.safetensors") for run in (quiet, loaded)]
    assert weights[0].keys() == weights[1].keys()
    assert all(np.array_equal(weights[0][name], weights[1][name]) for name in weights[0])
    assert quiet.metrics == loaded.metrics

    hashes = [_file_hashes(run.output_dir) for run in (quiet, loaded)]
    assert sorted(hashes[0]) == sorted(hashes[1])
    for expected in (
        "tokenizer/tokenizer.json",
        "tokenizer/vocab.txt",
        "kg/neighbors.npz",
        "kg/transe/config.json",
        "kg/transe/embeddings.safetensors",
        "model/model.safetensors",
        "metrics.jsonl",
        "checkpoints/step-0000003/model.safetensors",
        "checkpoints/step-0000003/trainer_state.json",
    ):
        assert expected in hashes[0], expected
    assert any(name.startswith("corpus/shards/") and name.endswith(".arrow") for name in hashes[0])
    assert any(
        token.isascii() and len(token) > 2
        for token in (quiet.output_dir / "tokenizer" / "vocab.txt").read_text(encoding="utf-8").split()
    )  # merges were learnt: the ties were there to break
    differing = sorted(name for name in hashes[0] if hashes[0][name] != hashes[1][name])
    assert differing == ["run_config.json"]
    configs = [json.loads((run.output_dir / "run_config.json").read_text()) for run in (quiet, loaded)]
    assert configs[0].pop("output_dir") != configs[1].pop("output_dir") and configs[0] == configs[1]


def test_a_knowledge_graph_run_builds_pepr_on_its_links_and_links_text_with_the_graph(toy_run, toy_corpus, tmp_path):
    """``knowledge_graph``: the PEPR table is that store's, the saved store (what fine-tuning links with) the
    graph, the knowledge store saved into the run and recorded; a store of other entities and given artefacts
    are refused."""
    from kgplm.kg.pepr import NeighborTable, top_k_neighbors
    from kgplm.training.run import RunDirectory

    store = kgplm.KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    triples = np.asarray(store.triples, dtype=np.int64)
    pruned = store.with_triples(triples[::2], derived_from={"pruned": "every other triple"})
    run = kgplm.train(
        "smedbert",
        **toy_arguments(toy_corpus, tmp_path / "pruned", max_steps=1, knowledge_graph=pruned, pepr_mode="exact"),
    )
    config = json.loads((run.output_dir / "run_config.json").read_text())
    assert config["knowledge_graph"] == str(run.output_dir / "knowledge_store")
    assert config["stages"]["knowledge_graph"] == {
        "num_triples": len(triples[::2]),
        "derived_from": {"pruned": "every other triple"},
    }
    saved = kgplm.KGStore.load(config["knowledge_graph"])
    assert (np.asarray(saved.triples) == np.asarray(pruned.triples)).all()
    table = NeighborTable.load(run.output_dir / "kg" / "neighbors.npz")
    frequencies = np.load(run.output_dir / "kg" / "entity_frequencies.npy")
    seeds = np.flatnonzero(frequencies > 0)
    expected = top_k_neighbors(pruned, seeds, k=10, mode="exact", frequencies=frequencies, show_progress=False)
    real = NeighborTable.load(toy_run.output_dir / "kg" / "neighbors.npz")
    assert (table.neighbors == expected.neighbors).all()
    assert not (table.neighbors == real.neighbors).all()
    linking_store = RunDirectory(run.output_dir).open_store()
    assert linking_store.derived_from is None and (np.asarray(linking_store.triples) == triples).all()
    with pytest.raises(ConfigurationError, match="knowledge_graph"):
        kgplm.train(
            "smedbert",
            **toy_arguments(
                toy_corpus,
                tmp_path / "bypass",
                knowledge_graph=pruned,
                neighbor_table=str(toy_run.output_dir / "kg" / "neighbors.npz"),
            ),
        )
    fewer = tmp_path / "fewer.ttl"
    fewer.write_text("@prefix ex: <http://example.org/> .\nex:a ex:r ex:b .\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="same entities as the graph"):
        kgplm.train(
            "smedbert",
            **toy_arguments(
                toy_corpus,
                tmp_path / "other",
                max_steps=1,
                pepr_mode="exact",
                knowledge_graph=kgplm.KGStore.from_rdf(fewer, show_progress=False),
            ),
        )


def test_the_kg_tables_in_the_model_are_the_trained_embeddings(toy_run):
    from kgplm.kg.embeddings import KGEmbeddings

    embeddings = KGEmbeddings.load(toy_run.output_dir / "kg" / "embeddings")
    transe = KGEmbeddings.load(toy_run.output_dir / "kg" / "transe")
    model = toy_run.load_model()
    assert embeddings.method == "transr" and transe.method == "transe"
    assert embeddings.config["initialized_from"] == "transe"  # TransR starts from TransE (Lin et al. 2015)
    assert (model.kg.entities == embeddings.entity_embeddings).all()  # frozen during pre-training
    assert (model.kg.projections == embeddings.projections).all()


def test_train_from_config_replays_the_run(toy_run, tmp_path):
    replay = kgplm.train_from_config(toy_run.output_dir / "run_config.json", output_dir=str(tmp_path / "replay"))
    assert replay.metrics == toy_run.metrics


def test_rerunning_a_finished_run_resumes_without_training(toy_run, toy_corpus):
    again = kgplm.train("smedbert", **toy_arguments(toy_corpus, toy_run.output_dir))
    assert again.metrics == toy_run.metrics


def test_another_configuration_in_the_same_directory_is_refused(toy_run, toy_corpus):
    with pytest.raises(ArtifactError, match="learning_rate"):
        kgplm.train("smedbert", **toy_arguments(toy_corpus, toy_run.output_dir, learning_rate=1e-3))


def test_unknown_methods_and_options_fail_early(toy_corpus, tmp_path):
    with pytest.raises(ConfigurationError, match="unknown method 'bert'; available methods: mlm, smedbert"):
        kgplm.train("bert", **toy_arguments(toy_corpus, tmp_path))
    with pytest.raises(ConfigurationError, match="unknown model_options"):
        kgplm.train("smedbert", **toy_arguments(toy_corpus, tmp_path / "x", model_options={"lambda_one": 2}))
    with pytest.raises(ConfigurationError, match="masking"):
        kgplm.train("mlm", **toy_arguments(toy_corpus, tmp_path / "y", masking="whole_sentence"))


_REFUSED_CALLS = """
import json, sys
import kgplm
from kgplm.exceptions import KgplmError
corpus, out, model = sys.argv[1:4]
calls = {
    "misspelt method": lambda: kgplm.train("smedbret", corpus=corpus, output_dir=out),
    "missing corpus": lambda: kgplm.train("smedbert", corpus=corpus + ".missing", output_dir=out),
    "no steps": lambda: kgplm.train("mlm", corpus=corpus, output_dir=out, max_steps=0),
    "unknown task": lambda: kgplm.finetune(model=model, task="cmedqanr", data_dir=out, output_dir=out),
    "missing model": lambda: kgplm.finetune(model=model + ".missing", task="cmedqaner", data_dir=out,
                                            output_dir=out),
}
answers = {}
for name, call in calls.items():
    try:
        call()
    except KgplmError as error:
        answers[name] = [type(error).__name__, str(error), "torch" in sys.modules]
print(json.dumps(answers))
"""


def test_refused_calls_fail_before_torch_loads(toy_corpus, tmp_path):
    """A misspelt method, a missing corpus or model, max_steps=0 and an unknown task are refused by a
    KgplmError before torch is imported (checked in a fresh interpreter: no timing)."""
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    completed = subprocess.run(
        [sys.executable, "-c", _REFUSED_CALLS, str(toy_corpus), str(tmp_path / "out"), str(tmp_path)],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    answers = json.loads(completed.stdout.splitlines()[-1])
    assert answers["misspelt method"][:2] == [
        "ConfigurationError",
        "unknown method 'smedbret'; available methods: mlm, smedbert, kebiolm, embert, electra, ehealth, epplm",
    ]
    assert answers["missing corpus"][0] == "MissingFileError" and "notes.txt.missing" in answers["missing corpus"][1]
    assert answers["no steps"][:2] == ["ConfigurationError", "max_steps must be a positive integer, got 0"]
    assert answers["unknown task"][0] == "ConfigurationError" and "did you mean cmedqaner" in answers["unknown task"][1]
    assert answers["missing model"][0] == "MissingFileError"
    assert {name: answer[2] for name, answer in answers.items()} == dict.fromkeys(answers, False)
    assert not (tmp_path / "out").exists()


def test_extending_a_finished_run_is_refused_unless_asked_and_then_recorded(toy_corpus, tmp_path):
    """A finished run re-run with a larger max_steps is refused (its model/ untouched); with
    resume_with_new_schedule=True it trains the further steps under the recomputed schedule, keeps the
    earlier model and records the change."""
    import hashlib

    arguments = toy_arguments(
        toy_corpus,
        tmp_path,
        graph=None,
        max_steps=4,
        checkpoint_every=2,
        log_every=1,
        warmup_steps=0,
        learning_rate=1e-3,
    )
    first = kgplm.train("mlm", **arguments)
    weights = tmp_path / "model" / "model.safetensors"
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    with pytest.raises(ArtifactError) as refused:
        kgplm.train("mlm", **{**arguments, "max_steps": 6})
    message = str(refused.value)
    assert "max_steps=4" in message and "resume_with_new_schedule=True" in message and "init_from=" in message
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == digest
    assert [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4]
    # the same call as before still resumes without training
    assert kgplm.train("mlm", **arguments).metrics == first.metrics

    extended = kgplm.train("mlm", **{**arguments, "max_steps": 6}, resume_with_new_schedule=True)
    assert [record["step"] for record in extended.metrics] == [1, 2, 3, 4, 5, 6]
    assert extended.metrics[:4] == first.metrics
    # the schedule for 6 steps from step 5 on: lr · (6 − s) / 6 at optimiser step s (counted from 0)
    assert [record["learning_rate"] for record in extended.metrics[4:]] == pytest.approx([1e-3 * 2 / 6, 1e-3 * 1 / 6])
    kept = tmp_path / "model-step-4" / "model.safetensors"
    assert hashlib.sha256(kept.read_bytes()).hexdigest() == digest
    assert hashlib.sha256(weights.read_bytes()).hexdigest() != digest
    config = json.loads((tmp_path / "run_config.json").read_text())
    assert config["max_steps"] == 6
    assert config["stages"]["schedule_changes"] == [
        {"after_step": 4, "previous_max_steps": 4, "max_steps": 6, "kept_model": "model-step-4"}
    ]


def test_the_built_in_method_names_are_the_registrys():
    from kgplm.api import BUILT_IN_METHODS
    from kgplm.methods import available

    assert tuple(available()[: len(BUILT_IN_METHODS)]) == BUILT_IN_METHODS


def test_mlm_baseline_uses_the_same_loop_and_needs_no_kg_artefacts(toy_corpus, tmp_path):
    result = kgplm.train("mlm", **toy_arguments(toy_corpus, tmp_path, max_steps=10))
    assert all(set(r) == {"step", "loss", "mlm", "mlm_accuracy", "learning_rate"} for r in result.metrics)
    assert result.load_model().__class__.__name__ == "KgplmForMaskedLM"
    for skipped in ("neighbors.npz", "entity_frequencies.npy", "embeddings", "transe"):
        assert not (tmp_path / "kg" / skipped).exists(), skipped


def test_the_fair_control_takes_smedberts_masking_and_sop(toy_corpus, tmp_path):
    result = kgplm.train(
        "mlm",
        **toy_arguments(toy_corpus, tmp_path, max_steps=10, masking="whole_entity", model_options={"use_sop": True}),
    )
    assert {"mlm", "sop", "sop_accuracy"} <= set(result.metrics[-1])
    assert result.run_config["masking"] == "whole_entity"


def test_ablation_switches_reach_the_model(toy_corpus, tmp_path):
    result = kgplm.train(
        "smedbert", **toy_arguments(toy_corpus, tmp_path, max_steps=5, model_options={"use_knowledge_losses": False})
    )
    assert set(result.metrics[-1]) == {"step", "loss", "mlm", "sop", "mlm_accuracy", "sop_accuracy", "learning_rate"}


_SCRIPT = """
import json, sys
import kgplm
kgplm.train("smedbert", **json.loads(sys.argv[1]))
"""


def _run(arguments: dict, *, kill_after_checkpoint: str | None = None) -> None:
    command = [sys.executable, "-c", _SCRIPT, json.dumps(arguments)]
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    process = subprocess.Popen(
        command, cwd=REPO_ROOT, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    if kill_after_checkpoint is None:
        _, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, stderr.decode()[-2000:]
        return
    target = Path(arguments["output_dir"]) / "checkpoints" / kill_after_checkpoint
    deadline = time.monotonic() + 600
    while not target.is_dir() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()


def test_a_run_killed_with_sigkill_resumes_to_the_same_losses(toy_corpus, tmp_path):
    uninterrupted = toy_arguments(toy_corpus, tmp_path / "whole", max_steps=30, checkpoint_every=10)
    killed = toy_arguments(toy_corpus, tmp_path / "killed", max_steps=30, checkpoint_every=10)
    _run(uninterrupted)
    _run(killed, kill_after_checkpoint="step-0000010")
    assert not (tmp_path / "killed" / "model").exists()
    _run(killed)
    whole = (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()
    resumed = (tmp_path / "killed" / "metrics.jsonl").read_text().splitlines()
    assert len(whole) == 6
    assert resumed == whole  # bit for bit: masks, SOP, negatives and dropout are replayed


def test_losses_decrease_on_real_medical_dialogue(cmekg_store, shared_data, tmp_path):
    """SMedBERT on 200 consultations linked to CMeKG: MLM, MNeM, MMeM and the total decrease."""
    import csv

    source = shared_data / "corpus" / "medical_dialogue" / "sample_IM_5000-6000.utf8.csv"
    with open(source, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))[:200]
    corpus = tmp_path / "dialogue.txt"
    corpus.write_text("\n".join((r["ask"] + r["answer"]).replace("\n", " ") for r in rows), encoding="utf-8")
    result = kgplm.train(
        "smedbert",
        graph=cmekg_store,
        corpus=corpus,
        output_dir=tmp_path / "run",
        text_model=dict(TINY_TEXT_ENCODER),
        vocab_size=2000,
        kg_method="transe",
        entity_dim=32,
        kg_epochs=1,
        pepr_mode="fast",  # exact PEPR over CMeKG is tested elsewhere; here it would only add time
        max_steps=60,
        batch_size=16,
        learning_rate=2e-3,
        log_every=10,
        checkpoint_every=60,
        max_length=128,
        progress=False,
    )
    for name in ("loss", "mlm", "mnem", "mmem"):
        curve = result.curve(name)
        assert curve[-1] < 0.9 * curve[0], (name, curve)
    sop = result.curve("sop")
    # near chance (ln 2) in so short a run on real text, and finite: SOP needs scale (experiments/sop_curve.py)
    assert all(0.5 < value < 0.8 for value in sop)


def test_linking_options_reach_the_corpus_and_are_recorded(toy_run, toy_corpus, tmp_path):
    from kgplm import KGStore
    from kgplm.text.corpus import load_corpus
    from kgplm.text.linking import EntityLinker
    from kgplm.text.linking_filters import LINKING_OPTIONS, common_names

    assert toy_run.run_config["linking"] == LINKING_OPTIONS  # the defaults, recorded
    result = kgplm.train(
        "mlm", **toy_arguments(toy_corpus, tmp_path, max_steps=2, linking={"common_word_share": 0.1, "min_length": 3})
    )
    assert result.run_config["linking"] == {**LINKING_OPTIONS, "common_word_share": 0.1, "min_length": 3}
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    texts = toy_corpus.read_text(encoding="utf-8").splitlines()
    expected = common_names(EntityLinker(store, min_length=3), texts, 0.1)
    assert expected and result.run_config["stages"]["linking"] == {"common_names": expected}
    dataset = load_corpus(result.output_dir / "corpus")
    linked = {store.entity_name(e) for row in dataset for e in row["mention_entity_ids"]}
    dropped = {e for name in expected for e in store.entity_ids(name)}
    assert linked and not linked & {store.entity_name(e) for e in dropped}
    with pytest.raises(ConfigurationError, match="unknown linking options"):
        kgplm.train("mlm", **toy_arguments(toy_corpus, tmp_path / "z", linking={"roots ": ["x"]}))


def test_fine_tuning_links_with_the_pre_training_runs_linker(toy_corpus, tmp_path):
    """The fine-tuning lookups (SMedBERT's knowledge, the span indicator) find the mentions pre-training found:
    the run's linking options and the common names its corpus pass dropped, not the linker's defaults."""
    from kgplm.methods.smedbert.batching import knowledge_inputs
    from kgplm.text.linking import EntityLinker
    from kgplm.training.run import RunDirectory
    from kgplm.finetuning.mention_inputs import span_lookup

    result = kgplm.train(
        "smedbert",
        **toy_arguments(toy_corpus, tmp_path, max_steps=1, linking={"common_word_share": 0.1, "min_length": 3}),
    )
    run = RunDirectory(result.output_dir)
    dropped = set(result.run_config["stages"]["linking"]["common_names"])
    texts = toy_corpus.read_text(encoding="utf-8").splitlines()
    default_linker = EntityLinker(run.open_store())
    default_surfaces = {m.surface.lower() for text in texts for m in default_linker.link(text)}
    assert dropped & default_surfaces  # the defaults would link what the run dropped
    for linker in (span_lookup(run).linker, knowledge_inputs(run, progress=False).linker):
        surfaces = {m.surface.lower() for text in texts for m in linker.link(text)}
        assert surfaces and not surfaces & dropped
        assert all(len(surface) >= 3 for surface in surfaces)
