r"""FedDense's dual-densely connected GNN (Wang et al., 2024; spec ``feddense.md`` §3.1).

Two channels over the same graph. The structural channel is FedStar's (shared):
:math:`\mathbf s^{(0)} = W_s\mathbf s_v`, :math:`\mathbf s^{(\ell)} = \tanh(\mathrm{GCN}_\ell(\mathbf s^{(\ell-1)}))`.
The feature channel (local) is a GIN whose layer :math:`\ell` reads *every* earlier map of
*both* channels (the dual dense connections, Eqs. 6-8), with :math:`\mathbf x^{(0)} = W_x\mathbf x_v
\in \mathbb R^{d_0}`, so its input has width :math:`2d_0 + 2(\ell-1)r`; the readout projects all
maps of both channels (width :math:`2d_0 + 2Lr`) to 64 per node, sums over the graph and
classifies (FedStar's head). Where :math:`\phi = \mathrm{Dropout}\circ\mathrm{ReLU}` (the paper's
:math:`H_x, H_s`) sits is ``activation``:

``"post"`` (the default) is FedStar's placement, our reading of the paper's implementation
details ("consistent with other methods, apply ReLU followed by Dropout"): :math:`\phi` once
after each GIN layer, as FedStar's model and the GIN baseline do,

.. math::
    \mathbf x^{(\ell)} = \phi\big(\mathrm{GIN}_\ell([\mathbf x^{(0)},\dots,\mathbf x^{(\ell-1)}
        \,\|\, \mathbf s^{(0)},\dots,\mathbf s^{(\ell-1)}])\big),

and the maps are concatenated raw: :math:`\mathbf x^{(0)}`, :math:`\mathbf s^{(0)} = W_s\mathbf s_v`
and the structural maps :math:`\tanh(\mathrm{GCN}_\ell(\cdot))` reach the layers and the readout
as FedStar's layers and readout get them, without ReLU or Dropout (so no :math:`H_s` acts on
the structural maps; Eqs. 7-8 name :math:`H_x, H_s` on the concatenations, and the sentence
above says what they are, not unambiguously where they sit).

``"pre"`` is the spec's literal reading of Eqs. 6-8 (§3.1.2): :math:`\phi` on the dense
concatenations, :math:`\mathbf c^{(\ell)}_v = [\phi([\mathbf x^{(0..\ell-1)}_v]) \,\|\,
\phi([\mathbf s^{(0..\ell-1)}_v])]`, :math:`\mathbf x^{(\ell)} = \mathrm{GIN}_\ell(\mathbf c^{(\ell)})`
kept raw, and :math:`\phi` on the readout's input too (a fresh dropout mask at every use).
Both have the same parameters. Each GIN layer
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
        activation: ``"post"`` (default: ReLU + Dropout after each GIN layer) or ``"pre"``
            (on the dense concatenations, the spec's literal Eqs. 6-8).
    """

    shared_prefixes = ("struct.",)
    graph_inputs = ("stc_enc",)

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        width: int = 16,
        d0: int = 64,
        head: int = 64,
        num_layers: int = 3,
        dropout: float = 0.5,
        activation: str = "post",
    ) -> None:
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
            for i in range(num_layers)
        )
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
