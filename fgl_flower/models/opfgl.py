r"""O-pFGL's server side: the global pseudo-graph (spec §2.8).

The server turns pooled class statistics :math:`(\boldsymbol\mu^c, \boldsymbol\sigma^c,
\lambda_c)` of propagated features into a tiny graph :math:`(X', W, Y')`: learnable node
features and an MLP link predictor :math:`g_\theta`, optimised so that the class
statistics of :math:`[X' \,\|\, \hat W X' \,\|\dots]` match the global ones (graph
condensation as in SimGC).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fgl_flower.device import cpu_seeded
from fgl_flower.methods.opfgl import CondenseOptions


class LinkPredictor(nn.Module):
    r"""PGE: edge logits :math:`E_{ij} = g_\theta(\mathbf x'_i \,\|\, \mathbf x'_j)` for all
    ordered pairs, an MLP :math:`2f \to H \to H \to 1` with BatchNorm + ReLU after each
    hidden layer.

    The first layer acts on a concatenation, so it is computed as
    :math:`W_a\mathbf x_i + W_b\mathbf x_j` (two ``[n, H]`` products and a broadcast sum)
    instead of on the ``[n^2, 2f]`` pair matrix: the same numbers at a fraction of the cost.
    All ``n^2`` pairs form one batch, so BatchNorm uses their statistics (as the code does).
    """

    def __init__(self, in_features: int, hidden: int = 128) -> None:
        super().__init__()
        self.in_features = in_features
        self.lin1 = nn.Linear(2 * in_features, hidden)
        self.bn1 = nn.BatchNorm1d(hidden)
        self.lin2 = nn.Linear(hidden, hidden)
        self.bn2 = nn.BatchNorm1d(hidden)
        self.lin3 = nn.Linear(hidden, 1)

    def forward(self, x: Tensor) -> Tensor:
        """Edge logits ``[n, n]`` (row ``i``, column ``j``: the pair ``(x_i, x_j)``)."""
        n, f = x.shape
        w = self.lin1.weight
        h = (x @ w[:, :f].t())[:, None, :] + (x @ w[:, f:].t())[None, :, :] + self.lin1.bias
        h = F.relu(self.bn1(h.reshape(n * n, -1)))
        h = F.relu(self.bn2(self.lin2(h)))
        return self.lin3(h).view(n, n)

    def adjacency(self, x: Tensor, threshold: float, binary: bool = False) -> Tensor:
        r"""Weighted adjacency :math:`W_{ij} = P_{ij}\,\mathbb 1[P_{ij}\ge\delta]` with
        :math:`P = \sigma((E + E^\top)/2)` and a zero diagonal (symmetric, ``[n, n]``).

        ``binary`` gives the paper's Eq. 10, :math:`\mathbb 1[P_{ij}\ge\delta]`, with a
        straight-through gradient (the indicator has none).
        """
        e = self.forward(x)
        p = torch.sigmoid((e + e.t()) / 2)
        p = p * (1.0 - torch.eye(p.size(0), dtype=p.dtype, device=p.device))
        keep = (p >= threshold).to(p.dtype)
        if binary:
            return keep + p - p.detach()
        return p * keep


def normalized_dense(w: Tensor) -> Tensor:
    r""":math:`\tilde D^{-1/2}(W + I)\tilde D^{-1/2}` for a dense ``w`` with zero diagonal."""
    a = w + torch.eye(w.size(0), dtype=w.dtype, device=w.device)
    d = a.sum(1).pow(-0.5)
    return d[:, None] * a * d[None, :]


def propagate_dense(x: Tensor, w: Tensor, hops: int) -> Tensor:
    r""":math:`[X \,\|\, \hat W X \,\|\dots\|\, \hat W^h X]`, ``[n, (h+1) f]``."""
    a = normalized_dense(w)
    outs = [x]
    for _ in range(hops):
        outs.append(a @ outs[-1])
    return torch.cat(outs, dim=1)


@dataclass(frozen=True)
class ClassStatistics:
    """Pooled per-class statistics of propagated features (server side, float64).

    ``count`` is :math:`N^c`, ``orig_count`` :math:`O^c` (labelled nodes only), ``mean`` /
    ``std`` are ``[C, D]``, ``weight`` is :math:`\\lambda_c = N^c / \\sum N`.
    """

    count: Tensor
    orig_count: Tensor
    mean: Tensor
    std: Tensor
    weight: Tensor

    def to(self, device: torch.device) -> ClassStatistics:
        return ClassStatistics(
            *(t.to(device) for t in (self.count, self.orig_count, self.mean, self.std, self.weight))
        )


def synthetic_class_sizes(stats: ClassStatistics, per_class: int, rate: float) -> list[int]:
    r""":math:`n'_c`: ``per_class`` for every class when ``rate == 0`` (Cora, CiteSeer,
    PubMed), otherwise :math:`\lceil \text{rate}\cdot O^c\rceil` (0 for a class nobody has)."""
    if rate <= 0:
        return [per_class] * stats.count.numel()
    return [math.ceil(rate * float(o) - 1e-9) for o in stats.orig_count]


def aligned_share(stats: ClassStatistics, labels: Tensor) -> float:
    """The share of pseudo nodes (``labels``, ``[n']``) whose class has pooled statistics
    (:math:`N^c > 0`): with ``rate == 0`` every class gets nodes, and those of a class no
    client sent statistics for are never aligned (:func:`alignment_loss` skips them), so they
    stay the initial noise."""
    if labels.numel() == 0:
        return 0.0
    return float((stats.count.to(labels.device)[labels] > 0).double().mean())


def alignment_loss(
    x_prop: Tensor,
    labels: Tensor,
    sizes: Sequence[int],
    stats: ClassStatistics,
    variance: bool = False,
) -> Tensor:
    r"""Eq. 11 in the code's form:

    .. math::
        L_{align}=\sum_{c:\,N^c>0,\,n'_c>0}\lambda_c\Big[\mathrm{MSE}(\boldsymbol\mu'^c,
        \boldsymbol\mu^c)+\mathbb 1[n'_c\ge2]\,\mathrm{MSE}(\boldsymbol\sigma'^c,
        \boldsymbol\sigma^c)\Big]

    (unbiased std; ``variance`` matches :math:`\sigma^2` instead, the paper's text).
    """
    loss = x_prop.new_zeros(())
    for c, n_c in enumerate(sizes):
        if n_c == 0 or stats.count[c] <= 0:
            continue
        rows = x_prop[labels == c]
        mean = stats.mean[c].to(x_prop.dtype)
        term = F.mse_loss(rows.mean(0), mean)
        if n_c >= 2:
            spread = rows.var(0) if variance else rows.std(0)
            target = stats.std[c].pow(2) if variance else stats.std[c]
            term = term + F.mse_loss(spread, target.to(x_prop.dtype))
        loss = loss + float(stats.weight[c]) * term
    return loss


def smoothness_loss(x: Tensor, w: Tensor, per_dimension: bool = True) -> Tensor:
    r"""Eq. 12 in the code's (SimGC's) form, minimised:

    .. math::
        L_{smt}=\frac{\sum_{ij}W_{ij}\,\frac1f\sum_d\exp(-\frac12(x'_{id}-x'_{jd})^2)}
        {\sum_{ij}W_{ij}}

    ``per_dimension=False`` uses :math:`\exp(-\|\mathbf x'_i-\mathbf x'_j\|^2/2)` (paper).
    """
    diff2 = (x[:, None, :] - x[None, :, :]).pow(2)
    kernel = torch.exp(-0.5 * diff2).mean(-1) if per_dimension else torch.exp(-0.5 * diff2.sum(-1))
    total = w.sum()
    return (w * kernel).sum() / total if total > 0 else total


@dataclass
class PseudoGraph:
    """The download of O-pFGL: ``x [n', f]``, ``edge_index [2, E']``, ``edge_weight [E']``,
    ``y [n']``, plus the loss trace of the optimisation (server-side diagnostics)."""

    x: Tensor
    edge_index: Tensor
    edge_weight: Tensor
    y: Tensor
    losses: list[float]


def condense(
    stats: ClassStatistics,
    sizes: Sequence[int],
    num_features: int,
    opts: CondenseOptions,
    generator_seed: int,
    progress: Callable[[int, float], None] | None = None,
    progress_every: int = 250,
    device: torch.device | None = None,
) -> PseudoGraph:
    r"""Optimise :math:`X'` and :math:`g_\theta` for ``opts.steps + 1`` iterations.

    Loss :math:`\alpha_{feat}L_{align}+\alpha_{smt}L_{smt}`; in every block of 50 steps
    the first 10 update :math:`\theta` and the other 40 update :math:`X'` (two Adams). The
    final graph keeps the entries of :math:`W` (from the last :math:`X'`, BatchNorm in
    training mode as in the code) that are nonzero, in both directions.
    ``progress(step, loss)``, if given, is called every ``progress_every`` steps. The
    optimisation runs on ``device`` (default: the CPU), from initial values drawn on the
    CPU; the returned graph is on the CPU.
    """
    device = torch.device("cpu") if device is None else device
    y = torch.cat([torch.full((n,), c, dtype=torch.long) for c, n in enumerate(sizes)])
    n = y.numel()
    if n == 0:
        raise ValueError("The pseudo-graph has no nodes: no client uploaded any class.")
    with cpu_seeded(generator_seed):
        x = nn.Parameter(torch.randn(n, num_features).to(device))
        pge = LinkPredictor(num_features, opts.hidden).to(device)
    y = y.to(device)
    stats = stats.to(device)
    opt_x = torch.optim.Adam([x], lr=opts.lr_feat)
    opt_pge = torch.optim.Adam(pge.parameters(), lr=opts.lr_adj)
    pge.train()
    losses = []
    for t in range(opts.steps + 1):
        opt_x.zero_grad()
        opt_pge.zero_grad()
        w = pge.adjacency(x, opts.threshold, binary=opts.paper)
        x_prop = propagate_dense(x, w, opts.hops)
        loss = opts.feat_alpha * alignment_loss(x_prop, y, sizes, stats, variance=opts.paper)
        if opts.smoothness_alpha:
            loss = loss + opts.smoothness_alpha * smoothness_loss(
                x, w, per_dimension=not opts.paper
            )
        loss.backward()
        (opt_pge if t % 50 < 10 else opt_x).step()
        losses.append(loss.item())
        if progress is not None and t % progress_every == 0:
            progress(t, losses[-1])
    with torch.no_grad():
        w = pge.adjacency(x, opts.threshold, binary=opts.paper)
    edge_index = w.nonzero().t().contiguous()
    weight = w[edge_index[0], edge_index[1]]
    return PseudoGraph(
        x.detach().cpu().clone(), edge_index.cpu(), weight.cpu().clone(), y.cpu(), losses
    )
