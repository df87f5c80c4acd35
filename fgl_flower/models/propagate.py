r"""Message passing as sparse-dense products, for mini-batches of graphs.

PyG's layers fed an ``edge_index`` gather one message per edge (an ``[E, d]`` buffer) and
scatter them back; on dense graphs this dominates a CPU epoch (a COLLAB batch of 128 graphs
has 660 k edges). The same sums are one product with the adjacency stored as CSR, and the
backward one product with its transpose. :class:`Adjacency` holds both orientations, built
once per mini-batch and shared by every layer; :class:`GINConv` and :class:`GCNConv` are
PyG's layers (same parameters, names and initialisation) that propagate with it.

Built by a stable sort of the edges, so each row keeps its entries in ``edge_index`` order
and repeated edges count repeatedly, as the scatter does.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import torch
import torch_geometric.nn as pyg_nn
from torch import Tensor


def _csr(rows: Tensor, cols: Tensor, values: Tensor, num_nodes: int) -> Tensor:
    """CSR ``[N, N]`` with ``values`` at ``(rows, cols)``, rows stably sorted."""
    order = torch.argsort(rows, stable=True)
    crow = torch.zeros(num_nodes + 1, dtype=torch.long, device=rows.device)
    torch.cumsum(torch.bincount(rows, minlength=num_nodes), 0, out=crow[1:])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(crow, cols[order], values[order], (num_nodes, num_nodes),
                                       check_invariants=False)


class Adjacency(NamedTuple):
    r"""A propagation matrix :math:`\mathbf P` (``P[v, u]``: the weight of ``u``'s message to
    ``v``) as CSR ``[N, N]`` (``t``), with its transpose (``rev``) for the backward."""

    t: Tensor
    rev: Tensor

    @classmethod
    def from_edges(cls, src: Tensor, dst: Tensor, values: Tensor, num_nodes: int) -> Adjacency:
        return cls(_csr(dst, src, values, num_nodes), _csr(src, dst, values, num_nodes))

    @classmethod
    def sum(cls, edge_index: Tensor, num_nodes: int) -> Adjacency:
        r""":math:`\mathbf P = \mathbf A^\top`: :math:`(\mathbf P\mathbf x)_v = \sum_{(u, v)\in E}\mathbf x_u`,
        PyG's ``"add"`` aggregation over ``edge_index [2, E]`` (source, target)."""
        src, dst = edge_index
        return cls.from_edges(src, dst, torch.ones(src.numel(), device=src.device), num_nodes)

    @classmethod
    def gcn(cls, edge_index: Tensor, num_nodes: int) -> Adjacency:
        r"""GCN's :math:`\mathbf P = \hat{\mathbf D}^{-1/2}(\mathbf A + \mathbf I)^\top\hat{\mathbf D}^{-1/2}`,
        :math:`\hat D_{vv} = 1 + |\{(u, v) \in E, u \ne v\}|`: PyG's ``gcn_norm`` with unit
        weights (existing self-loops replaced by one of weight 1, in-degree normalization)."""
        src, dst = edge_index
        keep = src != dst
        loop = torch.arange(num_nodes, device=src.device)
        src, dst = torch.cat([src[keep], loop]), torch.cat([dst[keep], loop])
        deg = torch.bincount(dst, minlength=num_nodes).to(torch.float32)
        dinv = deg.pow_(-0.5)
        return cls.from_edges(src, dst, dinv[src] * dinv[dst], num_nodes)


class _Propagate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, t: Tensor, rev: Tensor) -> Tensor:
        ctx.rev = rev
        return t @ x

    @staticmethod
    def backward(ctx, grad: Tensor):
        return ctx.rev @ grad, None, None


def propagate(adj: Adjacency, x: Tensor) -> Tensor:
    r""":math:`\mathbf P\mathbf x` for ``x [N, d]``, differentiable in ``x``."""
    return _Propagate.apply(x, adj.t, adj.rev)


class GINConv(pyg_nn.GINConv):
    r"""PyG's ``GINConv``, :math:`\mathbf x'_v = \mathrm{MLP}\big((1 + \epsilon)\mathbf x_v +
    \sum_{u \in \mathcal N(v)} \mathbf x_u\big)`, on :meth:`Adjacency.sum`:
    ``forward(x [N, d], adj) -> [N, out]``."""

    def forward(self, x: Tensor, adj: Adjacency) -> Tensor:  # type: ignore[override]
        return self.nn(propagate(adj, x) + (1 + self.eps) * x)


class GCNConv(pyg_nn.GCNConv):
    r"""PyG's ``GCNConv``, :math:`\mathbf X' = \mathbf P\mathbf X\mathbf W^\top + \mathbf b`, on
    :meth:`Adjacency.gcn` (the normalization is the adjacency's, computed once per batch):
    ``forward(x [N, d], adj) -> [N, out]``."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(in_channels, out_channels, normalize=False)

    def forward(self, x: Tensor, adj: Adjacency) -> Tensor:  # type: ignore[override]
        return propagate(adj, self.lin(x)) + self.bias
