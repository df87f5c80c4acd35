r"""Structural encodings of a graph's nodes (FedStar; FedDense's structural channel).

Two node-level encodings, computed once per graph before training (FedDense spec §2.3):

* the random-walk encoding (RWSE) of :func:`random_walk_encoding`, :math:`K` return
  probabilities of a random walk;
* the degree encoding (DSE) of :func:`degree_encoding`, a one-hot of the clipped degree;

and their concatenation :math:`\mathbf s_v = [\mathrm{RWSE}(v) \,\|\, \mathrm{DSE}(v)]`
(:func:`structure_encoding`).
"""

from __future__ import annotations

import torch
from torch import Tensor


def _degree(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Degrees counted on ``edge_index[0]`` (both directions are stored for undirected graphs)."""
    return torch.bincount(edge_index[0], minlength=num_nodes)


def random_walk_encoding(edge_index: Tensor, num_nodes: int, steps: int = 16) -> Tensor:
    r"""``[N, steps]``: the diagonals of the first ``steps`` powers of :math:`M = AD^{-1}`.

    .. math::
        \mathrm{RWSE}(v) = \big[(M)_{vv}, (M^2)_{vv}, \dots, (M^K)_{vv}\big],
        \qquad M = A D^{-1},\ D = \mathrm{diag}(d),\ 1/0 := 0

    with :math:`A_{uv} = 1` for every edge ``(u, v)`` of ``edge_index [2, E]`` and
    :math:`d` the degrees on ``edge_index[0]``. :math:`AD^{-1}` and :math:`D^{-1}A` are
    similar, so entry :math:`k` is the probability that a :math:`k`-step random walk from
    :math:`v` returns to :math:`v`; isolated nodes get 0. Each power is one sparse-dense
    product (:math:`O(E N)` time, :math:`O(N^2)` memory, in float64).
    """
    deg = _degree(edge_index, num_nodes).to(torch.float64)
    inv = torch.where(deg > 0, 1.0 / deg.clamp(min=1), torch.zeros_like(deg))
    m = torch.sparse_coo_tensor(
        edge_index, inv[edge_index[1]], (num_nodes, num_nodes), check_invariants=False
    ).coalesce()
    power = torch.eye(num_nodes, dtype=torch.float64)
    out = torch.empty(num_nodes, steps, dtype=torch.float64)
    for k in range(steps):
        power = torch.sparse.mm(m, power)
        out[:, k] = power.diagonal()
    return out.to(torch.float32)


def degree_encoding(edge_index: Tensor, num_nodes: int, dim: int = 16) -> Tensor:
    r"""``[N, dim]``: :math:`\mathrm{onehot}(\mathrm{clip}(d_v, 1, \mathrm{dim}) - 1)`, so
    degrees 0 and 1 share the first column and degrees :math:`\ge` ``dim`` the last."""
    deg = _degree(edge_index, num_nodes).clamp(1, dim) - 1
    return torch.nn.functional.one_hot(deg, dim).to(torch.float32)


def structure_encoding(
    edge_index: Tensor, num_nodes: int, rw_dim: int = 16, dg_dim: int = 16
) -> Tensor:
    """``[N, rw_dim + dg_dim]``: :func:`random_walk_encoding` then :func:`degree_encoding`."""
    return torch.cat(
        [
            random_walk_encoding(edge_index, num_nodes, rw_dim),
            degree_encoding(edge_index, num_nodes, dg_dim),
        ],
        dim=1,
    )
