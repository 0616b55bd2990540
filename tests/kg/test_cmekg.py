"""CMeKG importer: counts recomputed independently from the TSV, and each documented rule."""

from __future__ import annotations

import functools
import gzip
import re
from pathlib import Path

import pytest

from kgplm import KGStore
from kgplm.exceptions import DataFormatError, EncodingError
from kgplm.kg.cmekg import ALIAS_PREDICATES, LINK_PREDICATES, cmekg_package_path


@functools.lru_cache(maxsize=1)
def read_rows(path: Path) -> list[tuple[str, str, str]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [tuple(line.rstrip("\n").split("\t")) for line in handle]


def synonym_merges(rows) -> dict[str, str]:
    """The documented merge rule, written plainly: a 别称/又称/同义词 object that is no subject, is the
    object of a link, and is an alias of exactly one subject → that subject."""
    subjects = {s for s, _, _ in rows}
    link_objects = {part.strip() for _, p, o in rows if p in LINK_PREDICATES for part in re.split("[；;]", o)}
    owners: dict[str, set[str]] = {}
    synonym_of: dict[str, set[str]] = {}
    for subject, predicate, obj in rows:
        alias = obj.strip()
        if predicate in ALIAS_PREDICATES and alias and alias != subject and alias not in subjects:
            owners.setdefault(alias, set()).add(subject)
            if predicate in ("别称", "又称", "同义词"):
                synonym_of.setdefault(alias, set()).add(subject)
    return {
        alias: next(iter(owners[alias])) for alias in synonym_of if alias in link_objects and len(owners[alias]) == 1
    }


def recount(path: Path) -> tuple[set, set, set, dict]:
    """Entities, relations, triples and merges by the documented rules, written plainly over the TSV."""
    rows = read_rows(path)
    merged = synonym_merges(rows)
    subjects = {s for s, _, _ in rows}
    entities, triples = set(subjects), set()
    for subject, predicate, obj in rows:
        if predicate in LINK_PREDICATES:
            for part in re.split("[；;]", obj):
                if part.strip():
                    name = merged.get(part.strip(), part.strip())
                    if name == subject and part.strip() in merged:
                        continue  # a link to one's own synonym is no link
                    entities.add(name)
                    triples.add((subject, predicate, name))
        elif predicate in ALIAS_PREDICATES and obj.strip() in subjects and obj.strip() != subject:
            triples.add((subject, predicate, obj.strip()))
    return entities, {p for _, p, _ in triples}, triples, merged


def test_counts_match_independent_recount(cmekg_store: KGStore, cmekg_tsv: Path) -> None:
    entities, relations, triples, merged = recount(cmekg_tsv)
    store = cmekg_store
    assert store.num_entities == len(entities)
    assert store.num_relations == len(relations)
    assert store.num_triples == len(triples)
    names = {store.entity_name(i) for i in range(store.num_entities)}
    assert names == entities
    name = store.entity_name
    relation_names = store.relation_names
    assert {(name(h), relation_names[r], name(t)) for h, r, t in store.triples.tolist()} == triples
    assert store.describe()["merged_entities"] == len(merged)


def test_synonyms_that_are_link_objects_merge_into_their_subject(cmekg_store: KGStore, cmekg_tsv: Path) -> None:
    store = cmekg_store
    rows = read_rows(cmekg_tsv)
    for alias, subject in (("脑溢血", "脑出血"), ("藏红花", "西红花"), ("狐臭", "臭汗症")):
        entity = store.entity_id(subject)
        assert store.entity_id(alias) == entity and alias in store.aliases(entity)
        assert alias not in {store.entity_name(i) for i in store.entity_ids(alias)}  # no node of its own
        # every link that named the alias now reaches the subject
        linked = {(s, p) for s, p, o in rows if p in LINK_PREDICATES and alias in re.split("[；;]", o)}
        assert linked
        incoming = store.neighbors(entity, direction="in")
        assert linked <= set(zip(incoming.neighbor, incoming.relation))


def test_entity_types_follow_the_rules(cmekg_store: KGStore) -> None:
    store = cmekg_store
    assert store.entity_type(store.entity_id("糖尿病")) == "disease"
    assert store.entity_type(store.entity_id("龟鹿益肾胶囊")) == "drug"
    # an object-only entity takes the range of the predicates pointing at it
    polyuria = store.entity_id("多尿")
    assert store.entity_type(polyuria) == "symptom"
    assert store.entity_type(store.entity_id("内分泌科")) == "department"
    counts = store.describe()["entities_per_type"]
    assert counts["drug"] > 10000 and counts["disease"] > 5000 and counts.get(None, 0) < 0.05 * store.num_entities


def test_aliases_and_attributes(cmekg_store: KGStore) -> None:
    store = cmekg_store
    diabetes = store.entity_id("糖尿病")
    labels = store.labels(diabetes)
    assert ("diabetes mellitus", "en", "altLabel") in labels
    assert store.entity_id("diabetes mellitus") == diabetes
    # literal predicates are attributes, never relations
    assert not {"用法用量", "性状", "贮藏", "规格", "ICD10", "有效期"} & set(store.relation_names)
    attributes = store.attributes("龟鹿益肾胶囊")
    assert "分类" in set(attributes.predicate)


def test_rules_on_a_small_dump(tmp_path: Path) -> None:
    path = tmp_path / "cmekg_small.tsv"
    path.write_text(
        "阿司匹林片\t成份\t阿司匹林\n"
        "阿司匹林片\t适应症\t头痛；发热\n"
        "阿司匹林片\t用法用量\t口服，一次1片\n"
        "阿司匹林片\t英文名\tAspirin Tablets\n"
        "阿司匹林片\t商品名\t拜阿司匹灵\n"
        "拜阿司匹灵\t成份\t阿司匹林\n"
        "头痛\t常见症状\t疼痛\n"
        "头痛\t就诊科室\t神经内科\n"
        "阿司匹林片\t适应症\t头痛\n",
        encoding="utf-8",
    )
    store = KGStore.from_cmekg(path, show_progress=False)
    name = store.entity_name
    triples = {(name(h), store.relation_name(r), name(t)) for h, r, t in store.triples.tolist()}
    assert triples == {
        ("阿司匹林片", "成份", "阿司匹林"),
        ("阿司匹林片", "适应症", "头痛"),
        ("阿司匹林片", "适应症", "发热"),
        ("阿司匹林片", "商品名", "拜阿司匹灵"),
        ("拜阿司匹灵", "成份", "阿司匹林"),
        ("头痛", "常见症状", "疼痛"),
        ("头痛", "就诊科室", "神经内科"),
    }
    assert store.describe()["duplicate_triples"] == 1
    tablet = store.entity_id("阿司匹林片")
    assert ("Aspirin Tablets", "en", "altLabel") in store.labels(tablet)
    assert "拜阿司匹灵" in store.aliases(tablet)
    assert "阿司匹林片" in store.aliases(store.entity_id("拜阿司匹灵"))  # the equivalence copies names back
    assert list(store.attributes(tablet).value) == ["口服，一次1片"]
    types = {name(i): store.entity_type(i) for i in range(store.num_entities)}
    assert types == {
        "阿司匹林片": "drug",
        "阿司匹林": "ingredient",
        "头痛": "disease",
        "发热": "disease",
        "拜阿司匹灵": "drug",
        "疼痛": "symptom",
        "神经内科": "department",
    }


def test_synonym_merge_rule_on_a_small_dump(tmp_path: Path) -> None:
    path = tmp_path / "cmekg_synonyms.tsv"
    path.write_text(
        "脑出血\t别称\t脑溢血\n"
        "脑出血\t常见症状\t头痛\n"
        "癫痫持续状态\t病因\t脑溢血；外伤\n"  # 脑溢血 merges: the link reaches 脑出血
        "脑出血\t鉴别诊断\t脑溢血\n"  # a link to one's own synonym disappears
        "川贝母\t别称\t贝母\n"
        "伊贝母\t别称\t贝母\n"
        "止咳方\t组成\t贝母\n"  # 贝母 names two subjects: stays its own entity
        "阿司匹林片\t英文名\tAspirin\n"
        "止痛方\t组成\tAspirin\n",  # not a synonym predicate: no merge
        encoding="utf-8",
    )
    store = KGStore.from_cmekg(path, show_progress=False)
    name = store.entity_name
    triples = {(name(h), store.relation_name(r), name(t)) for h, r, t in store.triples.tolist()}
    assert triples == {
        ("脑出血", "常见症状", "头痛"),
        ("癫痫持续状态", "病因", "脑出血"),
        ("癫痫持续状态", "病因", "外伤"),
        ("止咳方", "组成", "贝母"),
        ("止痛方", "组成", "Aspirin"),
    }
    assert store.describe()["merged_entities"] == 1
    assert store.entity_id("脑溢血") == store.entity_id("脑出血")
    assert store.entity_name(store.entity_id("贝母")) == "贝母"  # its own node, found by its display name
    assert set(store.entity_ids("贝母")) == {store.entity_id(n) for n in ("贝母", "川贝母", "伊贝母")}
    assert "merged" in store.summary()
    unmerged = KGStore.from_cmekg(path, merge_synonyms=False, show_progress=False)
    assert unmerged.describe()["merged_entities"] == 0
    assert unmerged.entity_name(unmerged.entity_id("脑溢血")) == "脑溢血"
    assert unmerged.num_entities == store.num_entities + 1 and unmerged.num_triples == store.num_triples + 1


def test_package_copy_equals_the_tsv(cmekg_store: KGStore) -> None:
    try:
        cmekg_package_path()
    except Exception as error:  # pragma: no cover - pycmekg is a dependency
        pytest.fail(f"pycmekg is not installed: {error}")
    from_package = KGStore.from_cmekg(show_progress=False)
    assert from_package.num_triples == cmekg_store.num_triples
    assert (from_package.triples == cmekg_store.triples).all()
    assert [from_package.entity_name(i) for i in range(0, from_package.num_entities, 997)] == [
        cmekg_store.entity_name(i) for i in range(0, cmekg_store.num_entities, 997)
    ]


def test_restricted_unpickler_refuses_classes(tmp_path: Path) -> None:
    import pickle

    from kgplm.exceptions import ArtifactError
    from kgplm.kg.cmekg import _RestrictedUnpickler

    payload = pickle.dumps({"药": {"成份": [Path("x")]}})
    with open(tmp_path / "evil.pkl", "wb") as handle:
        handle.write(payload)
    with open(tmp_path / "evil.pkl", "rb") as handle, pytest.raises(ArtifactError, match="only dict, list and str"):
        _RestrictedUnpickler(handle).load()


def test_bad_rows(tmp_path: Path) -> None:
    path = tmp_path / "cmekg_bad.tsv"
    path.write_text("甲\t成份\t乙\n甲\t成份\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        KGStore.from_cmekg(path, show_progress=False)
    assert caught.value.line == 2 and "3 fields" in str(caught.value)
    latin = tmp_path / "cmekg_latin.tsv"
    latin.write_bytes("a\t成份\tb\n".encode("utf-8") + "c\t\xe9\td\n".encode("latin-1"))
    with pytest.raises(EncodingError) as caught:
        KGStore.from_cmekg(latin, show_progress=False)
    assert caught.value.line == 2
