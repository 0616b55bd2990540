"""How a method's encoder runs: :class:`Encoding` builds the encoder modules on a host model and encodes a batch.

Pre-training models and the generic fine-tuning model (:class:`~kgplm.models.KgplmForFineTuning`)
both call their method's encoding, so the encoder's parameters keep the same names (``bert``, and
for SMedBERT ``kg``, ``hybrid_attention`` …) in both: ``from_pretrained`` of a pre-training
checkpoint loads the encoder of the fine-tuning model, and checkpoints saved before the method
registry keep loading. An encoding holds no parameters itself; it is a strategy shared by every
model of its method.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from transformers.models.bert.modeling_bert import BertModel

__all__ = ["Encoding", "EncoderOutput", "BertEncoding"]


@dataclass
class EncoderOutput:
    """``last_hidden_state`` (batch, length, hidden) and whatever else the method's heads reuse."""

    last_hidden_state: torch.Tensor
    extras: dict[str, Any] = field(default_factory=dict)


class Encoding:
    """Base: a plain BERT encoder (``host.bert``), the encoder of the MLM baseline and of methods
    whose knowledge lives only in pre-training objectives.

    Subclasses override :meth:`build` and :meth:`encode` and list the batch keys they read beyond
    BERT's in :attr:`input_names`.
    """

    #: Extra batch keys :meth:`encode` reads (beyond input_ids, attention_mask, token_type_ids).
    input_names: tuple[str, ...] = ()

    def build(self, host: torch.nn.Module, config, *, pooler: bool = True) -> None:
        """Create the encoder modules as attributes of ``host`` (``pooler``: BERT's [CLS] pooler)."""
        host.bert = BertModel(config, add_pooling_layer=pooler)

    def encode(
        self,
        host: torch.nn.Module,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        **inputs,
    ) -> EncoderOutput:
        hidden = host.bert(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state  # (batch, length, d1)
        return EncoderOutput(hidden)

    def pool(self, host: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
        """The sequence vector that classification heads read: BERT's pooler over [CLS]."""
        return host.bert.pooler(hidden)

    def word_embeddings(self, host: torch.nn.Module) -> torch.nn.Embedding:
        return host.bert.embeddings.word_embeddings


#: The plain BERT encoding (an alias that reads better at registration).
BertEncoding = Encoding
