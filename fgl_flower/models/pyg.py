r"""Node-classification backbones built on PyG's message-passing layers (GraphSAGE, GAT,
SGC). PyG is imported with this module only, i.e. when one of these models is used."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GATConv, SAGEConv, SGConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from fgl_flower.models.node import _dims, _Stacked


class GraphSAGE(_Stacked):
    r"""GraphSAGE with mean aggregation (Hamilton et al., 2017).

    .. math::
        \mathbf{h}_v^{(l+1)} = \mathbf{W}_1\mathbf{h}_v^{(l)} + \mathbf{W}_2\,
        \mathrm{mean}_{u\in\mathcal N(v)}\mathbf{h}_u^{(l)}
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int = 2,
        dropout: float = 0.5,
    ) -> None:
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

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int = 2,
        dropout: float = 0.5,
    ) -> None:
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

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int = 2,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.conv = SGConv(in_channels, out_channels, K=num_layers)

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        # Project first, then propagate K times: equal to SGConv by linearity, and it
        # works on sparse features (SGConv itself propagates the raw input first).
        conv = self.conv
        x = F.linear(x, conv.lin.weight)
        ei, ew = gcn_norm(
            edge_index, edge_weight, x.size(0), False, conv.add_self_loops, dtype=x.dtype
        )
        for _ in range(conv.K):
            x = conv.propagate(ei, x=x, edge_weight=ew)
        return x if conv.lin.bias is None else x + conv.lin.bias
