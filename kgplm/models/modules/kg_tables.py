"""The KG embedding tables a knowledge method reads (entities, relations, TransR projections)."""

from __future__ import annotations

import math

import torch
from torch import nn

from kgplm.models.configuration import KgplmConfig

__all__ = ["KnowledgeGraphTables"]


class KnowledgeGraphTables(nn.Module):
    """ent(e), rel(r) and TransR's M_r, initialised from :class:`~kgplm.kg.embeddings.models.KGEmbeddings`.

    ``related_relation``/``related_projection`` are a "related" relation for neighbours with no
    direct link (PEPR tables built with ``candidates="any"``, relation id −1), learned when
    ``learn_related`` (otherwise fixed at zero and the identity: a table of direct links never
    uses them). TransE tables use M_r = I.
    """

    def __init__(self, config: KgplmConfig, *, trainable: bool = False, learn_related: bool = True) -> None:
        super().__init__()
        self.entities = nn.Parameter(torch.zeros(config.num_entities, config.entity_dim), requires_grad=trainable)
        self.relations = nn.Parameter(torch.zeros(config.num_relations, config.relation_dim), requires_grad=trainable)
        self.projections = nn.Parameter(
            torch.zeros(config.num_relations, config.entity_dim, config.relation_dim), requires_grad=trainable
        )
        self.related_relation = nn.Parameter(torch.zeros(1, config.relation_dim), requires_grad=learn_related)
        self.related_projection = nn.Parameter(
            torch.zeros(1, config.entity_dim, config.relation_dim), requires_grad=learn_related
        )
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
            raise ConfigurationError(
                f"KG embeddings have entity table {tuple(embeddings.entity_embeddings.shape)}; "
                f"the model expects {tuple(self.entities.shape)}"
            )
        if tuple(embeddings.relation_embeddings.shape) != tuple(self.relations.shape):
            raise ConfigurationError(
                f"KG embeddings have relation table "
                f"{tuple(embeddings.relation_embeddings.shape)}; the model expects "
                f"{tuple(self.relations.shape)}"
            )
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
