r"""Graph-classification backbone: GIN with sum readout (as in FedStar / FedDense §3.2)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import global_add_pool

from fgl_flower.models.functional import dropout
from fgl_flower.models.propagate import Adjacency, GINConv


class GIN(nn.Module):
    r"""Graph isomorphism network with a sum readout.

    ``pre: Linear(F -> h)``, then ``num_layers`` x [GINConv(MLP(h, h, h)) -> ReLU -> Dropout],
    ``global_add_pool``, ``post: Linear(h, h)`` + ReLU + Dropout, ``readout: Linear(h, C)``.

    .. math::
        \mathbf{h}_v^{(l+1)} = \mathrm{MLP}^{(l)}\Big(\mathbf{h}_v^{(l)} +
        \sum_{u\in\mathcal N(v)}\mathbf{h}_u^{(l)}\Big),\qquad
        \mathbf{h}_G = \sum_{v\in G}\mathbf{h}_v^{(L)}

    Messages are summed by a sparse product with the mini-batch's adjacency
    (:mod:`fgl_flower.models.propagate`), the same sums as PyG's scatter.
    The GIN convolutions are built first, so that two clients seeded alike get identical
    ``convs`` even when their input and output widths differ. :attr:`shared_prefixes`
    names the parameters shared in cross-dataset FL (the rest depends on the dataset).
    """

    shared_prefixes = ("convs.",)

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int = 3,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        h = hidden_channels
        self.dropout = dropout
        self.convs = nn.ModuleList(
            GINConv(nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, h)))
            for _ in range(num_layers)
        )
        self.pre = nn.Linear(in_channels, h)
        self.post = nn.Linear(h, h)
        self.readout = nn.Linear(h, out_channels)

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor) -> Tensor:
        """``x [N, F]``, ``edge_index [2, E]``, ``batch [N]`` -> ``[B, C]``."""
        adj = Adjacency.sum(edge_index, x.size(0))
        x = self.pre(x)
        for conv in self.convs:
            x = dropout(F.relu(conv(x, adj)), self.dropout, self.training)
        x = global_add_pool(x, batch)
        x = dropout(F.relu(self.post(x)), self.dropout, self.training)
        return self.readout(x)
