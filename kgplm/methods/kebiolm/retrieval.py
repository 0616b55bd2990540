"""Dot-product search and softmax over a large entity table, in chunks of entities.

KeBioLM scores every mention vector h'_m against every entity vector e_j twice: to find the k
nearest entities (Eq. 3) and in the entity-linking softmax (Eq. 10). The reference code computes a
full linear layer over all entities, a (mentions × entities) matrix — 50 mentions × 512 sequences ×
477k UMLS entities would be 12 · 10⁹ scores. Here both walk the table in chunks of ``chunk_size``
entities, so memory grows with mentions × chunk only:

* :func:`top_k_by_dot_product` keeps a running top-k (exact, no gradient: the selection is
  discrete; the scores of the selected entities are recomputed with gradients by the caller).
* :func:`chunked_logsumexp` is log Σ_j exp(q·e_j) as an autograd function whose backward
  recomputes each chunk's softmax instead of storing it: ∂/∂q = Σ_j p_j e_j, ∂/∂e_j = p_j q.
* :func:`linking_loss` is Eq. 10 with the full (chunked) softmax, or a sampled / in-batch softmax.

Precision: the search and the log-sum-exp run in fp32 with autocast off, whatever the caller's
autocast (the queries h'_m come out of a linear layer in bf16/fp16 under mixed precision; the table
is an fp32 parameter). A bf16 search would rank by scores rounded to 8 bits (ties among the top k),
and the custom backward runs outside autocast, where bf16 queries against an fp32 table do not
multiply at all. The gradient flows back through the cast to the queries' own dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["top_k_by_dot_product", "chunked_logsumexp", "linking_loss"]


@torch.no_grad()
def top_k_by_dot_product(queries: torch.Tensor, table: torch.Tensor, k: int, chunk_size: int, *,
                         with_logsumexp: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The ``k`` rows of ``table`` (entities, d) with the largest dot product with each query (n, d).

    Returns ``(scores, ids, logsumexp)``: scores and ids (n, min(k, entities)), best first, exact, chunk
    by chunk; with ``with_logsumexp`` also log Σ_j exp(q · e_j) over every entity (n,) from the same
    pass (the full linking softmax's normaliser, handed to :func:`chunked_logsumexp`), else ``None``.
    """
    dtype = _search_dtype(queries, table)
    with torch.autocast(queries.device.type, enabled=False):
        return _top_k(queries.to(dtype), table.to(dtype), k, chunk_size, with_logsumexp)


def _search_dtype(queries: torch.Tensor, table: torch.Tensor) -> torch.dtype:
    """fp32, or fp64 when either input is fp64: never below fp32 (see the module docstring)."""
    return torch.promote_types(torch.promote_types(queries.dtype, table.dtype), torch.float32)


def _top_k(queries, table, k, chunk_size, with_logsumexp):
    k = min(k, table.shape[0])
    best_scores = queries.new_empty(queries.shape[0], 0)
    best_ids = torch.empty(queries.shape[0], 0, dtype=torch.long, device=queries.device)
    normaliser = queries.new_full((queries.shape[0],), float("-inf")) if with_logsumexp else None
    for start in range(0, table.shape[0], chunk_size):
        scores = queries @ table[start: start + chunk_size].T  # (n, chunk)
        if with_logsumexp:
            normaliser = torch.logaddexp(normaliser, torch.logsumexp(scores, dim=1))
        chunk_scores, chunk_ids = scores.topk(min(k, scores.shape[1]), dim=1)
        merged_scores = torch.cat([best_scores, chunk_scores], 1)  # (n, ≤ 2k)
        merged_ids = torch.cat([best_ids, chunk_ids + start], 1)
        best_scores, order = merged_scores.topk(min(k, merged_scores.shape[1]), dim=1)
        best_ids = merged_ids.gather(1, order)
    return best_scores, best_ids, normaliser


class _ChunkedLogSumExp(torch.autograd.Function):
    """log Σ_j exp(q · e_j) per query without materialising (queries × entities) for backward."""

    @staticmethod
    def forward(ctx, queries: torch.Tensor, table: torch.Tensor, chunk_size: int,
                known: torch.Tensor | None) -> torch.Tensor:
        if known is not None:  # computed already, by the retrieval's pass over the same table
            result = known.detach().clone()
        else:
            result = queries.new_full((queries.shape[0],), float("-inf"))
            for start in range(0, table.shape[0], chunk_size):
                scores = queries @ table[start: start + chunk_size].T  # (n, chunk)
                result = torch.logaddexp(result, torch.logsumexp(scores, dim=1))
        ctx.save_for_backward(queries, table, result)
        ctx.chunk_size = chunk_size
        return result

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        queries, table, result = ctx.saved_tensors
        want_queries, want_table = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_queries = torch.zeros_like(queries) if want_queries else None
        grad_table = torch.zeros_like(table) if want_table else None
        for start in range(0, table.shape[0], ctx.chunk_size):
            rows = table[start: start + ctx.chunk_size]
            # softmax of this chunk, weighted by the incoming gradient: (n, chunk)
            weights = torch.exp(queries @ rows.T - result[:, None]) * grad_output[:, None]
            if want_queries:
                grad_queries += weights @ rows
            if want_table:
                grad_table[start: start + ctx.chunk_size] = weights.T @ queries
        return grad_queries, grad_table, None, None


def chunked_logsumexp(queries: torch.Tensor, table: torch.Tensor, chunk_size: int,
                      known: torch.Tensor | None = None) -> torch.Tensor:
    """log Σ_j exp(queries · table_j) for each query, (n,); gradients to both, chunk by chunk.

    ``known``: the value, when a pass over the same queries and table computed it already
    (:func:`top_k_by_dot_product` with ``with_logsumexp``); the forward pass is then skipped.
    """
    dtype = _search_dtype(queries, table)
    with torch.autocast(queries.device.type, enabled=False):
        return _ChunkedLogSumExp.apply(queries.to(dtype), table.to(dtype), chunk_size,
                                       None if known is None else known.to(dtype))


def linking_loss(queries: torch.Tensor, table: torch.Tensor, gold: torch.Tensor, *, softmax: str = "full",
                 chunk_size: int = 16384, num_negatives: int = 4096,
                 logsumexp: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over mentions of −log softmax(h'_m · e)_gold (Eq. 10).

    ``softmax``: ``"full"`` — over every entity (exact, chunked); ``"sampled"`` — over the batch's
    gold entities and ``num_negatives`` entities drawn uniformly (shared by the batch; with a
    uniform proposal the log-Q correction is a constant and cancels); ``"in_batch"`` — over the
    batch's gold entities only. Both approximations make the gradient sparse in the table.
    ``logsumexp``: the full softmax's normaliser when the retrieval computed it already.
    """
    if softmax == "full":
        gold_scores = (queries * table[gold]).sum(-1)  # (mentions,)
        return (chunked_logsumexp(queries, table, chunk_size, logsumexp) - gold_scores).mean()
    candidates = gold
    if softmax == "sampled":
        draws = torch.randint(table.shape[0], (num_negatives,), device=gold.device)
        candidates = torch.cat([gold, draws])
    candidates = torch.unique(candidates)  # sorted, so the gold's column is a binary search away
    logits = queries @ table[candidates].T  # (mentions, candidates)
    return F.cross_entropy(logits, torch.searchsorted(candidates, gold))
