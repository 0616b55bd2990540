"""EntityLinker at scale (issue 30.6): built from the store's compact name index, saved, memory-mapped on load."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import synthetic_umls  # noqa: E402

from kgplm import KGStore  # noqa: E402
from kgplm.exceptions import ArtifactError, ConfigurationError  # noqa: E402
from kgplm.kg.collector import GraphCollector  # noqa: E402
from kgplm.kg.vocabulary import LABEL_ROLES  # noqa: E402
from kgplm.text import EntityLinker  # noqa: E402

TEXTS = [
    "患者有2型糖尿病和高血压，MRI显示正常。",
    "Pain and PAIN: the pain of diabetes mellitus, AS and as.",
    "感冒后头痛，服用阿司匹林。",
    "",
    "no names here at all",
]


def tiny_store() -> KGStore:
    collector = GraphCollector(source="test")
    name, alias = LABEL_ROLES.index("prefLabel"), LABEL_ROLES.index("altLabel")
    labels = [
        ("糖尿病", [("diabetes mellitus", "en")]),
        ("2型糖尿病", []),
        ("高血压", [("hypertension", "en")]),
        ("磁共振", [("MRI", "en")]),
        ("头痛", [("pain", "en"), ("Pain", "en")]),
        ("疼痛", [("pain", "en")]),
        ("强直性脊柱炎", [("AS", "en")]),
        ("感冒", []),
        ("阿司匹林", [("aspirin", "en")]),
    ]
    relation = collector.relation("http://example.org/r", "r")
    for index, (display, aliases) in enumerate(labels):
        entity = collector.entity(f"http://example.org/e{index}")
        collector.add_label(entity, display, "zh", name)
        for text, language in aliases:
            collector.add_label(entity, text, language, alias)
        if index:
            collector.add_triple(entity, relation, 0)
    return collector.build()


@pytest.fixture(scope="module")
def store() -> KGStore:
    return tiny_store()


@pytest.fixture(scope="module")
def jieba_linker(store: KGStore) -> EntityLinker:
    return EntityLinker(store)  # the default word boundaries: jieba's best path


def mentions(linker: EntityLinker, nested: bool = False):
    return [linker.link(text, nested=nested) for text in TEXTS] + [linker.link_many(TEXTS, nested=nested)]


def test_store_linker_equals_the_old_dictionary_path(store: KGStore, jieba_linker: EntityLinker) -> None:
    """From the compact index as from the ``{name: ids}`` dict the linker used to read."""
    pairs = [
        (jieba_linker, EntityLinker(store, names=store.name_index())),
        (
            EntityLinker(store, word_boundaries=None),
            EntityLinker(store, names=store.name_index(), word_boundaries=None),
        ),
    ]
    for from_index, from_dict in pairs:
        assert list(from_index.patterns) == list(from_dict.patterns)
        assert list(from_index._candidates) == list(from_dict._candidates)
        for nested in (False, True):
            assert mentions(from_index, nested) == mentions(from_dict, nested)
    assert [m.candidates for m in jieba_linker.link("the pain")] == [(4, 5)]


@pytest.mark.parametrize("mmap", [True, False])
def test_save_load_gives_identical_mentions(
    tmp_path: Path, mmap: bool, store: KGStore, jieba_linker: EntityLinker
) -> None:
    for options in (
        {},
        {"word_boundaries": None},
        {"nested": True, "case_sensitive_abbreviations": False, "word_boundaries": None},
    ):
        linker = EntityLinker(store, **options) if options else jieba_linker
        loaded = EntityLinker.load(linker.save(tmp_path / "linker"), store=store, mmap=mmap)
        assert loaded.num_names == linker.num_names and list(loaded.patterns) == list(linker.patterns)
        for nested in (False, True):
            assert mentions(loaded, nested) == mentions(linker, nested)
        assert loaded.count(TEXTS).tolist() == linker.count(TEXTS).tolist()
    assert not list(tmp_path.glob(".linker.tmp-*"))  # written to a temporary name, renamed


def test_generated_umls_save_load(tmp_path: Path) -> None:
    directory = tmp_path / "rrf"
    synthetic_umls.write_synthetic_umls(directory, 200, seed=2, chunk_size=100)
    store = KGStore.from_umls_rrf(directory, show_progress=False)
    linker = EntityLinker(store, word_boundaries=None)
    text = " and ".join(store.entity_name(entity) for entity in range(0, store.num_entities, 7))
    found = linker.link(text)
    assert len(found) >= store.num_entities // 7 - 2
    loaded = EntityLinker.load(linker.save(tmp_path / "linker"), store=KGStore.load(store.save(tmp_path / "store")))
    assert loaded.link(text) == found
    assert EntityLinker(store, names=store.name_index(), word_boundaries=None).link(text) == found


def test_memory_mapped_load_reads_no_array(tmp_path: Path, store: KGStore) -> None:
    """The loaded arrays are maps of the files, not copies: a change to a file after ``load`` shows through."""
    linker = EntityLinker(store, word_boundaries=None)
    directory = linker.save(tmp_path / "linker")
    loaded = EntityLinker.load(directory, store=store)
    for array_ in (*loaded._automaton, loaded._best_entity, loaded._candidates.indptr, loaded._candidates.entities):
        assert isinstance(array_, np.memmap) and Path(array_.filename).parent == directory.resolve()
    assert loaded.link("头痛")[0].entity_id == 4
    path = directory / "best_entity.npy"
    on_disk = np.load(path, mmap_mode="r+")
    entry = int(linker.find("头痛")[2][0])
    on_disk[entry] = 7  # rewrite the file under the loaded linker
    on_disk.flush()
    del on_disk
    assert int(loaded.best_entities(np.array([entry]))[0]) == 7
    eager = EntityLinker.load(directory, store=store, mmap=False)
    assert not isinstance(eager._best_entity, np.memmap) and int(eager.best_entities(np.array([entry]))[0]) == 7


def test_load_checks_the_directory_and_the_store(tmp_path: Path, store: KGStore) -> None:
    directory = EntityLinker(store, word_boundaries=None).save(tmp_path / "linker")
    other = KGStore.from_umls_rrf(
        synthetic_umls.write_synthetic_umls(tmp_path / "rrf", 30, seed=1) and tmp_path / "rrf", show_progress=False
    )
    with pytest.raises(ConfigurationError, match="built from a store"):
        EntityLinker.load(directory, store=other)
    manifest = json.loads((directory / "manifest.json").read_text())
    (directory / "manifest.json").write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(ArtifactError, match="format version 99"):
        EntityLinker.load(directory)
    with pytest.raises(ArtifactError, match="manifest.json is missing"):
        EntityLinker.load(tmp_path)


def test_candidate_rows_gather_equals_row_by_row() -> None:
    from kgplm.text.linking_persistence import CandidateTable

    table = CandidateTable.from_rows([(4, 1), (7,), (), (2, 3, 9), (5,)])
    indices = np.array([3, 0, 0, 2, 4, 1, 3])  # repeats, an empty row, more than the short-list cut
    assert table.rows(indices) == [(2, 3, 9), (4, 1), (4, 1), (), (5,), (7,), (2, 3, 9)]
    assert table.rows(indices[:2]) == [(2, 3, 9), (4, 1)]
    assert table.rows(np.zeros(0, dtype=np.int64)) == []


def test_link_of_a_long_text_gives_each_mention_its_candidates(store: KGStore, jieba_linker: EntityLinker) -> None:
    text = " ".join(TEXTS) * 5  # dozens of mentions: the gathered path, not the short-list one
    starts, ends, entries = jieba_linker.find(text)
    linked = jieba_linker.link(text)
    assert len(linked) == len(starts) > 4
    pain = {store.entity_id("http://example.org/e4"), store.entity_id("http://example.org/e5")}  # 头痛, 疼痛
    seen_pain = 0
    for mention, start, end, entry in zip(linked, starts.tolist(), ends.tolist(), entries.tolist()):
        assert (mention.start, mention.end, mention.surface) == (start, end, text[start:end])
        assert mention.entity_id == mention.candidates[0] == int(jieba_linker.best_entities(np.array([entry]))[0])
        if mention.surface.lower() == "pain":
            seen_pain += 1
            assert set(mention.candidates) == pain and len(mention.candidates) == 2
        else:
            assert len(mention.candidates) == 1
    assert seen_pain == 15  # Pain, PAIN and pain in TEXTS[1] (matching ignores case), five times over
