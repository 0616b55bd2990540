"""kgplm.viz draws an entity's neighbourhood: the entity and exactly its PEPR top-K neighbours."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.image  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from kgplm import KGStore  # noqa: E402
from kgplm.exceptions import ConfigurationError  # noqa: E402
from kgplm.kg.pepr import personalized_pagerank  # noqa: E402
from kgplm.viz import draw_neighbourhood  # noqa: E402

TOY_GRAPH = Path(__file__).resolve().parents[1] / "graphs" / "toy_medical.ttl"


@pytest.fixture(scope="module")
def store() -> KGStore:
    return KGStore.from_rdf(TOY_GRAPH, show_progress=False)


def _expected_top_k(store: KGStore, entity: int, k: int) -> list[int]:
    """The top-k one-hop neighbours by exact PPR scores (the row of the dense power iteration)."""
    scores = np.asarray(personalized_pagerank(store, [entity], tol=1e-12))[0]
    neighbours = sorted(set(store.one_hop(entity)[0].tolist()) - {entity}, key=lambda n: (-scores[n], n))
    if len(neighbours) > k:  # the expectation is only well defined without a tie at the cut
        assert not np.isclose(scores[neighbours[k - 1]], scores[neighbours[k]], rtol=1e-6)
    return neighbours[:k]


def _drawn(figure, prefix: str) -> list[int]:
    return [
        int(artist.get_gid().split(":")[1])
        for ax in figure.axes
        for artist in ax.get_children()
        if (artist.get_gid() or "").startswith(prefix)
    ]


@pytest.mark.parametrize("name, k", [("糖尿病", 4), ("高血压", 3), ("二甲双胍", 10)])
def test_the_drawn_nodes_are_the_entity_and_exactly_its_top_k(store, tmp_path, name, k) -> None:
    entity = store.entity_id(name)
    drawing = draw_neighbourhood(store, name, k=k)
    expected = _expected_top_k(store, entity, k)
    path = tmp_path / "neighbourhood.png"
    drawing.save(path)

    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100 and image.std() > 0
    assert _drawn(drawing.figure, "node:") == [entity, *expected]  # one marker per node, centre first
    assert sorted(_drawn(drawing.figure, "label:")) == sorted([entity, *expected])
    assert drawing.ranked == expected and drawing.node_ids == [entity, *expected]
    assert drawing.scores == sorted(drawing.scores, reverse=True)
    labels = {artist.get_gid(): artist.get_text() for artist in drawing.figure.axes[0].texts if artist.get_gid()}
    for rank, neighbour in enumerate(expected, 1):
        assert labels[f"label:{neighbour}"].startswith(f"#{rank} {store.entity_name(neighbour)}")
    relations = {
        artist.get_text() for artist in drawing.figure.axes[0].texts if (artist.get_gid() or "").startswith("relation:")
    }
    frame = store.neighbors(entity)
    assert relations == set(frame[frame.neighbor_id.isin(expected)].relation)
    legend = {text.get_text() for text in drawing.figure.axes[0].get_legend().get_texts()}
    assert legend == {store.entity_type(n) or "(untyped)" for n in [entity, *expected]}


def test_the_other_neighbours_are_drawn_on_request(store) -> None:
    entity = store.entity_id("糖尿病")
    drawing = draw_neighbourhood(store, entity, k=4, show_others=True)
    one_hop = set(store.one_hop(entity)[0].tolist())
    assert set(drawing.others) == one_hop - set(drawing.ranked)
    assert sorted(_drawn(drawing.figure, "node:")) == sorted(one_hop | {entity})


def test_bad_arguments_fail_early(store) -> None:
    with pytest.raises(ConfigurationError, match="k must be a positive integer"):
        draw_neighbourhood(store, "糖尿病", k=0)
    with pytest.raises(ConfigurationError, match="outside the store"):
        draw_neighbourhood(store, store.num_entities + 5)
