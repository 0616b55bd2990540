"""What a cloze-probe score is compared with: the model-free baseline, chance, and the query groups.

The probe itself (queries, decoding, the paper) is :mod:`kgplm.evaluation.probing`; this module holds
the reference rows and the summaries printed beside a model's score.

Reference rows (:func:`reference_scores`), one value per query:

* **baseline** — model-free, and blind to the probed fact: for each answer length n, the 5 entities
  of that length that most often fill the query's slot (relation and side) among the *other* training
  triples — the graph minus the held-out triples minus every triple that answers this query (same
  relation, the given entity's name on the given side). Counting the probed triple itself would let
  a fact stated once answer its own query. The budget matches the model's: 5 strings per
  length.
* **chance** — the expected score of guessing uniformly: 5 distinct entity names or aliases of each
  length drawn from the graph's, hit probability 1 − Π_n C(N_n − g_n, 5) / C(N_n, 5), with N_n names
  of n tokens of which g_n are gold (the decoder writes 5 fills per length, so does the guesser).

Query groups (:func:`summarize`), each scored as the relation-level macro recall@5:

* **hard / easy** — *easy* queries are those the baseline answers; they need no knowledge of the
  entity asked about, so they are reported apart. The primary figure is recall on the **hard**
  queries, seen and held out, with chance on the same queries beside it (the baseline scores 0 there
  by construction).
* **type 1 / type 2** — Yuan et al. (2021) §4.6.4: "Type 1: answers within queries; Type 2: answers
  not in queries" (e.g. "[MASK] has form tacrolimus monohydrate" → tacrolimus). The paper gives no
  matching rule; here a query is type 1 when one of its accepted answer names or aliases occurs as a
  substring of the query text (prefix + suffix, Latin letters compared case-insensitively).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from kgplm.evaluation.cloze_decoding import piece_surface

__all__ = ["reference_scores", "answer_in_query", "summarize", "probe_table", "result_rows", "REFERENCE_ROWS", "GROUPS"]

REFERENCE_ROWS = ("baseline", "chance")
#: Summary key suffix → (held out wanted: None = any, difficulty: None/"hard"/"easy", type: None/1/2).
GROUPS = {
    "": (None, None, None),
    "_seen": (False, None, None),
    "_unseen": (True, None, None),
    "_hard": (None, "hard", None),
    "_hard_seen": (False, "hard", None),
    "_hard_unseen": (True, "hard", None),
    "_easy": (None, "easy", None),
    "_type1": (None, None, 1),
    "_type2": (None, None, 2),
}


def answer_in_query(query) -> bool:
    """Type 1 of Yuan et al. (2021) §4.6.4: an accepted answer name occurs in the query's text."""
    text = (query.prefix + query.suffix).lower()
    return any(name.lower() in text for name in query.answer_names if name)


def gold_surfaces(tokenizer, query, max_answer_tokens: int) -> set[str]:
    """The query's answer names that ``tokenizer`` writes in 1…``max_answer_tokens`` pieces without [UNK],
    as :func:`piece_surface` strings."""
    surfaces = set()
    for name in query.answer_names:
        pieces = tokenizer.tokenize(name)
        if 1 <= len(pieces) <= max_answer_tokens and tokenizer.unk_token not in pieces:
            surfaces.add(piece_surface(pieces))
    return surfaces


def reference_scores(
    probe, store, tokenizer, *, beam_size: int = 5, max_answer_tokens: int | None = None
) -> dict[str, list[float | None]]:
    """Per query the model-free baseline's hit (0/1) and the chance of a hit (see the module docstring);
    ``None`` for a query whose answers ``tokenizer`` cannot write."""
    max_answer_tokens = max_answer_tokens or probe.settings.get("max_answer_tokens", 10)
    from kgplm.training.heldout import HeldOutTriples

    triples = np.asarray(store.triples, dtype=np.int64)
    if probe.exclude_from_training:
        triples = HeldOutTriples(store, store.triple_ids(probe.exclude_from_training)).kept_triples()
    relation_of = {store.relation_name(r): r for r in range(store.num_relations)}
    names = [store.entity_name(e) for e in range(store.num_entities)]
    # chance: distinct name/alias surfaces of the graph by token length
    pool: dict[int, set[str]] = defaultdict(set)
    length_of: dict[str, int] = {}
    for surface, length in _surfaces(tokenizer, list(store.name_index())):
        if 1 <= length <= max_answer_tokens:
            pool[length].add(surface)
            length_of[surface] = length
    # baseline: per slot (side, relation) the fillers' counts, and per slot and given name the counts that
    # the query's own facts contribute (subtracted for that query)
    display = _surfaces(tokenizer, names)
    asked = {
        (query.direction, relation_of[query.relation], names[store.entity_id(query.known)]) for query in probe.queries
    }
    counts: dict[tuple[str, int], Counter] = defaultdict(Counter)
    own: dict[tuple[str, int, str], Counter] = {key: Counter() for key in asked}
    for head, relation, tail in triples.tolist():
        counts[("tail", relation)][tail] += 1
        counts[("head", relation)][head] += 1
        for key, filler in ((("tail", relation, names[head]), tail), (("head", relation, names[tail]), head)):
            if key in own:
                own[key][filler] += 1
    ranked: dict[tuple[str, int], dict[int, list[tuple[int, int]]]] = {}
    baseline, chance = [], []
    for query in probe.queries:
        gold = gold_surfaces(tokenizer, query, max_answer_tokens)
        if not gold:
            baseline.append(None)
            chance.append(None)
            continue
        slot = (query.direction, relation_of[query.relation])
        if slot not in ranked:
            by_length: dict[int, list[tuple[int, int]]] = defaultdict(list)
            for entity, count in counts[slot].most_common():
                length = display[entity][1]
                if 1 <= length <= max_answer_tokens:
                    by_length[length].append((entity, count))
            ranked[slot] = by_length
        mine = own[(*slot, names[store.entity_id(query.known)])]
        guesses = [
            display[entity][0]
            for candidates in ranked[slot].values()
            for entity in _top_without(candidates, mine, beam_size)
        ]
        baseline.append(float(any(guess in gold for guess in guesses)))
        miss = 1.0
        for length, candidates in pool.items():
            hits = len({s for s in gold if length_of.get(s) == length})
            miss *= _miss_probability(len(candidates), hits, beam_size)
        chance.append(1.0 - miss)
    return {"baseline": baseline, "chance": chance}


def _top_without(candidates: list[tuple[int, int]], own: Counter, size: int) -> list[int]:
    """The ``size`` most frequent entities of ``candidates`` ((entity, count), most frequent first) once
    ``own``'s counts are subtracted (entities left with no count dropped). Only the first
    ``size + len(own)`` candidates can make it: at least ``size`` of them keep their counts, which are at
    least any later candidate's; a stable sort keeps the original order among ties."""
    head = [(entity, count - own.get(entity, 0)) for entity, count in candidates[: size + len(own)]]
    head = sorted(((entity, count) for entity, count in head if count > 0), key=lambda item: -item[1])
    return [entity for entity, _ in head[:size]]


def _surfaces(tokenizer, texts: list[str]) -> list[tuple[str, int]]:
    """(surface, number of tokens) of each text; 0 tokens when it holds [UNK]."""
    result = []
    for start in range(0, len(texts), 4096):
        encoded = tokenizer(texts[start : start + 4096], add_special_tokens=False)["input_ids"]
        for ids in encoded:
            pieces = tokenizer.convert_ids_to_tokens(ids)
            result.append((piece_surface(pieces), 0 if tokenizer.unk_token in pieces else len(pieces)))
    return result


def _miss_probability(population: int, golds: int, draws: int) -> float:
    """P(no gold among ``draws`` distinct items drawn uniformly from ``population``) = C(N−g, d)/C(N, d)."""
    probability = 1.0
    for i in range(min(draws, population)):
        probability *= max(population - golds - i, 0) / (population - i)
    return probability


def summarize(
    probe, scores: Sequence[float | bool | None], easy: Sequence[float | bool | None] | None = None
) -> dict[str, float | int]:
    """Relation-level macro recall@5 and query counts over every group of :data:`GROUPS` (``None`` scores
    left out). ``easy``: per query whether the baseline answers it (:func:`reference_scores`); without
    it the hard and easy groups are empty (their recall is NaN)."""
    types = [1 if answer_in_query(query) else 2 for query in probe.queries]
    result: dict[str, float | int] = {}
    for name, (held_out, difficulty, kind) in GROUPS.items():
        per_relation: dict[str, list[float]] = defaultdict(list)
        for index, (query, score) in enumerate(zip(probe.queries, scores)):
            if score is None or (held_out is not None and query.held_out != held_out):
                continue
            if kind is not None and types[index] != kind:
                continue
            if difficulty is not None:
                if easy is None or easy[index] is None or bool(easy[index]) != (difficulty == "easy"):
                    continue
            per_relation[query.relation].append(float(score))
        recalls = [float(np.mean(values)) for values in per_relation.values()]
        result[f"recall@5{name}"] = float(np.mean(recalls)) if recalls else float("nan")
        result[f"queries{name}"] = sum(len(values) for values in per_relation.values())
        result[f"relations{name}"] = len(per_relation)
    result["unanswerable"] = sum(score is None for score in scores)
    return result


def probe_table(rows: Mapping[str, Mapping[str, float]]) -> str:
    """A text table of :func:`summarize` results, one row per model or reference (baseline, chance): the
    primary hard-query columns first, then every query, the baseline-answered ones and the paper's types."""
    columns = [
        ("hard seen", "_hard_seen"),
        ("hard unseen", "_hard_unseen"),
        ("hard", "_hard"),
        ("all", ""),
        ("easy", "_easy"),
        ("type 1", "_type1"),
        ("type 2", "_type2"),
    ]
    header = f"{'recall@5 (macro over relations)':<36}" + "".join(f"{title:>13}" for title, _ in columns)
    lines = [header, "-" * len(header)]
    for name, summary in rows.items():
        lines.append(f"{name:<36}" + "".join(f"{_percent(summary.get('recall@5' + key)):>13}" for _, key in columns))
    first = next(iter(rows.values()), {})
    lines.append(f"{'queries':<36}" + "".join(f"{first.get('queries' + key, 0):>13}" for _, key in columns))
    return "\n".join(lines)


def _percent(value) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f}"


def result_rows(result: Mapping[str, float], name: str = "model") -> dict[str, dict[str, float]]:
    """A flat probe result (the model's keys, and the references' prefixed ``baseline_``/``chance_``) as
    rows for :func:`probe_table`: the model, baseline, chance."""
    rows = {name: {key: value for key, value in result.items() if not key.startswith(REFERENCE_ROWS)}}
    labels = {"baseline": "baseline (frequent, other facts)", "chance": "chance (uniform entity names)"}
    for reference in REFERENCE_ROWS:
        rows[labels[reference]] = {
            key[len(reference) + 1 :]: value for key, value in result.items() if key.startswith(reference + "_")
        }
    return rows
