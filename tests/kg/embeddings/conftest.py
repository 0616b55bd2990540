"""The graph most KG embedding tests train on."""

from __future__ import annotations

import pytest

from kgplm import KGStore
from tests.kg.embeddings.helpers import NUM_GROUPS, store_from_rows


@pytest.fixture(scope="module")
def composition_store(tmp_path_factory) -> KGStore:
    """Drug i has ingredient i, ingredient i targets disease i, so drug i treats disease i."""
    rows = []
    for i in range(NUM_GROUPS):
        rows += [
            (f"drug{i}", "has_ingredient", f"ingredient{i}"),
            (f"ingredient{i}", "targets", f"disease{i}"),
            (f"drug{i}", "treats", f"disease{i}"),
            (f"disease{i}", "has_symptom", f"symptom{i}"),
        ]
    return store_from_rows(tmp_path_factory.mktemp("composition"), rows)
