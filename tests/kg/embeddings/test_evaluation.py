"""Filtered, realistic link-prediction ranks against a brute-force count, and their metrics."""

from __future__ import annotations

import numpy as np
import pytest

from kgplm.exceptions import KgplmError
from kgplm.kg.embeddings import KGEmbeddings, rank_triples, write_triples_tsv
from tests.kg.embeddings.helpers import random_embeddings


def _brute_force_ranks(emb: KGEmbeddings, triples, side: str, known: set) -> list[float]:
    ranks = []
    for head, relation, tail in triples:
        truth = head if side == "head" else tail
        candidates = []
        for entity in range(emb.num_entities):
            triple = (entity, relation, tail) if side == "head" else (head, relation, entity)
            if entity != truth and triple in known:
                continue  # filtered: another true answer
            candidates.append(float(emb.energy([triple])[0]))
        true_energy = float(emb.energy([(head, relation, tail)])[0])
        optimistic = 1 + sum(c < true_energy for c in candidates)
        pessimistic = sum(c <= true_energy for c in candidates)
        ranks.append((optimistic + pessimistic) / 2)
    return ranks


@pytest.mark.parametrize("method", ["transe", "transr"])
@pytest.mark.parametrize("side", ["head", "tail"])
def test_filtered_ranks_agree_with_brute_force(method, side):
    rng = np.random.default_rng(3)
    emb = random_embeddings(method, 15, 3, seed=4)
    # two entities with identical vectors create ties, which the realistic rank must handle
    emb.entity_embeddings[7] = emb.entity_embeddings[2]
    known = {tuple(t) for t in rng.integers(0, [15, 3, 15], size=(60, 3)).tolist()}
    test = np.array(sorted(known))[:25]
    filtered = rank_triples(emb, test, side=side, filter_triples=np.array(sorted(known)), batch_size=4)
    assert filtered.tolist() == pytest.approx(_brute_force_ranks(emb, test.tolist(), side, known))
    raw = rank_triples(emb, test, side=side)
    assert raw.tolist() == pytest.approx(_brute_force_ranks(emb, test.tolist(), side, set()))
    assert np.all(raw >= filtered)


def test_evaluate_reports_the_metrics_of_the_ranks():
    emb = random_embeddings("transe", 10, 2, seed=1)
    triples = np.array([[0, 0, 1], [2, 1, 3], [4, 0, 5]])
    ranks = np.concatenate([rank_triples(emb, triples, side=s) for s in ("head", "tail")])
    metrics = emb.evaluate(triples, progress=False)
    assert metrics["mrr"] == pytest.approx(np.mean(1 / ranks))
    assert metrics["hits@3"] == pytest.approx(np.mean(ranks <= 3))
    assert metrics["mean_rank"] == pytest.approx(ranks.mean())
    assert metrics["num_ranks"] == 6


def test_evaluate_accepts_labelled_triples(tmp_path, composition_store):
    """Triples of names or IRIs, as PyKEEN users read them from a TSV, rank like their id triples."""
    store = composition_store
    emb = random_embeddings("transe", store.num_entities, store.num_relations, seed=2)
    ids = store.triples[:10]
    write_triples_tsv(store, tmp_path / "test.tsv", ids)  # IRIs, PyKEEN's format
    by_iri = [line.split("\t") for line in (tmp_path / "test.tsv").read_text(encoding="utf-8").splitlines()]
    by_name = [(store.entity_name(h), store.relation_name(r), store.entity_name(t)) for h, r, t in ids.tolist()]
    expected = emb.evaluate(ids, filter_triples=store.triples, progress=False)
    for labelled in (by_iri, by_name, np.array(by_name, dtype=object)):
        assert emb.evaluate(labelled, store=store, filter_triples=store.triples, progress=False) == expected
    with pytest.raises(KgplmError, match="drug999"):
        emb.evaluate([("drug0", "treats", "drug999")], store=store, progress=False)
    with pytest.raises(KgplmError, match="cures"):
        emb.evaluate([("drug0", "cures", "disease0")], store=store, progress=False)
    with pytest.raises(KgplmError, match="store="):
        emb.evaluate(by_name, progress=False)
