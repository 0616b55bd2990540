"""The plain baseline: a BERT encoder trained with masked language modelling only (``method="mlm"``).

Devlin et al. (2019), "BERT: Pre-training of Deep Bidirectional Transformers for Language
Understanding", NAACL. Equation: L = −Σ_{i masked} log p(w_i | masked text), p = softmax of the
MLM head (transform, LayerNorm, decoder tied to the word embeddings). The same training loop,
data and masking as the knowledge-enhanced methods, so comparisons isolate the knowledge.
Deviation: no next-sentence prediction (RoBERTa showed it does not help; SOP is SMedBERT's).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers.models.bert.modeling_bert import BertModel, BertOnlyMLMHead

from kgplm.models.configuration import KgplmConfig
from kgplm.models.modules import KgplmPreTrainedModel, PretrainingOutput

__all__ = ["KgplmForMaskedLM"]


class KgplmForMaskedLM(KgplmPreTrainedModel):
    """BERT + MLM head. Extra batch keys (mentions, neighbours) are accepted and ignored."""

    _tied_weights_keys = {
        "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias",
    }

    def __init__(self, config: KgplmConfig) -> None:
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.cls = BertOnlyMLMHead(config)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                **_unused) -> PretrainingOutput:
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state  # (batch, length, d1)
        logits = self.cls(hidden)  # (batch, length, vocab)
        output = PretrainingOutput(prediction_logits=logits, last_hidden_state=hidden, losses={})
        if labels is not None:
            output.loss = output.losses["mlm"] = F.cross_entropy(logits.flatten(0, 1), labels.flatten(),
                                                                 ignore_index=-100)
        return output
