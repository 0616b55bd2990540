"""SMedBERT: mention-neighbour hybrid attention and mention-neighbour context modelling.

Paper: Zhang, Jiang, Zhang, Wang, Wang, Zhang, Chen, Huang and Qian (2021), "SMedBERT: A
Knowledge-Enhanced Pre-trained Language Model with Structured Semantics for Medical Text
Mining", ACL 2021, §3.3–3.5 and appendix B.

Notation: h_i token states (d1 = hidden size), ent(e) TransR entity vectors (d2 = entity_dim),
rel(r) = h_r relation vectors (d_r = relation_dim), M_r TransR projections (d2 × d_r), N(e_m) the
PEPR top-K neighbours of the entity of mention e_m (:mod:`kgplm.kg.pepr`), τ(e) the type of e,
σ = GELU (the paper's Eq. 2 defines σ as GELU), LN = LayerNorm, sp = self-attentive pooling.

Equations implemented
---------------------
Mention representation (Eq. 2), after encoder layer L (``config.knowledge_layer``):
    h'_m = LN(σ(sp(h_i..h_j) W_be)),  W_be ∈ R^{d1×d2}
Neighbouring entity type attention (Eq. 3), per type τ present among N(e_m):
    h_τ = Σ_{e ∈ N(e_m), τ(e)=τ} ent(e);  α'_τ = tanh(h'_m W_t + h_τ W_t') W_a;  α = softmax_τ(α')
Neighbouring entity node attention (Eq. 4–7):
    β'_e = α_{τ(e)} · (h'_m W_q)(ent(e) W_k)ᵀ / √d2;  β = softmax_{e ∈ N(e_m)}(β')
    ĥ_m = Σ_e β_e (ent(e) W_v + b_v);  h̄_m = LN(ĥ_m + σ(ĥ_m W_l1 + b_l1) W_l2)
Gated position infusion (Eq. 8–11), for every token i of mention m:
    h_mf = σ((h̄_m ∥ h'_m) W_mf + b_mf);  h̃_mf = LN(h_mf W_bp + b_bp)
    g_i = tanh((h_i ∥ h̃_mf) W_ug + b_ug);  h_i ← σ((h_i ∥ g_i ⊙ h̃_mf) W_ex + b_ex) + h_i
Tokens outside mentions are unchanged; the remaining encoder layers then run.

Which mentions get what (the authors' code; the paper does not say): each sequence's linked
mentions form two disjoint sets. Mentions whose tokens were all chosen for masking are the
*knowledge* mentions: the hybrid attention injects their neighbours (Eq. 2–11) and MMeM
reconstructs them. The other mentions are *MNeM targets*: they get no injection, and MNeM
predicts their neighbours from their final states. (Injecting a mention's neighbours and then
predicting those same neighbours from its states lets the model copy: on a toy run MNeM reached
0.72 with the true neighbours injected against 1.40 with another mention's.) The split by mention
is not enough: an unmasked mention of the *entity* of a knowledge mention in the same sequence
has the same PEPR row, injected into the sequence, and MNeM could copy it. Such a mention is
neither injected nor an MNeM target (it stays text for MLM;
:func:`~kgplm.methods.smedbert.batching.split_mentions`). Measured by
``experiments/smedbert_leaks.py`` (bert-base-chinese vocabulary, 128-token chunks, whole-entity
masking, SOP, 3 maskings): in 2,101 chunks of 1,000 consultations, 4,109 of 55,018 unmasked
mentions (7.5 %) named an injected entity of their chunk and were MNeM targets before; in
1,005 chunks of 1,000 CMeKG fact sentences, 133 of 31,874 (0.4 %); now 0 of the MNeM targets
in both (50,909 and 31,741 targets remain). What this does not remove: a masked mention whose
entity is a PEPR neighbour of another knowledge mention of the sequence still has its identity
injected through that mention's neighbours (the design of the paper's injection, not a copy of
an MNeM target). At fine-tuning there is no masking and every linked mention is a knowledge mention.

Masked neighbour modelling (Eq. 12, 15, 16, 19), on the encoder output h_f, for MNeM targets:
    h_mf = LN(sp(h_if..h_jf) W_sa),  W_sa ∈ R^{d1×d2}
    f_s(e_m, r, e) = λ · (h_mf M_r + h_r)/‖h_mf M_r + h_r‖ · ((ent(e) M_r)/‖ent(e) M_r‖)ᵀ
    L_MNeM = mean over (m, e ∈ N(e_m)) of
             −log softmax([f_s(e) − log Q(e), f_s(n_1) − log Q(n_1), …, f_s(n_K) − log Q(n_K)])_0
with K negatives n_k drawn from Q(e) = t_e / C_τ(e) (corpus frequency within the positive's type;
appendix B) and the log-Q correction of sampled softmax (Jean et al. 2015). When both normalised
vectors have norm 1, f_s = λ(1 − ‖h_mf M_r + h_r − ent(e) M_r‖² / 2): the TransR energy (Eq. 17).
Masked mention modelling (Eq. 20–21): whole mention spans are masked in the input; the target is
    Y_m = LN(sp(p(w_i)..p(w_j)) W_sa)  from the token embeddings p of the initial model,
    L_MMeM = mean over masked mentions of ‖h_mf − Y_m‖² / d2  (the paper's "Mean-Squared Error").
Objective (Eq. 22): L = L_MLM + L_SOP + λ1 L_MNeM + λ2 L_MMeM, λ1 = 2, λ2 = 4.

Deviations and choices (each documented here; options where the alternative is reasonable)
------------------------------------------------------------------------------------------
* The reference code ranks neighbours by another entity's PageRank, uses 35 uniform negatives
  without the log-Q term, scrambles M_r and has no MMeM loss. Here: every mention's N(e_m) is its
  own entity's PEPR top-K (:func:`kgplm.kg.pepr.top_k_neighbors`), negatives follow Q with the
  log-Q correction, M_r is the TransR matrix of the neighbour's relation, MMeM is implemented.
* Direction: Eq. 16 reads e_m as the head. For a neighbour that is the *head* of the triple
  (direction 1, e_m the tail) TransR says ent(e) M_r + h_r ≈ h_mf M_r, so the query becomes
  h_mf M_r − h_r. Neighbours without a direct link (``candidates="any"``) use a learned
  "related" relation (:class:`~kgplm.models.modules.KnowledgeGraphTables`).
* ‖ent(n) M_r‖ is computed exactly for every negative; the paper's Eq. 18–19 shortcut replaces it
  by ‖ent(n)‖ to save the projections, which only equals it when M_r is orthogonal.
* Accidental hits (a negative equal to the positive) are removed from the softmax.
* Q(e) uses add-one smoothing, (t_e + 1) / Σ_{τ(e')=τ(e)} (t_{e'} + 1), so that entities never
  mentioned in the corpus (most neighbours) have a finite log Q and can be drawn.
* MMeM's target: ``mmem_target="frozen_initial"`` (default) computes Y_m with a frozen copy,
  taken when pre-training starts, of the word embeddings *and* of sp/W_sa/LN, so that the target
  cannot collapse together with the trainable projection (the paper shares W_sa, which lets
  both sides shrink to LN's bias). ``"shared"`` uses the current sp/W_sa/LN with gradients stopped
  on the target, closer to the letter of Eq. 20.
* Losses are means (over neighbour edges for MNeM; over masked mentions and the d2 components for
  MMeM, which the paper calls a mean-squared error while Eq. 21 writes a sum) instead of per-sample
  sums, so λ1 and λ2 do not depend on batch composition or d2.
* SOP pairs are made inside each chunk of the linked corpus (split at a random token, halves
  swapped with probability 1/2; :mod:`kgplm.training.collator`); a mention cut by the split is
  dropped from that example.
* Type attention of an entity with no type uses one extra "untyped" bucket.
* An objective without a target in a batch (no masked mention, no MNeM target, no SOP pair) is
  left out of that step's loss instead of contributing the NaN of an empty mean.
* With a text encoder trained from scratch (no ``text_model`` checkpoint), MMeM's target Y_m is
  computed from the *random* initial word embeddings, not from the pre-trained BERT embeddings the
  paper starts from: it still asks the fused mention vector to recover a fixed per-mention code,
  but a weaker one. ``kgplm.train`` logs this once.
* Ablations: ``use_type_attention=False`` sets α = 1; ``use_hybrid_attention=False`` replaces both
  attentions by the mean of the neighbour vectors (the infusion still runs);
  ``use_knowledge_losses=False`` trains on L_MLM + L_SOP only.
* ``relational_encoder="rgcn"`` (an addition, off by default) refines ent(e) with an R-GCN over
  each mention's neighbour set (messages between co-neighbours, typed by their link to the
  mention's entity) before the attention. Each mention's neighbour set is its own subgraph (one
  node per neighbour edge, :func:`~kgplm.models.modules.neighbor_graph`): no node is shared with
  another mention of the batch, so a masked mention's own entity, even where it neighbours a
  batch partner, cannot reach its tokens, and an example's states do not depend on its batch
  partners (before, one node per distinct entity of the batch coupled them). MNeM keeps the
  TransR vectors.
* Mixed precision (``mixed_precision="bf16"|"fp16"``): under autocast the span pooling's and both
  attentions' softmaxes and weighted sums, the normalisations and scores of MNeM (Eq. 16) and the
  MNeM/MMeM losses run in fp32; the linear maps run in the autocast dtype.
* No host–device synchronisation in the forward pass: the indices whose size depends on the data
  (mention tokens, the (mention, type) groups of Eq. 3, the R-GCN's co-neighbour pairs)
  come from the collators, built on the CPU with the same functions (:func:`type_groups`,
  :func:`~kgplm.models.modules.mention_token_index`, :func:`~kgplm.models.modules.neighbor_graph`),
  and the R-GCN layer is a loop-free equivalent of PyG's ``RGCNConv``
  (:class:`~kgplm.models.modules.BasisRelationalConvolution`).
* SOP stays at chance (ln 2) in short CPU runs on real text, also for Hugging Face's
  ``BertForPreTraining`` fed the same batches: it is a matter of scale, not of wiring
  (``experiments/sop_curve.py``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import MessagePassing
from torch_geometric.utils import scatter, softmax
from transformers.models.bert.modeling_bert import BertModel, BertOnlyMLMHead

from kgplm.methods.smedbert.configuration import SmedbertConfig
from kgplm.models.encoding import EncoderOutput, Encoding
from kgplm.models.modules import (
    MLM_HEAD_TIED_WEIGHTS,
    KgplmPreTrainedModel,
    KnowledgeGraphTables,
    PretrainingOutput,
    RelationalEncoder,
    SelfAttentiveSpanPooling,
    extended_attention_mask,
    mention_token_index,
    run_encoder_layers,
)
from kgplm.models.objectives import masked_lm_objective, sentence_order_objective

__all__ = [
    "NeighborTypeAttention",
    "NeighborNodeAttention",
    "MentionNeighborHybridAttention",
    "GatedPositionInfusion",
    "MentionProjection",
    "type_groups",
    "mnem_scores",
    "masked_neighbor_loss",
    "SmedbertEncoding",
    "SmedbertForPreTraining",
    "KNOWLEDGE_INPUTS",
    "KNOWLEDGE_INDEX_INPUTS",
    "MNEM_INPUTS",
]

#: The batch keys of the knowledge mentions the encoder injects neighbours for (pre-training and fine-tuning).
KNOWLEDGE_INPUTS = (
    "mention_batch",
    "mention_spans",
    "neighbor_mention",
    "neighbor_entity_ids",
    "neighbor_relation_ids",
    "neighbor_directions",
    "neighbor_type_ids",
)
#: Indices of the knowledge mentions the collators precompute on the CPU (optional; ``SmedbertEncoding.encode``).
KNOWLEDGE_INDEX_INPUTS = ("mention_tokens", "neighbor_type_group", "type_group_mention", "co_neighbor_pairs")
#: The batch keys of MNeM: the target mentions (never injected), their neighbour edges and negatives,
#: and (optional, precomputed) their tokens.
MNEM_INPUTS = (
    "mnem_mention_batch",
    "mnem_mention_spans",
    "mnem_edge_mention",
    "mnem_entity_ids",
    "mnem_relation_ids",
    "mnem_directions",
    "mnem_negative_ids",
    "mnem_log_q",
    "mnem_mention_tokens",
)


class NeighborTypeAttention(nn.Module):
    """Eq. 3: α'_τ = tanh(h'_m W_t + h_τ W_t') W_a with h_τ the sum of the type's neighbour vectors."""

    def __init__(self, entity_dim: int) -> None:
        super().__init__()
        self.mention_transform = nn.Linear(entity_dim, entity_dim, bias=False)  # W_t
        self.type_transform = nn.Linear(entity_dim, entity_dim, bias=False)  # W_t'
        self.score = nn.Linear(entity_dim, 1, bias=False)  # W_a

    def forward(
        self,
        mention_vectors: torch.Tensor,
        neighbor_vectors: torch.Tensor,
        edge_mention: torch.Tensor,
        edge_group: torch.Tensor,
        group_mention: torch.Tensor,
    ) -> torch.Tensor:
        """α per (mention, type) group, shape (groups,); softmax over each mention's groups."""
        num_groups = len(group_mention)
        type_vectors = scatter(
            neighbor_vectors.float(), edge_group, dim=0, dim_size=num_groups, reduce="sum"
        )  # (groups, d2)
        scores = self.score(
            torch.tanh(self.mention_transform(mention_vectors[group_mention]) + self.type_transform(type_vectors))
        ).squeeze(-1)  # (groups,)
        return softmax(scores.float(), group_mention, num_nodes=len(mention_vectors))  # fp32 under autocast


class NeighborNodeAttention(MessagePassing):
    r"""Eq. 4–6 as message passing on the bipartite neighbour → mention graph.

    .. math::
        \beta'_{e} = \alpha_{\tau(e)} \frac{(h'_m W_q)(\mathrm{ent}(e) W_k)^\top}{\sqrt{d_2}},\quad
        \beta = \mathrm{softmax}_{e \in N(e_m)}(\beta'),\quad
        \hat h_m = \sum_{e} \beta_e (\mathrm{ent}(e) W_v + b_v)

    Sources are neighbour rows (``x[0]``), targets mentions (``x[1]``); ``edge_weight`` is α_τ(e).
    """

    def __init__(self, entity_dim: int) -> None:
        super().__init__(aggr="sum", node_dim=0)
        self.query = nn.Linear(entity_dim, entity_dim, bias=False)  # W_q
        self.key = nn.Linear(entity_dim, entity_dim, bias=False)  # W_k
        self.value = nn.Linear(entity_dim, entity_dim)  # W_v, b_v
        self.scale = 1.0 / math.sqrt(entity_dim)
        self.last_attention: torch.Tensor | None = None

    def reset_parameters(self) -> None:
        for layer in (self.query, self.key, self.value):
            layer.reset_parameters()

    def forward(
        self,
        neighbor_vectors: torch.Tensor,
        mention_vectors: torch.Tensor,
        edge_index: torch.Tensor,
        edge_weight: torch.Tensor,
    ) -> torch.Tensor:
        return self.propagate(
            edge_index,
            x=(neighbor_vectors, mention_vectors),
            edge_weight=edge_weight,
            size=(len(neighbor_vectors), len(mention_vectors)),
        )

    def message(
        self,
        x_j: torch.Tensor,
        x_i: torch.Tensor,
        edge_weight: torch.Tensor,
        index: torch.Tensor,
        ptr: torch.Tensor | None,
        size_i: int | None,
    ) -> torch.Tensor:
        # fp32 under autocast: the scores, the grouped softmax and the weighted sum of values
        scores = edge_weight.float() * (self.query(x_i).float() * self.key(x_j).float()).sum(-1) * self.scale
        attention = softmax(scores, index, ptr, size_i)  # (edges,)
        self.last_attention = attention.detach()
        return attention.unsqueeze(-1) * self.value(x_j).float()  # (edges, d2)


class MentionNeighborHybridAttention(nn.Module):
    """Eq. 2–7: h'_m from the mention's tokens, then h̄_m from its neighbours (type and node attention)."""

    def __init__(self, config: SmedbertConfig) -> None:
        super().__init__()
        d1, d2 = config.hidden_size, config.entity_dim
        self.span_pooling = SelfAttentiveSpanPooling(d1)
        self.mention_projection = nn.Linear(d1, d2)  # W_be
        self.mention_norm = nn.LayerNorm(d2, eps=config.layer_norm_eps)
        # switched-off ablations create no parameters
        hybrid = config.use_hybrid_attention
        self.type_attention = NeighborTypeAttention(d2) if hybrid and config.use_type_attention else None
        self.node_attention = NeighborNodeAttention(d2) if hybrid else None
        self.expand = nn.Linear(d2, 4 * d2)  # W_l1, b_l1
        self.contract = nn.Linear(4 * d2, d2, bias=False)  # W_l2
        self.output_norm = nn.LayerNorm(d2, eps=config.layer_norm_eps)

    def mention_vectors(self, token_states: torch.Tensor, token_mention: torch.Tensor, num_mentions: int):
        """h'_m = LN(GELU(sp(h_i..h_j) W_be)), (mentions, d2)."""
        pooled = self.span_pooling(token_states, token_mention, num_mentions)  # (mentions, d1)
        return self.mention_norm(F.gelu(self.mention_projection(pooled)))

    def forward(
        self,
        mention_vectors: torch.Tensor,
        neighbor_vectors: torch.Tensor,
        edge_mention: torch.Tensor,
        edge_type: torch.Tensor,
        num_types: int,
        groups: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """h̄_m, (mentions, d2). ``neighbor_vectors`` (edges, d2), one row per neighbour edge;
        ``groups``: :func:`type_groups` of the edges when the collator built them."""
        num_mentions = len(mention_vectors)
        num_edges = len(edge_mention)
        if num_edges == 0:
            summary = mention_vectors.new_zeros(mention_vectors.shape)
        elif self.node_attention is None:  # ablation: no hybrid attention
            summary = scatter(neighbor_vectors, edge_mention, dim=0, dim_size=num_mentions, reduce="mean")
        else:
            if self.type_attention is not None:
                edge_group, group_mention = (
                    groups if groups is not None else type_groups(edge_mention, edge_type, num_types)
                )
                type_weight = self.type_attention(
                    mention_vectors, neighbor_vectors, edge_mention, edge_group, group_mention
                )[edge_group]  # (edges,)
            else:
                type_weight = neighbor_vectors.new_ones(num_edges)
            edge_index = torch.stack([torch.arange(num_edges, device=edge_mention.device), edge_mention])  # (2, edges)
            summary = self.node_attention(neighbor_vectors, mention_vectors, edge_index, type_weight)
        return self.output_norm(summary + self.contract(F.gelu(self.expand(summary))))


def type_groups(
    edge_mention: torch.Tensor, neighbor_type_ids: torch.Tensor, num_types: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 3's groups: one per (mention, type) pair present, in (mention, type) order.

    Returns ``(edge_group (edges,), group_mention (groups,))``; an untyped neighbour (−1) has
    type ``num_types``. Uses ``torch.unique``: collators call it on the CPU and pass the result.
    """
    types = torch.where(neighbor_type_ids < 0, num_types, neighbor_type_ids)
    group_keys, edge_group = torch.unique(edge_mention * (num_types + 1) + types, return_inverse=True)
    return edge_group, group_keys // (num_types + 1)


class GatedPositionInfusion(nn.Module):
    """Eq. 8–11: fuse h̄_m and h'_m, then update each token of the mention through a gate."""

    def __init__(self, config: SmedbertConfig) -> None:
        super().__init__()
        d1, d2 = config.hidden_size, config.entity_dim
        self.fuse = nn.Linear(2 * d2, 2 * d2)  # W_mf, b_mf
        self.to_tokens = nn.Linear(2 * d2, d1)  # W_bp, b_bp
        self.norm = nn.LayerNorm(d1, eps=config.layer_norm_eps)
        self.gate = nn.Linear(2 * d1, d1)  # W_ug, b_ug
        self.update = nn.Linear(2 * d1, d1)  # W_ex, b_ex

    def forward(
        self,
        hidden_states: torch.Tensor,
        neighbor_summary: torch.Tensor,
        mention_vectors: torch.Tensor,
        token_mention: torch.Tensor,
        token_batch: torch.Tensor,
        token_position: torch.Tensor,
    ) -> torch.Tensor:
        infusion = F.gelu(self.fuse(torch.cat([neighbor_summary, mention_vectors], -1)))  # (mentions, 2·d2)
        infusion = self.norm(self.to_tokens(infusion))[token_mention]  # (mention_tokens, d1)
        token_states = hidden_states[token_batch, token_position]  # (mention_tokens, d1)
        gate = torch.tanh(self.gate(torch.cat([token_states, infusion], -1)))
        delta = F.gelu(self.update(torch.cat([token_states, gate * infusion], -1)))  # h_i ← delta + h_i
        # out of place, accumulating, so a token of two overlapping mentions receives both updates
        return hidden_states.index_put((token_batch, token_position), delta.to(hidden_states.dtype), accumulate=True)


class MentionProjection(nn.Module):
    """Eq. 12 / 20: LN(sp(h_i..h_j) W_sa), the mention vector that MNeM and MMeM score."""

    def __init__(self, config: SmedbertConfig) -> None:
        super().__init__()
        self.span_pooling = SelfAttentiveSpanPooling(config.hidden_size)
        self.projection = nn.Linear(config.hidden_size, config.entity_dim)  # W_sa
        self.norm = nn.LayerNorm(config.entity_dim, eps=config.layer_norm_eps)

    def forward(self, token_states: torch.Tensor, token_mention: torch.Tensor, num_mentions: int) -> torch.Tensor:
        return self.norm(self.projection(self.span_pooling(token_states, token_mention, num_mentions)))


def mnem_scores(
    mention_vectors: torch.Tensor,
    relation_vectors: torch.Tensor,
    projections: torch.Tensor,
    candidate_vectors: torch.Tensor,
    directions: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Eq. 16: f_s for each edge and candidate.

    ``mention_vectors`` h_mf (edges, d2), ``relation_vectors`` h_r (edges, d_r), ``projections``
    M_r (edges, d2, d_r), ``candidate_vectors`` ent(e) (edges, candidates, d2), ``directions``
    (edges,) 0 when e_m is the head, 1 when it is the tail. Returns (edges, candidates).
    """
    # in fp32 under autocast: the scores are cosines scaled by λ and compared through a softmax
    with torch.autocast(device_type=mention_vectors.device.type, enabled=False):
        mention_vectors, relation_vectors = mention_vectors.float(), relation_vectors.float()
        projections, candidate_vectors = projections.float(), candidate_vectors.float()
        sign = torch.where(directions == 1, -1.0, 1.0).unsqueeze(-1)  # (edges, 1)
        query = (
            torch.bmm(mention_vectors.unsqueeze(1), projections).squeeze(1) + sign * relation_vectors
        )  # (edges, d_r)
        keys = torch.bmm(candidate_vectors, projections)  # (edges, candidates, d_r)
        return scale * torch.einsum("ed,ecd->ec", F.normalize(query, dim=-1), F.normalize(keys, dim=-1))


def masked_neighbor_loss(scores: torch.Tensor, log_q: torch.Tensor, candidate_ids: torch.Tensor) -> torch.Tensor:
    """Sampled softmax with log-Q correction; column 0 is the positive, the rest negatives."""
    logits = scores.float() - log_q.float()  # (edges, 1 + negatives)
    accidental = candidate_ids[:, 1:] == candidate_ids[:, :1]
    logits = torch.cat([logits[:, :1], logits[:, 1:].masked_fill(accidental, float("-inf"))], 1)
    return F.cross_entropy(logits, torch.zeros(len(logits), dtype=torch.long, device=logits.device))


class SmedbertEncoding(Encoding):
    """The SMedBERT encoder pass: BERT layers, the knowledge module after ``config.fusion_layer``
    layers, the remaining layers. Builds ``bert``, ``kg``, ``relational_encoder``,
    ``hybrid_attention`` and ``infusion`` on the host (the names of every SMedBERT checkpoint)."""

    input_names = KNOWLEDGE_INPUTS + KNOWLEDGE_INDEX_INPUTS

    def build(self, host: nn.Module, config: SmedbertConfig, *, pooler: bool = True) -> None:
        config.validate_knowledge()
        host.bert = BertModel(config, add_pooling_layer=pooler)
        host.kg = KnowledgeGraphTables(
            config, trainable=not config.freeze_kg_embeddings, learn_related=config.neighbor_candidates == "any"
        )
        host.relational_encoder = RelationalEncoder(config) if config.relational_encoder == "rgcn" else None
        host.hybrid_attention = MentionNeighborHybridAttention(config)
        host.infusion = GatedPositionInfusion(config)

    @staticmethod
    def neighbor_vectors(
        host,
        neighbor_mention,
        neighbor_entity_ids,
        neighbor_relation_ids,
        neighbor_directions,
        graph: dict | None = None,
    ) -> torch.Tensor:
        """ent(e) per neighbour edge, (edges, d2), refined by the R-GCN when configured (``graph``:
        :func:`~kgplm.models.modules.neighbor_graph` of the edges, when the collator built it)."""
        if host.relational_encoder is None:
            return host.kg.entities[neighbor_entity_ids]
        return host.relational_encoder(
            host.kg.entities,
            neighbor_entity_ids,
            neighbor_mention,
            neighbor_relation_ids,
            neighbor_directions,
            graph=graph,
        )

    def encode(
        self,
        host,
        input_ids,
        attention_mask=None,
        token_type_ids=None,
        mention_batch=None,
        mention_spans=None,
        neighbor_mention=None,
        neighbor_entity_ids=None,
        neighbor_relation_ids=None,
        neighbor_directions=None,
        neighbor_type_ids=None,
        mention_tokens=None,
        neighbor_type_group=None,
        type_group_mention=None,
        co_neighbor_pairs=None,
    ) -> EncoderOutput:
        """Token states after all layers, knowledge infused after ``config.fusion_layer``.

        The optional indices (``mention_tokens`` — :func:`~kgplm.models.modules.mention_token_index`
        stacked; ``neighbor_type_group``/``type_group_mention`` — :func:`type_groups`;
        ``co_neighbor_pairs`` —
        :func:`~kgplm.models.modules.neighbor_graph`) are what the collators build on the CPU; given,
        the pass makes no host–device synchronisation of its own; absent, they are computed here.
        ``extras["mention_index"]`` is ``(token_mention, token_batch, token_position, num_mentions)``
        of the knowledge mentions, or ``None`` without mentions.
        """
        config = host.config
        embeddings = host.bert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)  # (batch, length, d1)
        mask = extended_attention_mask(config, embeddings, attention_mask)
        layers = host.bert.encoder.layer
        hidden = run_encoder_layers(layers[: config.fusion_layer], embeddings, mask)

        mention_index = None
        if mention_spans is not None and len(mention_spans) > 0:
            num_mentions = len(mention_spans)
            token_mention, token_batch, token_position = (
                mention_tokens if mention_tokens is not None else mention_token_index(mention_batch, mention_spans)
            )
            mention_vectors = host.hybrid_attention.mention_vectors(
                hidden[token_batch, token_position], token_mention, num_mentions
            )  # (mentions, d2)
            edges = neighbor_mention if neighbor_mention is not None else mention_batch.new_zeros(0)
            if len(edges):
                graph = None if co_neighbor_pairs is None else {"co_neighbor_pairs": co_neighbor_pairs}
                neighbor_vectors = self.neighbor_vectors(
                    host, edges, neighbor_entity_ids, neighbor_relation_ids, neighbor_directions, graph
                )  # (edges, d2)
                edge_types = torch.where(neighbor_type_ids < 0, config.num_entity_types, neighbor_type_ids)
            else:
                neighbor_vectors = hidden.new_zeros(0, config.entity_dim)
                edge_types = edges
            groups = None if neighbor_type_group is None else (neighbor_type_group, type_group_mention)
            summary = host.hybrid_attention(
                mention_vectors, neighbor_vectors, edges, edge_types, config.num_entity_types, groups
            )
            hidden = host.infusion(hidden, summary, mention_vectors, token_mention, token_batch, token_position)
            mention_index = (token_mention, token_batch, token_position, num_mentions)

        hidden = run_encoder_layers(layers[config.fusion_layer :], hidden, mask)  # (batch, length, d1)
        return EncoderOutput(hidden, {"mention_index": mention_index})


SMEDBERT_ENCODING = SmedbertEncoding()


class SmedbertForPreTraining(KgplmPreTrainedModel):
    """BERT encoder with SMedBERT's knowledge module after ``config.fusion_layer`` layers and its heads.

    Inputs beyond BERT's (all flat, PyG style; see :class:`kgplm.methods.smedbert.batching.SmedbertCollator`):

    * knowledge mentions (neighbours injected; MMeM targets): ``mention_batch`` (mentions,),
      ``mention_spans`` (mentions, 2) token ``[start, end)``; ``neighbor_mention``,
      ``neighbor_entity_ids``, ``neighbor_relation_ids``, ``neighbor_directions``,
      ``neighbor_type_ids`` (edges,); optional precomputed indices (``SmedbertEncoding.encode``);
      ``mention_masked`` (mentions,) bool, optional: which of them MMeM reconstructs. The
      collator's knowledge mentions are by construction the masked ones and it passes no
      ``mention_masked``: every knowledge mention is then an MMeM target, decided from shapes,
      without reading the device. A given mask selects rows (a synchronisation on a GPU).
    * MNeM targets (never injected): ``mnem_mention_batch``, ``mnem_mention_spans``;
      ``mnem_edge_mention``, ``mnem_entity_ids``, ``mnem_relation_ids``, ``mnem_directions``
      (edges,); ``mnem_negative_ids`` (edges, negatives) and ``mnem_log_q`` (edges, 1 + negatives);
      ``mnem_mention_tokens`` (3, tokens) optional, precomputed.
    """

    config_class = SmedbertConfig
    _tied_weights_keys = dict(MLM_HEAD_TIED_WEIGHTS)

    def __init__(self, config: SmedbertConfig) -> None:
        super().__init__(config)
        SMEDBERT_ENCODING.build(self, config, pooler=True)
        self.cls = BertOnlyMLMHead(config)
        self.sop = nn.Linear(config.hidden_size, 2)
        self.mention_head = MentionProjection(config)
        # MMeM's frozen target network (word embeddings p and sp/W_sa/LN at the start of pre-training)
        self.mmem_target_embeddings = nn.Parameter(
            torch.zeros(config.vocab_size, config.hidden_size), requires_grad=False
        )
        self.mmem_target_head = MentionProjection(config).requires_grad_(False)
        self.post_init()
        self.snapshot_mmem_target()

    @torch.no_grad()
    def snapshot_mmem_target(self) -> None:
        """Freeze the current word embeddings and mention head as MMeM's target (start of pre-training)."""
        self.mmem_target_embeddings.copy_(self.bert.embeddings.word_embeddings.weight)
        self.mmem_target_head.load_state_dict(self.mention_head.state_dict())

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        sentence_order_label: torch.Tensor | None = None,
        mention_batch: torch.Tensor | None = None,
        mention_spans: torch.Tensor | None = None,
        mention_masked: torch.Tensor | None = None,
        neighbor_mention: torch.Tensor | None = None,
        neighbor_entity_ids: torch.Tensor | None = None,
        neighbor_relation_ids: torch.Tensor | None = None,
        neighbor_directions: torch.Tensor | None = None,
        neighbor_type_ids: torch.Tensor | None = None,
        mention_tokens: torch.Tensor | None = None,
        neighbor_type_group: torch.Tensor | None = None,
        type_group_mention: torch.Tensor | None = None,
        co_neighbor_pairs: torch.Tensor | None = None,
        mnem_mention_batch: torch.Tensor | None = None,
        mnem_mention_spans: torch.Tensor | None = None,
        mnem_edge_mention: torch.Tensor | None = None,
        mnem_entity_ids: torch.Tensor | None = None,
        mnem_relation_ids: torch.Tensor | None = None,
        mnem_directions: torch.Tensor | None = None,
        mnem_negative_ids: torch.Tensor | None = None,
        mnem_log_q: torch.Tensor | None = None,
        mnem_mention_tokens: torch.Tensor | None = None,
    ) -> PretrainingOutput:
        config = self.config
        encoded = SMEDBERT_ENCODING.encode(
            self,
            input_ids,
            attention_mask,
            token_type_ids,
            mention_batch,
            mention_spans,
            neighbor_mention,
            neighbor_entity_ids,
            neighbor_relation_ids,
            neighbor_directions,
            neighbor_type_ids,
            mention_tokens,
            neighbor_type_group,
            type_group_mention,
            co_neighbor_pairs,
        )
        hidden = encoded.last_hidden_state
        prediction_logits = self.cls(hidden)  # (batch, length, vocab)
        sop_logits = self.sop(self.bert.pooler(hidden)) if config.use_sop else None
        output = PretrainingOutput(
            prediction_logits=prediction_logits,
            sop_logits=sop_logits,
            last_hidden_state=hidden,
            losses={},
            loss_weights={},
            metrics={},
        )
        if labels is None:
            return output
        output.add("mlm", masked_lm_objective(prediction_logits, labels))
        if sop_logits is not None:
            output.add("sop", sentence_order_objective(sop_logits, sentence_order_label))
        if not config.use_knowledge_losses:
            return output
        mention_index = encoded.extras["mention_index"]
        if mention_index is not None and (mention_masked is None or bool(mention_masked.any())):
            token_mention, token_batch, token_position, num_mentions = mention_index
            fused = self.mention_head(
                hidden[token_batch, token_position], token_mention, num_mentions
            )  # (mentions, d2)
            output.mention_vectors = fused
            output.add(
                "mmem",
                self._mmem_loss(fused, mention_masked, token_mention, token_batch, token_position, labels),
                config.mmem_weight,
            )
        if mnem_edge_mention is not None and len(mnem_edge_mention) and mnem_negative_ids is not None:
            token_mention, token_batch, token_position = (
                mnem_mention_tokens
                if mnem_mention_tokens is not None
                else mention_token_index(mnem_mention_batch, mnem_mention_spans)
            )
            targets = self.mention_head(
                hidden[token_batch, token_position], token_mention, len(mnem_mention_spans)
            )  # (mnem mentions, d2)
            output.add(
                "mnem",
                self._mnem_loss(
                    targets[mnem_edge_mention],
                    mnem_entity_ids,
                    mnem_relation_ids,
                    mnem_directions,
                    mnem_negative_ids,
                    mnem_log_q,
                ),
                config.mnem_weight,
            )
        return output

    def _mnem_loss(self, edge_vectors, entity_ids, relation_ids, directions, negative_ids, log_q) -> torch.Tensor:
        """Eq. 16 and 19 over MNeM edges; ``edge_vectors`` h_mf of each edge's mention, (edges, d2)."""
        relation_vectors, projections = self.kg.relation_vectors(relation_ids)  # (edges, d_r), (edges, d2, d_r)
        candidate_ids = torch.cat([entity_ids.unsqueeze(1), negative_ids], 1)  # (edges, 1 + negatives)
        candidates = self.kg.entities[candidate_ids]  # (edges, 1 + negatives, d2)
        scores = mnem_scores(
            edge_vectors, relation_vectors, projections, candidates, directions, self.config.mnem_scale
        )
        return masked_neighbor_loss(scores, log_q, candidate_ids)

    def _mmem_loss(self, fused, mention_masked, token_mention, token_batch, token_position, labels) -> torch.Tensor:
        """Eq. 20–21 over the masked knowledge mentions (all of them when ``mention_masked`` is None);
        the masked tokens' originals are their labels. The squared error is taken in fp32."""
        num_mentions = len(fused)
        token_ids = labels[token_batch, token_position].clamp(min=0)  # (mention_tokens,)
        if self.config.mmem_target == "frozen_initial":
            with torch.no_grad():
                target = self.mmem_target_head(self.mmem_target_embeddings[token_ids], token_mention, num_mentions)
        else:
            with torch.no_grad():
                target = self.mention_head(
                    self.bert.embeddings.word_embeddings.weight[token_ids], token_mention, num_mentions
                )
        if mention_masked is not None:
            fused, target = fused[mention_masked], target[mention_masked]
        return F.mse_loss(fused.float(), target.float())  # mean over masked mentions and d2
