"""GNN backbones, resolved by name through :data:`MODELS`.

Node models map ``(x [N, F], edge_index [2, E]) -> logits [N, C]``; graph models map a
mini-batch of graphs to ``logits [B, C]``. ``x`` may be a sparse COO tensor.
"""

from fgl_flower.models.acmgcn import ACMGCN, ACMConv
from fgl_flower.models.graph import GIN
from fgl_flower.models.node import GAT, GCN, MLP, SGC, GraphSAGE
from fgl_flower.models.registry import INITS, MODELS, ModelSpec, build_model

__all__ = ["ACMGCN", "GAT", "GCN", "GIN", "INITS", "MLP", "MODELS", "SGC", "ACMConv", "GraphSAGE", "ModelSpec", "build_model"]
