"""The ``kgplm`` command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kgplm import KGStore
from kgplm.cli import main
from kgplm.kg.pepr import top_k_neighbors


def test_kg_import_stats_neighbors_export(tmp_path: Path, toy_turtle: Path, capsys) -> None:
    out = tmp_path / "store"
    assert main(["kg", "import", str(toy_turtle), "--output-dir", str(out)]) == 0
    assert "6 entities" in capsys.readouterr().out
    assert KGStore.load(out).num_triples == 4

    assert main(["kg", "stats", str(out), "--json"]) == 0
    assert '"num_triples": 4' in capsys.readouterr().out

    assert main(["kg", "neighbors", "糖尿病", "--store", str(out)]) == 0
    text = capsys.readouterr().out
    assert "多尿" in text and "二甲双胍" in text and "常见症状" in text

    ttl = tmp_path / "export.ttl"
    assert main(["kg", "export", str(out), "--output", str(ttl)]) == 0
    assert KGStore.from_rdf(ttl, show_progress=False).num_triples == 4


def test_kg_import_formats_and_export_by_extension(tmp_path: Path, toy_turtle: Path, capsys) -> None:
    import rdflib

    relative = tmp_path / "relative.ttl"
    relative.write_text("<a> <linked-to> <b> .\n", encoding="utf-8")
    assert main(["kg", "import", "rdf", str(relative), "--output-dir", str(tmp_path / "rel")]) == 2
    assert "--base-iri" in capsys.readouterr().err
    assert (
        main(
            [
                "kg",
                "import",
                "rdf",
                str(relative),
                "--base-iri",
                "http://example.org/kg/",
                "--output-dir",
                str(tmp_path / "rel"),
            ]
        )
        == 0
    )
    assert KGStore.load(tmp_path / "rel").entity_iri(0) == "http://example.org/kg/a"
    # the legacy --kind spelling and the importer aliases still work; options an importer lacks are refused
    tsv = tmp_path / "edges.tsv"
    tsv.write_text("a\tr\tb\n", encoding="utf-8")
    assert main(["kg", "import", str(tsv), "--kind", "tsv", "--output-dir", str(tmp_path / "tsv")]) == 0
    assert (
        main(["kg", "import", "triples", str(tsv), "--base-iri", "http://x/", "--output-dir", str(tmp_path / "x")]) == 2
    )
    assert "the triples importer takes no --base-iri" in capsys.readouterr().err
    # export: the extension names the format
    assert main(["kg", "import", str(toy_turtle), "--output-dir", str(tmp_path / "toy")]) == 0
    for name, rdflib_format in (("toy.nt", "nt"), ("toy.rdf", "xml"), ("toy.jsonld", "json-ld")):
        assert main(["kg", "export", str(tmp_path / "toy"), "--output", str(tmp_path / name)]) == 0
        assert len(rdflib.Graph().parse(tmp_path / name, format=rdflib_format)) > 0


def test_errors_exit_2_with_message(tmp_path: Path, toy_turtle: Path, capsys) -> None:
    assert main(["kg", "neighbors", "糖尿", "--store", str(toy_turtle)]) == 2
    error = capsys.readouterr().err
    assert "no entity is named '糖尿'" in error and "糖尿病" in error
    assert main(["kg", "stats", str(tmp_path / "missing.ttl")]) == 2
    assert "not found" in capsys.readouterr().err


def test_kg_pepr_and_ranked_neighbors(tmp_path: Path, capsys) -> None:
    from kgplm.kg.pepr import NeighborTable

    toy = Path(__file__).resolve().parents[1] / "graphs" / "toy_medical.ttl"
    out = tmp_path / "table.npz"
    assert main(["kg", "pepr", "--store", str(toy), "--output", str(out), "--k", "3", "--mode", "exact"]) == 0
    assert "29 entities" in capsys.readouterr().out
    table = NeighborTable.load(out)
    assert table.neighbors.shape == (29, 3)
    default_out = tmp_path / "default.npz"
    assert main(["kg", "pepr", "--store", str(toy), "--output", str(default_out), "--k", "3"]) == 0
    default = NeighborTable.load(default_out)
    # one default across API and CLI: auto with the default budget (exact on this graph)
    assert default.config["mode_requested"] == "auto" and default.mode == "exact"
    assert (
        default.config == top_k_neighbors(KGStore.from_rdf(toy, show_progress=False), k=3, show_progress=False).config
    )
    fast_out = tmp_path / "fast.npz"
    assert (
        main(
            [
                "kg",
                "pepr",
                "--store",
                str(toy),
                "--output",
                str(fast_out),
                "--k",
                "3",
                "--epsilon",
                "1e-9",
                "--num-hubs",
                "2",
                "--mode",
                "fast",
            ]
        )
        == 0
    )
    fast = NeighborTable.load(fast_out)
    assert fast.config["epsilon"] == 1e-9 and fast.config["num_hubs"] == 2 and fast.config["mode"] == "fast"
    np.testing.assert_array_equal(fast.neighbors, table.neighbors)
    capsys.readouterr()
    assert main(["kg", "neighbors", "糖尿病", "--store", str(toy), "--k", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "score" in lines[1] and len(lines) == 4 and "糖尿病肾病" in lines[2]


def test_kg_commands_say_when_they_use_cmekg(monkeypatch, capsys) -> None:
    """Without --store a kg command says on stderr that it reads CMeKG (opened here as the toy graph)."""
    import kgplm.kg

    toy = Path(__file__).resolve().parents[1] / "graphs" / "toy_medical.ttl"
    opened = []
    monkeypatch.setattr(
        kgplm.kg, "open_store", lambda spec: opened.append(spec) or KGStore.from_rdf(toy, show_progress=False)
    )
    assert main(["kg", "neighbors", "糖尿病", "--ranked-by", "none"]) == 0
    assert opened == ["cmekg"] and "using CMeKG" in capsys.readouterr().err
    assert main(["kg", "neighbors", "糖尿病", "--ranked-by", "none", "--store", str(toy)]) == 0
    assert opened == ["cmekg", str(toy)] and capsys.readouterr().err == ""


def test_kg_embed_trains_saves_and_evaluates(tmp_path: Path, capsys) -> None:
    from kgplm.kg.embeddings import KGEmbeddings

    toy = Path(__file__).resolve().parents[1] / "graphs" / "toy_medical.ttl"
    out = tmp_path / "emb"
    assert (
        main(
            [
                "kg",
                "embed",
                "--store",
                str(toy),
                "--output-dir",
                str(out),
                "--dim",
                "8",
                "--epochs",
                "3",
                "--batch-size",
                "8",
                "--test-fraction",
                "0.2",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "triples/s" in text and "filtered link prediction" in text and "mrr" in text
    store = KGStore.from_rdf(toy, show_progress=False)
    embeddings = KGEmbeddings.load(out, store=store)
    assert embeddings.entity_embeddings.shape == (store.num_entities, 8)

    transr = tmp_path / "transr"
    assert (
        main(
            [
                "kg",
                "embed",
                "--store",
                str(toy),
                "--output-dir",
                str(transr),
                "--method",
                "transr",
                "--dim",
                "8",
                "--relation-dim",
                "4",
                "--epochs",
                "1",
                "--init-from",
                str(out),
                "--format",
                "openke",
            ]
        )
        == 0
    )
    assert (transr / "embedding.vec.json").is_file() and (transr / "entity2id.txt").is_file()
    assert KGEmbeddings.from_openke(transr, store).projections.shape == (store.num_relations, 8, 4)


def test_kg_embed_takes_learning_rate_and_the_deprecated_lr_warns_and_trains_alike(tmp_path: Path, capsys) -> None:
    import pytest
    import torch

    from kgplm.kg.embeddings import KGEmbeddings

    toy = Path(__file__).resolve().parents[1] / "graphs" / "toy_medical.ttl"
    common = ["kg", "embed", "--store", str(toy), "--dim", "8", "--epochs", "2", "--batch-size", "8"]

    def trained(name: str, *rate: str) -> KGEmbeddings:
        assert main([*common, "--output-dir", str(tmp_path / name), *rate]) == 0
        return KGEmbeddings.load(tmp_path / name)

    default, new = trained("default"), trained("new", "--learning-rate", "0.05")
    with pytest.warns(FutureWarning, match="kgplm kg embed: the option '--lr' is deprecated.*'--learning-rate'"):
        old = trained("old", "--lr", "0.05")
    assert (default.config["lr"], new.config["lr"]) == (0.01, 0.05)
    assert torch.equal(old.entity_embeddings, new.entity_embeddings) and old.config == new.config
    assert not torch.equal(new.entity_embeddings, default.entity_embeddings)
    capsys.readouterr()
    assert main([*common, "--output-dir", str(tmp_path / "both"), "--lr", "0.05", "--learning-rate", "0.05"]) == 2
    assert "'--lr' (deprecated) and '--learning-rate'" in capsys.readouterr().err
    assert not (tmp_path / "both").exists()
    with pytest.raises(SystemExit):
        main(["kg", "embed", "--help"])
    usage = capsys.readouterr().out
    assert "--learning-rate" in usage and "--lr " not in usage and "--lr\n" not in usage


def test_text_vocab_link_and_build_corpus(tmp_path: Path, capsys) -> None:
    import json

    from kgplm.text import load_corpus, load_tokenizer

    toy = Path(__file__).resolve().parents[1] / "graphs" / "toy_medical.ttl"
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("糖尿病患者常见多尿。\n服用二甲双胍和阿司匹林。\n" * 10, encoding="utf-8")
    assert (
        main(
            [
                "text",
                "vocab",
                str(corpus),
                "--vocab-size",
                "200",
                "--min-frequency",
                "2",
                "--output-dir",
                str(tmp_path / "tok"),
            ]
        )
        == 0
    )
    tokenizer = load_tokenizer(tmp_path / "tok")
    assert tokenizer.tokenize("二甲双胍") == ["二", "甲", "双", "胍"]
    capsys.readouterr()

    assert main(["text", "link", "糖尿病伴多尿", "--store", str(toy)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["start"], r["end"], r["entity"]) for r in records] == [(0, 3, "糖尿病"), (4, 6, "多尿")]

    out = tmp_path / "built"
    assert (
        main(
            [
                "text",
                "build-corpus",
                str(corpus),
                "--store",
                str(toy),
                "--tokenizer",
                str(tmp_path / "tok"),
                "--output-dir",
                str(out),
                "--max-length",
                "16",
            ]
        )
        == 0
    )
    assert "20 examples from 20 documents" in capsys.readouterr().out
    assert len(load_corpus(out)) == 20


def test_train_then_replay_from_its_config(tmp_path: Path, capsys) -> None:
    import json

    from tests.test_api import TOY_GRAPH, write_toy_corpus

    corpus = write_toy_corpus(tmp_path / "notes.txt", lines=40)
    out = tmp_path / "run"
    tiny = json.dumps(
        {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "max_position_embeddings": 160,
        }
    )
    arguments = [
        "train",
        "--method",
        "smedbert",
        "--graph",
        str(TOY_GRAPH),
        "--corpus",
        str(corpus),
        "--output-dir",
        str(out),
        "--text-model",
        tiny,
        "--vocab-size",
        "300",
        "--max-length",
        "64",
        "--max-steps",
        "6",
        "--batch-size",
        "4",
        "--log-every",
        "3",
        "--checkpoint-every",
        "3",
        "--no-progress",
        "--model-options",
        '{"mnem_num_negatives": 3}',
    ]
    assert main(arguments) == 0
    assert "smedbert: 6 steps" in capsys.readouterr().out
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [3, 6] and {"mlm", "sop", "mnem", "mmem"} <= set(records[0])
    assert json.loads((out / "model" / "config.json").read_text())["mnem_num_negatives"] == 3
    assert main(["train", "--config", str(out / "run_config.json"), "--no-progress"]) == 0  # finished: resumes, no work
    assert [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()] == records
    assert main(["train", "--graph", str(TOY_GRAPH)]) == 2
    assert "needs --method, --corpus and --output-dir" in capsys.readouterr().err


def test_text_link_stats_and_filters_on_an_english_ontology(tmp_path: Path, capsys) -> None:
    from tests.text.test_linking_filters import ONTOLOGY, SENTENCES

    ontology = tmp_path / "hp.obo"
    ontology.write_text(ONTOLOGY, encoding="utf-8")
    corpus = tmp_path / "abstracts.txt"
    corpus.write_text("\n".join(SENTENCES), encoding="utf-8")
    capsys.readouterr()
    assert main(["text", "link", "--file", str(corpus), "--store", str(ontology), "--stats", "--top", "3"]) == 0
    out = capsys.readouterr().out
    # defaults: no "All", no qualifiers, no 277000; "Corn" (Heloma) is the most linked entity
    assert out.splitlines()[0] == "8 mentions of 5 entities in 4 texts"
    assert "| Heloma | http://purl.obolibrary.org/obo/HP_0200020 | HP | 4 | 50.0% |" in out
    assert "| Corn | 2 | 25.0% |" in out and "| corn | 2 | 25.0% |" in out
    assert (
        main(
            [
                "text",
                "link",
                "--file",
                str(corpus),
                "--store",
                str(ontology),
                "--stats",
                "--common-word-share",
                "0.5",
                "--root",
                "HP:0000118",
                "--stop-words",
                "none",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "dropped as a common word: 'corn' (in 75.0% of the texts)" in out
    assert out.splitlines()[0] == "4 mentions of 4 entities in 4 texts"  # hearing loss, seizure, mole, short stature
    assert (
        main(
            ["text", "link", "no all here; 277000", "--store", str(ontology), "--stop-words", "none", "--keep-numeric"]
        )
        == 0
    )
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["surface"], r["entity"]) for r in records] == [("all", "All"), ("277000", "Hearing impairment")]
