r"""Node-classification backbones.

All share the signature ``Model(in_channels, hidden_channels, out_channels, num_layers,
dropout)`` and ``forward(x, edge_index, edge_weight=None) -> [N, C]`` logits. Dropout is
applied to hidden representations (not to the raw input, which may be sparse).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GATConv, GCNConv, SAGEConv, SGConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from fgl_flower.models.registry import MODELS, ModelSpec
from fgl_flower.models.sparse import GraphCache, feature_matmul, gcn_adjacency


def _dims(in_channels: int, hidden: int, out_channels: int, num_layers: int) -> list[int]:
    return [in_channels] + [hidden] * (num_layers - 1) + [out_channels]


class _Stacked(nn.Module):
    """Layers with ReLU and dropout in between; subclasses build ``self.convs``."""

    uses_edges = True

    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.dropout = dropout
        self.convs = nn.ModuleList()

    def _layer(self, conv: nn.Module, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None) -> Tensor:
        return conv(x, edge_index, edge_weight)

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        for i, conv in enumerate(self.convs):
            x = self._layer(conv, x, edge_index, edge_weight)
            if i < len(self.convs) - 1:
                x = F.dropout(F.relu(x), self.dropout, self.training)
        return x


class GCN(_Stacked):
    r"""Graph convolutional network (Kipf & Welling, 2017).

    .. math::
        \mathbf{H}^{(l+1)} = \sigma\big(\hat{\mathbf{D}}^{-1/2}\hat{\mathbf{A}}
        \hat{\mathbf{D}}^{-1/2}\mathbf{H}^{(l)}\mathbf{W}^{(l)}\big)

    Equal to stacked :class:`~torch_geometric.nn.conv.GCNConv` layers (same parameters),
    but the normalized adjacency and CSR copies of sparse features are computed once per
    graph and reused across calls (see :mod:`fgl_flower.models.sparse`).
    """

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int = 2, dropout: float = 0.5) -> None:
        super().__init__(dropout)
        d = _dims(in_channels, hidden_channels, out_channels, num_layers)
        self.convs.extend(GCNConv(a, b) for a, b in zip(d[:-1], d[1:]))
        self._cache = GraphCache()

    def _layer(self, conv, x, edge_index, edge_weight):
        adj_t = self._cache.get(
            "adjacency", (edge_index, edge_weight),
            lambda: gcn_adjacency(edge_index, x.size(0), edge_weight, conv.add_self_loops),
        )
        h = feature_matmul(x, conv.lin.weight.t(), self._cache)
        h = adj_t @ h
        return h if conv.bias is None else h + conv.bias


class GraphSAGE(_Stacked):
    r"""GraphSAGE with mean aggregation (Hamilton et al., 2017).

    .. math::
        \mathbf{h}_v^{(l+1)} = \mathbf{W}_1\mathbf{h}_v^{(l)} + \mathbf{W}_2\,
        \mathrm{mean}_{u\in\mathcal N(v)}\mathbf{h}_u^{(l)}
    """

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int = 2, dropout: float = 0.5) -> None:
        super().__init__(dropout)
        d = _dims(in_channels, hidden_channels, out_channels, num_layers)
        self.convs.extend(SAGEConv(a, b) for a, b in zip(d[:-1], d[1:]))

    def _layer(self, conv, x, edge_index, edge_weight):
        # SAGE aggregates raw features before its linear maps: densify sparse input.
        return conv(x.to_dense() if x.is_sparse else x, edge_index)


class GAT(_Stacked):
    r"""Graph attention network (Veličković et al., 2018), 8 heads in hidden layers.

    ``hidden_channels`` is the concatenated width (``8 * hidden_channels // 8``).
    """

    heads = 8

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int = 2, dropout: float = 0.5) -> None:
        super().__init__(dropout)
        per_head = max(1, hidden_channels // self.heads)
        width = per_head * self.heads
        d = [in_channels] + [width] * (num_layers - 1)
        self.convs.extend(GATConv(a, per_head, heads=self.heads) for a in d[:-1])
        self.convs.append(GATConv(d[-1], out_channels, heads=1))

    def _layer(self, conv, x, edge_index, edge_weight):
        return conv(x, edge_index)


class SGC(nn.Module):
    r"""Simplified graph convolution (Wu et al., 2019): one linear map of
    :math:`\hat{\mathbf{A}}^K\mathbf{X}` with :math:`K` = ``num_layers``.

    ``hidden_channels`` and ``dropout`` are accepted for a uniform signature and unused.
    """

    uses_edges = True

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int = 2, dropout: float = 0.0) -> None:
        super().__init__()
        self.conv = SGConv(in_channels, out_channels, K=num_layers)

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        # Project first, then propagate K times: equal to SGConv by linearity, and it
        # works on sparse features (SGConv itself propagates the raw input first).
        conv = self.conv
        x = F.linear(x, conv.lin.weight)
        ei, ew = gcn_norm(edge_index, edge_weight, x.size(0), False, conv.add_self_loops, dtype=x.dtype)
        for _ in range(conv.K):
            x = conv.propagate(ei, x=x, edge_weight=ew)
        return x if conv.lin.bias is None else x + conv.lin.bias


class MLP(_Stacked):
    """Multi-layer perceptron on node features alone (ignores edges)."""

    uses_edges = False

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int = 2, dropout: float = 0.5) -> None:
        super().__init__(dropout)
        d = _dims(in_channels, hidden_channels, out_channels, num_layers)
        self.convs.extend(nn.Linear(a, b) for a, b in zip(d[:-1], d[1:]))

    def _layer(self, conv, x, edge_index, edge_weight):
        return conv(x)


for _name, _cls in (("gcn", GCN), ("sgc", SGC), ("graphsage", GraphSAGE), ("gat", GAT), ("mlp", MLP)):
    MODELS.register(_name, ModelSpec(_cls, "node"))
MODELS.register("sage", ModelSpec(GraphSAGE, "node"))
