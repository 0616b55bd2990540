"""Loading a pre-trained kgplm model under a task head, with kgplm's own account of what was loaded.

transformers (5.x) logs a "LOAD REPORT" table as a warning on every ``from_pretrained`` that leaves
weights new or unused. For a fine-tuning model both are expected — the task head is new, the
pre-training heads are unused — so kgplm silences that table here, checks the loading itself
(every encoder weight must come from the checkpoint) and logs one INFO line.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from kgplm.exceptions import ArtifactError

__all__ = ["silenced_load_report", "load_under_task_head", "TASK_HEAD_PREFIX"]

logger = logging.getLogger(__name__)

#: the parameters of :class:`kgplm.models.KgplmForFineTuning` that a pre-trained checkpoint lacks
TASK_HEAD_PREFIX = "head."
#: fine-tuning-only inputs a pre-trained checkpoint lacks (``finetune(mention_spans=True)``'s indicator, from zero)
FINE_TUNING_ONLY_PREFIXES = (TASK_HEAD_PREFIX, "span_indicator.", "gazetteer.")
#: encoder parts some pre-training models do not have (BERT's pooler: no MLM-only model trains it)
OPTIONAL_ENCODER_PARTS = (".pooler.",)

_TRANSFORMERS_LOADERS = (
    "transformers.modeling_utils",
    "transformers.utils.loading_report",
    "transformers.distributed.tensor_parallel",
)


@contextlib.contextmanager
def silenced_load_report() -> Iterator[None]:
    """Raise transformers' loading loggers to ERROR for the block (its report is a WARNING)."""
    loggers = [logging.getLogger(name) for name in _TRANSFORMERS_LOADERS]
    levels = [item.level for item in loggers]
    for item in loggers:
        item.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for item, level in zip(loggers, levels):
            item.setLevel(level)


def load_under_task_head(model_class, directory, **kwargs):
    """``model_class.from_pretrained(directory, **kwargs)`` without transformers' report; raises
    :class:`ArtifactError` when a weight outside the task head was not in the checkpoint."""
    with silenced_load_report():
        model, info = model_class.from_pretrained(str(directory), output_loading_info=True, **kwargs)
    missing = sorted(info.get("missing_keys", ()))
    not_head = [
        name
        for name in missing
        if not name.startswith(FINE_TUNING_ONLY_PREFIXES) and not any(part in name for part in OPTIONAL_ENCODER_PARTS)
    ]
    if not_head:
        raise ArtifactError(
            f"{directory} lacks {len(not_head)} encoder weights of {model_class.__name__} "
            f"(first: {not_head[:5]}); is it a kgplm pre-trained model of the same method?"
        )
    unused = sorted(info.get("unexpected_keys", ()))
    logger.info(
        "loaded %s from %s: %d new (task head, pooler) tensors, %d checkpoint tensors unused (pre-training heads)",
        model_class.__name__,
        directory,
        len(missing),
        len(unused),
    )
    return model
