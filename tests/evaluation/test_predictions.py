"""Prediction writers: JSON lines, and CBLUE submission files that CBLUE's own format reads back."""

from __future__ import annotations

import json

import pytest

from kgplm.evaluation.predictions import CBLUE_FILES, write_predictions
from kgplm.evaluation.readers import read_cmeee, read_cmeie, read_query_json, read_sts_json
from kgplm.exceptions import ConfigurationError

TEXT = "患者有2型糖尿病，服用二甲双胍。"


CMEEE_RECORD = {
    "id": "x",
    "text": TEXT,
    "predicted": [
        {"start": 3, "end": 8, "type": "dis", "mention": "2型糖尿病"},
        {"start": 11, "end": 15, "type": "dru", "mention": "二甲双胍"},
    ],
}


def test_every_cblue_task_writes_its_official_file_that_the_reader_accepts(tmp_path):
    """CMeEE-V2's end_idx is inclusive: the span [3, 8) is written as 3..7 and read back as [3, 8)."""
    records = {
        "cmeee": [CMEEE_RECORD],
        "cmeie": [
            {
                "id": "x",
                "text": TEXT,
                "predicted": [{"subject": "2型糖尿病", "predicate": "药物治疗", "object": "二甲双胍"}],
            }
        ],
        "chip-sts": [
            {
                "id": "x",
                "source_id": "17",
                "text_a": "糖尿病吃什么",
                "text_b": "糖尿病饮食",
                "category": "diabetes",
                "predicted": "1",
            }
        ],
        "kuake-qic": [{"id": "x", "source_id": "s3", "text": "糖尿病怎么治", "predicted": "治疗方案"}],
    }
    for task, rows in records.items():
        path = write_predictions(rows, tmp_path / "submission", task=task, format="cblue")
        assert path.name == CBLUE_FILES[task]
    cmeee = json.loads((tmp_path / "submission" / "CMeEE-V2_test.json").read_text(encoding="utf-8"))
    assert cmeee[0]["entities"][0] == {"start_idx": 3, "end_idx": 7, "type": "dis", "entity": "2型糖尿病"}
    assert read_cmeee(tmp_path / "submission" / "CMeEE-V2_test.json")[0].spans == ((3, 8, "dis"), (11, 15, "dru"))
    assert read_cmeie(tmp_path / "submission" / "CMeIE-V2_test.jsonl")[0].triples == (
        ("2型糖尿病", "药物治疗", "二甲双胍"),
    )
    sts = read_sts_json(tmp_path / "submission" / "CHIP-STS_test.json")[0]
    assert (sts.source_id, sts.text_a, sts.text_b, sts.category, sts.label) == (
        "17",
        "糖尿病吃什么",
        "糖尿病饮食",
        "diabetes",
        "1",
    )
    query = read_query_json(tmp_path / "submission" / "KUAKE-QIC_test.json")[0]
    assert (query.source_id, query.text, query.label) == ("s3", "糖尿病怎么治", "治疗方案")


def test_jsonl_writes_one_line_per_record_and_bad_formats_fail(tmp_path):
    path = write_predictions([{"id": "a"}, {"id": "b"}], tmp_path / "p.jsonl", task="cmedic")
    assert [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines()] == ["a", "b"]
    with pytest.raises(ConfigurationError, match="not a CBLUE task"):
        write_predictions([], tmp_path / "d", task="cmedic", format="cblue")
    with pytest.raises(ConfigurationError, match="format must be one of"):
        write_predictions([], tmp_path / "d", task="cmeee", format="csv")
