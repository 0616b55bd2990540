"""What ``kgplm.finetune``'s ``"auto"`` arguments resolve to: :data:`FINE_TUNING_DEFAULTS`, by the width of
the encoder."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FINE_TUNING_DEFAULTS", "FineTuningDefaults", "fine_tuning_defaults", "default_learning_rate"]

#: Encoders at least this wide fine-tune at BERT's rate.
BERT_BASE_HIDDEN_SIZE = 768
BERT_LEARNING_RATE = 5e-5
SMALL_ENCODER_LEARNING_RATE = 3e-3


@dataclass(frozen=True)
class FineTuningDefaults:
    """What ``kgplm.finetune``'s ``"auto"`` arguments resolve to for encoders at least ``min_hidden_size`` wide."""

    min_hidden_size: int
    learning_rate: float
    epochs: int
    patience: int
    encoders: str


#: The table ``learning_rate="auto"``, ``epochs="auto"`` and ``patience="auto"`` read, widest encoders first:
#: the first row whose ``min_hidden_size`` the encoder's ``hidden_size`` reaches. BERT-base and larger take
#: the rates of Devlin et al. (2019) (2e-5 to 5e-5, 2 to 4 epochs). The narrow encoders kgplm builds and
#: trains from scratch (``CPU_TEXT_ENCODER``, 128 wide; ``TINY_TEXT_ENCODER``, 32 wide) learn nothing at
#: those rates in a few epochs: they take the rate kgplm's "learned nothing" warning recommends (1e-3 to
#: 5e-3) and more epochs, with a patience that lets the first epochs predict no entity yet.
FINE_TUNING_DEFAULTS = (
    FineTuningDefaults(1024, 2e-5, 3, 2, "BERT-large and larger"),
    FineTuningDefaults(BERT_BASE_HIDDEN_SIZE, BERT_LEARNING_RATE, 3, 2, "BERT-base"),
    FineTuningDefaults(256, 1e-3, 10, 4, "small encoders (BERT-mini to BERT-medium sizes)"),
    FineTuningDefaults(0, SMALL_ENCODER_LEARNING_RATE, 10, 4, "the narrow encoders kgplm trains in tests and demos"),
)


def fine_tuning_defaults(hidden_size: int) -> FineTuningDefaults:
    """The row of :data:`FINE_TUNING_DEFAULTS` for an encoder ``hidden_size`` wide."""
    for row in FINE_TUNING_DEFAULTS:
        if hidden_size >= row.min_hidden_size:
            return row
    return FINE_TUNING_DEFAULTS[-1]


def default_learning_rate(hidden_size: int) -> float:
    """The fine-tuning rate ``learning_rate="auto"`` resolves to (:data:`FINE_TUNING_DEFAULTS`)."""
    return fine_tuning_defaults(hidden_size).learning_rate
