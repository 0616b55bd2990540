"""WordPiece vocabularies: eHealth-style training, loading vocab.txt, offsets, save/load."""

from __future__ import annotations

import itertools

import pytest

from kgplm.exceptions import ConfigurationError, MissingFileError
from kgplm.text import build_vocab, load_tokenizer, read_corpus


def test_bert_base_chinese_vocab_splits_chinese_and_keeps_offsets(chinese_tokenizer):
    # BERT's own normaliser lower-cases full-width letters but keeps them full width (the vocabulary has them)
    text = "２型糖尿病做ＭＲＩ，MRI"
    encoding = chinese_tokenizer(text, return_offsets_mapping=True)
    tokens = chinese_tokenizer.convert_ids_to_tokens(encoding["input_ids"])
    assert tokens == ["[CLS]", "２", "型", "糖", "尿", "病", "做", "ｍ", "##ｒ", "##ｉ", "，", "mr", "##i", "[SEP]"]
    pieces = [text[start:end] for start, end in encoding["offset_mapping"][1:-1]]
    assert pieces == ["２", "型", "糖", "尿", "病", "做", "Ｍ", "Ｒ", "Ｉ", "，", "MR", "I"]
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


def _cmedqaner_texts(shared_data, split="test"):
    import json

    path = shared_data / "tasks" / "zh" / "chineseblue" / "cMedQANER" / f"{split}.json"
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_a_third_party_vocab_gives_the_ids_of_bert_tokenizer(shared_data, chinese_tokenizer):
    """Same ids as transformers' BertTokenizer over the same vocab.txt (190 of 215 texts differed with NFKC)."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizer

    folder = shared_data / "vocab" / "bert-base-chinese"
    reference = BertTokenizer.from_pretrained(str(folder))
    assert len(reference) == 21128  # not the 5-token vocabulary that vocab_file= silently builds
    wordpiece = BertWordPieceTokenizer(str(folder / "vocab.txt"), lowercase=True)
    texts = _cmedqaner_texts(shared_data) + ["２型糖尿病做ＭＲＩ，血糖7.8mmol/L①", "Ⅱ型 10㎎"]
    same = sum(chinese_tokenizer(t)["input_ids"] == reference(t)["input_ids"] == wordpiece.encode(t).ids for t in texts)
    assert same == len(texts)
    pair = chinese_tokenizer(texts[0], texts[1])
    expected = reference(texts[0], texts[1])
    assert pair["input_ids"] == expected["input_ids"] and pair["token_type_ids"] == expected["token_type_ids"]


def test_the_normalisation_is_recorded_and_kept_on_reload(tmp_path, shared_data, chinese_tokenizer):
    from kgplm.text.tokenization import normalization_of, save_tokenizer

    text = "２型糖尿病做ＭＲＩ①"
    own = build_vocab([text] * 10 + ["患者头痛发热"] * 10, vocab_size=200, min_frequency=1, show_progress=False)
    assert normalization_of(own) == "nfkc+bert" and normalization_of(chinese_tokenizer) == "bert"
    for name, tokenizer in (("own", own), ("third_party", chinese_tokenizer)):
        save_tokenizer(tokenizer, tmp_path / name)
        for reloaded in (load_tokenizer(tmp_path / name), load_tokenizer(tmp_path / name / "vocab.txt")):
            assert normalization_of(reloaded) == normalization_of(tokenizer)
            assert reloaded(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert own.tokenize("ＭＲＩ") == own.tokenize("mri")  # NFKC folds full width for kgplm's own vocabularies
