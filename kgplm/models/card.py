"""Model cards: a ``README.md`` written beside the weights of every model kgplm saves.

A card says what the model is (method and paper, encoder size), what it was trained on (graph,
corpus or task data), with which settings, and what it scored (the last logged losses of a
pre-training run; dev and test scores of a fine-tuned model), in the form the Hugging Face Hub
reads (YAML front matter, then Markdown).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kgplm._io import atomic_file

__all__ = ["write_model_card"]

_SETTINGS = (
    "max_steps",
    "batch_size",
    "gradient_accumulation_steps",
    "learning_rate",
    "warmup_steps",
    "weight_decay",
    "masking",
    "max_length",
    "vocab_size",
    "kg_method",
    "entity_dim",
    "kg_epochs",
    "num_neighbors",
    "pepr_mode",
    "model_options",
    "seed",
    "epochs",
    "patience",
    "tagging",
    "max_train_examples",
    "max_eval_examples",
    "warmup_ratio",
)


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _table(rows: dict[str, Any]) -> list[str]:
    return ["| setting | value |", "|---|---|", *(f"| {k} | {_format(v)} |" for k, v in rows.items())]


def write_model_card(
    model_dir: str | os.PathLike,
    config,
    *,
    arguments: dict[str, Any],
    metrics: list[dict[str, Any]] | None = None,
    results: dict[str, Any] | None = None,
) -> Path:
    """Write ``model_dir/README.md`` for a model with ``config``.

    ``arguments``: the call that made it (``run_config.json`` or ``finetune_config.json``);
    ``metrics``: a pre-training run's logged records; ``results``: a fine-tuning run's ``results.json``.
    """
    from kgplm.registry import get

    spec = get(config.method)
    fine_tuned = config.task_kind is not None
    tags = ["kgplm", config.method, "medical", "fill-mask" if not fine_tuned else config.task_kind]
    lines = ["---", "library_name: kgplm", "tags:", *(f"- {tag}" for tag in tags), "---", ""]
    title = f"{config.method} fine-tuned on {config.task_name}" if fine_tuned else f"{config.method} (pre-trained)"
    lines += [
        f"# {title}",
        "",
        f"Method: `{spec.name}` — {spec.summary}.",
        f"Paper: {spec.paper}.",
        "",
        f"Encoder: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
        f"{config.num_attention_heads} heads, vocabulary {config.vocab_size}, "
        f"{config.max_position_embeddings} positions.",
        "",
    ]
    if fine_tuned:
        lines += [
            "## Task",
            "",
            f"Task `{config.task_name}` ({config.task_kind}); data `{arguments.get('data_dir')}`; "
            f"started from `{arguments.get('model')}`.",
            "",
        ]
        if config.label_names:
            lines += [f"Labels ({len(config.label_names)}): " + ", ".join(config.label_names), ""]
        if results:
            lines += [
                "## Scores",
                "",
                "| split | " + " | ".join(k for k in results["dev"] if k != "main") + " |",
                "|---|" + "---|" * (len(results["dev"]) - 1),
            ]
            for split in ("dev", "test"):
                scores = results.get(split)
                if scores:
                    lines.append(
                        f"| {split} | " + " | ".join(_format(v) for k, v in scores.items() if k != "main") + " |"
                    )
            lines += [
                "",
                f"Main metric: {results['metric']}. Examples: {_format(results['examples'])}. "
                f"Splits derived (not the official files): {_format(results.get('derived_splits', []))}.",
                "",
            ]
    else:
        lines += [
            "## Training data",
            "",
            f"Graph `{arguments.get('graph')}`; corpus `{arguments.get('corpus')}`"
            f"{' ' + _format(arguments['corpus_options']) if arguments.get('corpus_options') else ''}.",
            "",
        ]
        if metrics:
            last = {k: v for k, v in metrics[-1].items() if k != "learning_rate"}
            lines += [
                "## Last logged losses",
                "",
                "| " + " | ".join(last) + " |",
                "|" + "---|" * len(last),
                "| " + " | ".join(_format(v) for v in last.values()) + " |",
                "",
            ]
    lines += [
        "## Settings",
        "",
        *_table({k: arguments[k] for k in _SETTINGS if arguments.get(k) is not None}),
        "",
        "Load with `kgplm.models.load_pretrained(dir)` or, after `import kgplm`, the Hugging Face Auto classes.",
        "",
    ]
    path = Path(model_dir) / "README.md"
    with atomic_file(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines))
    return path
