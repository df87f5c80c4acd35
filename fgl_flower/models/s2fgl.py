r"""The maths of S2FGL (Tan et al., ICML 2025; spec ``s2fgl.md`` §3): structure-aware
label centrality (SALC), class prototypes and the knowledge repository of NLIR, the
federated knowledge distillation loss (FKD) and the frequency-aware alignment (FGMA).

Everything here is a pure function of tensors; :mod:`fgl_flower.clients.s2fgl` and
:mod:`fgl_flower.strategies.s2fgl` wire it into Flower messages.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse.linalg as spla
import torch
import torch.nn.functional as F
from torch import Tensor

from fgl_flower.methods.s2fgl import EIG_MODES
from fgl_flower.models.knn import cosine_topk


# --- SALC (spec §3.1) ---------------------------------------------------------------------
def personalized_pagerank(edge_index: Tensor, num_nodes: int, alpha: float = 0.85) -> Tensor:
    r"""The dense PageRank matrix of the official code, without the :math:`\alpha` factor.

    .. math::
        \mathbf P = \big(\mathbf I - (1-\alpha)\,\mathbf D^{-1}\mathbf A\big)^{-1},\qquad
        \mathbf D = \mathrm{diag}(\mathbf A\mathbf 1) + 10^{-6},

    with :math:`\mathbf A` the client's adjacency as stored (no self-loops added). The
    paper's :math:`\tilde{\mathbf P} = \alpha\mathbf P`. Returns ``[N, N]`` float64.
    """
    a = torch.zeros(num_nodes, num_nodes, dtype=torch.float64, device=edge_index.device)
    a[edge_index[0], edge_index[1]] = 1.0
    a.fill_diagonal_(0.0)
    w = a / (a.sum(1, keepdim=True) + 1e-6)
    eye = torch.eye(num_nodes, dtype=torch.float64, device=edge_index.device)
    return torch.linalg.inv(eye - (1.0 - alpha) * w)


def salc(ppr: Tensor, train_mask: Tensor, alpha: float = 0.85) -> Tensor:
    r"""Structure-aware label centrality, code version (spec §3.1).

    .. math::
        \Lambda_u = \max_v P_{uv}\,t_v \;+\; \alpha\sum_{v:\,t_v = 1} P_{uv}

    with :math:`t` the training mask. Shapes: ``ppr [N, N]``, ``train_mask [N]`` -> ``[N]``.
    """
    t = train_mask.to(ppr.dtype)
    return (ppr * t).amax(dim=1) + alpha * (ppr @ t)


def top_training_nodes(score: Tensor, train_mask: Tensor, divisor: int) -> Tensor:
    r"""The :math:`\lfloor N/\text{divisor}\rfloor` nodes of highest ``score`` (ties: lower
    index first), restricted to training nodes, as sorted indices.

    With SALC scores the restriction removes nothing (training nodes score at least
    :math:`1+\alpha`, the others at most :math:`1-\alpha`; spec §3.1); it guarantees that
    only training labels are ever read.
    """
    k = score.numel() // divisor
    order = torch.from_numpy(np.argsort(-score.cpu().numpy(), kind="stable")[:k])
    order = order[train_mask.cpu()[order]].sort().values
    return order.to(score.device)


# --- NLIR: prototypes and repository (spec §3.2) ------------------------------------------
def class_prototypes(
    h: Tensor, y: Tensor, nodes: Tensor, num_classes: int
) -> tuple[Tensor, Tensor]:
    r"""Class means :math:`\mathbf H_c` of ``h`` over ``nodes`` and the counts :math:`n_c`.

    Shapes: ``h [N, d]``, ``y [N]``, ``nodes [K]`` -> ``([C, d], [C])``; a class without
    nodes has the zero prototype.
    """
    labels = y[nodes]
    sums = torch.zeros(num_classes, h.size(1), dtype=h.dtype, device=h.device).index_add_(
        0, labels, h[nodes]
    )
    counts = torch.bincount(labels, minlength=num_classes).to(h.dtype)
    return sums / counts.clamp(min=1).unsqueeze(1), counts


def anchor_subsets(
    num_clients: int, num_anchors: int, fraction: float, rng: np.random.Generator
) -> list[np.ndarray]:
    r"""For each anchor, :math:`\lfloor \text{fraction}\cdot M\rfloor` (at least 1) distinct
    clients drawn uniformly; one subset per anchor, shared by all classes (the code's
    choice, spec §9 item 6)."""
    size = max(1, int(fraction * num_clients))
    return [np.sort(rng.choice(num_clients, size=size, replace=False)) for _ in range(num_anchors)]


def build_repository(prototypes: Tensor, counts: Tensor, subsets: Sequence[np.ndarray]) -> Tensor:
    r"""The global knowledge repository :math:`\mathcal H` (spec §3.2).

    .. math::
        \mathbf H^{g,k}_c = \frac{\sum_{i\in\mathcal N^k} n^i_c\,\mathbf H^i_c}
                                 {\sum_{i\in\mathcal N^k} n^i_c}
        \quad(\mathbf 0 \text{ if no client of } \mathcal N^k \text{ has class } c)

    Shapes: ``prototypes [M, C, d]``, ``counts [M, C]``, ``len(subsets) = K`` ->
    ``[K * C, d]``, class-major (rows ``c*K .. c*K + K-1`` are class ``c``'s anchors).
    """
    anchors = []
    for subset in subsets:
        idx = torch.as_tensor(subset, dtype=torch.long)
        n = counts[idx].to(prototypes.dtype)  # [S, C]
        total = (n.unsqueeze(2) * prototypes[idx]).sum(0)  # [C, d]
        anchors.append(total / n.sum(0).clamp(min=1e-12).unsqueeze(1))
    return torch.stack(anchors, dim=1).reshape(-1, prototypes.size(2))


def fkd_loss(
    h_local: Tensor, h_global: Tensor, repository: Tensor, temperature: float = 1.0
) -> Tensor:
    r"""Federated knowledge distillation over anchor similarities (spec §3.2).

    .. math::
        \mathcal L_{\text{FKD}} = \frac{T^2}{N}\sum_u \mathrm{KL}\big(
        \mathrm{softmax}(\varphi(\mathbf h^g_u)/T)\,\big\Vert\,
        \mathrm{softmax}(\varphi(\mathbf h^i_u)/T)\big),\qquad
        \varphi(\mathbf h) = [\cos(\mathbf h, \mathcal H_j)]_j

    Teacher: the frozen global model's ``h_global [N, d]``; student: ``h_local [N, d]``;
    ``repository [R, d]`` (a zero anchor has cosine 0).
    """
    anchors = F.normalize(repository, dim=1)
    student = F.normalize(h_local, dim=1) @ anchors.T / temperature
    teacher = F.normalize(h_global, dim=1) @ anchors.T / temperature
    return (
        F.kl_div(F.log_softmax(student, 1), F.softmax(teacher, 1), reduction="batchmean")
        * temperature**2
    )


# --- FGMA (spec §3.3) ---------------------------------------------------------------------
def knn_cosine_graph(x: Tensor, k: int = 3) -> Tensor:
    r"""Row-wise kNN cosine graph :math:`S'`: row :math:`u` keeps its ``k + 1`` largest
    cosines (itself included) and zeros elsewhere; not symmetric. ``x [n, d]`` -> ``[n, n]``."""
    n = x.size(0)
    top = cosine_topk(x, min(k + 1, n))
    return torch.zeros(n, n, dtype=top.values.dtype, device=x.device).scatter_(
        1, top.indices, top.values
    )


def laplacian(s: Tensor) -> Tensor:
    r""":math:`\mathbf L = \mathrm{diag}(\mathbf S\mathbf 1) - \mathbf S` (rows sum to 0)."""
    return torch.diag(s.sum(1)) - s


def spectral_basis(
    x: Tensor,
    k_sim: int = 3,
    k_eig: int = 10,
    mode: str = "dense-sym",
    seed: int = 0,
    cap: str = "half",
) -> tuple[Tensor, Tensor]:
    r"""Low- and high-frequency eigenvectors of the kNN-graph Laplacian of ``x [n, d]``.

    ``dense-sym`` (default): :math:`\mathbf L_{\text{sym}}` of
    :math:`(\mathbf S' + \mathbf S'^\top)/2`, exact ``eigh``; ``eigsh-asym``: ARPACK
    ``eigsh`` (``SM``/``LM``, tol 1e-3) on the non-symmetric :math:`\mathbf D' - \mathbf S'`
    as in the official code, with a start vector fixed by ``seed``. The number of
    eigenvectors is :math:`\min(k_{\text{eig}}, \lfloor n/2\rfloor)` (``cap="half"``: the
    low and high sets are disjoint) or :math:`\min(k_{\text{eig}}, n - 1)` (``cap="code"``:
    what ARPACK lets the official code take; they overlap when :math:`n < 2k_{\text{eig}}`). Returns
    ``(U_low [n, k], U_high [n, k])``, columns ordered by eigenvalue from the spectrum's
    end (smallest first, largest first); no gradient. Fewer than 2 nodes give ``k = 0``:
    two empty ``[n, 0]`` sets (nothing to align).
    """
    x = x.detach()
    n = x.size(0)
    k = min(k_eig, n // 2 if cap == "half" else n - 1)
    if k <= 0:
        return x.new_zeros(n, 0), x.new_zeros(n, 0)
    s = knn_cosine_graph(x, k_sim)
    if mode == "dense-sym":
        _, vecs = torch.linalg.eigh(laplacian((s + s.T) / 2).double())
        return vecs[:, :k].to(x.dtype), vecs[:, -k:].flip(1).to(x.dtype)
    if mode == "eigsh-asym":
        lap = laplacian(s).double().cpu().numpy()  # ARPACK: on the CPU
        v0 = np.random.default_rng(seed).uniform(-1, 1, n)
        kw = dict(k=k, tol=1e-3, maxiter=6000, v0=v0)
        low_vals, low = spla.eigsh(lap, which="SM", **kw)
        high_vals, high = spla.eigsh(lap, which="LM", **kw)
        low = low[:, np.argsort(low_vals)]
        high = high[:, np.argsort(-high_vals)]
        return (
            torch.from_numpy(low).to(x.device, x.dtype),
            torch.from_numpy(high).to(x.device, x.dtype),
        )
    raise ValueError(f"Unknown eig mode {mode!r}; use one of {EIG_MODES}.")


def projection_mse(u_a: Tensor, x_a: Tensor, u_b: Tensor, x_b: Tensor) -> Tensor:
    r"""Sum over columns :math:`m` of :math:`\mathrm{MSE}(u^a_m u^{a\top}_m X_a,\;
    u^b_m u^{b\top}_m X_b)`, without forming the ``[n, d]`` projections.

    For unit vectors, with :math:`\mathbf p = X^\top u` (``[d]``),

    .. math::
        \lVert u^a\mathbf p_a^\top - u^b\mathbf p_b^\top\rVert_F^2 =
        \lVert\mathbf p_a\rVert^2 + \lVert\mathbf p_b\rVert^2
        - 2\,(u^a\cdot u^b)(\mathbf p_a\cdot\mathbf p_b),

    divided by :math:`nd`. Shapes: ``u_* [n, k]`` (orthonormal columns), ``x_* [n, d]``.
    """
    if x_a.numel() == 0:  # no node to align
        return x_a.new_zeros(())
    p_a, p_b = u_a.T @ x_a, u_b.T @ x_b  # [k, d]
    cross = (u_a * u_b).sum(0) * (p_a * p_b).sum(1)
    sq = (p_a**2).sum(1) + (p_b**2).sum(1) - 2 * cross
    return sq.sum() / x_a.numel()


def fgma_loss(
    z_local: Tensor,
    basis_local: tuple[Tensor, Tensor],
    z_global: Tensor,
    basis_global: tuple[Tensor, Tensor],
) -> Tensor:
    r"""Frequency-aware graph modeling alignment (spec §3.3).

    .. math::
        \mathcal L_{\text{FGMA}} = \sum_{m=1}^{k}\Big(
        \mathrm{MSE}(u^{i,\text{low}}_m u^{i,\text{low}\top}_m Z^i,\,
                     u^{g,\text{low}}_m u^{g,\text{low}\top}_m Z^g)
        + \mathrm{MSE}(\cdot^{\text{high}})\Big)

    with eigenvectors paired by rank. Gradients flow through ``z_local [n, d]`` only.
    """
    (low_i, high_i), (low_g, high_g) = basis_local, basis_global
    return projection_mse(low_i, z_local, low_g, z_global) + projection_mse(
        high_i, z_local, high_g, z_global
    )
