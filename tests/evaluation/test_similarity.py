"""Similarity sets on a toy KG with known answers; Jaro–Winkler against published values; Acc@1 invariants."""

from __future__ import annotations

import pytest
import torch

from kgplm import KGStore
from kgplm.evaluation.similarity import (
    SimilarityQuery,
    build_similarity_sets,
    evaluate_similarity,
    jaro_winkler,
    similarity_hits,
)

TOY = """\
@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
ex:d1 a ex:Disease ; rdfs:label "糖尿病"@zh ; skos:altLabel "消渴病"@zh, "diabetes"@en .
ex:d2 a ex:Disease ; rdfs:label "糖尿病肾病"@zh .
ex:d3 a ex:Disease ; rdfs:label "糖尿病足"@zh .
ex:d4 a ex:Disease ; rdfs:label "糖尿病眼病"@zh .
ex:d5 a ex:Disease ; rdfs:label "感冒"@zh .
ex:d6 a ex:Disease ; rdfs:label "高血压"@zh ; ex:symptom ex:s1, ex:s2, ex:s3 .
ex:d7 a ex:Disease ; rdfs:label "高血压病"@zh ; ex:symptom ex:s1, ex:s2, ex:s3 .
ex:d8 a ex:Disease ; rdfs:label "高血压脑病"@zh ; ex:symptom ex:s1, ex:s2 .
ex:d9 a ex:Disease ; rdfs:label "高血压危象"@zh .
ex:d10 a ex:Disease ; rdfs:label "高血脂病"@zh .
ex:d11 a ex:Disease ; rdfs:label "肺炎"@zh ; skos:altLabel "肺部感染"@zh .
ex:s1 a ex:Symptom ; rdfs:label "头痛"@zh .
ex:s2 a ex:Symptom ; rdfs:label "头晕"@zh .
ex:s3 a ex:Symptom ; rdfs:label "耳鸣"@zh .
ex:s4 a ex:Symptom ; rdfs:label "糖尿"@zh .
"""


@pytest.fixture()
def store(tmp_path):
    path = tmp_path / "toy.ttl"
    path.write_text(TOY, encoding="utf-8")
    return KGStore.from_rdf(path, show_progress=False)


def test_jaro_winkler_published_values():
    # Winkler (1990) / the standard worked examples
    assert jaro_winkler("MARTHA", "MARHTA") == pytest.approx(0.9611, abs=1e-4)
    assert jaro_winkler("DIXON", "DICKSONX") == pytest.approx(0.8133, abs=1e-4)
    assert jaro_winkler("DWAYNE", "DUANE") == pytest.approx(0.84, abs=1e-4)
    assert jaro_winkler("abc", "xyz") == 0.0 and jaro_winkler("糖尿病", "糖尿病") == 1.0


def test_sets_on_a_toy_graph(store):
    corpus = ["患者有消渴病史。"] + ["肺部感染较重。"] * 5
    sets = build_similarity_sets(store, corpus_texts=corpus, num_negatives=3, rare_max_count=2, seed=0)
    d1 = {q.query: q for q in sets["D1"]}
    # the English alias is not paired with a Chinese name; 肺部感染 → 肺炎 has no 3 Disease names with JW > 0.6
    assert set(d1) == {"消渴病"}
    query = d1["消渴病"]
    assert query.candidates[0] == "糖尿病"
    # the three Disease names closest to 糖尿病 by Jaro–Winkler, most similar first; never the Symptom 糖尿
    expected = sorted(["糖尿病肾病", "糖尿病足", "糖尿病眼病"], key=lambda n: -jaro_winkler("糖尿病", n))
    assert list(query.candidates[1:]) == expected
    # D2: 高血压 and 高血压病 share all three neighbours; 高血压脑病 shares two (Jaccard 2/3) and is not paired
    assert [(q.query, q.candidates[0]) for q in sets["D2"]] == [("高血压", "高血压病")]
    assert "高血压" not in sets["D2"][0].candidates[1:]
    assert all(jaro_winkler("高血压病", n) > 0.6 for n in sets["D2"][0].candidates[1:])
    # D3: 消渴病 occurs once (rare), 肺部感染 five times (not rare, and it has no negatives anyway)
    assert [q.query for q in sets["D3"]] == ["消渴病"]


def test_accuracy_at_1_counts_strict_wins_only():
    class Constant(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None, token_type_ids=None, **_):
            return type("Output", (), {"last_hidden_state": torch.ones(*input_ids.shape, 4)})()

    class Tokenizer:
        def __call__(self, names, **_):
            length = max(len(n) for n in names) + 2
            ids = torch.zeros(len(names), length, dtype=torch.long)
            return {
                "input_ids": ids,
                "attention_mask": torch.ones_like(ids),
                "special_tokens_mask": torch.zeros_like(ids),
            }

        def encode(self, text):
            return [0]

    queries = [SimilarityQuery("a", ("b", "c", "d"), 0, 1)]
    assert evaluate_similarity(Constant(), Tokenizer(), {"D1": queries}) == {"D1": 0.0}


def test_per_query_hits_by_hand():
    """Names are embedded as one-hot-like vectors chosen by hand: query "q" is closest to "p" (a hit),
    query "r" to its negative "n" (a miss); Acc@1 is their mean."""
    vectors = {"q": [1.0, 0.0], "p": [0.9, 0.1], "n": [0.0, 1.0], "r": [0.1, 0.9], "m": [1.0, 0.05]}
    names = sorted(vectors)

    class Lookup(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None, token_type_ids=None, **_):
            hidden = torch.tensor([vectors[names[i]] for i in input_ids[:, 0].tolist()])[:, None]  # (batch, 1, 2)
            return type("Output", (), {"last_hidden_state": hidden})()

    class Tokenizer:
        def __call__(self, batch, **_):
            ids = torch.tensor([[names.index(n)] for n in batch])
            return {
                "input_ids": ids,
                "attention_mask": torch.ones_like(ids),
                "special_tokens_mask": torch.zeros_like(ids),
            }

        def encode(self, text):
            return [0]

    queries = [SimilarityQuery("q", ("p", "n"), 0, 1), SimilarityQuery("r", ("m", "n"), 2, 3)]
    hits = similarity_hits(Lookup(), Tokenizer(), {"D1": queries})
    assert hits["D1"].tolist() == [True, False]
    assert evaluate_similarity(Lookup(), Tokenizer(), {"D1": queries}) == {"D1": 0.5}


def test_prefix_filtered_neighbourhood_pairs_equal_brute_force():
    import random

    from kgplm.evaluation.similarity import _neighborhood_pairs

    rng = random.Random(3)
    neighbors = [set(rng.sample(range(8), rng.randint(0, 6))) for _ in range(150)]
    neighbors += [set(s) for s in neighbors[:20]]  # exact duplicates guarantee some pairs
    expected = sorted(
        (a, b)
        for a in range(len(neighbors))
        for b in range(a + 1, len(neighbors))
        if len(neighbors[a] & neighbors[b]) >= 3
        and len(neighbors[a] & neighbors[b]) >= 0.75 * len(neighbors[a] | neighbors[b])
    )
    assert sum(neighbors[a] != neighbors[b] for a, b in expected) > 20  # not only exact duplicates
    assert _neighborhood_pairs(neighbors, 0.75, 3) == expected
