"""Mention spans: the token index of each mention and self-attentive span pooling over it."""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.utils import scatter, softmax

__all__ = ["mention_token_index", "SelfAttentiveSpanPooling"]


def mention_token_index(
    mention_batch: torch.Tensor, mention_spans: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flatten token ``[start, end)`` spans into one row per mention token.

    Returns ``(token_mention, token_batch, token_position)``, each (mention_tokens,): the mention a
    row belongs to, its sequence in the batch and its position in the sequence.
    """
    lengths = (mention_spans[:, 1] - mention_spans[:, 0]).clamp(min=0)  # (mentions,)
    token_mention = torch.repeat_interleave(torch.arange(len(lengths), device=lengths.device), lengths)
    starts_of_rows = torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)
    offsets = torch.arange(len(token_mention), device=lengths.device) - starts_of_rows
    token_position = mention_spans[token_mention, 0] + offsets
    return token_mention, mention_batch[token_mention], token_position


class SelfAttentiveSpanPooling(nn.Module):
    """Self-attentive span pooling (Lin et al. 2017, one attention head).

    a_t = softmax_{t ∈ span}(w₂ᵀ tanh(W₁ h_t)),  sp(h_i..h_j) = Σ_t a_t h_t.
    """

    def __init__(self, hidden_size: int, attention_size: int | None = None) -> None:
        super().__init__()
        attention_size = attention_size or hidden_size
        self.project = nn.Linear(hidden_size, attention_size, bias=False)
        self.score = nn.Linear(attention_size, 1, bias=False)

    def forward(self, token_states: torch.Tensor, token_mention: torch.Tensor, num_mentions: int) -> torch.Tensor:
        """``token_states`` (mention_tokens, d) → (mentions, d), in fp32 (the softmax and sum are)."""
        scores = self.score(torch.tanh(self.project(token_states))).squeeze(-1).float()  # (mention_tokens,)
        weights = softmax(scores, token_mention, num_nodes=num_mentions)
        return scatter(
            weights.unsqueeze(-1) * token_states.float(), token_mention, dim=0, dim_size=num_mentions, reduce="sum"
        )
