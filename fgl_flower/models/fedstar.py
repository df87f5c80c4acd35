r"""FedStar's dual-channel GIN (Tan et al., AAAI 2023; FedDense spec §3.3).

A feature channel (GIN over ``[x || s]``) and a structure channel (GCN over the structural
encoding :math:`\mathbf s_v` of :mod:`fgl_flower.models.structure`), per layer

.. math::
    \mathbf x^{(\ell)} = \mathrm{Dropout}\big(\mathrm{ReLU}\big(
        \mathrm{GIN}_\ell([\mathbf x^{(\ell-1)} \,\|\, \mathbf s^{(\ell-1)}])\big)\big),
    \qquad
    \mathbf s^{(\ell)} = \tanh\big(\mathrm{GCN}_\ell(\mathbf s^{(\ell-1)})\big)

from :math:`\mathbf x^{(0)} = W_x\mathbf x_v`, :math:`\mathbf s^{(0)} = W_s\mathbf s_v`;
then :math:`\mathbf z_v = W_{hp}[\mathbf x^{(L)} \| \mathbf s^{(L)}]`, a sum readout and the
head ``Linear(h, h)`` + ReLU + Dropout + ``Linear(h, C)``.

Parameter names carry the channel: ``struct.*`` (the structural encoder, the only part
FedStar shares), ``feat.*`` and ``head.*`` (local). FedStar's code selects the shared keys
with the substring test ``'_s' in key``; here :attr:`FedStarGIN.shared_prefixes` names them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import global_add_pool

from fgl_flower.models.functional import dropout
from fgl_flower.models.propagate import Adjacency, GCNConv, GINConv
from fgl_flower.models.sparse import GraphCache

#: Width of the structural encoding (RWSE 16 + DSE 16, spec §2.3).
STRUCTURE_DIM = 32


def gin_conv(
    in_channels: int, hidden: int, out_channels: int, project_first: bool = False
) -> GINConv:
    """``GINConv(MLP: Linear(in, hidden), ReLU, Linear(hidden, out))`` with :math:`\\epsilon = 0`
    (``project_first``: see :class:`~fgl_flower.models.propagate.GINConv`)."""
    return GINConv(
        nn.Sequential(nn.Linear(in_channels, hidden), nn.ReLU(), nn.Linear(hidden, out_channels)),
        project_first=project_first,
    )


class GraphHead(nn.Module):
    r"""Per-node projection, sum readout and classifier (FedStar's ``Whp``/``post``/``readout``).

    .. math::
        \hat y_G = W_{cls}\,\mathrm{Dropout}\big(\mathrm{ReLU}(W_{post}
            \textstyle\sum_{v\in G} (W_{hp}\mathbf h_v + b_{hp}) + b_{post})\big) + b_{cls}

    ``h [N, in_channels]`` and ``batch [N]`` -> logits ``[B, C]``.
    """

    def __init__(self, in_channels: int, hidden: int, out_channels: int, dropout: float) -> None:
        super().__init__()
        self.dropout = dropout
        self.proj = nn.Linear(in_channels, hidden)
        self.post = nn.Linear(hidden, hidden)
        self.cls = nn.Linear(hidden, out_channels)

    def forward(self, h: Tensor, batch: Tensor) -> Tensor:
        g = global_add_pool(self.proj(h), batch)
        g = dropout(F.relu(self.post(g)), self.dropout, self.training)
        return self.cls(g)


def adjacencies(edge_index: Tensor, num_nodes: int) -> tuple[Adjacency, Adjacency]:
    """A graph's (or mini-batch's) two propagation matrices: the plain sum of the GIN
    channel and the GCN-normalized one of the structure channel, built once per forward
    (:mod:`fgl_flower.models.propagate`)."""
    sum_adj = Adjacency.sum(edge_index, num_nodes)
    return sum_adj, Adjacency.gcn(edge_index, num_nodes, sum_adj)


class StructureChannel(nn.Module):
    r"""The shared structural encoder: ``init: Linear(32 -> d0)`` then ``num_layers``
    ``GCNConv`` with tanh, :math:`\mathbf s^{(\ell)} = \tanh(\mathrm{GCN}_\ell(\mathbf s^{(\ell-1)}))`.

    :meth:`forward` takes the GCN-normalized adjacency (:func:`adjacencies`) and returns the
    ``num_layers + 1`` maps :math:`\mathbf s^{(0)},\dots,\mathbf s^{(L)}` (``[N, d0]``
    then ``[N, width]`` each).
    """

    def __init__(self, d0: int, width: int, num_layers: int) -> None:
        super().__init__()
        self.init = nn.Linear(STRUCTURE_DIM, d0)
        self.convs = nn.ModuleList(
            GCNConv(d0 if i == 0 else width, width) for i in range(num_layers)
        )

    def forward(self, stc_enc: Tensor, gcn_adj: Adjacency) -> list[Tensor]:
        maps = [self.init(stc_enc)]
        for conv in self.convs:
            maps.append(torch.tanh(conv(maps[-1], gcn_adj)))
        return maps


class FedStarGIN(nn.Module):
    """FedStar's ``GIN_dc``: ``(x [N, F], edge_index, batch [N], stc_enc [N, 32])`` -> logits ``[B, C]``.

    The structure channel is built first, so clients seeded alike start from the same
    shared weights whatever their feature and class counts (FedStar's server broadcasts
    its own initial structure encoder for the same effect).
    """

    shared_prefixes = ("struct.",)
    #: Per-node inputs besides ``x``/``edge_index``/``batch`` (attached by the learner).
    graph_inputs = ("stc_enc",)

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
        self.struct = StructureChannel(h, h, num_layers)
        self.feat = nn.Module()
        self.feat.init = nn.Linear(in_channels, h)
        self.feat.convs = nn.ModuleList(self.feature_conv(2 * h, h) for _ in range(num_layers))
        self.head = GraphHead(2 * h, h, out_channels, dropout)

    @staticmethod
    def feature_conv(in_channels: int, out_channels: int) -> nn.Module:
        """One layer of the feature channel: FedStar's GIN."""
        return gin_conv(in_channels, out_channels, out_channels)

    def node_states(self, x: Tensor, adj: tuple, stc_enc: Tensor) -> Tensor:
        """``[x^(L) || s^(L)]`` ``[N, 2h]``: both channels' last node representations, on
        the graph's :func:`adjacencies` (the feature channel's, the structure channel's)."""
        sum_adj, gcn_adj = adj
        s = self.struct(stc_enc, gcn_adj)
        h = self.feat.init(x)
        for conv, s_prev in zip(self.feat.convs, s):  # layer l reads s^(l-1)
            h = dropout(
                F.relu(conv(torch.cat([h, s_prev], -1), sum_adj)), self.dropout, self.training
            )
        return torch.cat([h, s[-1]], -1)

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor, stc_enc: Tensor) -> Tensor:
        """``x [N, F]``, ``edge_index [2, E]``, ``batch [N]``, ``stc_enc [N, 32]`` -> ``[B, C]``."""
        return self.head(self.node_states(x, adjacencies(edge_index, x.size(0)), stc_enc), batch)


class ChannelProbes:
    """The probes of FedStar's and FedDense's models (``struct.*``, ``feat.*``, ``head.*``),
    measured by forward hooks on every eval-mode forward while the context is open (so an
    evaluation measures them on its own forwards; train-mode forwards are skipped):

    * ``struct.norm``: mean over nodes of the L2 norm of the last structural map
      :math:`\\mathbf s^{(L)}_v` (the last output of ``struct``);
    * ``feat.norm``: the same for the feature channel's last map, the output of the last GIN
      layer as it computes it (before the ReLU that FedStar and FedDense's ``post`` apply);
    * ``head.dead``: share of the head's hidden units :math:`W_{post}\\mathbf h_G + b` that are
      :math:`\\le 0` for every graph (node, with :class:`NodeHead`) seen: 1 means constant logits.

    Works on :class:`FedStarGIN`, :class:`FedStarNodeGIN` and FedDense's ``DDCGNN``.
    :meth:`values` gives the keys that saw a forward.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.sums: dict[str, Tensor] = {}
        self.counts: dict[str, int] = {}
        self.alive: Tensor | None = None
        self._handles: list = []

    def _norm(self, key: str, h: Tensor) -> None:
        s = h.detach().float().norm(dim=-1).sum()
        self.sums[key] = self.sums[key] + s if key in self.sums else s
        self.counts[key] = self.counts.get(key, 0) + h.size(0)

    def _hook(self, fn):
        def hook(module: nn.Module, args, output) -> None:
            if not module.training:
                fn(output)

        return hook

    def _head(self, z: Tensor) -> None:
        alive = (z.detach() > 0).any(0)
        self.alive = alive if self.alive is None else self.alive | alive

    def __enter__(self) -> ChannelProbes:
        m = self.model
        hooks = (
            (lambda: m.struct, lambda maps: self._norm("struct.norm", maps[-1])),
            (lambda: m.feat.convs[-1], lambda h: self._norm("feat.norm", h)),
            (lambda: m.head.post, self._head),
        )
        try:
            for module, fn in hooks:
                self._handles.append(module().register_forward_hook(self._hook(fn)))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def values(self) -> dict[str, float]:
        out = {k: float(self.sums[k]) / max(self.counts[k], 1) for k in self.sums}
        if self.alive is not None:
            out["head.dead"] = dead_share(self.alive)
        return out


def dead_share(alive: Tensor) -> float:
    """Share of units never positive: ``alive [H]`` is whether each unit was ``> 0`` for
    some input."""
    return 1.0 - float(alive.float().mean()) if alive.numel() else float("nan")


class NodeHead(GraphHead):
    r"""FedStar's head without the readout, per node:
    :math:`\hat y_v = W_{cls}\,\mathrm{Dropout}(\mathrm{ReLU}(W_{post}(W_{hp}\mathbf h_v + b_{hp})
    + b_{post})) + b_{cls}`."""

    def forward(self, h: Tensor, batch: Tensor | None = None) -> Tensor:
        return self.cls(dropout(F.relu(self.post(self.proj(h))), self.dropout, self.training))


class FedStarNodeGIN(FedStarGIN):
    """FedStar for node classification on one client graph (FedHERO's baseline, its spec
    §7): the same channels and parameter names, a per-node head, and the structural
    encoding of the client's graph computed on first use and memoised per graph.
    ``forward(x [N, F] dense or sparse, edge_index) -> [N, C]``."""

    graph_inputs = ()

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int = 3,
        dropout: float = 0.5,
    ) -> None:
        super().__init__(in_channels, hidden_channels, out_channels, num_layers, dropout)
        self.head = NodeHead(2 * hidden_channels, hidden_channels, out_channels, dropout)
        self._cache = GraphCache()

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        from fgl_flower.models.structure import structure_encoding

        n = x.size(0)
        xd = self._cache.get("dense-x", (x,), lambda: x.to_dense() if x.is_sparse else x)
        stc = self._cache.get(
            f"stc_enc/{n}",
            (edge_index,),
            lambda: structure_encoding(edge_index.cpu(), n).to(x.device),
        )
        # keyed by class too: the cache is process-wide, and the variants' feature channels differ
        adj = self._cache.get(
            f"adjacencies/{type(self).__name__}/{n}",
            (edge_index,),
            lambda: self.adjacencies(edge_index, n),
        )
        return self.head(self.node_states(xd, adj, stc))

    @staticmethod
    def adjacencies(edge_index: Tensor, num_nodes: int) -> tuple:
        """The feature channel's and the structure channel's propagation (:func:`adjacencies`)."""
        return adjacencies(edge_index, num_nodes)


class FedStarNodeACM(FedStarNodeGIN):
    r""":class:`FedStarNodeGIN` whose feature channel is ACM-GCN (``fedstar.feature-conv =
    "acm"``), for a table that runs every method on that backbone (S2FGL's Table 1):
    :math:`\mathbf x^{(\ell)} = \mathrm{Dropout}(\mathrm{ReLU}(\mathrm{ACM}_\ell(
    [\mathbf x^{(\ell-1)} \,\|\, \mathbf s^{(\ell-1)}])))` with ACM-GCN's layer
    (:class:`~fgl_flower.models.acmgcn.ACMConv`: low-pass, high-pass and identity channels
    mixed per node) on its row-normalised low-pass filter. The structure channel, the head,
    the parameter names and what is shared (``struct.*``) are FedStar's."""

    @staticmethod
    def feature_conv(in_channels: int, out_channels: int) -> nn.Module:
        from fgl_flower.models.acmgcn import ACMConv

        return ACMConv(in_channels, out_channels)

    @staticmethod
    def adjacencies(edge_index: Tensor, num_nodes: int) -> tuple:
        from fgl_flower.models.acmgcn import acm_low_pass

        return acm_low_pass(edge_index, num_nodes), Adjacency.gcn(edge_index, num_nodes)
