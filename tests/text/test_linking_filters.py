"""Linking a user can steer, on an English OBO ontology and English sentences (issue 29.1).

The ontology mimics the Human Phenotype Ontology's shape: a root "All", a "Clinical modifier"
branch of qualifier terms, a "Phenotypic abnormality" branch, an EXACT numeric synonym and
everyday-word EXACT synonyms ("Corn" for Heloma, "Mole" for Nevus).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kgplm import KGStore
from kgplm.exceptions import ConfigurationError
from kgplm.text.linking import EntityLinker
from kgplm.text.linking import build_linker
from kgplm.text.linking_filters import common_names, descendants
from tests.kg.test_umls import write as write_umls

ONTOLOGY = """\
format-version: 1.2
ontology: hp

[Term]
id: HP:0000001
name: All

[Term]
id: HP:0012823
name: Clinical modifier
is_a: HP:0000001

[Term]
id: HP:0012824
name: Severity
is_a: HP:0012823

[Term]
id: HP:0012828
name: Severe
is_a: HP:0012824

[Term]
id: HP:0011009
name: Acute
is_a: HP:0012823

[Term]
id: HP:0000118
name: Phenotypic abnormality
is_a: HP:0000001

[Term]
id: HP:0000365
name: Hearing impairment
synonym: "hearing loss" EXACT []
synonym: "277000" EXACT []
is_a: HP:0000118

[Term]
id: HP:0001250
name: Seizure
is_a: HP:0000118

[Term]
id: HP:0200020
name: Heloma
synonym: "Corn" EXACT []
is_a: HP:0000118

[Term]
id: HP:0003764
name: Nevus
synonym: "Mole" EXACT []
is_a: HP:0000118

[Term]
id: HP:0004322
name: Short stature
namespace: growth
is_a: HP:0000118
"""

SENTENCES = [
    "All patients had severe hearing-loss and an acute seizure.",
    "A corn on the toe and a mole on the arm; short stature in all of them.",
    "Corn syrup and corn bread were served; 277000 cells were counted.",
    "Corn was eaten by all.",
]


@pytest.fixture()
def store(tmp_path: Path) -> KGStore:
    path = tmp_path / "hp.obo"
    path.write_text(ONTOLOGY, encoding="utf-8")
    return KGStore.from_obo(path, show_progress=False)


def linked(linker: EntityLinker, store: KGStore, text: str) -> list[tuple[str, str]]:
    return [(m.surface, store.entity_name(m.entity_id)) for m in linker.link(text)]


def test_root_and_qualifier_words_are_not_linked_by_default(store: KGStore) -> None:
    linker = EntityLinker(store)
    assert linked(linker, store, SENTENCES[0]) == [("hearing-loss", "Hearing impairment"), ("seizure", "Seizure")]
    surfaces = [surface.lower() for text in SENTENCES for surface, _ in linked(linker, store, text)]
    assert "all" not in surfaces and "severe" not in surfaces and "acute" not in surfaces
    # without the stop list, the root and the qualifiers come back: the filter is what removes them
    unfiltered = [
        surface.lower()
        for text in SENTENCES
        for surface, _ in linked(EntityLinker(store, stop_words=None), store, text)
    ]
    assert unfiltered.count("all") == 3 and "severe" in unfiltered and "acute" in unfiltered


def test_numeric_names_are_not_linked(store: KGStore) -> None:
    assert ("277000", "Hearing impairment") not in linked(EntityLinker(store), store, SENTENCES[2])
    assert ("277000", "Hearing impairment") in linked(EntityLinker(store, exclude_numeric=False), store, SENTENCES[2])


def test_hyphen_and_space_variants_match(store: KGStore) -> None:
    linker = EntityLinker(store)
    assert linked(linker, store, "hearing-loss, hearing loss, hearing\u2010loss") == [
        ("hearing-loss", "Hearing impairment"),
        ("hearing loss", "Hearing impairment"),
        ("hearing\u2010loss", "Hearing impairment"),
    ]
    names = EntityLinker(names={"X-linked": [0], "hearing loss": [1]})
    assert [(m.surface, m.entity_id) for m in names.link("x linked, X-linked, hearing-loss")] == [
        ("x linked", 0),
        ("X-linked", 0),
        ("hearing-loss", 1),
    ]
    assert EntityLinker(store, hyphen_variants=False).link("hearing-loss") == []


def test_roots_keep_only_descendants(store: KGStore, tmp_path: Path) -> None:
    below = descendants(store, [store.entity_id("HP:0012823")])
    assert sorted(store.entity_name(e) for e in below.nonzero()[0]) == [
        "Acute",
        "Clinical modifier",
        "Severe",
        "Severity",
    ]
    linker = EntityLinker(store, stop_words=None, roots=["HP:0000118"])
    found = [name for text in SENTENCES for _, name in linked(linker, store, text)]
    assert set(found) == {"Hearing impairment", "Seizure", "Heloma", "Nevus", "Short stature"}
    umls = KGStore.from_umls_rrf(write_umls(tmp_path / "umls"), show_progress=False)  # no is_a relation
    with pytest.raises(ConfigurationError, match="is_a"):
        EntityLinker(umls, roots=["C0011849"])


def test_entity_types_keep_only_those_types(store: KGStore) -> None:
    linker = EntityLinker(store, entity_types=["growth"])
    assert linked(linker, store, SENTENCES[1]) == [("short stature", "Short stature")]
    with pytest.raises(ConfigurationError, match="no types"):
        EntityLinker(store, entity_types=["phenotype"])


def test_user_stop_list_and_common_word_filter(store: KGStore) -> None:
    everyday = [name for text in SENTENCES for _, name in linked(EntityLinker(store), store, text)]
    assert everyday.count("Heloma") == 4 and "Nevus" in everyday  # "Corn" and "Mole" are EXACT synonyms
    own = EntityLinker(store, stop_words=["english", "corn", "Mole"])
    assert [name for text in SENTENCES for _, name in linked(own, store, text)].count("Heloma") == 0
    assert linked(own, store, "Corn and mole; all severe") == []
    # "corn" is linked in 3 of 4 documents, "hearing loss" in 1: a 50 % share drops only "corn"
    assert common_names(EntityLinker(store), SENTENCES, 0.5) == {"corn": 0.75}
    linker, report = build_linker(store, {"common_word_share": 0.5}, texts=lambda: iter(SENTENCES))
    assert report == {"common_names": {"corn": 0.75}}
    assert linked(linker, store, "a corn and a mole") == [("mole", "Nevus")]
    assert linked(linker, store, "all severe") == []  # the default stop list is still applied
    with pytest.raises(ConfigurationError, match="unknown linking options"):
        build_linker(store, {"stopwords": []})
    with pytest.raises(ConfigurationError, match="common_word_share"):
        build_linker(store, {"common_word_share": 1.5}, texts=lambda: iter(SENTENCES))


def test_short_capital_abbreviations_are_exempt_from_the_stop_list() -> None:
    linker = EntityLinker(names={"ALL": [0], "All": [1], "Leukemia": [2]})
    assert [(m.surface, m.entity_id) for m in linker.link("ALL is a leukemia; all of them")] == [
        ("ALL", 0),
        ("leukemia", 2),
    ]
