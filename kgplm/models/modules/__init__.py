"""Knowledge modules shared by the methods: span pooling, KG tables, a relational encoder, a text encoder.

Variable-size sets (the tokens of a mention, the neighbours of a mention) are flat tensors with
an index saying which set each row belongs to, as in PyTorch Geometric; softmaxes and sums over
a set use ``torch_geometric.utils.softmax`` and ``scatter`` instead of padding.

Indices whose size depends on the data (:func:`mention_token_index`, :func:`neighbor_graph`) need
``repeat_interleave``/``unique``, which wait for the device; collators build them on the CPU with
the same functions and pass them in, so the forward pass on a GPU does not synchronise. Under
autocast, grouped softmaxes and their weighted sums run in fp32.
"""

from kgplm.models.modules.encoder import extended_attention_mask, run_encoder_layers
from kgplm.models.modules.kg_tables import KnowledgeGraphTables
from kgplm.models.modules.output import PretrainingOutput
from kgplm.models.modules.pretrained import MLM_HEAD_TIED_WEIGHTS, KgplmPreTrainedModel
from kgplm.models.modules.relational import (
    BasisRelationalConvolution,
    RelationalEncoder,
    co_neighbor_edges,
    neighbor_graph,
)
from kgplm.models.modules.span_pooling import SelfAttentiveSpanPooling, mention_token_index

__all__ = [
    "mention_token_index",
    "SelfAttentiveSpanPooling",
    "KnowledgeGraphTables",
    "RelationalEncoder",
    "BasisRelationalConvolution",
    "co_neighbor_edges",
    "neighbor_graph",
    "KgplmPreTrainedModel",
    "run_encoder_layers",
    "extended_attention_mask",
    "PretrainingOutput",
    "MLM_HEAD_TIED_WEIGHTS",
]
