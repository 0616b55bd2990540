"""Running BERT's encoder layers with the mask of the configured attention implementation."""

from __future__ import annotations

import torch
from transformers.masking_utils import create_bidirectional_mask

from kgplm.models.configuration import KgplmConfig

__all__ = ["extended_attention_mask", "run_encoder_layers"]


def extended_attention_mask(config: KgplmConfig, embeddings: torch.Tensor, attention_mask: torch.Tensor | None):
    """The mask the encoder layers take, for the configured attention implementation."""
    return create_bidirectional_mask(config=config, inputs_embeds=embeddings, attention_mask=attention_mask)


def run_encoder_layers(layers, hidden_states: torch.Tensor, mask) -> torch.Tensor:
    for layer in layers:
        hidden_states = layer(hidden_states, mask)
    return hidden_states
