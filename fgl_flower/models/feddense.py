r"""FedDense's dual-densely connected GNN (Wang et al., 2024; spec ``feddense.md`` §3.1).

Two channels over the same graph. The structural channel is FedStar's (shared):
:math:`\mathbf s^{(0)} = W_s\mathbf s_v`, :math:`\mathbf s^{(\ell)} = \tanh(\mathrm{GCN}_\ell(\mathbf s^{(\ell-1)}))`.
The feature channel (local) is a GIN whose layer :math:`\ell` reads *every* earlier map of
*both* channels (the dual dense connections, Eqs. 6-8), with :math:`\phi = \mathrm{Dropout}\circ\mathrm{ReLU}`:

.. math::
    \mathbf c^{(\ell)}_v = \big[\phi([\mathbf x^{(0)}_v,\dots,\mathbf x^{(\ell-1)}_v])
        \,\|\, \phi([\mathbf s^{(0)}_v,\dots,\mathbf s^{(\ell-1)}_v])\big],
    \qquad \mathbf x^{(\ell)} = \mathrm{GIN}_\ell(\mathbf c^{(\ell)}) \in \mathbb R^{r}

with :math:`\mathbf x^{(0)} = W_x\mathbf x_v \in \mathbb R^{d_0}`, so
:math:`\dim\mathbf c^{(\ell)} = 2d_0 + 2(\ell-1)r`. The readout projects
:math:`[\phi([\mathbf x^{(0..L)}]) \| \phi([\mathbf s^{(0..L)}])]` (width :math:`2d_0 + 2Lr`) to 64
per node, sums over the graph and classifies (FedStar's head).

``activation="post"`` is FedStar-style post-activation (spec §3.1.2, alternative):
:math:`\mathbf x^{(\ell)} = \phi(\mathrm{GIN}_\ell([\mathbf x^{(0..\ell-1)} \| \mathbf s^{(0..\ell-1)}]))`
and the maps are concatenated raw. Both have the same parameters. Each GIN layer
projects its :math:`2d_0 + 2(\ell-1)r` inputs to :math:`r` before summing over neighbours
(``project_first``, the same layer: messages of width :math:`r`, not
:math:`\dim\mathbf c^{(\ell)}`). Shared parameters
(``struct.*``): :math:`|\theta_s| = 32 d_0 + d_0 + d_0 r + r + (L-1)(r^2 + r)`, i.e.
:math:`2112 + 2r^2 + 67r` for :math:`d_0 = 64, L = 3` (spec §3.1.3).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fgl_flower.models.fedstar import GraphHead, StructureChannel, adjacencies, gin_conv
from fgl_flower.models.functional import dropout

ACTIVATIONS = ("pre", "post")


class DDCGNN(nn.Module):
    """``(x [N, F], edge_index, batch [N], stc_enc [N, 32])`` -> logits ``[B, C]``.

    Args:
        in_channels: Node-feature width :math:`n_f` of this client.
        out_channels: Classes :math:`C` of this client.
        width: :math:`r`, the output width of every GNN layer of both channels.
        d0: Width of the two initialisation layers (64 reproduces the paper's payloads;
            ``d0 = width`` is the fully narrow variant).
        head: Width of the readout projection and of the head.
        num_layers: :math:`L`.
        dropout: Rate of :math:`\\phi` and of the head.
        activation: ``"pre"`` (Eqs. 6-8, default) or ``"post"``.
    """

    shared_prefixes = ("struct.",)
    graph_inputs = ("stc_enc",)

    def __init__(self, in_channels: int, out_channels: int, width: int = 16, d0: int = 64,
                 head: int = 64, num_layers: int = 3, dropout: float = 0.5,
                 activation: str = "pre") -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r}: use one of {ACTIVATIONS}")
        self.dropout = dropout
        self.activation = activation
        self.struct = StructureChannel(d0, width, num_layers)  # first: same init on every client
        self.feat = nn.Module()
        self.feat.init = nn.Linear(in_channels, d0)
        self.feat.convs = nn.ModuleList(
            gin_conv(2 * d0 + 2 * i * width, width, width, project_first=True)
            for i in range(num_layers))
        self.head = GraphHead(2 * d0 + 2 * num_layers * width, head, out_channels, dropout)

    def _phi(self, h: Tensor) -> Tensor:
        return dropout(F.relu(h), self.dropout, self.training)

    def _dense(self, xs: list[Tensor], ss: list[Tensor]) -> Tensor:
        """The dual-dense input of the next layer (or of the readout)."""
        if self.activation == "pre":
            return torch.cat([self._phi(torch.cat(xs, -1)), self._phi(torch.cat(ss, -1))], -1)
        return torch.cat(xs + ss, -1)

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor, stc_enc: Tensor) -> Tensor:
        sum_adj, gcn_adj = adjacencies(edge_index, x.size(0))
        ss = self.struct(stc_enc, gcn_adj)
        xs = [self.feat.init(x)]
        for i, conv in enumerate(self.feat.convs):
            out = conv(self._dense(xs, ss[: i + 1]), sum_adj)
            xs.append(self._phi(out) if self.activation == "post" else out)
        return self.head(self._dense(xs, ss), batch)
