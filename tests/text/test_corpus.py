"""Corpus reading and building: formats, located errors, examples, neighbours, save/load, resume."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from kgplm import KGStore
from kgplm.exceptions import ArtifactError, ConfigurationError, DataFormatError
from kgplm.kg.pepr import top_k_neighbors
from kgplm.text import Document, EntityLinker, build_corpus, entity_frequencies, load_corpus, read_corpus

TOY = Path(__file__).resolve().parents[2] / "graphs" / "toy_medical.ttl"


def test_read_formats_and_located_errors(tmp_path):
    (tmp_path / "a.txt").write_text("第一行\n\n第二行\n", encoding="utf-8")
    assert [(d.text, d.line) for d in read_corpus(tmp_path / "a.txt")] == [("第一行", 1), ("第二行", 3)]
    (tmp_path / "b.jsonl").write_text('{"text": "甲"}\n{"text": "乙"}\n{"text": 3}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"b.jsonl:3.*no string field 'text'"):
        list(read_corpus(tmp_path / "b.jsonl"))
    (tmp_path / "c.jsonl").write_text('{"text": "甲"}\n{"text": \n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"c.jsonl:2"):
        list(read_corpus(tmp_path / "c.jsonl"))
    (tmp_path / "d.csv").write_text('id,title,body\n1,标题,"多行\n正文"\n2,只有标题,\n3,x\n', encoding="utf-8")
    documents = read_corpus(tmp_path / "d.csv", columns=["title", "body"])
    assert [(d.text, d.line) for d in itertools.islice(documents, 2)] == [("标题\n多行\n正文", 2), ("只有标题", 4)]
    with pytest.raises(DataFormatError, match=r"d.csv:5.*2 fields.*expected 3 fields"):
        list(read_corpus(tmp_path / "d.csv", columns=["title"]))
    with pytest.raises(ConfigurationError, match=r"no column \['answer'\]"):
        list(read_corpus(tmp_path / "d.csv", columns=["answer"]))


@pytest.fixture(scope="module")
def toy_store():
    return KGStore.from_rdf(TOY, show_progress=False)


def test_the_encoding_option_reads_lines_csv_and_json_lines(tmp_path):
    from kgplm.exceptions import EncodingError

    text = ["患者主诉头痛三天", "伴有恶心，既往有高血压病史"]
    lines = tmp_path / "notes.txt"
    lines.write_bytes("\n".join(text).encode("gb18030"))
    table = tmp_path / "dialogue.csv"
    table.write_bytes(("title,ask\n" + "\n".join(f"{t},问" for t in text)).encode("gbk"))
    records = tmp_path / "notes.jsonl"
    records.write_bytes("\n".join(json.dumps({"text": t}, ensure_ascii=False) for t in text).encode("big5", "replace"))
    assert [d.text for d in read_corpus(lines, encoding="gb18030")] == text
    assert [d.text for d in read_corpus(table, encoding="gbk", columns=["title"])] == text
    assert len(list(read_corpus(records, encoding="big5"))) == 2
    for path in (lines, table):
        with pytest.raises(EncodingError, match=r"encoding= \(kgplm.train: corpus_options=\{'encoding'") as error:
            list(read_corpus(path))
        assert str(error.value).startswith(str(path))
    with pytest.raises(EncodingError, match=r"notes.txt:1: not valid ascii.*encoding='ascii'"):
        list(read_corpus(lines, encoding="ascii"))
    with pytest.raises(ConfigurationError, match="not a text encoding"):
        list(read_corpus(lines, encoding="gkb"))
    with pytest.raises(ConfigurationError, match="ASCII"):
        list(read_corpus(lines, encoding="utf-16"))


def test_examples_carry_exact_mentions_and_pepr_neighbours(tmp_path, toy_store, chinese_tokenizer):
    store = toy_store
    table = top_k_neighbors(store, k=3, mode="exact")
    texts = ["糖尿病患者常见多尿和多饮，可服用二甲双胍。", "没有实体的句子。", "二甲双胍" * 40]
    dataset = build_corpus(
        texts,
        store=store,
        tokenizer=chinese_tokenizer,
        output_dir=tmp_path / "c",
        neighbor_table=table,
        max_length=32,
        progress=False,
    )
    first = dataset[0]
    tokens = chinese_tokenizer.convert_ids_to_tokens(first["input_ids"])
    linked = [
        ("".join(tokens[s:e]), store.entity_name(entity))
        for (s, e), entity in zip(first["mention_spans"], first["mention_entity_ids"])
    ]
    assert linked == [("糖尿病", "糖尿病"), ("多尿", "多尿"), ("多饮", "多饮"), ("二甲双胍", "二甲双胍")]
    for entity, neighbors, relations, types in zip(
        first["mention_entity_ids"], first["neighbor_ids"], first["neighbor_relations"], first["neighbor_types"]
    ):
        row = table.row_of(entity)
        assert neighbors == table.neighbors[row].tolist() and relations == table.relations[row].tolist()
        primary = store.primary_type_ids()
        assert types == [int(primary[n]) if n >= 0 else -1 for n in neighbors]
    assert dataset[1]["mention_spans"] == []
    # the long document is chunked; the mention cut at the chunk edge is dropped, not mangled
    long_chunks = [row for row in dataset if row["document"] == "2"]
    assert len(long_chunks) == 6 and all(len(row["input_ids"]) <= 32 for row in long_chunks)
    frequencies = entity_frequencies(tmp_path / "c")
    assert frequencies[store.entity_id("二甲双胍")] == 41 and frequencies[store.entity_id("多尿")] == 1
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert manifest["statistics"]["mentions_in_text"] == 44
    # chunks hold 30 characters; the 4-character names crossing characters 30, 90 and 150 are cut
    assert manifest["statistics"]["mentions_in_examples"] == 4 + 40 - 3


def test_dialogue_corpus_round_trips_and_resumes(tmp_path, cmekg_store, chinese_tokenizer, shared_data):
    source = shared_data / "corpus" / "medical_dialogue" / "sample_IM_5000-6000.utf8.csv"
    documents = list(itertools.islice(read_corpus(source, columns=["title", "ask", "answer"]), 240))
    linker = EntityLinker(cmekg_store)
    options = dict(
        store=cmekg_store, tokenizer=chinese_tokenizer, linker=linker, max_length=64, shard_size=100, progress=False
    )
    built = build_corpus(documents, output_dir=tmp_path / "corpus", **options)
    loaded = load_corpus(tmp_path / "corpus")
    assert len(loaded) == len(built) > 240
    assert loaded[:] == built[:]
    assert {"input_ids", "attention_mask", "word_ids", "mention_spans", "mention_entity_ids"} <= set(loaded.features)
    mentions = sum(len(row) for row in loaded["mention_entity_ids"])
    assert mentions > 1000
    # every mention's tokens spell the linked name (normalised) — no lost Latin or digits
    row = loaded[0]
    for (start, end), entity in zip(row["mention_spans"], row["mention_entity_ids"]):
        surface = chinese_tokenizer.decode(row["input_ids"][start:end]).replace(" ", "")
        names = {n.lower().replace(" ", "") for n in [cmekg_store.entity_name(entity), *cmekg_store.aliases(entity)]}
        assert surface in names

    # resume: a lost shard is rebuilt, finished shards are kept as they are
    shards = tmp_path / "corpus" / "shards"
    kept = (shards / "shard-00000" / "statistics.json").stat().st_mtime_ns
    shutil.rmtree(shards / "shard-00001")
    (tmp_path / "corpus" / "manifest.json").unlink()
    resumed = build_corpus(documents, output_dir=tmp_path / "corpus", **options)
    assert resumed[:] == built[:]
    assert (shards / "shard-00000" / "statistics.json").stat().st_mtime_ns == kept
    with pytest.raises(ArtifactError, match="other settings"):
        build_corpus(documents, output_dir=tmp_path / "corpus", **{**options, "max_length": 32})


def test_documents_keep_their_ids(tmp_path, toy_store, chinese_tokenizer):
    dataset = build_corpus(
        [Document("note-7", "多尿")],
        store=toy_store,
        tokenizer=chinese_tokenizer,
        output_dir=tmp_path / "d",
        whole_word=False,
        progress=False,
    )
    assert dataset[0]["document"] == "note-7" and "word_ids" not in dataset.features
    assert np.array_equal(entity_frequencies(tmp_path / "d").nonzero()[0], [toy_store.entity_id("多尿")])
