"""A relational graph encoder over each mention's neighbours (R-GCN with basis decomposition)."""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.utils import scatter

from kgplm.models.configuration import KgplmConfig

__all__ = ["co_neighbor_edges", "neighbor_graph", "BasisRelationalConvolution", "RelationalEncoder"]


def co_neighbor_edges(edge_mention: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every ordered pair (u, v), u ≠ v, of neighbour edges that belong to the same mention.

    ``edge_mention`` (edges,) says which mention each neighbour edge belongs to. Returns
    ``(source_edge, target_edge)``, each (pairs,), without a Python loop: edges are grouped by
    mention, and each edge is paired with every other member of its group.
    """
    num_edges = len(edge_mention)
    order = torch.argsort(edge_mention, stable=True)  # edges grouped by mention
    grouped_mention = edge_mention[order]
    _, group_of_edge, group_size = torch.unique_consecutive(grouped_mention, return_inverse=True, return_counts=True)
    group_start = torch.cumsum(group_size, 0) - group_size  # (groups,)
    size_of_edge = group_size[group_of_edge]  # (edges,)
    source = torch.repeat_interleave(torch.arange(num_edges, device=edge_mention.device), size_of_edge)
    offset = torch.arange(len(source), device=edge_mention.device) - torch.repeat_interleave(
        torch.cumsum(size_of_edge, 0) - size_of_edge, size_of_edge
    )
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
            num_nodes, self.num_bases, out_channels
        )  # (nodes, bases, out): h_u V_b
        # h_u W_r = Σ_b a_rb (h_u V_b), elementwise so that autocast keeps it in fp32: (edges, out)
        messages = (self.comp[edge_type].unsqueeze(-1) * per_basis[source].float()).sum(1)
        slot = target * self.num_relations + edge_type  # one mean per (target, relation)
        counts = scatter(
            torch.ones_like(slot, dtype=messages.dtype),
            slot,
            dim=0,
            dim_size=num_nodes * self.num_relations,
            reduce="sum",
        )
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
        self.convolution = BasisRelationalConvolution(
            config.entity_dim, config.entity_dim, self.num_edge_types, num_bases=min(num_bases, self.num_edge_types)
        )

    def reset_parameters(self) -> None:
        self.convolution.reset_parameters()

    def edge_types(self, relation_ids: torch.Tensor, directions: torch.Tensor) -> torch.Tensor:
        """2·r + direction for a direct link, the last type for "related" (relation id −1)."""
        return torch.where(relation_ids < 0, self.num_edge_types - 1, 2 * relation_ids + directions.clamp(min=0))

    def forward(
        self,
        entity_table: torch.Tensor,
        neighbor_entity_ids: torch.Tensor,
        edge_mention: torch.Tensor,
        relation_ids: torch.Tensor,
        directions: torch.Tensor,
        graph: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Refined vectors of the neighbour edges, (edges, d2). ``graph``: :func:`neighbor_graph` of the
        edges when the collator built it (else it is built here, which synchronises on a GPU)."""
        if graph is None:
            graph = neighbor_graph(edge_mention)
        source_edge, _ = graph["co_neighbor_pairs"]
        edge_type = self.edge_types(relation_ids, directions)[source_edge]
        node_vectors = entity_table[neighbor_entity_ids]  # (edges, d2): one node per neighbour edge
        return node_vectors + self.convolution(node_vectors, graph["co_neighbor_pairs"], edge_type)
