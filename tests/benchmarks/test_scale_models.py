"""benchmarks/scale_models.py's stage functions at toy sizes: what the scale table reads from them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from scale_models import kebiolm_step, measured, parse_size, random_triples, smedbert_step, transe_epoch  # noqa: E402


def test_sizes_and_random_triples():
    assert [parse_size(s) for s in ("115k", "1M", "4M", "2500", "1.5M")] == [115_157, 10**6, 4 * 10**6, 2500, 1_500_000]
    triples = random_triples(50, 1000, num_relations=3, chunk=64)
    assert triples.dtype == np.int32 and triples.shape == (1000, 3)
    assert triples[:, [0, 2]].max() < 50 and set(np.unique(triples[:, 1])) == {0, 1, 2}
    assert np.array_equal(triples, random_triples(50, 1000, num_relations=3, chunk=64))


def test_measured_sees_an_allocation_of_the_block():
    result = {}
    with measured(result):
        block = np.ones(50 * 2**20 // 8)  # 50 MiB, written
    assert result["peak_rss_delta"] >= 45 * 2**20 and block.sum() > 0
    assert result["seconds"] >= 0 and result["cpu_seconds"] >= 0


def test_transe_epoch_on_random_triples():
    result = transe_epoch(random_triples(300, 2000, num_relations=4), num_entities=300, num_relations=4, dim=8)
    assert result["num_triples"] == 2000 and result["table_bytes"] == (300 + 4) * 8 * 4
    assert result["triples_per_second"] == pytest.approx(2000 / result["seconds"])


@pytest.mark.parametrize("softmax", ["full", "sampled"])
def test_knowledge_method_steps(softmax):
    kebiolm = kebiolm_step(500, linking_softmax=softmax, steps=1, mentions=3, length=32, vocab_size=100)
    assert kebiolm["stage"] == f"kebiolm-{softmax}" and kebiolm["mentions"] == 8 * 3 and kebiolm["seconds"] > 0
    if softmax == "full":
        smedbert = smedbert_step(500, steps=1, length=128, vocab_size=100)
        assert smedbert["neighbour_edges"] == 8 * 4 * 10 and smedbert["seconds"] > 0


def test_the_softmax_comparison_refuses_a_store_without_its_corpus(tmp_path):
    from scale_models import compare_linking_softmaxes

    from kgplm import KGStore
    from kgplm.exceptions import ConfigurationError

    store = KGStore.from_rdf(Path(__file__).resolve().parents[2] / "graphs" / "toy_medical.ttl", show_progress=False)
    with pytest.raises(ConfigurationError, match="without a corpus"):
        compare_linking_softmaxes(tmp_path / "work", store=store)
    assert not (tmp_path / "work").exists()  # refused before any run started
