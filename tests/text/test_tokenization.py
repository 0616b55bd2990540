"""WordPiece vocabularies: eHealth-style training, loading vocab.txt, offsets, save/load."""

from __future__ import annotations

import itertools

import pytest

from kgplm.exceptions import ConfigurationError, MissingFileError
from kgplm.text import build_vocab, load_tokenizer, read_corpus


def test_bert_base_chinese_vocab_splits_chinese_and_keeps_offsets(chinese_tokenizer):
    text = "２型糖尿病做ＭＲＩ"
    encoding = chinese_tokenizer(text, return_offsets_mapping=True)
    tokens = chinese_tokenizer.convert_ids_to_tokens(encoding["input_ids"])
    assert tokens == ["[CLS]", "2", "型", "糖", "尿", "病", "做", "mr", "##i", "[SEP]"]
    pieces = [text[start:end] for start, end in encoding["offset_mapping"][1:-1]]
    assert pieces == ["２", "型", "糖", "尿", "病", "做", "ＭＲ", "Ｉ"]
    assert chinese_tokenizer.convert_tokens_to_ids("[MASK]") == 103 and len(chinese_tokenizer) == 21128


def test_build_vocab_on_real_text_drops_rare_pieces_and_round_trips(tmp_path, shared_data):
    corpus = shared_data / "corpus" / "medical_dialogue" / "IM_neike.utf8.txt"
    texts = [document.text for document in itertools.islice(read_corpus(corpus), 3000)]
    texts += ["IHC检查阳性，TSHR抗体升高，MRI未见异常。"] * 6 + ["ZQXJ罕见缩写"] * 4
    tokenizer = build_vocab(texts, vocab_size=3000, output_dir=tmp_path / "tok", show_progress=False)
    vocabulary = tokenizer.get_vocab()
    assert [vocabulary[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 1, 2, 3, 4]
    assert len(vocabulary) <= 3000
    # abbreviations seen ≥ 5 times become pieces; lower-cased; a piece seen 4 times does not
    assert {"ihc", "tshr", "mri"} <= set(vocabulary)
    assert "zqxj" not in vocabulary
    assert all(len(token) == 1 for token in ("糖", "尿") if token in vocabulary)
    assert tokenizer.tokenize("ＩＨＣ") == ["ihc"]

    loaded = load_tokenizer(tmp_path / "tok")
    from_vocab_txt = load_tokenizer(tmp_path / "tok" / "vocab.txt")
    sample = "患者IHC阳性，做了ＭＲＩ，血糖7.8mmol/L"
    assert loaded(sample)["input_ids"] == tokenizer(sample)["input_ids"] == from_vocab_txt(sample)["input_ids"]


def test_errors():
    with pytest.raises(ConfigurationError, match="vocab_size"):
        build_vocab(["a"], vocab_size=3)
    with pytest.raises(MissingFileError):
        load_tokenizer("/nonexistent/vocab.txt")
