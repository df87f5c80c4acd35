r"""Message passing as sparse-dense products, for mini-batches of graphs.

PyG's layers fed an ``edge_index`` gather one message per edge (an ``[E, d]`` buffer) and
scatter them back; on dense graphs this dominates a CPU epoch (a COLLAB batch of 128 graphs
has 660 k edges). The same sums are one product with the adjacency stored as CSR, and the
backward one product with its transpose. :class:`Adjacency` holds both orientations, built
once per mini-batch and shared by every layer; :class:`GINConv` and :class:`GCNConv` are
PyG's layers (same parameters, names and initialisation) that propagate with it.

Built by a stable sort of the edges, so each row keeps its entries in ``edge_index`` order
and repeated edges count repeatedly, as the scatter does. On the CPU the sort is skipped
where the rows are in order already (a batch of coalesced graphs, by source), and GCN's
matrices are derived from the sum's when both are built (same tensors, bit for bit).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn
from torch import Tensor

from fgl_flower.models.sparse import quiet_csr


def _stable_order(rows: Tensor, num_nodes: int) -> Tensor | None:
    """The stable sort order of ``rows``, or ``None`` where they never decrease. The test
    runs on the CPU only: on a GPU it is a device synchronisation, the sort is cheap."""
    if rows.device.type == "cpu" and bool((rows[1:] >= rows[:-1]).all()):
        return None
    if num_nodes <= torch.iinfo(torch.int32).max:
        rows = rows.int()  # the same order, sorted in about half the time
    return torch.argsort(rows, stable=True)


def _csr_tensor(crow: Tensor, cols: Tensor, values: Tensor, num_nodes: int) -> Tensor:
    with quiet_csr():
        return torch.sparse_csr_tensor(
            crow, cols, values, (num_nodes, num_nodes), check_invariants=False
        )


def _csr(rows: Tensor, cols: Tensor, values: Tensor | None, num_nodes: int) -> Tensor:
    """CSR ``[N, N]`` with ``values`` (``None``: ones) at ``(rows, cols)``, rows stably sorted."""
    crow = torch.zeros(num_nodes + 1, dtype=torch.long, device=rows.device)
    torch.cumsum(torch.bincount(rows, minlength=num_nodes), 0, out=crow[1:])
    order = _stable_order(rows, num_nodes)
    if order is not None:  # index_select: advanced indexing is several times slower on the CPU
        cols = cols.index_select(0, order)
        values = None if values is None else values.index_select(0, order)
    if values is None:
        values = torch.ones(cols.numel(), device=cols.device)
    return _csr_tensor(crow, cols, values, num_nodes)


def _append_loops(csr: Tensor, dinv: Tensor) -> Tensor:
    r"""``csr`` (a 0/1 matrix without diagonal entries) with a diagonal entry appended to
    every row, valued :math:`\hat d^{-1/2}_v \hat d^{-1/2}_u` at ``(v, u)``: what
    :func:`_csr` builds from the same edges followed by one loop per node, without a sort."""
    crow, cols = csr.crow_indices(), csr.col_indices()
    n, device = crow.numel() - 1, crow.device
    nodes = torch.arange(n, device=device)
    rows = torch.repeat_interleave(nodes, crow.diff(), output_size=cols.numel())
    new_crow = crow + torch.arange(n + 1, device=device)
    # every entry moves past the loops of the rows above it; a row's loop ends it
    at = torch.cat([torch.arange(cols.numel(), device=device) + rows, new_crow[1:] - 1])
    new_cols = torch.empty_like(at).index_copy_(0, at, torch.cat([cols, nodes]))
    values = torch.cat([dinv.index_select(0, cols) * dinv.index_select(0, rows), dinv * dinv])
    return _csr_tensor(new_crow, new_cols, torch.empty_like(values).index_copy_(0, at, values), n)


class Adjacency(NamedTuple):
    r"""A propagation matrix :math:`\mathbf P` (``P[v, u]``: the weight of ``u``'s message to
    ``v``) as CSR ``[N, N]`` (``t``), with its transpose (``rev``) for the backward."""

    t: Tensor
    rev: Tensor

    @classmethod
    def from_edges(
        cls, src: Tensor, dst: Tensor, values: Tensor | None, num_nodes: int
    ) -> Adjacency:
        """From the edges ``(src[i], dst[i])`` weighted ``values`` (``None``: ones)."""
        return cls(_csr(dst, src, values, num_nodes), _csr(src, dst, values, num_nodes))

    @classmethod
    def sum(cls, edge_index: Tensor, num_nodes: int) -> Adjacency:
        r""":math:`\mathbf P = \mathbf A^\top`: :math:`(\mathbf P\mathbf x)_v = \sum_{(u, v)\in E}\mathbf x_u`,
        PyG's ``"add"`` aggregation over ``edge_index [2, E]`` (source, target)."""
        src, dst = edge_index
        return cls.from_edges(src, dst, None, num_nodes)

    @classmethod
    def gcn(cls, edge_index: Tensor, num_nodes: int, sum_adj: Adjacency | None = None) -> Adjacency:
        r"""GCN's :math:`\mathbf P = \hat{\mathbf D}^{-1/2}(\mathbf A + \mathbf I)^\top\hat{\mathbf D}^{-1/2}`,
        :math:`\hat D_{vv} = 1 + |\{(u, v) \in E, u \ne v\}|`: PyG's ``gcn_norm`` with unit
        weights (existing self-loops replaced by one of weight 1, in-degree normalization).

        ``sum_adj``: the same graph's :meth:`sum`, if built. On the CPU a graph without
        self-loops then gets its matrices from it with no sort (the same tensors, bit for bit).
        """
        src, dst = edge_index
        keep = src != dst
        if sum_adj is not None and src.device.type == "cpu" and bool(keep.all()):
            deg = (sum_adj.t.crow_indices().diff() + 1).to(torch.float32)
            dinv = deg.pow_(-0.5)
            return cls(_append_loops(sum_adj.t, dinv), _append_loops(sum_adj.rev, dinv))
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
    ``forward(x [N, d], adj) -> [N, out]``.

    ``project_first``: for an MLP that starts with a ``Linear`` :math:`(W, \mathbf b)`
    narrowing :math:`d` to :math:`d' < d`, propagate :math:`\mathbf z = \mathbf x W^\top`
    instead of :math:`\mathbf x`,

    .. math::
        W\Big((1 + \epsilon)\mathbf x_v + \sum_{u} \mathbf x_u\Big) + \mathbf b
        = (1 + \epsilon)\mathbf z_v + \sum_{u} \mathbf z_u + \mathbf b,

    the same layer with :math:`d'` instead of :math:`d` columns in both sparse products (the
    forward's and the backward's); the sums are taken in another order, so the numbers
    agree to rounding, not bit for bit. Dense FLOPs are unchanged.
    """

    def __init__(self, nn: torch.nn.Module, project_first: bool = False, **kwargs) -> None:
        super().__init__(nn, **kwargs)
        first = nn[0] if isinstance(nn, torch.nn.Sequential) and len(nn) else None
        if project_first and not isinstance(first, torch.nn.Linear):
            raise ValueError(
                "project_first needs an MLP (nn.Sequential) that starts with nn.Linear."
            )
        self.project_first = project_first

    def forward(self, x: Tensor, adj: Adjacency) -> Tensor:  # type: ignore[override]
        if not self.project_first:
            return self.nn(propagate(adj, x) + (1 + self.eps) * x)
        first = self.nn[0]
        z = F.linear(x, first.weight)
        h = propagate(adj, z) + (1 + self.eps) * z
        return self.nn[1:](h if first.bias is None else h + first.bias)


class GCNConv(pyg_nn.GCNConv):
    r"""PyG's ``GCNConv``, :math:`\mathbf X' = \mathbf P\mathbf X\mathbf W^\top + \mathbf b`, on
    :meth:`Adjacency.gcn` (the normalization is the adjacency's, computed once per batch):
    ``forward(x [N, d], adj) -> [N, out]``."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(in_channels, out_channels, normalize=False)

    def forward(self, x: Tensor, adj: Adjacency) -> Tensor:  # type: ignore[override]
        return propagate(adj, self.lin(x)) + self.bias
