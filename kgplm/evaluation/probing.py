"""A KG cloze probe for any masked-language model in kgplm, built as KeBioLM builds its UMLS probe.

Yuan et al. (2021), "Improving Biomedical Pretrained Language Models with Knowledge", BioNLP, §4.6
(after LAMA, Petroni et al. 2019, and X-FACTR, Jiang et al. 2020).

Queries (:func:`build_probe`). Each triple (s, r, o) of the graph gives two queries through a
per-relation template (:data:`CMEKG_TEMPLATES` for CMeKG's Chinese predicates, ``"{s}的{r}是{o}。"``
for other Chinese ones, the paper's "s r o" with ``is`` before relations ending in of/as/by for
English ones): ``[CLS] s r [MASK]… [SEP]`` (``direction="tail"``) and ``[CLS] [MASK]… r o [SEP]``
(``"head"``). Queries with the same text are one query whose answers are every entity that completes
it (the entities sharing the known entity's name included), each with its name and aliases. Answers
are limited to ``max_answer_tokens`` (10) tokens — counted without a tokenizer when the probe is
built (a CJK character or a Latin word is one token) and again with the model's tokenizer when it is
scored; at most ``queries_per_relation`` queries per relation are drawn (seeded). Deviation: queries with
more than ``max_answers`` (20) correct entities are skipped ("[MASK]的不良反应有恶心" has hundreds): the
relation's most frequent entities answer them without any knowledge, and holding them out would
remove a large share of the text (the paper's queries have 2.39 answers on average).

Held out. A share ``held_out_fraction`` of each relation's queries is held out: every triple linking
the known entity and an answer of such a query (in any relation, either direction) is listed in the
probe's ``exclude_from_training``; ``kgplm.train(..., exclude_triples=probe_file)`` keeps those facts
out of the corpus text, the KG embeddings and the PEPR table (:mod:`kgplm.training.heldout`). The other
queries stay *seen* (their facts may be in the training data); a seen query that shares a pair of
entities with a held-out one is dropped. Scores are reported for all, seen and unseen queries.

Decoding and metric. For every answer length n = 1…10 the masks are filled by confidence-ordered
beam search with a beam of 5 (:mod:`kgplm.evaluation.cloze_decoding`); a query is right when any of
the 5 × 10 decoded strings equals a gold answer or alias (compared as WordPiece strings without
spaces). The metric is the relation-level macro recall@5: the share of right queries per relation,
averaged over relations.

Reference rows, printed with every table (:func:`reference_scores`, :func:`probe_table`):

* baseline — model-free: for each length n, the 5 entities of that length that most often fill the
  query's slot (tail or head) of its relation among the training triples (the graph minus the
  held-out triples): the same budget of 5 strings per length as the model;
* chance — 5 distinct entity names or aliases of each length drawn uniformly from the graph's: the
  exact probability of a hit, 1 − Π_n C(N_n − g_n, 5) / C(N_n, 5), with N_n names of n tokens of
  which g_n are gold.

Queries whose answers cannot be written with the model's tokenizer (all longer than 10 tokens or
containing [UNK]) are left out of every row and counted.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from kgplm._io import atomic_file, require_file
from kgplm.evaluation.cloze_decoding import fill_masks, piece_surface
from kgplm.exceptions import ArtifactError, ConfigurationError

__all__ = ["CMEKG_TEMPLATES", "ProbeQuery", "Probe", "build_probe", "template_for", "approximate_token_count",
           "evaluate_probe", "reference_scores", "summarize", "probe_table", "probe_model", "result_rows",
           "PROBE_FORMAT", "PROBE_TASK"]

logger = logging.getLogger(__name__)

PROBE_FORMAT = "kgplm-cloze-probe"

#: Templates for CMeKG's entity-valued predicates ({s} subject, {o} object); others get "{s}的{r}是{o}。".
CMEKG_TEMPLATES = {
    "不良反应": "{s}的不良反应有{o}。", "成份": "{s}的成份有{o}。", "常见症状": "{s}的常见症状有{o}。",
    "适应症": "{s}适用于{o}。", "主治": "{s}主治{o}。", "功能主治": "{s}主治{o}。", "常见病因": "{s}的常见病因是{o}。",
    "检查": "{s}需要做的检查有{o}。", "并发症": "{s}可并发{o}。", "就诊科室": "{s}的就诊科室是{o}。",
    "通用名": "{s}的通用名是{o}。", "商品名": "{s}的商品名是{o}。", "药物相互作用": "{s}与{o}有药物相互作用。",
    "治疗": "{s}可用{o}治疗。", "药物治疗": "{s}可用{o}治疗。", "常见发病部位": "{s}常见于{o}。",
    "病因": "{s}的病因是{o}。", "上位关系": "{s}属于{o}。", "下位关系": "{s}包括{o}。", "别称": "{s}又称{o}。",
    "又称": "{s}又称{o}。", "同义词": "{s}又称{o}。", "鉴别诊断": "{s}需与{o}鉴别。", "手术治疗": "{s}可行{o}。",
    "发病部位": "{s}发生于{o}。", "高危因素": "{s}的高危因素有{o}。",
}
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_PRE_TOKEN = re.compile(r"[A-Za-z0-9]+|\S")
_PLACEHOLDER = re.compile(r"\{([so])\}")


def template_for(relation: str, templates: Mapping[str, str] | None = None) -> str:
    """The template of a relation name: ``templates``, then :data:`CMEKG_TEMPLATES`, then the defaults."""
    for table in (templates or {}, CMEKG_TEMPLATES):
        if relation in table:
            return table[relation]
    if _CJK.search(relation):
        return "{s}的" + relation + "是{o}。"
    phrase = relation.replace("_", " ").strip()
    if phrase.split() and phrase.split()[-1] in ("of", "as", "by"):
        phrase = "is " + phrase  # the paper: translation_of → is translation of
    return "{s} " + phrase + " {o} ."


def approximate_token_count(text: str) -> int:
    """Tokens of a BERT-style tokenizer without the tokenizer: one per CJK character or punctuation
    mark, one per run of Latin letters and digits (WordPiece may split those further)."""
    return len(_PRE_TOKEN.findall(text))


@dataclass(frozen=True)
class ProbeQuery:
    """``prefix`` + answer + ``suffix`` is the sentence; ``answers`` the IRIs of every correct entity and
    ``answer_names`` their names and aliases; ``held_out``: its facts are excluded from training."""

    relation: str
    direction: str  # "tail": s r [MASK]; "head": [MASK] r o
    known: str  # IRI of the entity given in the query
    prefix: str
    suffix: str
    answers: tuple[str, ...]
    answer_names: tuple[str, ...]
    held_out: bool

    @property
    def slot(self) -> tuple[str, str]:
        return self.relation, self.direction


@dataclass
class Probe:
    """Queries, the triples to exclude from training (labelled by IRI) and the settings that built it."""

    queries: list[ProbeQuery]
    exclude_from_training: list[list[str]]
    settings: dict = field(default_factory=dict)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the probe as JSON (the file ``kgplm.train(exclude_triples=...)`` reads); atomic."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        content = {"format": PROBE_FORMAT, "version": 1, "settings": self.settings,
                   "queries": [asdict(query) for query in self.queries],
                   "exclude_from_training": self.exclude_from_training}
        with atomic_file(path, "w", encoding="utf-8") as handle:
            json.dump(content, handle, ensure_ascii=False, indent=0)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Probe":
        path = Path(path)
        if path.is_dir():
            path = path / "probe.json"
        content = json.loads(require_file(path, "cloze probe (probe.json)").read_text(encoding="utf-8"))
        if not isinstance(content, dict) or content.get("format") != PROBE_FORMAT:
            raise ArtifactError(f"{path} is not a kgplm cloze probe (format {PROBE_FORMAT!r})")
        queries = [ProbeQuery(**{**query, "answers": tuple(query["answers"]),
                                 "answer_names": tuple(query["answer_names"])}) for query in content["queries"]]
        return cls(queries, content["exclude_from_training"], content.get("settings", {}))


# -- building ----------------------------------------------------------------------------------------------
def build_probe(store, *, queries_per_relation: int = 100, max_answer_tokens: int = 10, max_answers: int = 20,
                held_out_fraction: float = 0.5, triples: np.ndarray | None = None,
                templates: Mapping[str, str] | None = None, seed: int = 0) -> Probe:
    """Queries from ``store`` (see the module docstring); ``triples`` (ids) restricts the facts asked
    about (answers and exclusions still come from the whole graph); queries with more than
    ``max_answers`` correct entities are skipped."""
    if queries_per_relation < 1 or max_answer_tokens < 1 or max_answers < 1:
        raise ConfigurationError("queries_per_relation, max_answer_tokens and max_answers must be positive")
    if not 0.0 <= held_out_fraction <= 1.0:
        raise ConfigurationError(f"held_out_fraction must be in [0, 1], got {held_out_fraction}")
    all_triples = np.asarray(store.triples, dtype=np.int64)
    all_triples = all_triples[all_triples[:, 0] != all_triples[:, 2]]
    asked = all_triples if triples is None else np.asarray(triples, dtype=np.int64).reshape(-1, 3)
    if not len(asked):
        raise ConfigurationError("the graph has no triples to probe")
    names = [store.entity_name(e) for e in range(store.num_entities)]
    # (relation, direction, name of the known entity) → the triples that answer it, over the whole graph
    facts: dict[tuple[int, str, str], list[tuple[int, int, int]]] = defaultdict(list)
    for head, relation, tail in all_triples.tolist():
        facts[(relation, "tail", names[head])].append((head, relation, tail))
        facts[(relation, "head", names[tail])].append((head, relation, tail))
    short_names = _short_names(store, max_answer_tokens)
    rng = np.random.default_rng(seed)
    by_relation: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    for key in sorted({(r, d, names[h if d == "tail" else t]) for h, r, t in asked.tolist() if h != t
                       for d in ("tail", "head")}):
        answers = {t if key[1] == "tail" else h for h, _, t in facts[key]}
        if len(answers) <= max_answers and any(short_names(answer) for answer in answers):
            by_relation[key[0]].append(key)
    chosen: list[tuple[tuple[int, str, str], bool]] = []
    for relation in sorted(by_relation):
        keys = by_relation[relation]
        picked = [keys[i] for i in rng.permutation(len(keys))[:queries_per_relation]]
        held = rng.permutation(len(picked)) < round(held_out_fraction * len(picked))
        chosen += list(zip(picked, held.tolist()))
    pairs_out = {frozenset((h, t)) for key, held in chosen if held for h, _, t in facts[key]}
    kept = [(key, held) for key, held in chosen
            if held or not any(frozenset((h, t)) in pairs_out for h, _, t in facts[key])]
    if len(kept) < len(chosen):
        logger.info("probe: %d seen queries dropped (they share a pair of entities with held-out ones)",
                    len(chosen) - len(kept))
    excluded = all_triples[[frozenset((h, t)) in pairs_out for h, _, t in all_triples.tolist()]] \
        if pairs_out else np.zeros((0, 3), np.int64)
    queries = [_query(store, key, facts[key], held, names, short_names, templates) for key, held in kept]
    iri = store.entity_iri
    relation_iris = store.relation_iris
    settings = {"queries_per_relation": queries_per_relation, "max_answer_tokens": max_answer_tokens,
                "max_answers": max_answers,
                "held_out_fraction": held_out_fraction, "seed": seed, "graph": store.source,
                "num_entities": store.num_entities, "num_triples": store.num_triples}
    logger.info("probe: %d queries over %d relations (%d held out), %d triples excluded from training",
                len(queries), len({q.relation for q in queries}), sum(q.held_out for q in queries), len(excluded))
    return Probe(queries, [[iri(h), relation_iris[r], iri(t)] for h, r, t in excluded.tolist()], settings)


def _short_names(store, max_answer_tokens: int):
    cache: dict[int, tuple[str, ...]] = {}

    def short_names(entity: int) -> tuple[str, ...]:
        if entity not in cache:
            surfaces = dict.fromkeys([store.entity_name(entity), *store.aliases(entity)])
            cache[entity] = tuple(s for s in surfaces if 1 <= approximate_token_count(s) <= max_answer_tokens)
        return cache[entity]

    return short_names


def _query(store, key, facts, held_out: bool, names, short_names, templates) -> ProbeQuery:
    relation, direction, known_name = key
    answers = sorted({t if direction == "tail" else h for h, _, t in facts})
    known = facts[0][0] if direction == "tail" else facts[0][2]
    template = template_for(store.relation_name(relation), templates)
    marker = "\x00"
    text = _PLACEHOLDER.sub(lambda m: known_name if (m.group(1) == "s") == (direction == "tail") else marker,
                            template)
    prefix, _, suffix = text.partition(marker)
    answer_names = tuple(dict.fromkeys(name for answer in answers for name in short_names(answer)))
    return ProbeQuery(store.relation_name(relation), direction, store.entity_iri(known), prefix, suffix,
                      tuple(store.entity_iri(a) for a in answers), answer_names, held_out)


# -- scoring -----------------------------------------------------------------------------------------------
def _gold_surfaces(tokenizer, query: ProbeQuery, max_answer_tokens: int) -> set[str]:
    surfaces = set()
    for name in query.answer_names:
        pieces = tokenizer.tokenize(name)
        if 1 <= len(pieces) <= max_answer_tokens and tokenizer.unk_token not in pieces:
            surfaces.add(piece_surface(pieces))
    return surfaces


def evaluate_probe(model, tokenizer, probe: Probe, *, beam_size: int = 5, max_answer_tokens: int | None = None,
                   batch_size: int = 64, device: str = "cpu", progress: bool = False) -> list[bool | None]:
    """Per query: right (``True``), wrong, or ``None`` when its answers cannot be written with ``tokenizer``.

    ``model`` returns ``prediction_logits`` (any kgplm pre-training model; KeBioLM uses its own detected
    mentions here, other knowledge methods run without linked mentions).
    """
    max_answer_tokens = max_answer_tokens or probe.settings.get("max_answer_tokens", 10)
    model.eval().to(device)
    gold = [_gold_surfaces(tokenizer, query, max_answer_tokens) for query in probe.queries]
    answerable = [index for index, surfaces in enumerate(gold) if surfaces]
    contexts = [(tokenizer(probe.queries[i].prefix, add_special_tokens=False)["input_ids"],
                 tokenizer(probe.queries[i].suffix, add_special_tokens=False)["input_ids"]) for i in answerable]
    hits = np.zeros(len(answerable), dtype=bool)
    for length in range(1, max_answer_tokens + 1):
        fills = fill_masks(model, tokenizer, contexts, length, beam_size=beam_size, batch_size=batch_size,
                           device=device, progress=progress)
        for row, (index, candidates) in enumerate(zip(answerable, fills)):
            hits[row] |= any(piece_surface(tokenizer.convert_ids_to_tokens(list(ids))) in gold[index]
                             for ids, _ in candidates)
    result: list[bool | None] = [None] * len(probe.queries)
    for row, index in enumerate(answerable):
        result[index] = bool(hits[row])
    return result


def reference_scores(probe: Probe, store, tokenizer, *, beam_size: int = 5,
                     max_answer_tokens: int | None = None) -> dict[str, list[float | None]]:
    """Per query the model-free baseline's hit (0/1) and the chance of a hit (see the module docstring)."""
    max_answer_tokens = max_answer_tokens or probe.settings.get("max_answer_tokens", 10)
    from kgplm.training.heldout import HeldOutTriples

    triples = np.asarray(store.triples, dtype=np.int64)
    if probe.exclude_from_training:
        triples = HeldOutTriples(store, store.triple_ids(probe.exclude_from_training)).kept_triples()
    relation_of = {store.relation_name(r): r for r in range(store.num_relations)}
    # chance: distinct name/alias surfaces of the graph by token length
    pool: dict[int, set[str]] = defaultdict(set)
    length_of: dict[str, int] = {}
    for surface, length in _surfaces(tokenizer, list(store.name_index())):
        if 1 <= length <= max_answer_tokens:
            pool[length].add(surface)
            length_of[surface] = length
    # baseline: per (relation, direction) the most frequent fillers among the training triples, by length
    display = _surfaces(tokenizer, [store.entity_name(e) for e in range(store.num_entities)])
    counts = {(direction, r): Counter() for r in range(store.num_relations) for direction in ("tail", "head")}
    for head, relation, tail in triples.tolist():
        counts[("tail", relation)][tail] += 1
        counts[("head", relation)][head] += 1
    frequent: dict[tuple[str, str], list[str]] = {}
    baseline, chance = [], []
    for query in probe.queries:
        gold = _gold_surfaces(tokenizer, query, max_answer_tokens)
        if not gold:
            baseline.append(None)
            chance.append(None)
            continue
        slot = query.slot
        if slot not in frequent:
            by_length: dict[int, list[str]] = defaultdict(list)
            for entity, _ in counts[(query.direction, relation_of[query.relation])].most_common():
                surface, length = display[entity]
                if 1 <= length <= max_answer_tokens and len(by_length[length]) < beam_size:
                    by_length[length].append(surface)
            frequent[slot] = [guess for guesses in by_length.values() for guess in guesses]
        baseline.append(float(any(guess in gold for guess in frequent[slot])))
        miss = 1.0
        for length, candidates in pool.items():
            hits = len({s for s in gold if length_of.get(s) == length})
            miss *= _miss_probability(len(candidates), hits, beam_size)
        chance.append(1.0 - miss)
    return {"baseline": baseline, "chance": chance}


def _surfaces(tokenizer, texts: list[str]) -> list[tuple[str, int]]:
    """(surface, number of tokens) of each text; 0 tokens when it holds [UNK]."""
    result = []
    for start in range(0, len(texts), 4096):
        encoded = tokenizer(texts[start: start + 4096], add_special_tokens=False)["input_ids"]
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


def summarize(probe: Probe, scores: Sequence[float | bool | None]) -> dict[str, float | int]:
    """Relation-level macro recall over all, seen and unseen queries (``None`` scores left out)."""
    result: dict[str, float | int] = {}
    for name, wanted in (("", None), ("_seen", False), ("_unseen", True)):
        per_relation: dict[str, list[float]] = defaultdict(list)
        for query, score in zip(probe.queries, scores):
            if score is not None and (wanted is None or query.held_out == wanted):
                per_relation[query.relation].append(float(score))
        recalls = [float(np.mean(values)) for values in per_relation.values()]
        result[f"recall@5{name}"] = float(np.mean(recalls)) if recalls else float("nan")
        result[f"queries{name}"] = sum(len(values) for values in per_relation.values())
        result[f"relations{name}"] = len(per_relation)
    result["unanswerable"] = sum(score is None for score in scores)
    return result


def probe_table(rows: Mapping[str, Mapping[str, float]]) -> str:
    """A text table of :func:`summarize` results, one row per model or reference (baseline, chance)."""
    header = f"{'':<34}{'recall@5 all':>14}{'seen':>10}{'unseen':>10}{'queries':>10}{'seen/unseen':>14}"
    lines = [header, "-" * len(header)]
    for name, summary in rows.items():
        lines.append(f"{name:<34}{100 * summary['recall@5']:>14.1f}{100 * summary['recall@5_seen']:>10.1f}"
                     f"{100 * summary['recall@5_unseen']:>10.1f}{summary['queries']:>10}"
                     f"{summary['queries_seen']:>7}/{summary['queries_unseen']:<6}")
    return "\n".join(lines)


# -- one call ----------------------------------------------------------------------------------------------
PROBE_TASK = "probe"
REFERENCE_ROWS = ("baseline", "chance")


def probe_model(model: str | os.PathLike, probe: "str | os.PathLike | Probe", *, store=None, beam_size: int = 5,
                batch_size: int = 64, device: str = "cpu", progress: bool = True) -> dict[str, float | int]:
    """Probe a pre-trained kgplm model (a ``kgplm.train`` output); what ``kgplm.evaluate(task="probe")`` runs.

    ``probe``: a probe file (or a directory holding ``probe.json``); ``store``: the graph it was built
    from (default: the model's pre-training run's). Returns :func:`summarize`'s keys for the model and
    the same keys prefixed ``baseline_`` and ``chance_`` (:func:`result_rows` splits them for
    :func:`probe_table`).
    """
    from kgplm.exceptions import MissingFileError
    from kgplm.models import load_pretrained
    from kgplm.text.tokenization import load_tokenizer
    from kgplm.training.run import locate_model

    probe = probe if isinstance(probe, Probe) else Probe.load(probe)
    model_dir, tokenizer_dir, run = locate_model(model)
    if store is None:
        if run is None:
            raise MissingFileError(model_dir.parent / "run_config.json", "pre-training run of the model (the probe "
                                                                          "needs the graph; pass store=)")
        store = run.open_store(progress=progress)
    expected = probe.settings.get("num_entities")
    if expected is not None and expected != store.num_entities:
        raise ArtifactError(f"the probe was built on a graph of {expected:,} entities; this one has "
                            f"{store.num_entities:,}")
    network = load_pretrained(str(model_dir))
    if network.config.task_kind is not None:
        raise ConfigurationError(f"{model_dir} is fine-tuned for {network.config.task_name}; the cloze probe needs a "
                                 f"pre-trained model with its masked-LM head")
    tokenizer = load_tokenizer(tokenizer_dir)
    result = summarize(probe, evaluate_probe(network, tokenizer, probe, beam_size=beam_size, batch_size=batch_size,
                                             device=device, progress=progress))
    for name, scores in reference_scores(probe, store, tokenizer, beam_size=beam_size).items():
        result.update({f"{name}_{key}": value for key, value in summarize(probe, scores).items()})
    return result


def result_rows(result: Mapping[str, float], name: str = "model") -> dict[str, dict[str, float]]:
    """:func:`probe_model`'s flat result as rows for :func:`probe_table`: the model, baseline, chance."""
    rows = {name: {key: value for key, value in result.items() if not key.startswith(REFERENCE_ROWS)}}
    labels = {"baseline": "baseline (most frequent, no model)", "chance": "chance (uniform entity names)"}
    for reference in REFERENCE_ROWS:
        rows[labels[reference]] = {key[len(reference) + 1:]: value for key, value in result.items()
                                   if key.startswith(reference + "_")}
    return rows
