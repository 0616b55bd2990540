"""Per-example test outcomes of a fine-tuned model: what the paired bootstrap resamples.

``kgplm.finetune`` reports a test score and the ids of the examples it scored; this re-predicts
those examples with the saved model exactly as ``kgplm.evaluate`` does (same encoder inputs, same
length) and turns each example into the counts of :mod:`kgplm.evaluation.statistics`. The
replication runner checks that the counts give back the reported score, so a drift between this
decoding and kgplm's scoring stops the run instead of skewing the table.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kgplm.evaluation.statistics import example_counts, metric_from_counts

__all__ = ["scored_outcomes", "dev_kappa", "chance_score", "baseline_counts", "best_constant"]


def _predictions(encoder, examples, features, outputs) -> list:
    """Predicted spans (NER: windows merged back to the document) or labels (``None``: no prediction), one per
    example, decoded as :func:`kgplm.finetuning.scoring.score` decodes them."""
    if encoder.kind in ("ner", "nested_ner"):
        return encoder.predicted_spans(examples, features, outputs)
    names = encoder.label_names
    return [None if feature.get("cut") else names[int(np.argmax(output))] for feature, output in zip(features, outputs)]


def _gold(spec, examples) -> list:
    return [example.spans if spec.kind in ("ner", "nested_ner") else example.label for example in examples]


def _predicted(finetuned: Path, task: str, data_dir: Path, split: str, device: str) -> tuple[list, list, list]:
    """(ids, examples, predictions) of the ``split`` examples ``finetuned`` scored, re-predicted as
    ``kgplm.evaluate`` predicts them."""
    from kgplm.evaluation.tasks import get_task, load_task
    from kgplm.models import load_pretrained
    from kgplm.text.tokenization import load_tokenizer
    from kgplm.finetuning.encoding import TaskEncoder
    from kgplm.finetuning.loop import predict
    from kgplm.training.run import locate_model
    from kgplm.finetuning.mention_inputs import fine_tuning_knowledge

    spec = get_task(task)
    ids = json.loads((finetuned / "results.json").read_text(encoding="utf-8"))["example_ids"][split]
    settings = json.loads((finetuned / "finetune_config.json").read_text(encoding="utf-8"))
    by_id = {example.id: example for example in load_task(task, data_dir, split)}
    examples = [by_id[i] for i in ids]
    model_dir, tokenizer_dir, run = locate_model(finetuned)
    network = load_pretrained(str(model_dir)).to(device)
    config = network.config
    # the method's own inputs, or the span indicator's or typed gazetteer's (kgplm.finetune(mention_spans=...))
    knowledge = fine_tuning_knowledge(config, run, encoder_inputs=settings["encoder_inputs"])
    encoder = TaskEncoder(
        spec,
        load_tokenizer(tokenizer_dir),
        label_names=config.label_names,
        max_length=settings["max_length"],
        tagging=config.tagging,
        knowledge=knowledge,
    )
    features = encoder.encode(examples)
    return ids, examples, _predictions(encoder, examples, features, predict(network, encoder, features, device=device))


def scored_outcomes(finetuned: Path, task: str, data_dir: Path, *, device: str = "cpu") -> dict:
    """``{"ids", "metric", "counts" (examples × k), "score"}`` of the test examples ``finetuned`` scored."""
    from kgplm.evaluation.tasks import get_task

    spec = get_task(task)
    ids, examples, predicted = _predicted(finetuned, task, data_dir, "test", device)
    counts = example_counts(spec.metric, _gold(spec, examples), predicted)
    return {
        "ids": ids,
        "metric": spec.metric,
        "counts": counts.tolist(),
        "score": float(metric_from_counts(spec.metric, counts.sum(0))),
    }


def dev_kappa(finetuned: Path, task: str, data_dir: Path, *, device: str = "cpu") -> float | None:
    """Cohen's κ of ``finetuned``'s dev predictions against the gold labels
    (:func:`kgplm.evaluation.degenerate.cohen_kappa`); ``None`` for a task that is not classification (NER)."""
    from kgplm.evaluation.degenerate import cohen_kappa
    from kgplm.evaluation.tasks import get_task

    spec = get_task(task)
    if spec.kind in ("ner", "nested_ner"):
        return None
    _, examples, predicted = _predicted(finetuned, task, data_dir, "dev", device)
    return cohen_kappa(_gold(spec, examples), predicted)


def chance_score(task: str, train_examples, examples) -> float | None:
    """The expected score on ``examples`` of a uniformly random training label per example (the mean over
    :func:`baseline_counts`' seeded draws); ``None`` for NER, which has no chance predictor."""
    chance = baseline_counts(task, train_examples, examples)["chance"]
    if chance is None:
        return None
    from kgplm.evaluation.tasks import get_task

    return float(metric_from_counts(get_task(task).metric, chance.sum(1)).mean())


def baseline_counts(
    task: str, train_examples, test_examples, *, draws: int = 200, seed: int = 0
) -> dict[str, np.ndarray | None]:
    """Counts of the majority-class predictor (all-O for NER: no entity) and of chance (a uniformly random
    training label per example; ``draws`` seeded draws stacked as runs, (draws, examples, k)); NER has no
    chance predictor (``None``)."""
    from kgplm.evaluation.tasks import get_task

    spec = get_task(task)
    gold = _gold(spec, test_examples)
    if spec.kind in ("ner", "nested_ner"):
        return {"majority": example_counts(spec.metric, gold, [set()] * len(gold)), "chance": None}
    train_labels = [example.label for example in train_examples]
    labels, frequency = np.unique(train_labels, return_counts=True)
    majority = example_counts(spec.metric, gold, [labels[int(np.argmax(frequency))]] * len(gold))
    rng = np.random.default_rng(seed)
    all_labels = sorted(set(labels.tolist()) | set(gold))
    chance = np.stack(
        [
            example_counts(
                spec.metric,
                gold,
                labels[rng.integers(0, len(labels), len(gold))].tolist(),
                labels=all_labels if spec.metric == "macro_f1" else None,
            )
            for _ in range(draws)
        ]
    )
    return {"majority": majority, "chance": chance}


def best_constant(task: str, train_examples, examples) -> dict:
    """The best constant predictor on ``examples`` (a run's dev set): ``{"score", "prediction"}``.

    NER: no entity in any document (all-O; a constant span set is no predictor). Labelled tasks: the
    training label that, predicted for every example, scores highest on ``examples`` (at least the
    majority class; for macro-F1 the same label list as :func:`baseline_counts`). A fine-tuned run
    whose dev score does not exceed this has learnt nothing the label distribution does not give."""
    from kgplm.evaluation.tasks import get_task
    from kgplm.exceptions import ConfigurationError

    spec = get_task(task)
    gold = _gold(spec, examples)
    if spec.kind in ("ner", "nested_ner"):
        counts = example_counts(spec.metric, gold, [set()] * len(gold))
        return {"score": float(metric_from_counts(spec.metric, counts.sum(0))), "prediction": "no entity (all-O)"}
    if spec.metric not in ("accuracy", "macro_f1"):
        raise ConfigurationError(
            f"task {task!r} ({spec.kind}, {spec.metric}): the runner has no constant predictor "
            f"for it (ranking and regression tasks are not replication columns yet)"
        )
    labels = sorted({example.label for example in train_examples})
    all_labels = sorted(set(labels) | set(gold))
    scores = {
        label: float(
            metric_from_counts(
                spec.metric,
                example_counts(
                    spec.metric, gold, [label] * len(gold), labels=all_labels if spec.metric == "macro_f1" else None
                ).sum(0),
            )
        )
        for label in labels
    }
    best = max(labels, key=lambda label: (scores[label], label))
    return {"score": scores[best], "prediction": best}
