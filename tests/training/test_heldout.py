"""Held-out triples: sentences stating them leave the text, KG embeddings and PEPR tables lose them,
through kgplm.train (toy graph, hand-checked)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import kgplm
from kgplm import KGStore
from kgplm.exceptions import ArtifactError, ConfigurationError, DataFormatError
from kgplm.kg.pepr import NeighborTable
from kgplm.training.heldout import HeldOutTriples, read_labelled_triples
from tests.test_api import TOY_GRAPH, toy_arguments, write_toy_corpus


@pytest.fixture(scope="module")
def store():
    return KGStore.from_rdf(TOY_GRAPH, show_progress=False)


def _triple(store, head, relation, tail):
    return [store.entity_id(head), store.relation_id(relation), store.entity_id(tail)]


def test_sentences_stating_a_held_out_fact_are_removed(store):
    held_out = HeldOutTriples(store, np.array([_triple(store, "感冒", "常见症状", "发热")]))
    text = "糖尿病的常见症状有多尿。感冒常伴发烧！感冒多休息?发热不退应就医\n感冒和fever常见。"
    kept, removed = held_out.filter_text(text)
    # 发烧 and fever are aliases of 发热; the sentences naming only one of the two entities stay
    assert kept == "糖尿病的常见症状有多尿。感冒多休息?发热不退应就医\n"
    assert removed == 2
    assert held_out.filter_text("感冒。") == ("感冒。", 0)


def test_the_graph_and_neighbour_tables_lose_exactly_the_held_out_triples(store):
    fact = _triple(store, "感冒", "常见症状", "发热")
    held_out = HeldOutTriples(store, np.array([fact]))
    kept = held_out.kept_triples()
    assert len(kept) == store.num_triples - 1 and fact not in kept.tolist()
    cold, fever, cough = store.entity_id("感冒"), store.entity_id("发热"), store.entity_id("咳嗽")
    symptom, department = store.relation_id("常见症状"), store.relation_id("就诊科室")
    table = NeighborTable(
        seeds=np.array([cold, fever]),
        neighbors=np.array([[fever, cough, 7], [cold, cough, -1]]),
        relations=np.array([[symptom, symptom, department], [symptom, -1, -1]]),
        directions=np.array([[0, 0, 1], [1, -1, -1]]),
        scores=np.array([[0.5, 0.3, 0.1], [0.4, 0.2, 0.0]]),
        config={"k": 3},
    )
    filtered = held_out.filter_neighbor_table(table)
    assert filtered.neighbors.tolist() == [[cough, 7, -1], [cough, -1, -1]]  # (cough, related) stays for fever
    assert filtered.relations.tolist() == [[symptom, department, -1], [-1, -1, -1]]
    assert filtered.directions.tolist() == [[0, 1, -1], [-1, -1, -1]]
    assert filtered.scores.tolist() == [[0.3, 0.1, 0.0], [0.2, 0.0, 0.0]]
    assert filtered.config["held_out_links_removed"] == 2


def test_triple_files_are_read_and_checked(store, tmp_path):
    tsv = tmp_path / "held.tsv"
    tsv.write_text("感冒\t常见症状\t发热\n\n糖尿病\t就诊科室\t内分泌科\n", encoding="utf-8")
    assert read_labelled_triples(tsv) == [["感冒", "常见症状", "发热"], ["糖尿病", "就诊科室", "内分泌科"]]
    assert len(HeldOutTriples.load(tsv, store)) == 2
    bad = tmp_path / "bad.tsv"
    bad.write_text("感冒\t常见症状\t发热\n感冒\t常见症状\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad.tsv:2: 2 tab-separated fields"):
        read_labelled_triples(bad)
    not_a_list = tmp_path / "probe.json"
    not_a_list.write_text(json.dumps({"exclude_from_training": [["a", "b"]]}), encoding="utf-8")
    with pytest.raises(DataFormatError, match="exclude_from_training"):
        read_labelled_triples(not_a_list)
    unknown = tmp_path / "unknown.tsv"
    unknown.write_text("感冒\t常见症状\t不存在的病\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="row 0"):
        HeldOutTriples.load(unknown, store)


def test_train_keeps_held_out_facts_out_of_every_stage(store, tmp_path):
    from kgplm.evaluation.probing import build_probe
    from kgplm.kg.embeddings import KGEmbeddings
    from kgplm.text.corpus import load_corpus
    from kgplm.text.tokenization import load_tokenizer

    probe_path = build_probe(store, queries_per_relation=3, held_out_fraction=0.5, seed=0).save(tmp_path / "p.json")
    held_out = HeldOutTriples.load(probe_path, store)
    corpus = write_toy_corpus(tmp_path / "notes.txt")
    lines = corpus.read_text(encoding="utf-8").splitlines()
    stating = sum(held_out.filter_text(line)[1] for line in lines)
    assert 0 < stating < len(lines)
    output = tmp_path / "run"
    kgplm.train(
        "smedbert",
        **toy_arguments(corpus, output, max_steps=2, kg_epochs=2, log_every=1),
        exclude_triples=str(probe_path),
    )
    config = json.loads((output / "run_config.json").read_text(encoding="utf-8"))
    assert config["exclude_triples"] == str(probe_path)
    assert config["stages"]["held_out_text"]["sentences_removed"] == stating
    assert config["stages"]["held_out_triples"]["count"] == len(held_out)
    for kind in ("transe", "embeddings"):  # TransE and the TransR initialised from it
        trained = KGEmbeddings.load(output / "kg" / kind)
        assert trained.config["num_training_triples"] == store.num_triples - len(held_out)
    table = NeighborTable.load(output / "kg" / "neighbors.npz")
    excluded = set(map(tuple, held_out.triples.tolist()))
    linked = []
    for seed, neighbors, relations, directions in zip(table.seeds, table.neighbors, table.relations, table.directions):
        for neighbor, relation, direction in zip(neighbors.tolist(), relations.tolist(), directions.tolist()):
            if direction == 0:
                linked.append((int(seed), relation, neighbor))
            elif direction == 1:
                linked.append((neighbor, relation, int(seed)))
    assert linked and not excluded & set(linked)
    assert table.config.get("held_out_links_removed", 0) > 0
    tokenizer = load_tokenizer(output / "tokenizer")
    texts = [
        tokenizer.decode(ids, skip_special_tokens=True).replace(" ", "")
        for ids in load_corpus(output / "corpus")["input_ids"]
    ]
    assert len(texts) == len(lines) - stating
    assert all(held_out.filter_text(text)[1] == 0 for text in texts)
    # a rerun must name the same held-out triples; precomputed KG embeddings cannot be checked
    other = build_probe(store, queries_per_relation=3, held_out_fraction=0.5, seed=5)
    with pytest.raises(ArtifactError, match="exclude_triples differ"):
        kgplm.train(
            "smedbert",
            **toy_arguments(corpus, output, max_steps=2, kg_epochs=2, log_every=1),
            exclude_triples=str(other.save(tmp_path / "q.json")),
        )
    other.save(probe_path)  # the same file name with other triples in it
    with pytest.raises(ArtifactError, match="other held-out triples"):
        kgplm.train(
            "smedbert",
            **toy_arguments(corpus, output, max_steps=2, kg_epochs=2, log_every=1),
            exclude_triples=str(probe_path),
        )
    with pytest.raises(ConfigurationError, match="precomputed kg_embeddings"):
        kgplm.train(
            "smedbert",
            **toy_arguments(corpus, tmp_path / "run2", max_steps=2, kg_epochs=2),
            exclude_triples=str(probe_path),
            kg_embeddings=str(output / "kg" / "embeddings"),
        )
