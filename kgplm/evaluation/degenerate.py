"""A fine-tune that learned nothing says so: predictions that do not depend on the input.

A tagger that predicts ``O`` everywhere scores F1 0; a classifier that predicts one class scores the
majority share. Both are what a model that learned nothing does, typically because the learning rate
is too low (or too high) or there were too few epochs. :func:`constant_prediction` finds them in the
records of :func:`kgplm.evaluation.predictions.example_predictions`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["constant_prediction", "learned_nothing_message"]

_EMPTY_OUTPUT_KINDS = ("ner", "nested_ner", "relation_triples")


def constant_prediction(records: Sequence[dict[str, Any]], kind: str) -> str | None:
    """A description of the constant prediction (``"no entity on any of the 40 examples (all O)"``,
    ``"the label '1' for all 40 examples"``), or ``None`` when the predictions vary (or there are
    fewer than 2 examples)."""
    if len(records) < 2:
        return None
    if kind in _EMPTY_OUTPUT_KINDS:
        if any(record["predicted"] for record in records):
            return None
        what = "no entity" if kind != "relation_triples" else "no triple"
        return f"{what} on any of the {len(records)} examples" + (" (all O)" if kind != "relation_triples" else "")
    values = {json.dumps(record["predicted"], sort_keys=True) for record in records}
    if len(values) > 1:
        return None
    value = records[0]["predicted"]
    if kind in ("qa_ranking", "graded_ranking"):
        return f"candidate {value} as the best for all {len(records)} queries"
    return f"the label {value!r} for all {len(records)} examples"


def learned_nothing_message(description: str, *, split: str, learning_rate: float, epochs: int) -> str:
    """The warning ``kgplm.finetune`` logs and returns when the predictions are constant."""
    return (
        f"the fine-tuned model predicts {description} of {split}: it learned nothing from the input. "
        f"Try another learning rate (this run: {learning_rate:g}; a small encoder often needs 1e-3 to 5e-3, "
        f"BERT-base 2e-5 to 5e-5) or more epochs (this run: {epochs}), and check that the training labels "
        f"are not all one class"
    )
