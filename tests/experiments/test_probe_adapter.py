"""The replication table's probe adapter (experiments/_probe.py) on the toy graph: its groups are the
probe library's baseline hits and the text's statements, and its fingerprint follows the queries."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

from _probe import HeldOutProbe  # noqa: E402

from kgplm import KGStore  # noqa: E402
from kgplm.evaluation.probing import reference_scores  # noqa: E402
from kgplm.text.tokenization import build_vocab  # noqa: E402
from tests.test_api import TOY_GRAPH  # noqa: E402


def test_groups_follow_the_baseline_and_the_text():
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    names = [text for e in range(store.num_entities) for text, _, _ in store.labels(e)] + store.relation_names
    tokenizer = build_vocab(names * 3 + ["的有是。"] * 3, 400, min_frequency=1, show_progress=False)
    text = ["视网膜病变的常见症状有视物模糊。"]
    adapter = HeldOutProbe(store, tokenizer, text, max_probes=500)
    baseline = np.array([bool(hit) for hit in reference_scores(adapter.probe, store, tokenizer)["baseline"]])
    assert adapter.hard.tolist() == (~baseline).tolist() and adapter.hard.any() and (~adapter.hard).any()
    vision = [i for i, q in enumerate(adapter.probe.queries) if q.prefix == "视网膜病变的常见症状有"]
    assert len(vision) == 1 and adapter.seen[vision[0]] and adapter.hard[vision[0]]  # stated, and only once
    pair = {"视网膜病变", "视物模糊"}  # the only statement: a query is seen when it asks about this pair
    assert adapter.seen.tolist() == [
        store.entity_name(store.entity_id(q.known)) in pair and bool(pair & set(q.answer_names))
        for q in adapter.probe.queries
    ]
    assert ((adapter.chance > 0) & (adapter.chance <= 1)).all()  # few names per length in the toy graph
    fewer = HeldOutProbe(store, tokenizer, text, max_probes=5)
    assert fewer.fingerprint != adapter.fingerprint
    assert HeldOutProbe(store, tokenizer, text, max_probes=500).fingerprint == adapter.fingerprint
