"""Task readers on the real files (counts from the data README) and on bad input."""

from __future__ import annotations

import json

import pytest

from kgplm.evaluation.tasks import (
    PairExample,
    RankingExample,
    RelationExample,
    SpanExample,
    TextExample,
    TripleExample,
    derive_splits,
    get_task,
    load_task,
    read_mention_json,
    task_names,
)
from kgplm.exceptions import ConfigurationError, DataFormatError, MissingFileError


@pytest.fixture(scope="module")
def tasks_root(shared_data):
    return shared_data / "tasks"


def sizes(splits):
    return tuple(len(splits[s]) for s in ("train", "dev", "test"))


def span_count(examples):
    return sum(len(e.spans) for e in examples)


def test_registry_lists_every_task_of_the_issue():
    assert set(task_names()) >= {
        "cmedqaner",
        "cehrner",
        "cmeee",
        "cmedqq",
        "chip-sts",
        "cmedqa",
        "cmedic",
        "cmedtc",
        "kuake-qic",
        "cmeie",
        "bc5cdr",
        "ncbi-disease",
        "chemprot",
        "gad",
        "ddi",
    }
    with pytest.raises(ConfigurationError, match="did you mean cmedqaner"):
        get_task("cmedqner")


def test_cmedqaner_counts(tasks_root, caplog):
    splits = load_task("cmedqaner", tasks_root)
    assert sizes(splits) == (1673, 175, 215)
    assert isinstance(splits["train"][0], SpanExample)
    # README: 12,625 / 1,035 / 1,350 mentions; 15 misaligned (line 367) and overlapping ones are dropped
    assert "15 mentions whose offset does not point" in caplog.text
    dropped = {"train": 15 + 128, "dev": 11, "test": 10}
    assert span_count(splits["train"]) + dropped["train"] == 12625
    assert span_count(splits["dev"]) + dropped["dev"] == 1035
    assert span_count(splits["test"]) + dropped["test"] == 1350
    example = splits["train"][0]
    assert example.spans == ((0, 2, "disease"), (26, 28, "disease")) and example.text[26:28] == "便秘"


def test_cehrner_and_nested_cmeee(tasks_root):
    splits = load_task("cehrner", tasks_root)
    assert sizes(splits) == (914, 44, 41)
    assert (span_count(splits["train"]), span_count(splits["dev"]), span_count(splits["test"])) == (16136, 749, 632)
    cmeee = load_task("cmeee", tasks_root)
    assert sum(sizes(cmeee)) == 5000  # dev only: split 80/10/10
    assert sizes(cmeee) == (4000, 500, 500)
    examples = [e for split in cmeee.values() for e in split]
    assert span_count(examples) == 26081
    assert len({s[2] for e in examples for s in e.spans}) == 9
    nested = sum(any(a[0] <= b[0] and b[1] <= a[1] and a != b for a in e.spans for b in e.spans) for e in examples)
    assert nested > 0  # nesting is kept for the two-stream head


def test_classification_and_pair_counts(tasks_root):
    assert sizes(load_task("cmedqq", tasks_root)) == (16071, 1793, 1935)
    assert sizes(load_task("cmedic", tasks_root)) == (1683, 123, 84)
    cmedtc = load_task("cmedtc", tasks_root)
    assert sizes(cmedtc) == (14610, 1550, 1800)
    assert len({e.label for e in cmedtc["train"]}) == 44
    sts = load_task("chip-sts", tasks_root)
    assert sizes(sts) == (14400, 1600, 4000)  # test = the dev file; dev = 10 % of train
    assert isinstance(sts["train"][0], PairExample)
    qic = load_task("kuake-qic", tasks_root)
    assert sum(sizes(qic)) == 1955 and isinstance(qic["train"][0], TextExample)
    assert len({e.label for split in qic.values() for e in split}) == 11


def test_cmedqa_groups_candidates_by_question(tasks_root):
    splits = load_task("cmedqa", tasks_root)
    assert isinstance(splits["test"][0], RankingExample)
    # one group per question and file: 895 dev and 897 test questions, pooled and split by question
    assert sum(len(split) for split in splits.values()) == 895 + 897


def test_relation_tasks(tasks_root):
    cmeie = load_task("cmeie", tasks_root)
    examples = [e for split in cmeie.values() for e in split]
    assert len(examples) == 3585 and isinstance(examples[0], TripleExample)
    assert sum(len(e.triples) for e in examples) == 16309
    assert len({t[1] for e in examples for t in e.triples}) == 43
    chemprot = load_task("chemprot", tasks_root)
    assert sizes(chemprot) == (4169, 2427, 3469)
    example = chemprot["train"][0]
    assert isinstance(example, RelationExample)
    assert example.text[slice(*example.head)] == "Epidermal growth factor receptor"
    assert example.text[slice(*example.tail)] == "gefitinib"
    assert "<<" not in example.text and "[[" not in example.text
    gad = load_task("gad", tasks_root)
    assert len(gad["train"]) + len(gad["dev"]) == 535 and len(gad["test"]) == 534
    assert gad["test"][0].text[slice(*gad["test"][0].head)] == "@GENE$"
    assert sum(sizes(load_task("ddi", tasks_root))) == 2496


def test_blurb_ner_counts(tasks_root):
    chem, disease = load_task("bc5cdr-chem", tasks_root), load_task("bc5cdr-disease", tasks_root)
    assert span_count(chem["train"]) == 5203 and span_count(disease["train"]) == 4182
    ncbi = load_task("ncbi-disease", tasks_root)
    assert tuple(span_count(ncbi[s]) for s in ("train", "dev", "test")) == (5134, 787, 960)
    for example in ncbi["train"][:200]:  # spans start and end on token boundaries of the space-joined text
        for start, end, _ in example.spans:
            assert (start == 0 or example.text[start - 1] == " ") and (
                end == len(example.text) or example.text[end] == " "
            )
            assert example.text[start:end] == example.text[start:end].strip()


def test_derived_splits_are_seeded_and_disjoint():
    items = list(range(100))
    first, second = derive_splits({"dev": items}), derive_splits({"dev": items})
    assert first == second
    assert sorted(first["train"] + first["dev"] + first["test"]) == items
    assert (len(first["train"]), len(first["dev"]), len(first["test"])) == (80, 10, 10)
    assert derive_splits({"dev": items}, seed=1)["train"] != first["train"]


def test_a_users_directory_with_the_files_directly(tmp_path):
    for split in ("train", "dev", "test"):
        (tmp_path / f"{split}.txt").write_text("1\t头痛怎么办\n0\t感冒吃什么药\n", encoding="utf-8")
    splits = load_task("cmedic", tmp_path)
    assert [e.label for e in splits["train"]] == ["1", "0"]
    assert splits["dev"][1].text == "感冒吃什么药" and splits["dev"][1].id == "dev.txt:2"


def test_bad_rows_name_file_and_line(tmp_path):
    path = tmp_path / "train.json"
    path.write_text('{"text": "头痛", "mention_data": []}\n{"text": "x", broken\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"train.json:2.*broken JSON"):
        read_mention_json(path)
    path.write_text(
        json.dumps({"text": "头痛", "mention_data": [{"mention": "头痛", "type": "symptom", "offset": "5"}]}) + "\n",
        encoding="utf-8",
    )
    with pytest.raises(DataFormatError, match=r"train.json:1.*outside the text of 2 characters"):
        read_mention_json(path)
    bad = tmp_path / "cls"
    bad.mkdir()
    for split in ("train", "dev", "test"):
        (bad / f"{split}.txt").write_text("1\t头痛\textra\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"train.txt:1.*3 tab-separated fields \(expected 2 fields\)"):
        load_task("cmedic", bad)
    with pytest.raises(MissingFileError):
        load_task("cmedqq", tmp_path)


def test_chemprot_markers_are_removed_in_either_order(tmp_path):
    from kgplm.evaluation.tasks import read_chemprot

    path = tmp_path / "train.jsonl"
    rows = [
        '{"text": "A [[ xx ]] B << yyy >> C", "label": "UP"}',
        '{"text": "<< yyy >> then [[ xx ]].", "label": "UP"}',
    ]
    path.write_text("\n".join(rows), encoding="utf-8")
    first, second = read_chemprot(path)
    assert (first.text, first.text[slice(*first.head)], first.text[slice(*first.tail)]) == ("A xx B yyy C", "yyy", "xx")
    assert (second.text, second.text[slice(*second.head)], second.text[slice(*second.tail)]) == (
        "yyy then xx.",
        "yyy",
        "xx",
    )
    path.write_text('{"text": "no markers", "label": "UP"}', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"train.jsonl:1.*markers << … >> not found"):
        read_chemprot(path)


# -- issue 19 ------------------------------------------------------------------------------------------------
def test_cmedqa_test_questions_never_reach_train_or_dev(tasks_root):
    """Upstream dev and test share 892 questions; the splits are drawn by question from both files."""
    splits = load_task("cmedqa", tasks_root)
    test_questions = {e.query for e in splits["test"]}
    seen = {e.query for e in splits["train"] + splits["dev"]}
    assert not test_questions & seen
    assert not {e.query for e in splits["dev"]} & {e.query for e in splits["train"]}
    # every candidate row of both files lands in exactly one split
    assert sum(len(e.candidates) for split in splits.values() for e in split) == 5475 + 6149
    assert len(test_questions) >= 80


def test_ranking_baselines_of_the_official_cmedqa_test_file(tasks_root):
    from kgplm.evaluation.metrics import ranking_baselines
    from kgplm.evaluation.tasks import read_ranking

    examples = read_ranking(tasks_root / "zh" / "chineseblue" / "cMedQA" / "test.txt")
    baselines = ranking_baselines([e.labels for e in examples])
    assert (baselines["questions"], baselines["answerable"]) == (897, 225)
    # by hand: the mean share of correct candidates, and the share whose first candidate is correct
    answerable = [e.labels for e in examples if any(e.labels)]
    assert baselines["random_acc@1"] == pytest.approx(sum(sum(l) / len(l) for l in answerable) / 225)
    assert baselines["first_candidate_acc@1"] == pytest.approx(81 / 225)  # 0.36
    assert round(baselines["random_acc@1"], 2) == 0.34


def _write_json_list(path, records):
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")


def test_official_cblue_files_are_read_when_present(tmp_path, caplog):
    from kgplm.evaluation.tasks import load_task_splits

    def entity(text, word, kind="dis"):
        start = text.index(word)
        return {"start_idx": start, "end_idx": start + len(word) - 1, "type": kind, "entity": word}

    for split, texts in (("train", ["头痛三天", "发热咳嗽", "腹泻"]), ("dev", ["胸闷气短"]), ("test", ["乏力"])):
        records = [{"text": t, "entities": [entity(t, t[:2])]} for t in texts]
        if split == "test":  # the CBLUE test file carries no labels
            records = [{"text": t} for t in texts]
        _write_json_list(tmp_path / f"CMeEE-V2_{split}.json", records)
    loaded = load_task_splits("cmeee", tmp_path)
    assert [e.text for e in loaded.splits["train"]] == ["头痛三天", "发热咳嗽", "腹泻"]
    assert [e.text for e in loaded.splits["dev"]] == ["胸闷气短"]
    assert loaded.derived == () and loaded.unlabelled == ("test",)
    assert loaded.splits["test"][0].spans is None
    assert "derived" not in caplog.text


def test_official_blurb_relation_files_are_read_when_present(tasks_root, tmp_path):
    from kgplm.evaluation.tasks import load_task_splits

    source = (tasks_root / "en" / "blurb_re" / "GAD_BLURB" / "dev_0.json").read_text(encoding="utf-8").splitlines()
    folder = tmp_path / "en" / "blurb_re" / "GAD_BLURB"
    folder.mkdir(parents=True)
    for split, rows in (("train", source[:300]), ("dev", source[300:400]), ("test", source[400:])):
        (folder / f"{split}_0.json").write_text("\n".join(rows), encoding="utf-8")
    loaded = load_task_splits("gad", tmp_path)
    assert [len(loaded.splits[s]) for s in ("train", "dev", "test")] == [300, 100, 135]
    assert loaded.derived == ()


def test_missing_splits_are_derived_with_a_warning_and_reported(tasks_root, caplog):
    from kgplm.evaluation.tasks import load_task_splits

    loaded = load_task_splits("kuake-qic", tasks_root)
    assert loaded.derived == ("train", "dev", "test")
    assert "KUAKE-QIC_train.json" in caplog.text and "derived" in caplog.text
    assert load_task_splits("chip-sts", tasks_root).derived == ("dev", "test")
    assert load_task_splits("cmedqaner", tasks_root).derived == ()


def test_chemprot_markers_round_trip_on_the_real_files(tasks_root):
    """Putting the four markers back at the entity spans gives the released text, for every example."""
    count = 0
    for split in ("train", "dev", "test"):
        path = tasks_root / "en" / "chemprot" / f"{split}.jsonl"
        raw = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        examples = load_task("chemprot", tasks_root, split)
        for text, example in zip(raw, examples):
            inserts = sorted(
                [
                    (example.head[0], "<< "),
                    (example.head[1], " >>"),
                    (example.tail[0], "[[ "),
                    (example.tail[1], " ]]"),
                ],
                key=lambda p: p[0],
            )
            rebuilt, last = "", 0
            for position, marker in inserts:
                rebuilt += example.text[last:position] + marker
                last = position
            assert rebuilt + example.text[last:] == text, example.id
            count += 1
    assert count == 10065


def test_official_train_file_is_not_replaced_by_a_split_of_dev(tmp_path):
    for split, texts in (
        ("train", ["头痛三天", "发热咳嗽", "腹泻"]),
        ("dev", ["胸闷气短", "恶心"]),
        ("test", ["乏力"]),
    ):
        records = [{"query": t, "label": "病情诊断"} for t in texts]
        _write_json_list(tmp_path / f"KUAKE-QIC_{split}.json", records)
    splits = load_task("kuake-qic", tmp_path)
    assert [e.text for e in splits["train"]] == ["头痛三天", "发热咳嗽", "腹泻"]
    assert [e.text for e in splits["test"]] == ["乏力"]


def test_cmedir_groups_documents_by_query_and_splits_by_query(tasks_root):
    from kgplm.evaluation.tasks import load_task_splits

    loaded = load_task_splits("cmedir", tasks_root)
    assert loaded.derived == ("train", "dev", "test")  # the dev and test files share 1,093 queries
    examples = [e for split in loaded.splits.values() for e in split]
    assert len(examples) == 4298 + 4287  # distinct queries per file
    assert sum(len(e.candidates) for e in examples) == 9868 + 9864  # distinct (query, url) per file
    assert {g for e in examples for g in e.labels} == {0, 1, 2, 3, 4}
    assert not any(title.startswith(":") for e in examples for title in e.candidates)
    queries = {split: {e.query for e in loaded.splits[split]} for split in ("train", "dev", "test")}
    assert not queries["test"] & (queries["train"] | queries["dev"]) and not queries["train"] & queries["dev"]
    first = next(e for e in examples if e.id == "dev.json:1")
    # the two documents of dev.json's first row come first; the query's later rows add documents
    assert first.candidates[:2] == ("去除牙结石小妙招_不能不知道的窍门", "去除牙结石小妙招`_文档资料库")
    assert first.labels[:2] == (2, 1)
