"""Predictions, not only scores: one record per example, as JSON lines or as CBLUE submission files.

:func:`example_predictions` turns a fine-tuned model's outputs (decoded by the task's
:class:`~kgplm.finetuning.encoding.TaskEncoder`, the same decoding the scores use) into one record per
example: the input text, the gold annotation where the split has labels, and the prediction —
NER spans with character offsets (end exclusive; ``text[start:end] == mention``), a label, relation
triples, or candidate scores for ranking tasks.

:func:`write_predictions` writes them as JSON lines (``format="jsonl"``) or, for the CBLUE tasks, as
the benchmark's submission file (``format="cblue"``) so the hidden-label CBLUE test sets can be
scored by the benchmark's server:

=============  =======================  ==============================================================
task           file                     records
=============  =======================  ==============================================================
``cmeee``      ``CMeEE-V2_test.json``   ``{"text", "entities": [{"start_idx", "end_idx", "type",
                                        "entity"}]}`` — ``end_idx`` inclusive, as CMeEE-V2's files
``cmeie``      ``CMeIE-V2_test.jsonl``  ``{"text", "spo_list": [{"subject", "predicate",
                                        "object": {"@value"}}]}``
``chip-sts``   ``CHIP-STS_test.json``   ``{"id", "text1", "text2", "category", "label"}``
``kuake-qic``  ``KUAKE-QIC_test.json``  ``{"id", "query", "label"}``
=============  =======================  ==============================================================
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kgplm._io import atomic_file
from kgplm.exceptions import ConfigurationError

__all__ = ["example_predictions", "write_predictions", "CBLUE_FILES", "PREDICTION_FORMATS"]

PREDICTION_FORMATS = ("jsonl", "cblue")
#: CBLUE task → the submission file name.
CBLUE_FILES = {
    "cmeee": "CMeEE-V2_test.json",
    "cmeie": "CMeIE-V2_test.jsonl",
    "chip-sts": "CHIP-STS_test.json",
    "kuake-qic": "KUAKE-QIC_test.json",
}


def _spans(text: str, spans) -> list[dict[str, Any]]:
    return [
        {"start": int(start), "end": int(end), "type": kind, "mention": text[start:end]}
        for start, end, kind in sorted(spans)
    ]


def _triples(triples) -> list[dict[str, str]]:
    return [{"subject": subject, "predicate": predicate, "object": obj} for subject, predicate, obj in sorted(triples)]


def example_predictions(encoder, examples: Sequence, features: list[dict], outputs: list) -> list[dict[str, Any]]:
    """One record per example (see the module docstring); ``outputs`` from
    :func:`kgplm.finetuning.loop.predict` over ``features`` of ``examples``."""
    from kgplm.finetuning.scoring import predicted_labels, predicted_triples

    kind = encoder.kind
    records: list[dict[str, Any]] = []
    if kind in ("ner", "nested_ner"):
        for example, spans in zip(examples, encoder.predicted_spans(examples, features, outputs)):
            records.append(
                {
                    "id": example.id,
                    "text": example.text,
                    "predicted": _spans(example.text, spans),
                    "gold": None if example.spans is None else _spans(example.text, example.spans),
                }
            )
    elif kind == "relation_triples":
        for example, triples in zip(examples, predicted_triples(encoder, outputs)):
            records.append(
                {
                    "id": example.id,
                    "text": example.text,
                    "predicted": _triples(triples),
                    "gold": None if example.triples is None else _triples(example.triples),
                }
            )
    elif kind in ("qa_ranking", "graded_ranking"):
        scores: dict[int, list[float]] = {}
        for feature, output in zip(features, outputs):
            scores.setdefault(feature["example_index"], []).append(float(output))
        for index, example in enumerate(examples):
            candidate_scores = scores.get(index, [])
            best = max(range(len(candidate_scores)), key=candidate_scores.__getitem__) if candidate_scores else None
            records.append(
                {
                    "id": example.id,
                    "query": example.query,
                    "predicted": best,
                    "gold": list(example.labels),
                    "candidates": [
                        {"text": text, "score": value} for text, value in zip(example.candidates, candidate_scores)
                    ],
                }
            )
    else:
        for example, feature, label in zip(examples, features, predicted_labels(encoder, features, outputs)):
            record: dict[str, Any] = {"id": example.id}
            if kind == "pair":
                record.update(
                    text_a=example.text_a, text_b=example.text_b, source_id=example.source_id, category=example.category
                )
            else:
                record["text"] = example.text
                if kind == "relation":
                    record.update(head=list(example.head), tail=list(example.tail), cut=bool(feature.get("cut")))
                else:
                    record["source_id"] = example.source_id
            record.update(predicted=label, gold=example.label)
            records.append(record)
    return records


def _cblue_record(task: str, record: dict[str, Any]) -> dict[str, Any]:
    if task == "cmeee":
        return {
            "text": record["text"],
            "entities": [
                {
                    "start_idx": span["start"],
                    "end_idx": span["end"] - 1,
                    "type": span["type"],
                    "entity": span["mention"],
                }
                for span in record["predicted"]
            ],
        }
    if task == "cmeie":
        return {
            "text": record["text"],
            "spo_list": [
                {"subject": t["subject"], "predicate": t["predicate"], "object": {"@value": t["object"]}}
                for t in record["predicted"]
            ],
        }
    if task == "chip-sts":
        return {
            "id": record["source_id"],
            "text1": record["text_a"],
            "text2": record["text_b"],
            "category": record["category"],
            "label": record["predicted"],
        }
    return {"id": record["source_id"], "query": record["text"], "label": record["predicted"]}


def write_predictions(
    records: list[dict[str, Any]], output: str | os.PathLike, *, task: str, format: str = "jsonl"
) -> Path:
    """Write ``records`` (atomically). ``format="jsonl"``: ``output`` is the file. ``"cblue"``:
    ``output`` is a directory that receives the task's submission file; returns the file written."""
    if format not in PREDICTION_FORMATS:
        raise ConfigurationError(f"format must be one of {PREDICTION_FORMATS}, got {format!r}")
    output = Path(output)
    if format == "jsonl":
        output.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(output, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        return output
    if task not in CBLUE_FILES:
        raise ConfigurationError(
            f"format='cblue' writes the CBLUE submission files of {sorted(CBLUE_FILES)}; "
            f"{task!r} is not a CBLUE task (use format='jsonl')"
        )
    output.mkdir(parents=True, exist_ok=True)
    target = output / CBLUE_FILES[task]
    converted = [_cblue_record(task, record) for record in records]
    with atomic_file(target, "w", encoding="utf-8") as handle:
        if target.suffix == ".jsonl":
            handle.write("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in converted))
        else:
            json.dump(converted, handle, ensure_ascii=False, indent=1)
    return target
