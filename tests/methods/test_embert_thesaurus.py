"""EMBERT's thesaurus from every importer's synonyms: RDF labels and owl:sameAs, OBO synonyms, UMLS strings,
CMeKG aliases, merged synonyms and equivalence links; save → load."""

from __future__ import annotations

import pytest

from kgplm import KGStore
from kgplm.exceptions import ArtifactError, MissingFileError
from kgplm.methods.embert import Thesaurus, build_thesaurus
from tests.kg.test_obo import OBO
from tests.kg.test_umls import write as write_umls


def synonyms(thesaurus, store, name) -> set[str]:
    return set(thesaurus.synonyms(store.entity_id(name)))


def test_rdf_labels_alt_labels_exact_synonyms_and_same_as(toy_turtle, tmp_path):
    store = KGStore.from_rdf(toy_turtle, show_progress=False)
    thesaurus = build_thesaurus(store)
    assert synonyms(thesaurus, store, "糖尿病") == {"糖尿病", "diabetes", "消渴", "diabetes mellitus"}
    # owl:sameAs: the names of both sides, either way round
    assert synonyms(thesaurus, store, "二甲双胍") == {"二甲双胍", "metformin", "格华止"}
    assert synonyms(thesaurus, store, "格华止") == {"格华止", "二甲双胍", "metformin"}
    assert thesaurus.synonyms(store.entity_id("二甲双胍"))[0] == "二甲双胍"  # display name first
    assert synonyms(thesaurus, store, "口渴") == {"口渴", "烦渴"}  # prefLabel and label
    assert synonyms(thesaurus, store, "多尿") == {"多尿"}
    assert thesaurus.describe()["entities_with_synonyms"] == 4
    # without equivalence relations the sameAs partner's own names stay out (its copied names are labels)
    plain = build_thesaurus(store, equivalence_relations=[])
    assert synonyms(plain, store, "格华止") == {"格华止", "二甲双胍", "metformin"}
    assert plain.config["equivalence_links"] == 0 and thesaurus.config["equivalence_links"] == 1

    thesaurus.save(tmp_path / "thesaurus")
    loaded = Thesaurus.load(tmp_path / "thesaurus")
    assert loaded.surfaces == thesaurus.surfaces and loaded.config == thesaurus.config
    assert all(loaded.synonyms(e) == thesaurus.synonyms(e) for e in range(store.num_entities))


def test_obo_synonyms_and_umls_strings_of_a_cui(tmp_path):
    path = tmp_path / "hp.obo"
    path.write_text(OBO, encoding="utf-8")
    store = KGStore.from_obo(path, show_progress=False)
    # EXACT and RELATED synonyms are aliases; BROAD ones are not names of the term
    assert synonyms(build_thesaurus(store), store, "Phenotypic abnormality") == {
        "Phenotypic abnormality",
        "Organ abnormality",
        'Phenotype "odd"',
    }
    umls = KGStore.from_umls_rrf(write_umls(tmp_path / "umls"), show_progress=False)
    assert synonyms(build_thesaurus(umls), umls, "Diabetes Mellitus") == {"糖尿病", "Diabetes Mellitus", "DM"}


def test_cmekg_aliases_merged_synonyms_and_equivalence_links(cmekg_store):
    store = cmekg_store
    thesaurus = build_thesaurus(store)
    # 别称 / 英文名 aliases; 脑溢血 is an alias-only synonym the import merged into 脑出血
    assert synonyms(thesaurus, store, "脑出血") == {"脑出血", "cerebral hemorrhage", "脑溢血"}
    assert synonyms(thesaurus, store, "再生障碍性贫血") == {"再生障碍性贫血", "aplastic anemia", "再障"}
    # 通用名 links a brand to the generic product, whose own names (and brands) come along
    brand = synonyms(thesaurus, store, "美卡素")
    assert {"美卡素", "替米沙坦片", "Telmisartan Tablets"} <= brand
    assert store.entity_id("替米沙坦片") != store.entity_id("美卡素")
    assert "美卡素" in synonyms(thesaurus, store, "替米沙坦片")
    assert set(thesaurus.config["equivalence_relations_found"]) >= {"别称", "通用名", "商品名"}
    summary = thesaurus.describe()
    assert summary["entities"] == store.num_entities and summary["entities_with_synonyms"] > 18_000


def test_a_missing_or_foreign_thesaurus_fails_early(tmp_path):
    with pytest.raises(MissingFileError, match="thesaurus"):
        Thesaurus.load(tmp_path)
    (tmp_path / "thesaurus.json").write_text('{"format": "other"}', encoding="utf-8")
    with pytest.raises(ArtifactError, match="not a kgplm thesaurus"):
        Thesaurus.load(tmp_path)
