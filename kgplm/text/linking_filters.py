"""Which names an :class:`~kgplm.text.linking.EntityLinker` may link: the choices a user steers.

English ontologies name their roots, qualifiers and frequencies with everyday words. Linking
English abstracts to the Human Phenotype Ontology with every name as it is, the most-linked
entity was the root "All", matched by the word "all" (338 times), about 38 % of the mentions were
qualifiers ("severe", "acute", "left", "onset", "affected"), EXACT synonyms such as "277000"
became link names and "hearing-loss" did not match "hearing loss". The filters, each
an ``EntityLinker`` argument (and a key of ``kgplm.train(linking={...})``):

* ``stop_words`` (default ``"english"``: :data:`ENGLISH_STOP_WORDS`, function words and the
  clinical qualifier words of :data:`ENGLISH_QUALIFIERS`): names whose whole normalised surface
  is on the list are not linked ("All", "Severe"; "severe asthma" still is). Names written as 2–4
  capital letters ("ALL", "AS") are exempt: they match only text in capitals already (and with
  ``case_sensitive_abbreviations=False``, for lower-cased text, they are meant to match it). A list of
  your own replaces the default; the item ``"english"`` in it stands for the default list.
* ``min_length``: the shortest name, in characters.
* ``exclude_numeric`` (default on): names with no letter ("277000", "1.5", "10-20").
* ``hyphen_variants`` (default on): hyphens match spaces and each other in names and text
  ("hearing-loss" = "hearing loss"); offsets stay those of the text.
* ``entity_types``: only entities having one of these type names.
* ``roots``: only the given entities (ids, IRIs, CURIEs such as ``HP:0000118``, names) and their
  descendants along ``is_a`` (``rdfs:subClassOf``) edges.
* ``common_word_share`` (``kgplm.train`` and ``kgplm text link``; off by default): after a first
  pass over the corpus, names linked in more than this share of its documents are dropped as
  everyday words; :func:`common_names` measures them and the run records them.

Chinese text is unaffected by the English defaults unless a name is an English stop word, has no
letter, or contains a hyphen; ``benchmarks/linking.py`` reports the CMeKG figures.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from kgplm.exceptions import ConfigurationError
from kgplm.kg.vocabulary import RDFS_SUBCLASS_OF

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore
    from kgplm.text.linking import EntityLinker

__all__ = [
    "ENGLISH_STOP_WORDS",
    "ENGLISH_QUALIFIERS",
    "HYPHENS",
    "LINKING_OPTIONS",
    "resolve_stop_words",
    "has_no_letter",
    "allowed_entities",
    "common_names",
    "linking_settings",
    "LINKING_BEFORE_OPTIONS",
]

logger = logging.getLogger(__name__)

#: English function words and everyday words that ontologies use as names ("All", "Was", "Other")
ENGLISH_STOP_WORDS = frozenset(
    """
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing down during each either else ever every few for from
further had has have having he her here hers him his how however i if in into is it its itself just
least less many may me might more most much must my neither no none nor not of off often on once only
or other others our out over own per same she should since so some such than that the their them then
there these they this those through thus to too under until up upon us very was we well were what
when where whether which while who whom whose why will with within without would yet you your
one two three four five six seven eight nine ten first second third
normal abnormal abnormality finding findings history affected unaffected present absent
increased decreased high low large small long short
""".split()
)
#: qualifier, severity, laterality, onset, frequency and course words (HPO's "Clinical modifier",
#: "Frequency", "Onset" and "Mode of inheritance" branches name their terms with them)
ENGLISH_QUALIFIERS = frozenset(
    """
mild moderate severe profound borderline acute subacute chronic episodic progressive nonprogressive
recurrent relapsing remitting transient persistent intermittent generalized generalised localized
localised focal diffuse multifocal bilateral unilateral left right proximal distal central peripheral
symmetric symmetrical asymmetric asymmetrical onset congenital neonatal infantile juvenile adult
childhood antenatal prenatal postnatal frequent occasional rare obligate sporadic familial
dominant recessive inherited heterogeneous variable severity frequency course
""".split()
)
#: hyphen characters that ``hyphen_variants`` matches to a space (after NFKC)
HYPHENS = ("-", "\u2010", "\u2011", "\u2012", "\u2013", "\u00ad")
#: the keys of ``kgplm.train(linking={...})`` and their defaults (``EntityLinker``'s)
LINKING_OPTIONS = {
    "stop_words": "english",
    "min_length": 2,
    "exclude_numeric": True,
    "hyphen_variants": True,
    "entity_types": None,
    "roots": None,
    "common_word_share": None,
    "case_sensitive_abbreviations": True,
}


#: The options that reproduce the linker of runs made before linking options existed (their
#: ``run_config.json`` has no ``linking`` entry): no stop list, numeric names kept, no hyphen variants.
LINKING_BEFORE_OPTIONS = {**LINKING_OPTIONS, "stop_words": None, "exclude_numeric": False, "hyphen_variants": False}


def resolve_stop_words(stop_words: str | Iterable[str] | None) -> frozenset[str]:
    """The stop list of ``stop_words``: ``"english"``, an iterable (where ``"english"`` adds the default), None."""
    if stop_words is None:
        return frozenset()
    if isinstance(stop_words, str):
        stop_words = [stop_words]
    words: set[str] = set()
    for word in stop_words:
        if not isinstance(word, str):
            raise ConfigurationError(f"stop_words must hold strings, got {word!r}")
        if word == "english":
            words |= ENGLISH_STOP_WORDS | ENGLISH_QUALIFIERS
        else:
            words.add(word)
    return frozenset(words)


def has_no_letter(surface: str) -> bool:
    """True for "277000", "1.5", "10-20 %": no character is a letter of any script."""
    return not any(unicodedata.category(char).startswith("L") for char in surface)


def allowed_entities(
    store: "KGStore", entity_types: Iterable[str] | None, roots: Iterable[int | str] | None
) -> np.ndarray | None:
    """``(num_entities,)`` bool mask of the entities the type and root restrictions keep; None: all."""
    if entity_types is None and roots is None:
        return None
    allowed = np.ones(store.num_entities, dtype=np.bool_)
    if entity_types is not None:
        wanted = [entity_types] if isinstance(entity_types, str) else list(entity_types)
        names = store.type_names
        unknown = [name for name in wanted if name not in names]
        if unknown:
            raise ConfigurationError(f"entity_types {unknown} are no types of the store; it has {names[:20]}")
        type_ids = np.flatnonzero(np.isin(np.asarray(names, dtype=object), wanted))
        indptr = np.asarray(store.arrays["type_indptr"])
        owners = np.repeat(np.arange(store.num_entities), np.diff(indptr))
        typed = np.zeros(store.num_entities, dtype=np.bool_)
        typed[owners[np.isin(np.asarray(store.arrays["type_ids"]), type_ids)]] = True
        allowed &= typed
    if roots is not None:
        roots = [roots] if isinstance(roots, (str, int, np.integer)) else list(roots)
        allowed &= descendants(store, [store.entity_id(root) for root in roots])
    return allowed


def descendants(store: "KGStore", roots: list[int]) -> np.ndarray:
    """Bool mask of ``roots`` and every entity below them along ``is_a`` (``rdfs:subClassOf``) edges."""
    subclass = [
        index
        for index, (iri, name) in enumerate(zip(store.relation_iris, store.relation_names))
        if iri == RDFS_SUBCLASS_OF or name == "is_a"
    ]
    if not subclass:
        raise ConfigurationError(
            "roots= needs is_a (rdfs:subClassOf) edges, and the store has none; restrict by entity_types= instead"
        )
    triples = np.asarray(store.triples)
    edges = triples[np.isin(triples[:, 1], subclass)]  # child is_a parent
    order = np.argsort(edges[:, 2], kind="stable")
    children, parents = edges[order, 0], edges[order, 2]
    starts = np.searchsorted(parents, np.arange(store.num_entities + 1))
    keep = np.zeros(store.num_entities, dtype=np.bool_)
    frontier = np.unique(np.asarray(roots, dtype=np.int64))
    keep[frontier] = True
    while len(frontier):
        below = np.concatenate([children[starts[e] : starts[e + 1]] for e in frontier.tolist()])
        frontier = np.unique(below[~keep[below]]) if len(below) else below
        keep[frontier] = True
    return keep


def common_names(linker: "EntityLinker", texts: Iterable[str], share: float) -> dict[str, float]:
    """Surfaces (the normalised names) linked in more than ``share`` of the documents → their share."""
    if not 0 < share <= 1:
        raise ConfigurationError(f"common_word_share must be in (0, 1], got {share}")
    documents = np.zeros(len(linker.patterns), dtype=np.int64)
    count = 0
    for _, _, entries in linker.find_many(texts, nested=False):
        documents[np.unique(entries)] += 1
        count += 1
    if count == 0:
        return {}
    shares = documents / count
    return {
        linker.patterns[entry]: round(float(shares[entry]), 6)
        for entry in np.flatnonzero(shares > share)[np.argsort(-shares[shares > share], kind="stable")].tolist()
    }


def linking_settings(options: dict | None) -> dict:
    """Every linking option, the user's over the defaults, JSON-safe: what ``run_config.json`` records."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(LINKING_OPTIONS))
    if unknown:
        raise ConfigurationError(f"unknown linking options {unknown}; expected some of {list(LINKING_OPTIONS)}")
    settings = {**LINKING_OPTIONS, **options}
    for key in ("stop_words", "entity_types", "roots"):
        value = settings[key]
        if value is not None and not isinstance(value, (str, int)):
            settings[key] = list(value)
    return settings
