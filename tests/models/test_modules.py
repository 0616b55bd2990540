"""Shared knowledge modules: the loop-free R-GCN layer against PyTorch Geometric's RGCNConv."""

from __future__ import annotations

import torch
from torch_geometric.nn import RGCNConv

from kgplm.models.configuration import KgplmConfig
from kgplm.models.modules import BasisRelationalConvolution, RelationalEncoder, neighbor_graph


def test_basis_relational_convolution_equals_pyg_rgcnconv():
    generator = torch.Generator().manual_seed(0)
    num_nodes, num_edges, num_relations, dim = 12, 60, 7, 16
    x = torch.randn(num_nodes, dim, generator=generator)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=generator)
    edge_type = torch.randint(0, num_relations, (num_edges,), generator=generator)
    ours = BasisRelationalConvolution(dim, dim, num_relations, num_bases=3)
    reference = RGCNConv(dim, dim, num_relations, num_bases=3)
    # the same parameter names and shapes: a state dict moves between them
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in reference.state_dict().items()}
    with torch.no_grad():
        reference.bias.normal_(generator=generator)  # not the zeros of its initialisation
    ours.load_state_dict(reference.state_dict())
    torch.testing.assert_close(
        ours(x, edge_index, edge_type), reference(x, edge_index, edge_type), rtol=1e-5, atol=1e-5
    )


def test_neighbor_graph_by_hand():
    """One node per neighbour edge: pairs only inside a mention, even where two mentions share entity 7."""
    graph = neighbor_graph(torch.tensor([0, 0, 1, 1, 1]))
    assert set(graph) == {"co_neighbor_pairs"}
    assert sorted(map(tuple, graph["co_neighbor_pairs"].T.tolist())) == [
        (0, 1),
        (1, 0),
        (2, 3),
        (2, 4),
        (3, 2),
        (3, 4),
        (4, 2),
        (4, 3),
    ]


def test_the_rgcn_refines_each_mentions_neighbours_from_its_own_neighbour_set_only():
    """Entity 7 neighbours mention 0 (with 3) and mention 1 (with 9): its two refined vectors differ,
    and each equals the R-GCN run on that mention's neighbour set alone."""
    config = KgplmConfig(num_entities=12, num_relations=2, entity_dim=8, relation_dim=8)
    torch.manual_seed(0)
    encoder = RelationalEncoder(config)
    table = torch.randn(12, 8)
    entities, mentions = torch.tensor([7, 3, 7, 9]), torch.tensor([0, 0, 1, 1])
    relations, directions = torch.tensor([0, 1, 1, 0]), torch.tensor([0, 1, 0, 1])
    with torch.no_grad():
        together = encoder(table, entities, mentions, relations, directions)
        alone = [
            encoder(table, entities[part], torch.zeros(2, dtype=torch.long), relations[part], directions[part])
            for part in (slice(0, 2), slice(2, 4))
        ]
    torch.testing.assert_close(together, torch.cat(alone), rtol=0, atol=1e-6)
    assert not torch.allclose(together[0], together[2])
