"""Fine-tuning, evaluation and prediction: one home for what turns a pre-trained kgplm model into a task model.

* :mod:`kgplm.finetuning.api` — :func:`finetune`, :func:`evaluate`, :func:`predict` and their results
  (re-exported by :mod:`kgplm`); their arguments are :mod:`kgplm.arguments`' dataclasses;
* :mod:`kgplm.finetuning.encoding` — :class:`~kgplm.finetuning.encoding.TaskEncoder`: task examples →
  features, model outputs → task predictions;
* :mod:`kgplm.finetuning.loop` — the training loop with early stopping, and the model's outputs over
  features;
* :mod:`kgplm.finetuning.scoring` — task scores from those outputs;
* :mod:`kgplm.finetuning.defaults` — what ``"auto"`` resolves to, by the encoder's width;
* :mod:`kgplm.finetuning.checkpoints` — preemption: a checkpoint on a stop signal, and exact resume;
* :mod:`kgplm.finetuning.mention_inputs` — the linked mentions a fine-tuned encoder may read (the span
  indicator, the typed gazetteer).

The task heads are models and live with them (:mod:`kgplm.models.finetuning`), where the Auto classes
register them.
"""

from kgplm.finetuning.api import (
    EVALUATION_SUBSET_SEED,
    EvaluationResult,
    FineTuningResult,
    PredictionResult,
    evaluate,
    finetune,
    predict,
)

__all__ = [
    "finetune",
    "evaluate",
    "predict",
    "FineTuningResult",
    "EvaluationResult",
    "PredictionResult",
    "EVALUATION_SUBSET_SEED",
]
