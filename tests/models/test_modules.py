"""Shared knowledge modules: the loop-free R-GCN layer against PyTorch Geometric's RGCNConv."""

from __future__ import annotations

import torch
from torch_geometric.nn import RGCNConv

from kgplm.models.modules import BasisRelationalConvolution, neighbor_graph


def test_basis_relational_convolution_equals_pyg_rgcnconv():
    generator = torch.Generator().manual_seed(0)
    num_nodes, num_edges, num_relations, dim = 12, 60, 7, 16
    x = torch.randn(num_nodes, dim, generator=generator)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=generator)
    edge_type = torch.randint(0, num_relations, (num_edges,), generator=generator)
    ours = BasisRelationalConvolution(dim, dim, num_relations, num_bases=3)
    reference = RGCNConv(dim, dim, num_relations, num_bases=3)
    # the same parameter names and shapes: a state dict moves between them
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in
                                                                  reference.state_dict().items()}
    with torch.no_grad():
        reference.bias.normal_(generator=generator)  # not the zeros of its initialisation
    ours.load_state_dict(reference.state_dict())
    torch.testing.assert_close(ours(x, edge_index, edge_type), reference(x, edge_index, edge_type),
                               rtol=1e-5, atol=1e-5)


def test_neighbor_graph_by_hand():
    graph = neighbor_graph(torch.tensor([7, 3, 7, 9]), torch.tensor([0, 0, 1, 1]))
    assert graph["neighbor_nodes"].tolist() == [3, 7, 9]
    assert graph["neighbor_node_of_edge"].tolist() == [1, 0, 1, 2]
    assert sorted(map(tuple, graph["co_neighbor_pairs"].T.tolist())) == [(0, 1), (1, 0), (2, 3), (3, 2)]
