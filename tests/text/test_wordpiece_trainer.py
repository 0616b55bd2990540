"""kgplm's deterministic WordPiece learner: same vocabulary in any process, hand-computed merges,
the incremental pair counts against a naive recount, parity with ``tokenizers``' trainer where no
tie arises, and real text through a saved and reloaded tokenizer."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from kgplm.exceptions import ConfigurationError
from kgplm.text import build_vocab, load_tokenizer
from kgplm.text.tokenization import SPECIAL_TOKENS
from kgplm.text.wordpiece_trainer import learn_wordpiece

REPO_ROOT = Path(__file__).resolve().parents[2]


def _tied_corpus() -> list[str]:
    """Latin words over 8 letters, every word as frequent as many others: count ties at most merges."""
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(2, 6))) for _ in range(60)]
    return [" ".join(words[i : i + 5]) + "，患者头痛" for i in range(0, 60, 5)] * 3


_CHILD = """
import json, sys
from kgplm.text.tokenization import build_vocab
vocabulary = build_vocab(json.load(sys.stdin), 80, min_frequency=1, show_progress=False).get_vocab()
json.dump(sorted(vocabulary.items(), key=lambda item: item[1]), sys.stdout, ensure_ascii=False)
"""


def test_the_same_call_learns_the_same_vocabulary_in_processes_with_other_hash_seeds():
    """tokenizers' trainer broke these ties in hash-map order: 5 processes gave 5 different vocabularies."""
    outputs = []
    for seed in ("0", "1"):
        environment = {
            **os.environ,
            "PYTHONHASHSEED": seed,
            "PYTHONPATH": str(REPO_ROOT),
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "RAYON_NUM_THREADS": "1",
        }
        done = subprocess.run(
            [sys.executable, "-c", _CHILD],
            cwd=REPO_ROOT,
            env=environment,
            capture_output=True,
            text=True,
            check=True,
            input=json.dumps(_tied_corpus()),
        )
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]
    assert len(outputs[0]) == 80 and [token for token, _ in outputs[0][:5]] == list(SPECIAL_TOKENS)
    # and in this process, twice
    here = [
        sorted(
            build_vocab(_tied_corpus(), 80, min_frequency=1, show_progress=False).get_vocab().items(),
            key=lambda item: item[1],
        )
        for _ in range(2)
    ]
    assert [list(pair) for pair in here[0]] == [list(pair) for pair in here[1]] == outputs[0]


# hug 10, pug 5, pun 12, bun 4, hugs 5 (the Hugging Face course's BPE example), with "##" pieces:
#   counts  h ##u: 15   ##u ##g: 20   p ##u: 17   ##u ##n: 16   b ##u: 4   ##g ##s: 5
#   1. ##u + ##g (20) → ##ug     now h ##ug: 15, p ##ug: 5, p ##u: 12, ##u ##n: 16, ##ug ##s: 5
#   2. ##u + ##n (16) → ##un     now p ##un: 12, b ##un: 4
#   3. h + ##ug (15) → hug       now hug ##s: 5
#   4. p + ##un (12) → pun
#   5. tie at 5: (hug, ##s) < (p, ##ug) as strings → hugs
#   6. p + ##ug (5) → pug
#   7. b + ##un (4) → bun        (not made with min_frequency=5)
HUG_COUNTS = {"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}
HUG_MERGES = [
    ("##u", "##g", "##ug", 20),
    ("##u", "##n", "##un", 16),
    ("h", "##ug", "hug", 15),
    ("p", "##un", "pun", 12),
    ("hug", "##s", "hugs", 5),
    ("p", "##ug", "pug", 5),
]
HUG_ALPHABET = ["b", "g", "h", "n", "p", "s", "u", "##g", "##n", "##s", "##u"]


def test_hand_computed_merges_and_ids():
    learnt = learn_wordpiece(HUG_COUNTS, 100, min_frequency=5)
    assert list(learnt.merges) == HUG_MERGES
    assert list(learnt.tokens) == HUG_ALPHABET + ["##ug", "##un", "hug", "pun", "hugs", "pug"]
    everything = learn_wordpiece(HUG_COUNTS, 100, min_frequency=1)
    assert everything.tokens[-1] == "bun" and everything.merges[-1] == ("b", "##un", "bun", 4)
    # vocab_size stops the merges: 11 alphabet pieces + 3 merged
    assert learn_wordpiece(HUG_COUNTS, 14).tokens[-3:] == ("##ug", "##un", "hug")


def test_build_vocab_normalises_before_counting_and_numbers_special_tokens_first():
    texts = ["ＨＵＧ"] * 10 + ["Pug"] * 5 + ["pun"] * 12 + ["bun"] * 4 + ["hugs"] * 5
    tokenizer = build_vocab(texts, 100, min_frequency=5, show_progress=False)
    vocabulary = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    assert [token for token, _ in vocabulary] == (
        list(SPECIAL_TOKENS) + HUG_ALPHABET + ["##ug", "##un", "hug", "pun", "hugs", "pug"]
    )
    assert [index for _, index in vocabulary] == list(range(len(vocabulary)))
    assert tokenizer.tokenize("Hugs bun") == ["hugs", "b", "##un"]


def test_limit_alphabet_keeps_the_most_frequent_characters_ties_to_the_smaller_code_point():
    # character counts: a 3, b 2, c 2, d 2 → limit 2 keeps a and b (b < c < d)
    learnt = learn_wordpiece({"ab": 1, "ca": 1, "ad": 1, "b": 1, "c": 1, "d": 1}, 100, limit_alphabet=2)
    assert learnt.tokens == ("a", "b", "##a", "##b", "ab")
    # words holding a character outside the alphabet take no part in the merges: "ca" and "ad" make nothing
    assert learnt.merges == (("a", "##b", "ab", 1),)
    with pytest.raises(ConfigurationError, match="min_frequency"):
        learn_wordpiece(HUG_COUNTS, 100, min_frequency=0)


def _naive_merges(word_counts, vocab_size, min_frequency=1):
    """Recount every pair over every word at every step; the best by (count, then the smaller pair)."""
    words = {word: [word[0]] + ["##" + char for char in word[1:]] for word in word_counts}
    size = len({c for w in word_counts for c in w}) + len({c for w in word_counts for c in w[1:]})
    merges, made, unique = [], set(), True
    while size < vocab_size:
        pairs = Counter()
        for word, symbols in words.items():
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] += word_counts[word]
        if not pairs or max(pairs.values()) < min_frequency:
            break
        best = max(pairs.values())
        tied = sorted(pair for pair, count in pairs.items() if count == best)
        unique = unique and len(tied) == 1
        left, right = tied[0]
        new = left + right.removeprefix("##")
        merges.append((left, right, new, best))
        if new not in made:
            made.add(new)
            size += 1
        for word, symbols in words.items():
            merged, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == (left, right):
                    merged.append(new)
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            words[word] = merged
    return merges, unique


def _random_counts(seed, words=40, letters="abcdefg", longest=4, top=1000):
    rng = random.Random(seed)
    counts = {}
    while len(counts) < words:
        word = "".join(rng.choice(letters) for _ in range(rng.randint(2, longest)))
        counts[word] = rng.randint(1, top)
    return counts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_incremental_pair_counts_match_a_naive_recount(seed):
    counts = _random_counts(seed, words=60, letters="abcd", longest=7, top=5)  # many ties, repeated letters
    learnt = learn_wordpiece(counts, 10**6)
    expected, unique = _naive_merges(counts, 10**6)
    assert not unique  # the corpus does exercise the tie-break
    assert list(learnt.merges) == expected


def test_where_no_tie_arises_the_tokens_are_those_of_the_tokenizers_trainer():
    """The independent reference: tokenizers' WordPieceTrainer, on a corpus whose first 24 merges have
    a unique best pair each (checked by the naive recount), stopped by vocab_size before the first tie."""
    from tokenizers import models, trainers

    from kgplm.text.tokenization import wordpiece_pipeline

    counts = _random_counts(1464)
    alphabet = len({c for w in counts for c in w}) + len({c for w in counts for c in w[1:]})
    merges, unique = _naive_merges(counts, alphabet + 24)
    assert unique and len({new for _, _, new, _ in merges}) == 24
    texts = [" ".join([word] * count) for word, count in sorted(counts.items())] + ["头痛发热"]
    vocab_size = len(SPECIAL_TOKENS) + alphabet + 4 + 24  # + 头 痛 发 热
    ours = build_vocab(texts, vocab_size, min_frequency=1, show_progress=False).get_vocab()
    reference = wordpiece_pipeline(models.WordPiece(unk_token="[UNK]"))
    reference.train_from_iterator(
        texts,
        trainer=trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=1,
            special_tokens=list(SPECIAL_TOKENS),
            limit_alphabet=20000,
            continuing_subword_prefix="##",
            show_progress=False,
        ),
    )
    theirs = reference.get_vocab()
    assert len(ours) == vocab_size and set(ours) == set(theirs)
    assert {token: ours[token] for token in SPECIAL_TOKENS} == {token: theirs[token] for token in SPECIAL_TOKENS}


def _cmedqaner_texts(shared_data, split):
    path = shared_data / "tasks" / "zh" / "chineseblue" / "cMedQANER" / f"{split}.json"
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.slow
def test_real_text_round_trips_through_a_saved_vocabulary(tmp_path, shared_data):
    tokenizer = build_vocab(
        _cmedqaner_texts(shared_data, "train"), 3000, min_frequency=2, output_dir=tmp_path / "tok", show_progress=False
    )
    texts = _cmedqaner_texts(shared_data, "test")
    directory, vocab_txt = load_tokenizer(tmp_path / "tok"), load_tokenizer(tmp_path / "tok" / "vocab.txt")
    assert directory.get_vocab() == vocab_txt.get_vocab() == tokenizer.get_vocab()
    pipeline = tokenizer.backend_tokenizer
    unknown = tokenizer.unk_token_id
    for text in texts:
        encoding = tokenizer(text, return_offsets_mapping=True)
        assert directory(text)["input_ids"] == vocab_txt(text)["input_ids"] == encoding["input_ids"]
        # every known piece is (part of: NFKC makes "…" three ".") the normalised text under its offsets
        for token_id, (start, end) in zip(encoding["input_ids"][1:-1], encoding["offset_mapping"][1:-1]):
            if token_id != unknown:
                piece = tokenizer.convert_ids_to_tokens(token_id).removeprefix("##")
                assert piece in pipeline.normalizer.normalize_str(text[start:end])
    known = sum(token != unknown for text in texts for token in tokenizer(text)["input_ids"])
    total = sum(len(tokenizer(text)["input_ids"]) for text in texts)
    assert known / total > 0.99
