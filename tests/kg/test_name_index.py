"""The compact name index (kgplm.kg.name_index) against the dicts it replaced (issue 30.2).

The reference is the old implementation, written out here: a ``{name: [ids]}`` dict filled label by
label, entities without a label under their IRI's local name, a case-folded dict beside it, and
``{iri: id}`` for IRIs. Every lookup of the store must give the same ids and the same errors.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import synthetic_umls  # noqa: E402

from kgplm import KGStore  # noqa: E402
from kgplm.exceptions import AmbiguousEntityError, UnknownEntityError  # noqa: E402
from kgplm.kg import name_index as name_index_module  # noqa: E402
from kgplm.kg.collector import GraphCollector  # noqa: E402
from kgplm.kg.curie import curie_candidates  # noqa: E402
from kgplm.kg.vocabulary import LABEL_ROLES, local_name  # noqa: E402


def reference_dicts(store: KGStore) -> tuple[dict, dict, dict]:
    """The old ``_build_name_indexes`` and ``_iri_index``: one Python object per name."""
    names: dict[str, list[int]] = defaultdict(list)
    for entity in range(store.num_entities):
        for text, _, _ in store.labels(entity):
            bucket = names[text]
            if not bucket or bucket[-1] != entity:
                bucket.append(entity)
    for entity in range(store.num_entities):
        if not store.labels(entity):
            names[local_name(store.entity_iri(entity))].append(entity)
    casefolded: dict[str, list[int]] = defaultdict(list)
    for text, owners in names.items():
        for owner in owners:
            if owner not in casefolded[text.casefold()]:
                casefolded[text.casefold()].append(owner)
    iris = {iri: i for i, iri in enumerate(store.entity_iris)}
    iris.update(store.merged_iris())
    return dict(names), dict(casefolded), iris


def reference_entity_ids(store: KGStore, dicts: tuple[dict, dict, dict], query: str) -> list[int]:
    names, casefolded, iris = dicts
    if query in iris:
        return [iris[query]]
    for iri in curie_candidates(query, store.prefixes):
        if iri in iris:
            return [iris[iri]]
    found = names.get(query)
    if found is None:
        found = casefolded.get(query.casefold(), [])
    return sorted(found, key=lambda e: (store.entity_name(e) != query, e))


def outcome(call, query):
    try:
        return ("ok", call(query))
    except (UnknownEntityError, AmbiguousEntityError) as error:
        return (type(error).__name__, str(error))


def check_store(store: KGStore, sample: int | None = None, seed: int = 0) -> None:
    dicts = reference_dicts(store)
    names = dicts[0]
    # the dict on request is the old dict, keys in the same order
    assert list(store.name_index().items()) == list(names.items())
    lookup = store.name_lookup()
    queries = list(names)
    if sample is not None and len(queries) > sample:
        queries = [queries[i] for i in np.random.default_rng(seed).choice(len(queries), sample, replace=False)]
    for text in queries:
        assert lookup.exact(text) == names[text], text
        for variant in (text.upper(), text.lower(), text.swapcase(), text.casefold()):
            assert lookup.casefolded(variant) == dicts[1].get(variant.casefold(), []), variant
            assert store.entity_ids(variant) == reference_entity_ids(store, dicts, variant), variant
    for entity in range(0, store.num_entities, max(1, store.num_entities // 500)):
        iri = store.entity_iri(entity)
        assert store.entity_ids(iri) == [dicts[2][iri]]


def tiny_store() -> KGStore:
    """Aliases shared by entities, case variants, an unlabelled entity whose local name is another's
    label, one whose local name is new, and a string table holding one text twice."""
    collector = GraphCollector(source="test")
    name, alias = LABEL_ROLES.index("prefLabel"), LABEL_ROLES.index("altLabel")
    a, b, c, d, e, f = (collector.entity(f"http://example.org/{x}") for x in ("a", "b", "c", "d", "Pain", "x9"))
    collector.add_label(a, "Pain", "en", name)
    collector.add_label(a, "pain", "en", alias)
    collector.add_label(b, "pain", "en", name)
    collector.add_label(b, "PAIN", "de", alias)
    collector.add_label(c, "Straße", "de", name)
    collector.add_label(c, "STRASSE", "de", alias)
    collector.add_label(d, "头痛", "zh", name)
    collector.add_label(d, "pain", "zh", alias)
    collector.add_triple(a, collector.relation("http://example.org/r", "r"), b)
    del e, f  # e: local name "Pain" (another's label); f: local name "x9" (new)
    return collector.build()


def test_tiny_store_same_ids_and_errors_as_the_dicts() -> None:
    store = tiny_store()
    check_store(store)
    dicts = reference_dicts(store)
    assert dicts[0]["Pain"] == [0, 4] and store.name_lookup().exact("Pain") == [0, 4]  # label, then local name
    assert store.name_lookup().casefolded("strasse") == [2]  # ß folds to ss
    for query in ("pain", "Pain", "PAIN", "pAiN", "x9", "X9", "头痛", "nothing", "", "Pai", "pain "):
        assert outcome(store.entity_ids, query) == outcome(lambda q: reference_entity_ids(store, dicts, q), query)
        expected = reference_entity_ids(store, dicts, query)

        def old_entity_id(q, expected=expected):
            if not expected:
                raise UnknownEntityError.with_suggestions(q, dicts[0].keys())
            if len(expected) > 1:
                exact = [e for e in expected if store.entity_name(e) == q]
                if len(exact) == 1:
                    return exact[0]
                raise AmbiguousEntityError(
                    q, [f"{e} ({store.entity_name(e)}, {store.entity_iri(e)})" for e in expected[:10]]
                )
            return expected[0]

        assert outcome(store.entity_id, query) == outcome(old_entity_id, query), query


def test_the_hash_tables_are_built_on_the_first_lookup_only() -> None:
    """Readers of every key (the entity linker at UMLS scale) pay for no hash table: building the index (the
    store logs its size), reading its keys and owners build none; the first exact and case-folded lookups
    build one each (issue 30.6: at 1M concepts the two tables are 117 MB)."""
    store = tiny_store()
    index = store.name_lookup()
    arrays = index.nbytes
    index.owner_csr()
    [index.key(key) for key in range(len(index))]
    assert index.nbytes == arrays
    assert index.exact("Pain") == [0, 4]
    with_exact = index.nbytes
    assert with_exact > arrays
    assert {0, 4} <= set(index.casefolded("pain"))
    assert index.nbytes > with_exact


def test_hash_collisions_never_return_a_wrong_entity(monkeypatch) -> None:
    """With every text hashed alike, lookups still compare texts: same ids as the dicts."""
    monkeypatch.setattr(
        name_index_module, "_hash_slices", lambda blob, starts, ends: np.zeros(len(starts), dtype=np.uint64)
    )
    store = tiny_store()
    check_store(store)


def test_generated_umls_same_ids_as_the_dicts(tmp_path: Path) -> None:
    directory = tmp_path / "rrf"
    synthetic_umls.write_synthetic_umls(directory, 300, seed=5, chunk_size=120)
    store = KGStore.from_umls_rrf(directory, show_progress=False)
    check_store(store)
    loaded = KGStore.load(store.save(tmp_path / "store"))  # memory-mapped strings: the same lookups
    check_store(loaded, sample=200)
    text = loaded.entity_name(7)
    assert 7 in loaded.entity_ids(text) and 7 in loaded.entity_ids(text.upper())


@pytest.mark.slow
def test_cmekg_same_ids_as_the_dicts(cmekg_store: KGStore) -> None:
    check_store(cmekg_store, sample=3000)
