"""A KG cloze probe for any masked-language model in kgplm, built as KeBioLM builds its UMLS probe.

Yuan et al. (2021), "Improving Biomedical Pretrained Language Models with Knowledge", BioNLP, §4.6
(after LAMA, Petroni et al. 2019, and X-FACTR, Jiang et al. 2020).

Queries (:func:`build_probe`). Each triple (s, r, o) of the graph gives two queries through a
per-relation template: ``[CLS] s r [MASK]… [SEP]`` (``direction="tail"``) and ``[CLS] [MASK]… r o
[SEP]`` (``"head"``). A template states the fact the way the pre-training text does: for a Chinese
relation name the default is :data:`TEXT_FORM_TEMPLATE` ``"{s}的{r}有{o}。"``, the form in which
:func:`kgplm.demo.verbalized_facts` writes CMeKG's facts for every benchmark corpus ("糖尿病的常见症状有
多尿、口渴。"), so a query is a training sentence with the object masked. :data:`CMEKG_TEMPLATES` (hand-written
Chinese sentences per CMeKG predicate) are an option (``templates=CMEKG_TEMPLATES``) for a corpus of
prose; English relation names get the paper's "s r o" with ``is`` before relations ending in of/as/by.
Queries with the same text are one query whose answers are every entity that completes it (the
entities sharing the known entity's name included), each with its name and aliases. Answers are
limited to ``max_answer_tokens`` (10) tokens — counted without a tokenizer when the probe is built (a
CJK character or a Latin word is one token) and again with the model's tokenizer when it is scored; at
most ``queries_per_relation`` queries per relation are drawn (seeded). Deviation: queries with more than
``max_answers`` (20) correct entities are skipped ("[MASK]的不良反应有恶心" has hundreds): the relation's
most frequent entities answer them without any knowledge, and holding them out would remove a large
share of the text (the paper's queries have 2.39 answers on average).

Held out. A share ``held_out_fraction`` of each relation's queries is held out: every triple linking
the known entity and an answer of such a query (in any relation, either direction) is listed in the
probe's ``exclude_from_training``; ``kgplm.train(..., exclude_triples=probe_file)`` keeps those facts
out of the corpus text, the KG embeddings and the PEPR table (:mod:`kgplm.training.heldout`). The other
queries stay *seen* (their facts may be in the training data); a seen query that shares a pair of
entities with a held-out one is dropped.

Decoding and metric. For every answer length n = 1…10 the masks are filled by confidence-ordered
beam search with a beam of 5 (:mod:`kgplm.evaluation.cloze_decoding`); a query is right when any of
the 5 × 10 decoded strings equals a gold answer or alias (compared as WordPiece strings without
spaces). The metric is the relation-level macro recall@5: the share of right queries per relation,
averaged over relations.

What a score is compared with (:mod:`kgplm.evaluation.probe_scoring`): a model-free baseline that
guesses the slot's most frequent fillers among the *other* facts, chance (a uniform guess with the
decoder's budget), and the query groups — *hard* queries (the baseline misses them; the primary
figure, seen and held out, with chance beside it), *easy* ones (reported apart) and the paper's
§4.6.4 type 1 (an answer occurs in the query) / type 2.

Queries whose answers cannot be written with the model's tokenizer (all longer than 10 tokens or
containing [UNK]) are left out of every row and counted.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from kgplm._io import atomic_file, require_file
from kgplm.evaluation.cloze_decoding import fill_masks, piece_surface
from kgplm.evaluation.probe_scoring import (
    REFERENCE_ROWS,
    answer_in_query,
    gold_surfaces,
    probe_table,
    reference_scores,
    result_rows,
    summarize,
)
from kgplm.exceptions import ArtifactError, ConfigurationError

__all__ = [
    "CMEKG_TEMPLATES",
    "TEXT_FORM_TEMPLATE",
    "ProbeQuery",
    "Probe",
    "build_probe",
    "template_for",
    "approximate_token_count",
    "evaluate_probe",
    "reference_scores",
    "summarize",
    "probe_table",
    "probe_model",
    "result_rows",
    "answer_in_query",
    "REFERENCE_ROWS",
    "PROBE_FORMAT",
    "PROBE_TASK",
]

logger = logging.getLogger(__name__)

PROBE_FORMAT = "kgplm-cloze-probe"

#: How the pre-training text states a fact (:func:`kgplm.demo.verbalized_facts`): the default template of a
#: Chinese relation name ({s} subject, {r} relation, {o} object).
TEXT_FORM_TEMPLATE = "{s}的{r}有{o}。"
#: Hand-written sentences for CMeKG's entity-valued predicates; used only when passed as ``templates``.
CMEKG_TEMPLATES = {
    "不良反应": "{s}的不良反应有{o}。",
    "成份": "{s}的成份有{o}。",
    "常见症状": "{s}的常见症状有{o}。",
    "适应症": "{s}适用于{o}。",
    "主治": "{s}主治{o}。",
    "功能主治": "{s}主治{o}。",
    "常见病因": "{s}的常见病因是{o}。",
    "检查": "{s}需要做的检查有{o}。",
    "并发症": "{s}可并发{o}。",
    "就诊科室": "{s}的就诊科室是{o}。",
    "通用名": "{s}的通用名是{o}。",
    "商品名": "{s}的商品名是{o}。",
    "药物相互作用": "{s}与{o}有药物相互作用。",
    "治疗": "{s}可用{o}治疗。",
    "药物治疗": "{s}可用{o}治疗。",
    "常见发病部位": "{s}常见于{o}。",
    "病因": "{s}的病因是{o}。",
    "上位关系": "{s}属于{o}。",
    "下位关系": "{s}包括{o}。",
    "别称": "{s}又称{o}。",
    "又称": "{s}又称{o}。",
    "同义词": "{s}又称{o}。",
    "鉴别诊断": "{s}需与{o}鉴别。",
    "手术治疗": "{s}可行{o}。",
    "发病部位": "{s}发生于{o}。",
    "高危因素": "{s}的高危因素有{o}。",
}
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_PRE_TOKEN = re.compile(r"[A-Za-z0-9]+|\S")
_PLACEHOLDER = re.compile(r"\{([so])\}")


def template_for(relation: str, templates: Mapping[str, str] | None = None) -> str:
    """The template of a relation name: ``templates``, then the training text's form
    (:data:`TEXT_FORM_TEMPLATE`) for a Chinese name, the paper's "s r o" for others."""
    if templates and relation in templates:
        return templates[relation]
    if _CJK.search(relation):
        return TEXT_FORM_TEMPLATE.replace("{r}", relation)
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
        content = {
            "format": PROBE_FORMAT,
            "version": 1,
            "settings": self.settings,
            "queries": [asdict(query) for query in self.queries],
            "exclude_from_training": self.exclude_from_training,
        }
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
        queries = [
            ProbeQuery(**{**query, "answers": tuple(query["answers"]), "answer_names": tuple(query["answer_names"])})
            for query in content["queries"]
        ]
        return cls(queries, content["exclude_from_training"], content.get("settings", {}))


# -- building ----------------------------------------------------------------------------------------------
def build_probe(
    store,
    *,
    queries_per_relation: int = 100,
    max_answer_tokens: int = 10,
    max_answers: int = 20,
    held_out_fraction: float = 0.5,
    triples: np.ndarray | None = None,
    templates: Mapping[str, str] | None = None,
    seed: int = 0,
) -> Probe:
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
    for key in sorted(
        {(r, d, names[h if d == "tail" else t]) for h, r, t in asked.tolist() if h != t for d in ("tail", "head")}
    ):
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
    kept = [
        (key, held) for key, held in chosen if held or not any(frozenset((h, t)) in pairs_out for h, _, t in facts[key])
    ]
    if len(kept) < len(chosen):
        logger.info(
            "probe: %d seen queries dropped (they share a pair of entities with held-out ones)", len(chosen) - len(kept)
        )
    excluded = (
        all_triples[[frozenset((h, t)) in pairs_out for h, _, t in all_triples.tolist()]]
        if pairs_out
        else np.zeros((0, 3), np.int64)
    )
    queries = [_query(store, key, facts[key], held, names, short_names, templates) for key, held in kept]
    iri = store.entity_iri
    relation_iris = store.relation_iris
    settings = {
        "queries_per_relation": queries_per_relation,
        "max_answer_tokens": max_answer_tokens,
        "max_answers": max_answers,
        "held_out_fraction": held_out_fraction,
        "seed": seed,
        "graph": store.source,
        "num_entities": store.num_entities,
        "num_triples": store.num_triples,
    }
    logger.info(
        "probe: %d queries over %d relations (%d held out), %d triples excluded from training",
        len(queries),
        len({q.relation for q in queries}),
        sum(q.held_out for q in queries),
        len(excluded),
    )
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
    text = _PLACEHOLDER.sub(lambda m: known_name if (m.group(1) == "s") == (direction == "tail") else marker, template)
    prefix, _, suffix = text.partition(marker)
    answer_names = tuple(dict.fromkeys(name for answer in answers for name in short_names(answer)))
    return ProbeQuery(
        store.relation_name(relation),
        direction,
        store.entity_iri(known),
        prefix,
        suffix,
        tuple(store.entity_iri(a) for a in answers),
        answer_names,
        held_out,
    )


# -- scoring -----------------------------------------------------------------------------------------------
def evaluate_probe(
    model,
    tokenizer,
    probe: Probe,
    *,
    beam_size: int = 5,
    max_answer_tokens: int | None = None,
    batch_size: int = 64,
    device: str = "cpu",
    progress: bool = False,
) -> list[bool | None]:
    """Per query: right (``True``), wrong, or ``None`` when its answers cannot be written with ``tokenizer``.

    ``model`` returns ``prediction_logits`` (any kgplm pre-training model; KeBioLM uses its own detected
    mentions here, other knowledge methods run without linked mentions).
    """
    max_answer_tokens = max_answer_tokens or probe.settings.get("max_answer_tokens", 10)
    model.eval().to(device)
    gold = [gold_surfaces(tokenizer, query, max_answer_tokens) for query in probe.queries]
    answerable = [index for index, surfaces in enumerate(gold) if surfaces]
    contexts = [
        (
            tokenizer(probe.queries[i].prefix, add_special_tokens=False)["input_ids"],
            tokenizer(probe.queries[i].suffix, add_special_tokens=False)["input_ids"],
        )
        for i in answerable
    ]
    hits = np.zeros(len(answerable), dtype=bool)
    for length in range(1, max_answer_tokens + 1):
        fills = fill_masks(
            model,
            tokenizer,
            contexts,
            length,
            beam_size=beam_size,
            batch_size=batch_size,
            device=device,
            progress=progress,
        )
        for row, (index, candidates) in enumerate(zip(answerable, fills)):
            hits[row] |= any(
                piece_surface(tokenizer.convert_ids_to_tokens(list(ids))) in gold[index] for ids, _ in candidates
            )
    result: list[bool | None] = [None] * len(probe.queries)
    for row, index in enumerate(answerable):
        result[index] = bool(hits[row])
    return result


# -- one call ----------------------------------------------------------------------------------------------
PROBE_TASK = "probe"


def probe_model(
    model: str | os.PathLike,
    probe: "str | os.PathLike | Probe",
    *,
    store=None,
    beam_size: int = 5,
    batch_size: int = 64,
    device: str = "cpu",
    progress: bool = True,
) -> dict[str, float | int]:
    """Probe a pre-trained kgplm model (a ``kgplm.train`` output); what ``kgplm.evaluate(task="probe")`` runs.

    ``probe``: a probe file (or a directory holding ``probe.json``); ``store``: the graph it was built
    from (default: the model's pre-training run's). Returns :func:`summarize`'s keys for the model (the
    hard/easy split by the baseline's hits) and the same keys prefixed ``baseline_`` and ``chance_``
    (:func:`result_rows` splits them for :func:`probe_table`).
    """
    from kgplm.exceptions import MissingFileError
    from kgplm.models import load_pretrained
    from kgplm.text.tokenization import load_tokenizer
    from kgplm.training.run import locate_model

    probe = probe if isinstance(probe, Probe) else Probe.load(probe)
    model_dir, tokenizer_dir, run = locate_model(model)
    if store is None:
        if run is None:
            raise MissingFileError(
                model_dir.parent / "run_config.json",
                "pre-training run of the model (the probe needs the graph; pass store=)",
            )
        store = run.open_store(progress=progress)
    expected = probe.settings.get("num_entities")
    if expected is not None and expected != store.num_entities:
        raise ArtifactError(
            f"the probe was built on a graph of {expected:,} entities; this one has {store.num_entities:,}"
        )
    network = load_pretrained(str(model_dir))
    if network.config.task_kind is not None:
        raise ConfigurationError(
            f"{model_dir} is fine-tuned for {network.config.task_name}; the cloze probe needs a "
            f"pre-trained model with its masked-LM head"
        )
    tokenizer = load_tokenizer(tokenizer_dir)
    references = reference_scores(probe, store, tokenizer, beam_size=beam_size)
    easy = references["baseline"]  # queries the model-free baseline answers are reported apart
    result = summarize(
        probe,
        evaluate_probe(
            network, tokenizer, probe, beam_size=beam_size, batch_size=batch_size, device=device, progress=progress
        ),
        easy,
    )
    for name, scores in references.items():
        result.update({f"{name}_{key}": value for key, value in summarize(probe, scores, easy).items()})
    return result
