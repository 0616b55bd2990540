"""The base class of kgplm's pre-training models: Hugging Face weight initialisation, saving and loading."""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel

from kgplm.models.configuration import KgplmConfig

__all__ = ["KgplmPreTrainedModel", "MLM_HEAD_TIED_WEIGHTS"]

#: BERT's MLM decoder shares the word embeddings (and the prediction head's bias).
MLM_HEAD_TIED_WEIGHTS = {
    "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
    "cls.predictions.decoder.bias": "cls.predictions.bias",
}


class KgplmPreTrainedModel(PreTrainedModel):
    """Base class: Hugging Face weight initialisation, saving and loading for kgplm models."""

    config_class = KgplmConfig
    base_model_prefix = "bert"
    supports_gradient_checkpointing = False
    _supports_sdpa = True

    def get_output_embeddings(self):
        """The MLM decoder (``self.cls``), tied to the word embeddings."""
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.predictions.decoder = new_embeddings
        self.cls.predictions.bias = new_embeddings.bias

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters the optimiser updates (frozen KG tables and MMeM targets excluded)."""
        return [p for p in self.parameters() if p.requires_grad]

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        from transformers import initialization as init
        from transformers.models.bert.modeling_bert import (
            BertEmbeddings,
            BertLMPredictionHead,
        )

        super()._init_weights(module)
        if isinstance(module, BertLMPredictionHead):
            init.zeros_(module.bias)
        elif isinstance(module, BertEmbeddings):
            init.copy_(module.position_ids, torch.arange(module.position_ids.shape[-1]).expand((1, -1)))
            init.zeros_(module.token_type_ids)
