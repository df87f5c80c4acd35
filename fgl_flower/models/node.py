r"""Node-classification backbones without PyG layers: GCN and MLP (GraphSAGE, GAT and SGC
are in :mod:`fgl_flower.models.pyg`).

All node backbones share the signature ``Model(in_channels, hidden_channels, out_channels, num_layers,
dropout)`` and ``forward(x, edge_index, edge_weight=None) -> [N, C]`` logits. Dropout is
applied to hidden representations (not to the raw input, which may be sparse).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

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

    def _layer(
        self, conv: nn.Module, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None
    ) -> Tensor:
        return conv(x, edge_index, edge_weight)

    def embed(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        """The input of the last layer, ``[N, hidden]`` (after its ReLU and dropout): the
        node representations that representation-level methods (FGSSL) compare."""
        for conv in self.convs[:-1]:
            x = F.dropout(
                F.relu(self._layer(conv, x, edge_index, edge_weight)), self.dropout, self.training
            )
        return x

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        return self._layer(
            self.convs[-1], self.embed(x, edge_index, edge_weight), edge_index, edge_weight
        )


class GCNLayer(nn.Module):
    r"""The parameters of one GCN layer: ``lin.weight [out, in]`` (no bias) and ``bias [out]``.

    The state dict and the initialisation are PyG's ``GCNConv(in, out)`` exactly (Glorot
    uniform weight and zero bias, with the same draws from the global generator: the
    ``Linear`` fills its weight once when built and once more in the reset, as PyG's does),
    so models, checkpoints and seeded runs are interchangeable with it. :class:`GCN`
    propagates with a cached CSR adjacency, so no message-passing machinery is built.
    """

    add_self_loops = True

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels, bias=False)  # first draw
        self.bias = nn.Parameter(torch.empty(out_channels))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        w = self.lin.weight
        bound = math.sqrt(6.0 / (w.size(-2) + w.size(-1)))
        w.uniform_(-bound, bound)
        self.bias.zero_()


class GCN(_Stacked):
    r"""Graph convolutional network (Kipf & Welling, 2017).

    .. math::
        \mathbf{H}^{(l+1)} = \sigma\big(\hat{\mathbf{D}}^{-1/2}\hat{\mathbf{A}}
        \hat{\mathbf{D}}^{-1/2}\mathbf{H}^{(l)}\mathbf{W}^{(l)}\big)

    Equal to stacked :class:`~torch_geometric.nn.conv.GCNConv` layers (same parameters,
    :class:`GCNLayer`), but the normalized adjacency and CSR copies of sparse features are
    computed once per graph and reused across calls (see :mod:`fgl_flower.models.sparse`).
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
        self.convs.extend(GCNLayer(a, b) for a, b in zip(d[:-1], d[1:]))
        self._cache = GraphCache()

    def _layer(self, conv, x, edge_index, edge_weight):
        adj_t = self._cache.get(
            f"adjacency/{x.size(0)}",
            (edge_index, edge_weight),
            lambda: gcn_adjacency(edge_index, x.size(0), edge_weight, conv.add_self_loops),
        )
        h = feature_matmul(x, conv.lin.weight.t(), self._cache)
        h = adj_t @ h
        return h + conv.bias


class MLP(_Stacked):
    """Multi-layer perceptron on node features alone (ignores edges)."""

    uses_edges = False

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
        self.convs.extend(nn.Linear(a, b) for a, b in zip(d[:-1], d[1:]))

    def _layer(self, conv, x, edge_index, edge_weight):
        return conv(x)


class ConcatGCN(nn.Module):
    r"""Feature projection, ``L`` GCN layers and a classifier on every layer's output
    (H2GCN-style combination; FedHERO's local channel alone, its spec §7 baseline backbone).

    .. math::
        \mathbf Z^0 = \mathrm{ReLU}(\mathbf X\mathbf W_0 + b_0),\quad
        \mathbf Z^l = \mathrm{ReLU}(\hat{\mathbf A}\mathbf Z^{l-1}\mathbf W_l + b_l),\quad
        \hat{\mathbf Y} = [\mathbf X \| \mathbf Z^0 \| \dots \| \mathbf Z^L]\,\mathbf W_c + b_c

    with dropout after every :math:`\mathbf Z^l`. ``x [N, F]`` (dense or sparse) -> ``[N, C]``.
    """

    uses_edges = True

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int = 2,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        self.proj = nn.Linear(in_channels, hidden_channels)
        self.convs = nn.ModuleList(
            GCNLayer(hidden_channels, hidden_channels) for _ in range(num_layers)
        )
        self.cls = nn.Linear(in_channels + (num_layers + 1) * hidden_channels, out_channels)
        self.dropout = dropout
        self._cache = GraphCache()

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        n = x.size(0)
        adj_t = self._cache.get(
            f"adjacency/{n}",
            (edge_index, edge_weight),
            lambda: gcn_adjacency(edge_index, n, edge_weight),
        )
        xd = self._cache.get("dense-x", (x,), lambda: x.to_dense() if x.is_sparse else x)
        z = F.dropout(F.relu(self.proj(xd)), self.dropout, self.training)
        outs = [xd, z]
        for conv in self.convs:
            z = adj_t @ (z @ conv.lin.weight.t()) + conv.bias
            z = F.dropout(F.relu(z), self.dropout, self.training)
            outs.append(z)
        return self.cls(torch.cat(outs, dim=1))
