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

The sampled softmax (``linking_softmax="sampled"``, an approximation for tables too large to score
whole on every step; the default stays the exact one). For mention m with gold entity g, the exact
Eq. 10 is L_m = log Z_m − s_g, Z_m = Σ_{j ∈ E} exp(s_j), s_j = h'_m · e_j. Split E into a set D_m
scored exactly — the mention's k retrieved entities (Eq. 3's top-k, hard negatives) and the gold
entities of the batch (in-batch, g among them) — and the rest, estimated from R entities r_1..r_R
drawn uniformly with replacement (shared by the batch), each draw that falls into D_m discarded
("accidental hits"):

    Ẑ_m = Σ_{j ∈ D_m} exp(s_j) + Σ_{i : r_i ∉ D_m} exp(s_{r_i} − log(R · q)),   q = 1/|E|
    L̂_m = log Ẑ_m − s_g

− log(R·q) is the sampling (log-Q) correction of Bengio & Senécal (2008) / Jean et al. (2015): R·q is
each entity's expected count among the draws, so the second sum is an unbiased estimate of
Σ_{j ∉ D_m} exp(s_j) and E[Ẑ_m] = Z_m. L̂_m is a consistent but biased estimate of L_m (the log of
an unbiased estimate is biased low, by Jensen) and its gradient is an approximation of Eq. 10's,
which reaches every entity; Ẑ_m = Z_m exactly when D_m covers every entity. Its gradient is sparse
in the table: only the rows of D_m and of the draws get one, so the table can be updated row-wise
(:class:`kgplm.training.optimizer.RowwiseAdamW`). ``"in_batch"`` scores the batch's golds only
(no correction, no estimate of the rest).

Precision: the search and the log-sum-exp run in fp32 with autocast off, whatever the caller's
autocast (the queries h'_m come out of a linear layer in bf16/fp16 under mixed precision; the table
is an fp32 parameter). A bf16 search would rank by scores rounded to 8 bits (ties among the top k),
and the custom backward runs outside autocast, where bf16 queries against an fp32 table do not
multiply at all. The gradient flows back through the cast to the queries' own dtype.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ["top_k_by_dot_product", "chunked_logsumexp", "linking_loss"]


@torch.no_grad()
def top_k_by_dot_product(
    queries: torch.Tensor, table: torch.Tensor, k: int, chunk_size: int, *, with_logsumexp: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
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
        scores = queries @ table[start : start + chunk_size].T  # (n, chunk)
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
    def forward(
        ctx, queries: torch.Tensor, table: torch.Tensor, chunk_size: int, known: torch.Tensor | None
    ) -> torch.Tensor:
        if known is not None:  # computed already, by the retrieval's pass over the same table
            result = known.detach().clone()
        else:
            result = queries.new_full((queries.shape[0],), float("-inf"))
            for start in range(0, table.shape[0], chunk_size):
                scores = queries @ table[start : start + chunk_size].T  # (n, chunk)
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
            rows = table[start : start + ctx.chunk_size]
            # softmax of this chunk, weighted by the incoming gradient: (n, chunk)
            weights = torch.exp(queries @ rows.T - result[:, None]) * grad_output[:, None]
            if want_queries:
                grad_queries += weights @ rows
            if want_table:
                grad_table[start : start + ctx.chunk_size] = weights.T @ queries
        return grad_queries, grad_table, None, None


def chunked_logsumexp(
    queries: torch.Tensor, table: torch.Tensor, chunk_size: int, known: torch.Tensor | None = None
) -> torch.Tensor:
    """log Σ_j exp(queries · table_j) for each query, (n,); gradients to both, chunk by chunk.

    ``known``: the value, when a pass over the same queries and table computed it already
    (:func:`top_k_by_dot_product` with ``with_logsumexp``); the forward pass is then skipped.
    """
    dtype = _search_dtype(queries, table)
    with torch.autocast(queries.device.type, enabled=False):
        return _ChunkedLogSumExp.apply(
            queries.to(dtype), table.to(dtype), chunk_size, None if known is None else known.to(dtype)
        )


def linking_loss(
    queries: torch.Tensor,
    table: torch.Tensor,
    gold: torch.Tensor,
    *,
    softmax: str = "full",
    chunk_size: int = 16384,
    num_negatives: int = 4096,
    logsumexp: torch.Tensor | None = None,
    retrieved: torch.Tensor | None = None,
    sparse: bool = False,
) -> torch.Tensor:
    """Mean over mentions of −log softmax(h'_m · e)_gold (Eq. 10).

    ``softmax``: ``"full"`` — over every entity (exact, chunked); ``"sampled"`` — the estimate of the
    module docstring: each mention's ``retrieved`` entities (m, k) and the batch's golds scored
    exactly, the rest estimated from ``num_negatives`` uniform draws with the log-Q correction;
    ``"in_batch"`` — over the batch's gold entities only. ``logsumexp``: the full softmax's
    normaliser when the retrieval computed it already. ``sparse``: the approximations read the table
    through a sparse-gradient lookup (the table's gradient is then a sparse tensor over those rows).
    """
    if softmax == "full":
        gold_scores = (queries * table[gold]).sum(-1)  # (mentions,)
        return (chunked_logsumexp(queries, table, chunk_size, logsumexp) - gold_scores).mean()
    if softmax == "sampled":
        return _sampled_linking_loss(queries, table, gold, retrieved, num_negatives, sparse)
    candidates = torch.unique(gold)  # sorted, so the gold's column is a binary search away
    logits = queries @ F.embedding(candidates, table, sparse=sparse).T  # (mentions, candidates)
    return F.cross_entropy(logits, torch.searchsorted(candidates, gold))


def _sampled_linking_loss(
    queries: torch.Tensor,
    table: torch.Tensor,
    gold: torch.Tensor,
    retrieved: torch.Tensor | None,
    num_negatives: int,
    sparse: bool,
) -> torch.Tensor:
    """mean_m (log Ẑ_m − s_gold) of the module docstring; memory mentions × (k + golds + draws)."""
    num_mentions, num_entities = len(gold), table.shape[0]
    golds = torch.unique(gold)
    exact = golds.expand(num_mentions, -1)
    if retrieved is not None:
        exact = torch.cat([retrieved, exact], 1)
    exact = exact.sort(dim=1).values  # D_m per row, ascending, with repeats
    repeated = torch.zeros_like(exact, dtype=torch.bool)
    repeated[:, 1:] = exact[:, 1:] == exact[:, :-1]  # each entity of D_m counted once
    draws = torch.randint(num_entities, (num_negatives,), device=gold.device)
    slots = torch.searchsorted(exact, draws.expand(num_mentions, -1).contiguous()).clamp(max=exact.shape[1] - 1)
    accidental = exact.gather(1, slots) == draws  # (mentions, draws): the draw is in D_m
    dtype = _search_dtype(queries, table)

    def rows(ids: torch.Tensor) -> torch.Tensor:  # gathered, then cast: never a cast copy of the table
        return F.embedding(ids, table, sparse=sparse).to(dtype)

    with torch.autocast(queries.device.type, enabled=False):
        queries = queries.to(dtype)
        exact_scores = torch.einsum("md,mcd->mc", queries, rows(exact))  # (mentions, |D_m| with repeats)
        draw_scores = queries @ rows(draws).T - math.log(num_negatives / num_entities)  # log-Q corrected
        scores = torch.cat(
            [exact_scores.masked_fill(repeated, float("-inf")), draw_scores.masked_fill(accidental, float("-inf"))], 1
        )
        gold_scores = (queries * rows(gold)).sum(-1)
        return (torch.logsumexp(scores, 1) - gold_scores).mean()
