"""The KG cloze probe on the toy graph: queries checked against the triples by brute force, scores
against oracle models and hand-computed macro recall, baseline and chance by hand and scipy."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.stats import hypergeom

from kgplm import KGStore
from kgplm.evaluation.probing import (
    CMEKG_TEMPLATES,
    Probe,
    ProbeQuery,
    answer_in_query,
    approximate_token_count,
    build_probe,
    evaluate_probe,
    probe_table,
    reference_scores,
    summarize,
    template_for,
)
from kgplm.text.tokenization import build_vocab
from tests.test_api import TOY_GRAPH


@pytest.fixture(scope="module")
def store():
    return KGStore.from_rdf(TOY_GRAPH, show_progress=False)


@pytest.fixture(scope="module")
def tokenizer(store):
    names = [text for e in range(store.num_entities) for text, _, _ in store.labels(e)] + store.relation_names
    texts = names * 3 + ["的有是。可并发又称用于就诊科室"] * 3
    return build_vocab(texts, 400, min_frequency=1, show_progress=False)


def _expected_keys(store):
    keys = {}
    for h, r, t in store.triples.tolist():
        if h == t:
            continue
        keys.setdefault((store.relation_name(r), "tail", store.entity_name(h)), set()).add(t)
        keys.setdefault((store.relation_name(r), "head", store.entity_name(t)), set()).add(h)
    return keys


def test_templates_and_token_counts():
    assert template_for("常见症状") == CMEKG_TEMPLATES["常见症状"] == "{s}的常见症状有{o}。"
    assert template_for("临床表现") == "{s}的临床表现有{o}。"  # the training text's form
    assert template_for("适应症") == "{s}的适应症有{o}。" != CMEKG_TEMPLATES["适应症"]
    assert template_for("适应症", CMEKG_TEMPLATES) == "{s}适用于{o}。"
    assert template_for("may_prevent") == "{s} may prevent {o} ."
    assert template_for("translation_of") == "{s} is translation of {o} ."  # the paper's rule
    assert template_for("x", {"x": "{o} x {s}"}) == "{o} x {s}"
    assert approximate_token_count("糖尿病") == 3
    assert approximate_token_count("diabetes mellitus") == 2
    assert approximate_token_count("口服，一次0.5g") == 8  # 口 服 ， 一 次 0 . 5g


def test_every_query_of_the_graph_once_with_every_answer(store):
    probe = build_probe(store, queries_per_relation=100, held_out_fraction=0.0)
    expected = _expected_keys(store)
    found = {(q.relation, q.direction, store.entity_name(store.entity_id(q.known))): q for q in probe.queries}
    assert len(found) == len(probe.queries) == len(expected)  # deduplicated, none missing
    texts = {(q.prefix, q.suffix) for q in probe.queries}
    assert len(texts) == len(probe.queries)
    for key, answers in expected.items():
        query = found[key]
        assert {store.entity_id(iri) for iri in query.answers} == answers
        names = {text for a in answers for text in [store.entity_name(a), *store.aliases(a)]}
        assert set(query.answer_names) == names
    cold = found[("常见症状", "tail", "感冒")]
    assert (cold.prefix, cold.suffix) == ("感冒的常见症状有", "。")
    assert {"发烧", "fever", "headache", "头痛"} <= set(cold.answer_names)
    headache = found[("常见症状", "head", "头痛")]
    assert (headache.prefix, headache.suffix) == ("", "的常见症状有头痛。")
    assert {store.entity_name(store.entity_id(a)) for a in headache.answers} == {"高血压", "脑卒中", "感冒"}
    assert not probe.exclude_from_training and not any(q.held_out for q in probe.queries)


def test_long_answers_are_left_out(store):
    probe = build_probe(store, queries_per_relation=100, max_answer_tokens=2, held_out_fraction=0.0)
    for query in probe.queries:
        assert query.answer_names and all(approximate_token_count(n) <= 2 for n in query.answer_names)
    diabetes = [q for q in probe.queries if q.relation == "常见症状" and q.prefix == "糖尿病的常见症状有"]
    assert set(diabetes[0].answer_names) == {"多尿", "多饮", "乏力"}  # 体重减轻 has 4 tokens


def test_per_relation_cap_held_out_share_and_exclusions(store):
    probe = build_probe(store, queries_per_relation=3, held_out_fraction=0.5, seed=1)
    by_relation: dict[str, list[ProbeQuery]] = {}
    for query in probe.queries:
        by_relation.setdefault(query.relation, []).append(query)
    assert all(len(queries) <= 3 for queries in by_relation.values())
    held = [q for q in probe.queries if q.held_out]
    assert held and len(held) < len(probe.queries)
    excluded = {tuple(row) for row in store.triple_ids(probe.exclude_from_training).tolist()}
    held_pairs = set()
    for query in held:
        known = store.entity_id(query.known)
        for answer in query.answers:
            held_pairs.add(frozenset((known, store.entity_id(answer))))
    # every triple between a held-out query's entities, in any relation or direction, and no other
    expected = {tuple(t) for t in store.triples.tolist() if frozenset((t[0], t[2])) in held_pairs}
    assert excluded == expected
    for query in probe.queries:
        if not query.held_out:
            known = store.entity_id(query.known)
            assert all(frozenset((known, store.entity_id(a))) not in held_pairs for a in query.answers)


def test_queries_with_too_many_answers_are_skipped(store):
    probe = build_probe(store, queries_per_relation=100, max_answers=3, held_out_fraction=0.0)
    expected = {key for key, answers in _expected_keys(store).items() if len(answers) <= 3}
    assert {(q.relation, q.direction, store.entity_name(store.entity_id(q.known))) for q in probe.queries} == expected
    assert len(expected) < len(_expected_keys(store))  # 感冒's four symptoms, 糖尿病's four …


def test_probe_file_round_trip(store, tmp_path):
    probe = build_probe(store, queries_per_relation=2, seed=3)
    loaded = Probe.load(probe.save(tmp_path / "probe.json"))
    assert loaded.queries == probe.queries and loaded.exclude_from_training == probe.exclude_from_training
    assert Probe.load(tmp_path).queries == probe.queries  # a directory holding probe.json


class Oracle(torch.nn.Module):
    """Writes a fixed string for each query: its first gold answer (``right``) at the answer's own
    length, or a wrong token everywhere."""

    def __init__(self, tokenizer, probe, right):
        super().__init__()
        self.tokenizer = tokenizer
        self.plans = {}
        for query, is_right in zip(probe.queries, right):
            prefix = tokenizer(query.prefix, add_special_tokens=False)["input_ids"]
            suffix = tokenizer(query.suffix, add_special_tokens=False)["input_ids"]
            answer = tokenizer(query.answer_names[0], add_special_tokens=False)["input_ids"]
            self.plans[(tuple(prefix), tuple(suffix))] = (len(prefix), answer, is_right)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        vocab = len(self.tokenizer)
        logits = torch.zeros(*input_ids.shape, vocab)
        wrong = self.tokenizer.convert_tokens_to_ids("的")
        for row, ids in enumerate(input_ids.tolist()):
            length = int(attention_mask[row].sum())
            body = ids[1 : length - 1]
            for (prefix, suffix), (start, answer, is_right) in self.plans.items():
                masks = len(body) - len(prefix) - len(suffix)
                if masks > 0 and tuple(body[:start]) == prefix and tuple(body[len(body) - len(suffix) :]) == suffix:
                    for offset in range(masks):
                        token = answer[offset] if is_right and masks == len(answer) else wrong
                        logits[row, 1 + start + offset, token] = 10.0
                    break
        return type("Output", (), {"prediction_logits": logits})()


def test_oracles_score_as_planned(store, tokenizer):
    probe = build_probe(store, queries_per_relation=100, max_answer_tokens=4, held_out_fraction=0.5, seed=0)
    right = [query.held_out for query in probe.queries]  # right exactly on the unseen queries
    hits = evaluate_probe(Oracle(tokenizer, probe, right), tokenizer, probe, batch_size=7)
    assert hits == right
    summary = summarize(probe, hits)
    assert summary["recall@5_unseen"] == 1.0 and summary["recall@5_seen"] == 0.0
    assert summary["queries"] == len(probe.queries) and summary["unanswerable"] == 0


def test_macro_recall_by_hand():
    def query(relation, held_out):
        return ProbeQuery(relation, "tail", "x", "", "", ("a",), ("a",), held_out)

    probe = Probe([query("A", False), query("A", True), query("B", False), query("C", True)], [])
    summary = summarize(probe, [True, False, True, None])
    assert summary["recall@5"] == pytest.approx((0.5 + 1.0) / 2)  # micro would be 2/3
    assert summary["recall@5_seen"] == 1.0 and summary["recall@5_unseen"] == 0.0
    assert (summary["queries"], summary["relations"], summary["unanswerable"]) == (3, 2, 1)
    assert "recall@5" in probe_table({"m": summary, "baseline": summary})


def test_baseline_and_chance_by_hand(store, tokenizer):
    probe = build_probe(store, queries_per_relation=100, held_out_fraction=0.0)
    references = reference_scores(probe, store, tokenizer)
    by_key = {(q.relation, q.direction, q.prefix, q.suffix): i for i, q in enumerate(probe.queries)}
    # [MASK]的常见症状有头痛: see test_the_baseline_never_counts_the_probed_fact
    assert references["baseline"][by_key[("常见症状", "head", "", "的常见症状有头痛。")]] == 1.0
    vision = by_key[("常见症状", "tail", "视网膜病变的常见症状有", "。")]
    # chance of the same query: names of 4 tokens in the graph, one of them gold
    pool = {text for text in store.name_index()}
    four = [t for t in pool if len(tokenizer.tokenize(t)) == 4 and tokenizer.unk_token not in tokenizer.tokenize(t)]
    expected = 1 - hypergeom(len(four), 1, 5).pmf(0)
    assert references["chance"][vision] == pytest.approx(expected)
    assert 0 < expected < 1 and not math.isnan(expected)


def test_held_out_triples_are_not_counted_by_the_baseline(store, tokenizer):
    seen = reference_scores(build_probe(store, queries_per_relation=100, held_out_fraction=0.0), store, tokenizer)
    assert sum(v for v in seen["baseline"] if v is not None) > 0
    probe = build_probe(store, queries_per_relation=100, held_out_fraction=1.0)
    assert len(store.triple_ids(probe.exclude_from_training)) == len(store.triples)  # every fact is held out
    references = reference_scores(probe, store, tokenizer)
    assert all(v == 0.0 for v in references["baseline"] if v is not None)  # nothing left to count


def test_evaluate_task_probe_prints_the_model_baseline_and_chance(store, tmp_path, capsys):
    """kgplm.evaluate(task="probe") on a pre-trained model; the CLI's table always shows both references."""
    import kgplm
    from kgplm.cli import main
    from tests.test_api import toy_arguments, write_toy_corpus

    probe_path = build_probe(store, queries_per_relation=2, max_answer_tokens=3, seed=0).save(tmp_path / "probe.json")
    run = tmp_path / "run"
    kgplm.train(
        "mlm",
        **toy_arguments(write_toy_corpus(tmp_path / "notes.txt"), run, max_steps=2, log_every=1),
        exclude_triples=str(probe_path),
    )
    result = kgplm.evaluate(model=run, task="probe", data_dir=probe_path, progress=False)
    assert {"recall@5", "recall@5_seen", "recall@5_unseen", "baseline_recall@5", "chance_recall@5"} <= set(result)
    assert result["queries"] + result["unanswerable"] == len(Probe.load(probe_path).queries)
    assert 0.0 <= result["chance_recall@5"] <= 1.0
    assert (
        main(["evaluate", "--model", str(run), "--task", "probe", "--data-dir", str(probe_path), "--no-progress"]) == 0
    )
    printed = capsys.readouterr().out
    table = printed.split("{", 1)[0]
    assert (
        str(run) in table and "baseline (frequent, other facts)" in table and "chance (uniform entity names)" in table
    )


def test_cli_builds_a_probe(tmp_path, capsys):
    from kgplm.cli import main

    out = tmp_path / "probe.json"
    assert (
        main(
            [
                "probe",
                "--store",
                str(TOY_GRAPH),
                "--output",
                str(out),
                "--queries-per-relation",
                "2",
                "--held-out-fraction",
                "0.5",
            ]
        )
        == 0
    )
    probe = Probe.load(out)
    assert probe.queries and probe.settings["queries_per_relation"] == 2
    assert "--exclude-triples" in capsys.readouterr().out


def test_the_baseline_never_counts_the_probed_fact(store, tokenizer):
    """The baseline guesses a slot's most frequent fillers among the *other* facts (issue 26.8)."""
    probe = build_probe(store, queries_per_relation=100, held_out_fraction=0.0)
    baseline = reference_scores(probe, store, tokenizer)["baseline"]
    by_key = {(q.relation, q.direction, q.prefix, q.suffix): i for i, q in enumerate(probe.queries)}
    # 视网膜病变 常见症状 视物模糊 is the only fact naming 视物模糊: counting it would answer its own query
    assert baseline[by_key[("常见症状", "tail", "视网膜病变的常见症状有", "。")]] == 0.0
    # [MASK]的常见症状有头痛 (answers 高血压, 脑卒中, 感冒): without those three facts, heads of 常见症状 of
    # 3 tokens are 糖尿病 (4), 脑卒中 (2: 头晕, 偏瘫), 高血压 (1: 头晕) → still a hit, from other facts
    assert baseline[by_key[("常见症状", "head", "", "的常见症状有头痛。")]] == 1.0
    # 内科 (就诊科室 of 感冒) is named by no other fact
    assert baseline[by_key[("就诊科室", "tail", "感冒的就诊科室有", "。")]] == 0.0


def test_a_query_is_a_training_sentence_with_the_object_masked(store):
    """The default template states a fact as kgplm.demo.verbalized_facts writes it in every benchmark corpus."""
    from kgplm.demo import verbalized_facts

    probe = build_probe(store, queries_per_relation=100, held_out_fraction=0.0)
    tail_queries = {(q.relation, q.prefix): q for q in probe.queries if q.direction == "tail"}
    texts = verbalized_facts(store, 10)
    assert len(texts) == 4  # 糖尿病, 高血压, 脑卒中, 感冒 have at least four links
    checked = set()
    for text, stated in texts:
        name = store.entity_name(stated[0][0])
        clauses = text[len(name) + 1 : -1].split("；")  # "{name}的" + clause；clause… + "。"
        for clause in clauses:  # each clause "{relation}有{object}、…" states the facts of one relation
            relation = clause.split("有", 1)[0]
            query = tail_queries[(relation, f"{name}的{relation}有")]
            first_object = clause.split("有", 1)[1].split("、")[0]
            assert first_object in query.answer_names and query.suffix == "。"
            assert query.prefix + first_object + query.suffix == f"{name}的{clause.split('、')[0]}。"
            checked.add(relation)
    assert checked == {"常见症状", "就诊科室", "并发症"}


def _query(relation, held_out, prefix="x的r有", names=("a",)):
    return ProbeQuery(relation, "tail", "x", prefix, "。", ("a",), names, held_out)


def test_query_types_follow_the_paper():
    """Yuan et al. §4.6.4: type 1 when an answer is written inside the query, type 2 otherwise."""
    assert answer_in_query(_query("A", False, "他克莫司一水合物的has form有", ("他克莫司",)))
    assert answer_in_query(_query("A", False, "Tacrolimus monohydrate has form ", ("tacrolimus",)))
    assert not answer_in_query(_query("A", False, "cosyntropin may diagnose ", ("adrenal cortex disease",)))


def test_hard_easy_and_type_groups_by_hand():
    queries = [
        _query("A", False),
        _query("A", True),
        _query("A", False, "a的r有"),  # the third is type 1
        _query("B", False),
        _query("B", True),
        _query("B", True),
    ]
    scores = [True, False, True, False, True, None]
    easy = [True, False, False, True, False, None]  # the baseline answers queries 0 and 3
    summary = summarize(Probe(queries, []), scores, easy)
    # hard: A → [q1 False, q2 True] = 0.5, B → [q4 True] = 1.0
    assert summary["recall@5_hard"] == pytest.approx(0.75) and summary["queries_hard"] == 3
    assert summary["recall@5_hard_seen"] == pytest.approx(1.0) and summary["queries_hard_seen"] == 1  # q2
    assert summary["recall@5_hard_unseen"] == pytest.approx((0.0 + 1.0) / 2)  # A: q1, B: q4
    assert summary["recall@5_easy"] == pytest.approx((1.0 + 0.0) / 2) and summary["queries_easy"] == 2
    assert summary["recall@5_type1"] == 1.0 and summary["queries_type1"] == 1
    assert summary["recall@5_type2"] == pytest.approx((0.5 + 0.5) / 2) and summary["queries_type2"] == 4
    without = summarize(Probe(queries, []), scores)  # no baseline given: no hard/easy groups
    assert math.isnan(without["recall@5_hard"]) and without["queries_hard"] == 0
    table = probe_table({"m": summary})
    header, row = table.splitlines()[0], table.splitlines()[2]
    assert header.index("hard seen") < header.index("hard unseen") < header.index(" all ") < header.index("type 2")
    assert row.split()[1:] == ["100.0", "50.0", "75.0", "58.3", "50.0", "100.0", "50.0"]  # all: A 2/3, B 1/2
