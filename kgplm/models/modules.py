"""Knowledge modules shared by the methods: span pooling, KG tables, a relational encoder, a text encoder.

Variable-size sets (the tokens of a mention, the neighbours of a mention) are flat tensors with
an index saying which set each row belongs to, as in PyTorch Geometric; softmaxes and sums over
a set use ``torch_geometric.utils.softmax`` and ``scatter`` instead of padding.

Indices whose size depends on the data (:func:`mention_token_index`, :func:`neighbor_graph`) need
``repeat_interleave``/``unique``, which wait for the device; collators build them on the CPU with
the same functions and pass them in, so the forward pass on a GPU does not synchronise. Under
autocast, grouped softmaxes and their weighted sums run in fp32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch_geometric.utils import scatter, softmax
from transformers import PreTrainedModel
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_outputs import ModelOutput

from kgplm.models.configuration import KgplmConfig

__all__ = ["mention_token_index", "SelfAttentiveSpanPooling", "KnowledgeGraphTables", "RelationalEncoder",
           "BasisRelationalConvolution", "co_neighbor_edges", "neighbor_graph", "KgplmPreTrainedModel", "run_encoder_layers", "extended_attention_mask",
           "PretrainingOutput", "MLM_HEAD_TIED_WEIGHTS"]


def mention_token_index(mention_batch: torch.Tensor, mention_spans: torch.Tensor
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
        return scatter(weights.unsqueeze(-1) * token_states.float(), token_mention, dim=0, dim_size=num_mentions,
                       reduce="sum")


class KnowledgeGraphTables(nn.Module):
    """ent(e), rel(r) and TransR's M_r, initialised from :class:`~kgplm.kg.embeddings.KGEmbeddings`.

    ``related_relation``/``related_projection`` are a "related" relation for neighbours with no
    direct link (PEPR tables built with ``candidates="any"``, relation id −1), learned when
    ``learn_related`` (otherwise fixed at zero and the identity: a table of direct links never
    uses them). TransE tables use M_r = I.
    """

    def __init__(self, config: KgplmConfig, *, trainable: bool = False, learn_related: bool = True) -> None:
        super().__init__()
        self.entities = nn.Parameter(torch.zeros(config.num_entities, config.entity_dim), requires_grad=trainable)
        self.relations = nn.Parameter(torch.zeros(config.num_relations, config.relation_dim), requires_grad=trainable)
        self.projections = nn.Parameter(torch.zeros(config.num_relations, config.entity_dim, config.relation_dim),
                                        requires_grad=trainable)
        self.related_relation = nn.Parameter(torch.zeros(1, config.relation_dim), requires_grad=learn_related)
        self.related_projection = nn.Parameter(torch.zeros(1, config.entity_dim, config.relation_dim),
                                               requires_grad=learn_related)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            bound = 6 / math.sqrt(self.entities.shape[1])
            self.entities.uniform_(-bound, bound)
            self.relations.uniform_(-bound, bound)
            eye = torch.eye(self.projections.shape[1], self.projections.shape[2])
            self.projections.copy_(eye.expand_as(self.projections))
            self.related_relation.zero_()
            self.related_projection.copy_(eye.unsqueeze(0))

    @torch.no_grad()
    def load_embeddings(self, embeddings) -> None:
        """Copy a :class:`KGEmbeddings` (TransE or TransR) of the same graph into the tables."""
        from kgplm.exceptions import ConfigurationError

        if tuple(embeddings.entity_embeddings.shape) != tuple(self.entities.shape):
            raise ConfigurationError(f"KG embeddings have entity table {tuple(embeddings.entity_embeddings.shape)}; "
                                     f"the model expects {tuple(self.entities.shape)}")
        if tuple(embeddings.relation_embeddings.shape) != tuple(self.relations.shape):
            raise ConfigurationError(f"KG embeddings have relation table "
                                     f"{tuple(embeddings.relation_embeddings.shape)}; the model expects "
                                     f"{tuple(self.relations.shape)}")
        self.entities.copy_(embeddings.entity_embeddings)
        self.relations.copy_(embeddings.relation_embeddings)
        if embeddings.projections is not None:
            self.projections.copy_(embeddings.projections)

    def relation_vectors(self, relation_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(h_r, M_r) per id; −1 selects the learned "related" relation. Shapes (n, d_r), (n, d2, d_r)."""
        # gather first, then swap in the learned rows: no copy of the whole tables per batch
        related = relation_ids < 0
        rows = relation_ids.clamp(min=0)
        vectors = torch.where(related[:, None], self.related_relation, self.relations[rows])  # (n, d_r)
        projections = torch.where(related[:, None, None], self.related_projection, self.projections[rows])
        return vectors, projections  # (n, d_r), (n, d2, d_r)


def co_neighbor_edges(edge_mention: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every ordered pair (u, v), u ≠ v, of neighbour edges that belong to the same mention.

    ``edge_mention`` (edges,) says which mention each neighbour edge belongs to. Returns
    ``(source_edge, target_edge)``, each (pairs,), without a Python loop: edges are grouped by
    mention, and each edge is paired with every other member of its group.
    """
    num_edges = len(edge_mention)
    order = torch.argsort(edge_mention, stable=True)  # edges grouped by mention
    grouped_mention = edge_mention[order]
    _, group_of_edge, group_size = torch.unique_consecutive(grouped_mention, return_inverse=True,
                                                            return_counts=True)
    group_start = torch.cumsum(group_size, 0) - group_size  # (groups,)
    size_of_edge = group_size[group_of_edge]  # (edges,)
    source = torch.repeat_interleave(torch.arange(num_edges, device=edge_mention.device), size_of_edge)
    offset = torch.arange(len(source), device=edge_mention.device) - torch.repeat_interleave(
        torch.cumsum(size_of_edge, 0) - size_of_edge, size_of_edge)
    target = group_start[group_of_edge][source] + offset  # (pairs,) positions in the grouped order
    keep = target != source
    return order[source[keep]], order[target[keep]]


def neighbor_graph(edge_mention: torch.Tensor) -> dict[str, torch.Tensor]:
    """The R-GCN's graph over a batch's neighbour edges (see :class:`RelationalEncoder`).

    Every neighbour edge is its own node: each mention's neighbour set is a separate subgraph, and
    an entity that neighbours two mentions is two nodes. (Sharing one node per entity across the
    batch let a node collect messages from every mention it neighbours, so a masked mention's own
    entity, neighbouring a batch partner, reached the mention's tokens, and an example's forward
    pass depended on its partners.) ``co_neighbor_pairs`` (2, pairs): :func:`co_neighbor_edges`
    as (source, target) node pairs.
    """
    return {"co_neighbor_pairs": torch.stack(co_neighbor_edges(edge_mention))}


class BasisRelationalConvolution(nn.Module):
    r"""R-GCN layer with basis decomposition (Schlichtkrull et al. 2018, Eq. 2–3), without a loop over relations.

    .. math::
        h'_v = W_0 h_v + b + \sum_r \frac{1}{|N_r(v)|} \sum_{u \in N_r(v)} W_r h_u,\qquad
        W_r = \sum_b a_{rb} V_b

    The same function and parameters (``weight`` = V, ``comp`` = a, ``root`` = W_0, ``bias``) as
    ``torch_geometric.nn.RGCNConv(num_bases=B)`` with mean aggregation (checked against it in the
    tests), so checkpoints of either load into the other. PyG's version runs one masked
    propagation per relation (2·|R|+1 of them, each a host synchronisation on a GPU); here every
    edge's message h_u W_r is formed from the B products h_u V_b at once and the per-relation means
    are one scatter. Messages are aggregated in fp32 under autocast.
    """

    def __init__(self, in_channels: int, out_channels: int, num_relations: int, num_bases: int) -> None:
        super().__init__()
        self.num_relations, self.num_bases = num_relations, num_bases
        self.weight = nn.Parameter(torch.empty(num_bases, in_channels, out_channels))  # V_b
        self.comp = nn.Parameter(torch.empty(num_relations, num_bases))  # a_rb
        self.root = nn.Parameter(torch.empty(in_channels, out_channels))  # W_0
        self.bias = nn.Parameter(torch.empty(out_channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        from torch_geometric.nn.inits import glorot, zeros

        glorot(self.weight)
        glorot(self.comp)
        glorot(self.root)
        zeros(self.bias)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_type: torch.Tensor) -> torch.Tensor:
        """``x`` (nodes, in), ``edge_index`` (2, edges) source → target, ``edge_type`` (edges,) → (nodes, out)."""
        num_nodes, (in_channels, out_channels) = len(x), self.root.shape
        source, target = edge_index
        per_basis = (x @ self.weight.permute(1, 0, 2).reshape(in_channels, -1)).view(
            num_nodes, self.num_bases, out_channels)  # (nodes, bases, out): h_u V_b
        # h_u W_r = Σ_b a_rb (h_u V_b), elementwise so that autocast keeps it in fp32: (edges, out)
        messages = (self.comp[edge_type].unsqueeze(-1) * per_basis[source].float()).sum(1)
        slot = target * self.num_relations + edge_type  # one mean per (target, relation)
        counts = scatter(torch.ones_like(slot, dtype=messages.dtype), slot, dim=0,
                         dim_size=num_nodes * self.num_relations, reduce="sum")
        messages = messages / counts[slot].unsqueeze(-1)
        aggregated = scatter(messages, target, dim=0, dim_size=num_nodes, reduce="sum")  # (nodes, out)
        return aggregated + x @ self.root + self.bias


class RelationalEncoder(nn.Module):
    """Optional R-GCN (Schlichtkrull et al. 2018) over each mention's neighbour set, one subgraph per mention.

    ent'(v) = ent(v) + RGCN(ent, edges)(v) with a message u → v for every two neighbours u ≠ v of
    the same mention, typed by how u is linked to the mention's entity (2·r + direction; the last
    type is "related, no direct link"). Nodes are the mention's own neighbour edges
    (:func:`neighbor_graph`): no node is shared with another mention, so a mention's refined
    neighbours depend on its own neighbour set only, not on its batch partners. The mention's own
    entity is not a node (PEPR never ranks a seed among its own neighbours), so a masked mention's
    identity cannot reach its tokens through the R-GCN. Basis decomposition keeps the parameters
    small for graphs with hundreds of relations.
    """

    def __init__(self, config: KgplmConfig, num_bases: int = 8) -> None:
        super().__init__()
        self.num_edge_types = 2 * config.num_relations + 1
        self.convolution = BasisRelationalConvolution(config.entity_dim, config.entity_dim, self.num_edge_types,
                                                      num_bases=min(num_bases, self.num_edge_types))

    def reset_parameters(self) -> None:
        self.convolution.reset_parameters()

    def edge_types(self, relation_ids: torch.Tensor, directions: torch.Tensor) -> torch.Tensor:
        """2·r + direction for a direct link, the last type for "related" (relation id −1)."""
        return torch.where(relation_ids < 0, self.num_edge_types - 1, 2 * relation_ids + directions.clamp(min=0))

    def forward(self, entity_table: torch.Tensor, neighbor_entity_ids: torch.Tensor, edge_mention: torch.Tensor,
                relation_ids: torch.Tensor, directions: torch.Tensor,
                graph: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        """Refined vectors of the neighbour edges, (edges, d2). ``graph``: :func:`neighbor_graph` of the
        edges when the collator built it (else it is built here, which synchronises on a GPU)."""
        if graph is None:
            graph = neighbor_graph(edge_mention)
        source_edge, _ = graph["co_neighbor_pairs"]
        edge_type = self.edge_types(relation_ids, directions)[source_edge]
        node_vectors = entity_table[neighbor_entity_ids]  # (edges, d2): one node per neighbour edge
        return node_vectors + self.convolution(node_vectors, graph["co_neighbor_pairs"], edge_type)


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


def extended_attention_mask(config: KgplmConfig, embeddings: torch.Tensor, attention_mask: torch.Tensor | None):
    """The mask the encoder layers take, for the configured attention implementation."""
    return create_bidirectional_mask(config=config, inputs_embeds=embeddings, attention_mask=attention_mask)


def run_encoder_layers(layers, hidden_states: torch.Tensor, mask) -> torch.Tensor:
    for layer in layers:
        hidden_states = layer(hidden_states, mask)
    return hidden_states


@dataclass
class PretrainingOutput(ModelOutput):
    """What a pre-training model returns.

    ``loss``: the weighted total Σ_k weight_k · losses[k] (``None`` when no objective had a target);
    ``losses``: each objective's mean loss by short name (``mlm``, ``sop`` …), present only when the
    batch held a target for it; ``loss_weights``: the weight of each; ``metrics``: values logged
    beside the losses (``mlm_accuracy``, ``sop_accuracy`` …).
    """

    loss: torch.Tensor | None = None
    losses: dict[str, torch.Tensor] | None = None
    loss_weights: dict[str, float] | None = None
    metrics: dict[str, torch.Tensor] | None = None
    prediction_logits: torch.Tensor | None = None
    sop_logits: torch.Tensor | None = None
    last_hidden_state: torch.Tensor | None = None
    mention_vectors: torch.Tensor | None = None

    def add(self, name: str, objective, weight: float = 1.0) -> None:
        """Record an :class:`~kgplm.models.objectives.Objective` (or a bare loss tensor); ``None`` is skipped."""
        if objective is None:
            return
        if self.losses is None:
            self.losses, self.loss_weights, self.metrics = {}, {}, {}
        loss = objective if isinstance(objective, torch.Tensor) else objective.loss
        self.losses[name] = loss
        self.loss_weights[name] = float(weight)
        if not isinstance(objective, torch.Tensor):
            self.metrics[f"{name}_accuracy"] = objective.accuracy
        self.loss = weight * loss if self.loss is None else self.loss + weight * loss
