"""A store without entity-to-entity links is valid; the stages that walk links say that they need them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgplm import KGStore
from kgplm.exceptions import EmptyGraphError


@pytest.fixture()
def linkless_store(tmp_path: Path) -> KGStore:
    path = tmp_path / "names.ttl"
    path.write_text(
        "@prefix ex: <http://example.org/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        'ex:a rdfs:label "头痛"@zh .\nex:b rdfs:label "发热"@zh ; ex:icd10 "R50" .\n',
        encoding="utf-8",
    )
    return KGStore.from_rdf(path, show_progress=False)


def test_pepr_says_it_needs_links(linkless_store: KGStore) -> None:
    from kgplm.kg import pepr

    assert linkless_store.num_entities == 2 and linkless_store.num_triples == 0
    with pytest.raises(EmptyGraphError, match="PEPR needs entity-to-entity links"):
        pepr.top_k_neighbors(linkless_store, k=1, show_progress=False)
    with pytest.raises(EmptyGraphError, match="PEPR needs entity-to-entity links"):
        pepr.personalized_pagerank(linkless_store, ["头痛"])


def test_embeddings_say_they_need_links(linkless_store: KGStore) -> None:
    from kgplm.kg.embeddings import train_kg_embeddings

    with pytest.raises(EmptyGraphError, match="KG embeddings .*needs entity-to-entity links"):
        train_kg_embeddings(linkless_store, dim=4, epochs=1, progress=False)
