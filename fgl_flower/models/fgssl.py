r"""FGSSL's views and losses (Huang et al., "Federated Graph Semantic and Structural
Learning", IJCAI 2023): a node-level semantic contrast with the global model and a
distillation of each node's neighbour-similarity distribution from it.

Shapes: ``h``/``h_teacher`` ``[N, d]`` node representations (the input of the backbone's last
layer), ``edge_index [2, E]`` directed edges without self-loops, ``y [N]``, ``mask [N]`` (bool).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.utils import softmax as scatter_softmax


def drop_edges(edge_index: Tensor, p: float) -> Tensor:
    """Each directed edge kept independently with probability :math:`1 - p` (PyG's
    ``dropout_edge`` without ``force_undirected``, the augmentation both codes use)."""
    if p <= 0.0:
        return edge_index
    keep = torch.rand(edge_index.size(1), device=edge_index.device) >= p
    return edge_index[:, keep]


def mask_features(x: Tensor, p: float) -> Tensor:
    """One Bernoulli(:math:`p`) draw per feature *column*; the drawn columns are zero for
    every node (GraphCL's feature masking)."""
    if p <= 0.0:
        return x
    keep = (torch.rand(x.size(1), device=x.device) >= p).to(x.dtype)
    return x * keep if not x.is_sparse else (x.to_dense() * keep)


def semantic_contrast(h: Tensor, h_teacher: Tensor, y: Tensor, mask: Tensor, tau: float) -> Tensor:
    r"""FNSC, a supervised InfoNCE with the local model's nodes as anchors and the global
    model's as samples, over the :math:`M` training nodes:

    .. math::
        \mathcal L = -\frac1M\sum_i\frac1{|P_i|}\sum_{p\in P_i}\Big[s_{ip} -
        \log\sum_{k=1}^{M} e^{s_{ik}}\Big],\qquad s_{ik} = \frac{\cos(\mathbf h_i,
        \hat{\mathbf h}_k)}{\tau},\quad P_i = \{k : y_k = y_i\}

    (:math:`P_i` includes :math:`i`: the same node seen by the global model is a positive).
    """
    a = F.normalize(h[mask], dim=1)
    b = F.normalize(h_teacher[mask], dim=1)
    labels = y[mask]
    if labels.numel() == 0:
        return h.new_zeros(())
    s = a @ b.t() / tau  # [M, M]
    positive = (labels[:, None] == labels[None, :]).to(s.dtype)
    log_prob = s - torch.logsumexp(s, dim=1, keepdim=True)
    return -((positive * log_prob).sum(1) / positive.sum(1)).mean()


def structure_distillation(
    h: Tensor, h_teacher: Tensor, edge_index: Tensor, omega: float
) -> Tensor:
    r"""FGSD: the KL divergence from the global model's distribution of each node's
    similarities over its neighbours to the local model's,

    .. math::
        p_{ij} = \mathrm{softmax}_{j\in N(i)}\frac{\cos(\hat{\mathbf h}_i, \hat{\mathbf h}_j)}
        {\omega},\quad q_{ij} = \mathrm{softmax}_{j\in N(i)}\frac{\cos(\mathbf h_i,
        \mathbf h_j)}{\omega},\quad \mathcal L = \frac1{|V_{>0}|}\sum_{i\in V_{>0}}
        \sum_{j\in N(i)} p_{ij}\log\frac{p_{ij}}{q_{ij}}

    over the nodes :math:`V_{>0}` with a neighbour (a node with one neighbour adds 0).
    """
    src, dst = edge_index
    if src.numel() == 0:
        return h.new_zeros(())
    n = h.size(0)
    a, b = F.normalize(h, dim=1), F.normalize(h_teacher, dim=1)
    q = scatter_softmax((a[src] * a[dst]).sum(1) / omega, src, num_nodes=n)
    p = scatter_softmax((b[src] * b[dst]).sum(1) / omega, src, num_nodes=n).detach()
    kl = p * (p.clamp_min(1e-12).log() - q.clamp_min(1e-12).log())
    has = torch.zeros(n, dtype=torch.bool, device=h.device)
    has[src] = True
    return torch.zeros(n, dtype=h.dtype, device=h.device).index_add_(0, src, kl).sum() / has.sum()


def edge_difference_distillation(
    h: Tensor, h_teacher: Tensor, edge_index: Tensor, tau: float
) -> Tensor:
    r"""OpenFGL's structural term: per edge :math:`(i, j)`, the distribution over the
    :math:`d` dimensions of :math:`|\mathbf h_i - \mathbf h_j| / \tau`, the teacher's
    distilled into the student's, :math:`\mathrm{KL}(p \Vert q)` summed and divided by the
    number of edges (``KLDivLoss(reduction="batchmean", log_target=True)``)."""
    src, dst = edge_index
    if src.numel() == 0:
        return h.new_zeros(())
    log_q = F.log_softmax((h[src] - h[dst]).abs() / tau, dim=1)
    log_p = F.log_softmax((h_teacher[src] - h_teacher[dst]).abs() / tau, dim=1).detach()
    return F.kl_div(log_q, log_p, reduction="batchmean", log_target=True)


@torch.no_grad()
def class_margin(h: Tensor, h_teacher: Tensor, y: Tensor, mask: Tensor) -> float:
    """Mean cosine of a local representation with the global model's of *other* nodes of
    its class, minus that with nodes of other classes (training nodes); NaN when either
    set is empty."""
    a = F.normalize(h[mask], dim=1)
    b = F.normalize(h_teacher[mask], dim=1)
    labels = y[mask]
    cos = a @ b.t()
    same = labels[:, None] == labels[None, :]
    same.fill_diagonal_(False)
    other = labels[:, None] != labels[None, :]
    if not same.any() or not other.any():
        return float("nan")
    return float(cos[same].mean() - cos[other].mean())
