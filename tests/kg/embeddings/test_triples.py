"""The seeded train/test split of triples."""

from __future__ import annotations

import numpy as np

from kgplm.kg.embeddings import split_triples


def test_split_keeps_every_test_entity_in_train(composition_store):
    triples = composition_store.triples
    train, test = split_triples(triples, test_fraction=0.2, seed=1)
    assert len(train) + len(test) == len(triples)
    assert 0 < len(test) <= round(0.2 * len(triples))
    seen = set(train[:, [0, 2]].ravel().tolist())
    assert set(test[:, [0, 2]].ravel().tolist()) <= seen
    again = split_triples(triples, test_fraction=0.2, seed=1)
    assert np.array_equal(again[1], test)
