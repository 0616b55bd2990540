"""The KG artefact cache: keys, entries, and kgplm.train runs that share a graph's artefacts."""

from __future__ import annotations

import functools
import json
import logging
import os

import numpy as np
import pytest

import kgplm
from kgplm.artefact_cache import ArtefactCache, cache_dir, graph_content_hash, graph_names_hash, texts_hash
from kgplm.cli import main
from kgplm.exceptions import ConfigurationError
from tests.test_api import TOY_GRAPH, toy_arguments, write_toy_corpus


def test_the_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KGPLM_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.setenv("KGPLM_CACHE", "off")
    assert cache_dir() is None
    monkeypatch.delenv("KGPLM_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "kgplm"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "kgplm"


def test_entries_are_keyed_by_every_setting_and_taken_by_hard_link(tmp_path):
    cache = ArtefactCache(tmp_path / "cache")
    settings = {"graph": "abc", "dim": 8, "epochs": 2}
    assert cache.key("transe", settings) == cache.key("transe", dict(reversed(list(settings.items()))))
    assert (
        len(
            {
                cache.key("transe", settings),
                cache.key("transr", settings),
                cache.key("transe", {**settings, "epochs": 3}),
                cache.key("transe", {**settings, "graph": "abd"}),
            }
        )
        == 4
    )
    artefact = tmp_path / "run" / "transe"
    artefact.mkdir(parents=True)
    (artefact / "embeddings.safetensors").write_bytes(b"\x01" * 100)
    (artefact / "config.json").write_text("{}", encoding="utf-8")
    assert not cache.fetch("transe", settings, tmp_path / "other" / "transe")
    entry = cache.put("transe", settings, artefact)
    assert entry == cache.root / "transe" / cache.key("transe", settings)
    assert cache.fetch("transe", settings, tmp_path / "other" / "transe")
    taken = tmp_path / "other" / "transe" / "embeddings.safetensors"
    assert taken.read_bytes() == b"\x01" * 100
    assert os.stat(taken).st_ino == os.stat(artefact / "embeddings.safetensors").st_ino  # one copy on disk
    (entry,) = cache.entries()
    assert (entry.kind, entry.size, entry.record["settings"]) == ("transe", 102, settings)
    with pytest.raises(ConfigurationError, match="older_than_days"):
        cache.prune()
    assert cache.prune(older_than_days=1) == []
    assert [e.key for e in cache.prune(everything=True)] == [entry.key]
    assert cache.entries() == [] and taken.read_bytes() == b"\x01" * 100  # the run keeps its files


def test_the_content_hash_changes_with_any_link():
    from kgplm import KGStore
    from tests.kg.helpers import store_from_edges

    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    assert graph_content_hash(store) == graph_content_hash(KGStore.from_rdf(TOY_GRAPH, show_progress=False))
    one = store_from_edges([(0, 0, 1), (1, 0, 2)], num_entities=3)
    other = store_from_edges([(0, 0, 1), (2, 0, 1)], num_entities=3)
    assert graph_content_hash(one) != graph_content_hash(other)


def test_a_second_run_on_the_same_graph_trains_no_embedding_and_computes_no_pepr(tmp_path, monkeypatch, caplog):
    """SMedBERT (PEPR, TransE → TransR, the entity linker) into one directory, then another into another:
    the second takes the table, both embeddings and the linker from the cache (nothing is computed or
    built; its files are the first run's, hard-linked); a third with other KG epochs trains its own
    embeddings; KeBioLM on the same graph builds nothing, and other linking options a linker of their own."""
    import kgplm.kg.embeddings
    import kgplm.kg.pepr
    import kgplm.text.linking

    monkeypatch.setenv("KGPLM_CACHE", str(tmp_path / "cache"))
    corpus = write_toy_corpus(tmp_path / "notes.txt")
    first = kgplm.train("smedbert", **toy_arguments(corpus, tmp_path / "first", max_steps=2))
    cache = ArtefactCache(tmp_path / "cache")
    assert sorted(entry.kind for entry in cache.entries()) == ["linker", "neighbor_table", "store", "transe", "transr"]

    calls = []

    def counted(function, name):
        @functools.wraps(function)  # the same signature, so the same defaults in the cache keys
        def wrapper(*args, **options):
            calls.append((name, options.get("method")))
            return function(*args, **options)

        return wrapper

    monkeypatch.setattr(
        kgplm.kg.embeddings, "train_kg_embeddings", counted(kgplm.kg.embeddings.train_kg_embeddings, "embeddings")
    )
    monkeypatch.setattr(kgplm.kg.pepr, "top_k_neighbors", counted(kgplm.kg.pepr.top_k_neighbors, "pepr"))
    monkeypatch.setattr(kgplm.text.linking, "build_linker", counted(kgplm.text.linking.build_linker, "linker"))
    with caplog.at_level(logging.INFO, logger="kgplm"):
        second = kgplm.train("smedbert", **toy_arguments(corpus, tmp_path / "second", max_steps=3, learning_rate=1e-3))
    assert calls == []
    # the cached linker links the corpus as the built one did: the same linked corpus, byte for byte
    shards = sorted(path.relative_to(first.output_dir) for path in (first.output_dir / "corpus").rglob("*.arrow"))
    assert shards and all(
        (first.output_dir / name).read_bytes() == (second.output_dir / name).read_bytes() for name in shards
    )
    assert "taken from the cache" in caplog.text and "KG embedding stage: training" not in caplog.text
    for name in ("kg/neighbors.npz", "kg/transe/embeddings.safetensors", "kg/embeddings/embeddings.safetensors"):
        assert (second.output_dir / name).read_bytes() == (first.output_dir / name).read_bytes()
        assert os.stat(second.output_dir / name).st_ino == os.stat(first.output_dir / name).st_ino
    assert second.steps == 3

    third = kgplm.train("smedbert", **toy_arguments(corpus, tmp_path / "third", max_steps=2, kg_epochs=3))
    assert calls == [("embeddings", "transe"), ("embeddings", "transr")]  # PEPR and the linker read no KG epochs
    assert json.loads((third.output_dir / "kg" / "transe" / "config.json").read_text())["config"]["epochs"] == 3

    # another seed: the embeddings follow it unless kg_seed fixes them; the PEPR table reads no seed
    calls.clear()
    kgplm.train("smedbert", **toy_arguments(corpus, tmp_path / "fourth", max_steps=2, seed=1, kg_seed=0))
    assert calls == []
    kgplm.train("smedbert", **toy_arguments(corpus, tmp_path / "fifth", max_steps=2, seed=1))
    assert calls == [("embeddings", "transe"), ("embeddings", "transr")]

    # another method on the same graph: KeBioLM links the corpus and reads TransR, both from the cache
    calls.clear()
    kgplm.train("kebiolm", **toy_arguments(corpus, tmp_path / "sixth", max_steps=1))
    assert calls == []
    # other linking options: another linker
    kgplm.train("kebiolm", **toy_arguments(corpus, tmp_path / "seventh", max_steps=1, linking={"min_length": 3}))
    assert calls == [("linker", None)]


def test_cache_ls_and_prune(tmp_path, capsys):
    cache = ArtefactCache(tmp_path / "cache")
    artefact = tmp_path / "table.npz"
    np.savez(artefact, seeds=np.arange(3))
    cache.put("neighbor_table", {"graph": "abc", "k": 10}, artefact)
    assert main(["cache", "ls", "--dir", str(cache.root)]) == 0
    listing = capsys.readouterr().out
    assert "1 entries" in listing and "neighbor_table" in listing and '"k": 10' in listing
    assert main(["cache", "prune", "--dir", str(cache.root), "--all"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out and cache.entries() == []


def _toy_store(directory=None, replace: tuple[str, str] | None = None):
    from kgplm import KGStore

    if replace is None:
        return KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    text = TOY_GRAPH.read_text(encoding="utf-8")
    assert replace[0] in text
    path = directory / "changed.ttl"
    path.write_text(text.replace(*replace), encoding="utf-8")
    return KGStore.from_rdf(path, show_progress=False)


def test_the_linker_key_holds_the_names_the_options_and_the_corpus_only_when_it_is_read(tmp_path):
    from kgplm.training.stages import linker_settings

    store = _toy_store()
    renamed = _toy_store(tmp_path, ('skos:altLabel "消渴"@zh', 'skos:altLabel "消渴症"@zh'))  # one alias, no link
    assert graph_content_hash(renamed) == graph_content_hash(store)  # the links and IRIs are the same
    assert graph_names_hash(renamed) != graph_names_hash(store)
    assert graph_names_hash(_toy_store()) == graph_names_hash(store)

    texts_read = []

    def texts(corpus=("患者有糖尿病。",)):
        texts_read.append(corpus)
        return iter(corpus)

    key = functools.partial(ArtefactCache.key, "linker")
    plain = key(linker_settings(store, None, texts))
    assert texts_read == []  # without common_word_share the build reads no corpus, nor does its key
    assert plain == key(linker_settings(_toy_store(), {"min_length": 2}, texts))  # a default given is the default
    assert plain != key(linker_settings(renamed, None, texts))
    assert plain != key(linker_settings(store, {"min_length": 3}, texts))
    assert plain != key(linker_settings(store, {"stop_words": None}, texts))
    share = {"common_word_share": 0.5}
    first = key(linker_settings(store, share, texts))
    assert texts_read and first != plain
    assert key(linker_settings(store, share, texts)) == first
    assert key(linker_settings(store, share, lambda: texts(("患者有高血压。",)))) != first
    assert texts_hash(["ab", "c"]) != texts_hash(["a", "bc"])


def test_the_saved_stores_of_two_runs_are_one_copy_on_disk(tmp_path, monkeypatch):
    """The graph parsed from RDF and a knowledge_graph store object, saved by two runs: one cache entry each,
    hard-linked into both runs' ``kg/store`` and ``knowledge_store``, loading as the stores they were."""
    from kgplm import KGStore

    monkeypatch.setenv("KGPLM_CACHE", str(tmp_path / "cache"))
    corpus = write_toy_corpus(tmp_path / "notes.txt")
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    pruned = store.with_triples(np.asarray(store.triples)[::2])
    runs = [
        kgplm.train("kebiolm", **toy_arguments(corpus, tmp_path / name, max_steps=1, knowledge_graph=pruned))
        for name in ("first", "second")
    ]
    entries = ArtefactCache(tmp_path / "cache").entries("store")
    assert len(entries) == 2
    for name, expected in (("kg/store", store), ("knowledge_store", pruned)):
        first, second = (run.output_dir / name for run in runs)
        files = sorted(path.name for path in first.iterdir())
        assert files == sorted(path.name for path in second.iterdir()) and "manifest.json" in files
        for file in files:
            assert os.stat(first / file).st_ino == os.stat(second / file).st_ino
        assert KGStore.load(second).equals(expected)
