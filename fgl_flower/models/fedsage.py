r"""FedSage+'s missing-neighbour generator and graph mending (Zhang et al., "Subgraph Federated
Learning with Missing Neighbor Generation", NeurIPS 2021).

A client hides some of its nodes, learns to predict for every remaining node how many
neighbours it lost (:math:`\hat n_v`) and their features (:math:`\hat{\mathbf X}_v`, up to
``K`` = ``num_pred`` of them), and finally attaches that many generated neighbours to its
*original* subgraph (the mended graph the classifier trains on). The paper's text could not
be read offline; shapes and defaults follow the official code (zkhku/fedsage), where the
three codes (official, OpenFGL, FederatedScope) agree, and the choices where they differ are
listed on ``docs/methods/fedsageplus.md``.

Shapes: ``N`` nodes of the client's subgraph, ``N'`` of the impaired one, ``D`` features,
``K`` generated neighbours at most per node.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import SAGEConv
from torch_geometric.utils import subgraph


def hide_nodes(val_mask: Tensor, portion: float, generator: torch.Generator) -> Tensor:
    """``[N]`` bool: ``int(portion * |val|)`` validation nodes drawn uniformly without
    replacement (every code hides validation nodes only, so all training and test nodes stay)."""
    val = val_mask.nonzero().flatten().cpu()
    hidden = torch.zeros(val_mask.numel(), dtype=torch.bool)
    count = int(portion * val.numel())
    if count:
        hidden[val[torch.randperm(val.numel(), generator=generator)[:count]]] = True
    return hidden.to(val_mask.device)


def impaired_graph(edge_index: Tensor, hidden: Tensor) -> tuple[Tensor, Tensor]:
    """``(kept [N'] node ids, edge_index [2, E'] of the subgraph they induce, renumbered 0..N'-1)``."""
    kept = (~hidden).nonzero().flatten()
    sub, _ = subgraph(kept, edge_index, relabel_nodes=True, num_nodes=hidden.numel())
    return kept, sub


def _by_source(src: Tensor, dst: Tensor, n: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The edges sorted by source, then by neighbour id, with each node's out-degree ``[n]``
    and the position of its first edge ``[n]``."""
    order = torch.argsort(src * n + dst)
    src, dst = src[order], dst[order]
    degree = torch.bincount(src, minlength=n)
    return src, dst, degree, torch.cumsum(degree, 0) - degree


def missing_neighbours(edge_index: Tensor, hidden: Tensor, num_pred: int) -> tuple[Tensor, Tensor]:
    """For every kept node, in the order of :func:`impaired_graph`'s ``kept``:

    - ``count [N']`` (float): its hidden neighbours, uncapped (the target of :math:`\\hat n`);
    - ``index [N', K]`` (long): the first ``K`` of them by node id, ``-1`` where fewer.

    Self-loops are not neighbours.
    """
    n = hidden.numel()
    src, dst = edge_index
    lost = hidden[dst] & ~hidden[src] & (src != dst)
    src, dst, count, start = _by_source(src[lost], dst[lost], n)
    rank = torch.arange(src.numel(), device=src.device) - start[src]
    index = torch.full((n, num_pred), -1, dtype=torch.long, device=src.device)
    first = rank < num_pred
    index[src[first], rank[first]] = dst[first]
    kept = ~hidden
    return count[kept].float(), index[kept]


def neighbour_features(x: Tensor, index: Tensor) -> Tensor:
    """``[N', K, D]``: the features of ``index``'s nodes (``missing_neighbours``), zero where ``-1``."""
    dense = x.to_dense() if x.is_sparse else x
    out = dense[index.clamp(min=0)]
    return out * (index >= 0).unsqueeze(-1).to(out.dtype)


class NeighGen(nn.Module):
    r"""The missing-neighbour generator: an encoder, a count head and a feature head.

    .. math::
        \mathbf z = \mathrm{SAGE}_2(\mathrm{ReLU}(\mathrm{SAGE}_1(\mathbf X))),\quad
        \hat n = \mathrm{ReLU}(\mathbf w^\top\mathbf z + b),\quad
        \hat{\mathbf X} = \tanh(\mathrm{MLP}(\mathbf z + \boldsymbol\epsilon)),\
        \boldsymbol\epsilon\sim\mathcal N(0, \mathbf I)

    with the feature MLP ``latent -> 256 -> 2048 -> K·D`` (ReLU, dropout before the last
    layer) as in all three codes; the noise is drawn in every forward (also in eval mode, as
    they do). ``forward(x [N, D], edge_index) -> (n̂ [N], X̂ [N, K, D'])``, where ``D'`` =
    ``out_channels`` is ``D`` (FedSage+ generates features) unless given (FedDEP generates
    ``D'``-dimensional embeddings, :mod:`fgl_flower.models.feddep`).
    """

    def __init__(
        self,
        in_channels: int,
        num_pred: int,
        hidden: int = 64,
        latent: int = 128,
        dropout: float = 0.5,
        out_channels: int | None = None,
    ) -> None:
        super().__init__()
        out = in_channels if out_channels is None else out_channels
        self.num_pred, self.out_channels, self.dropout = num_pred, out, dropout
        self.enc1, self.enc2 = SAGEConv(in_channels, hidden), SAGEConv(hidden, latent)
        self.dgen = nn.Linear(latent, 1)
        self.fgen = nn.ModuleList(
            [nn.Linear(latent, 256), nn.Linear(256, 2048), nn.Linear(2048, num_pred * out)]
        )

    def encode(self, x: Tensor, edge_index: Tensor) -> Tensor:
        x = x.to_dense() if x.is_sparse else x
        h = F.dropout(F.relu(self.enc1(x, edge_index)), self.dropout, self.training)
        return self.enc2(h, edge_index)

    def generate(self, z: Tensor) -> Tensor:
        h = z + torch.randn_like(z)
        h = F.relu(self.fgen[0](h))
        h = F.dropout(F.relu(self.fgen[1](h)), self.dropout, self.training)
        return torch.tanh(self.fgen[2](h)).view(z.size(0), self.num_pred, self.out_channels)

    def forward(self, x: Tensor, edge_index: Tensor) -> tuple[Tensor, Tensor]:
        z = self.encode(x, edge_index)
        return F.relu(self.dgen(z)).squeeze(-1), self.generate(z)


def slot_counts(predicted: Tensor, num_pred: int, rounding: str = "floor") -> Tensor:
    """``[N]`` long: :math:`\\min(K, \\lfloor\\hat n_v\\rfloor)` generated neighbours per node
    (FedSage+'s codes truncate; ``rounding = "round"``: :math:`\\min(K, \\mathrm{round}(\\hat
    n_v))`, FedDEP's codes in their local loss and mending, half to even as numpy and torch)."""
    if rounding == "floor":
        return predicted.detach().floor().clamp(0, num_pred).long()
    if rounding == "round":
        return predicted.detach().round().clamp(0, num_pred).long()
    raise ValueError(f"rounding={rounding!r}: use 'floor' or 'round'")


def feature_loss(
    pred: Tensor,
    target: Tensor,
    pred_count: Tensor,
    true_count: Tensor,
    matching: str = "min",
    rounding: str = "floor",
) -> Tensor:
    r"""The feature loss over the first :math:`\min(K, \lfloor\hat n_v\rfloor)` generated slots
    of every node, each matched to one of its :math:`\min(K, n_v)` true missing neighbours:

    .. math::
        \mathcal L_f = \frac1{NK}\sum_v\sum_{p < \lfloor\hat n_v\rfloor}
        \min_{k < n_v}\frac1D\lVert\hat{\mathbf x}_{v,p} - \mathbf x_{v,k}\rVert^2

    (``matching = "min"``, the greedy matching the codes name). ``"code"`` reproduces what the
    three codes compute: they compare a slot's error with ``D`` times the best so far, which
    for ``D > 1`` nearly always replaces it, so a slot ends matched to the last true neighbour
    ``k`` whose error is below ``D`` times the running value. A node with no true missing
    neighbour adds 0. ``pred``/``target`` ``[N, K, D]``, counts ``[N]``; ``rounding`` turns
    :math:`\hat n_v` into a slot count (:func:`slot_counts`).
    """
    n, k, d = pred.shape
    if n == 0:
        return pred.sum() * 0.0
    err = ((pred.unsqueeze(2) - target.unsqueeze(1)) ** 2).mean(-1)  # [N, K slots, K targets]
    slots = slot_counts(pred_count, k, rounding)
    targets = true_count.detach().clamp(0, k).long()
    valid_target = torch.arange(k, device=pred.device)[None, :] < targets[:, None]  # [N, K]
    if matching == "min":
        best = err.masked_fill(~valid_target[:, None, :], float("inf")).min(-1).values
    elif matching == "code":
        last = (targets - 1).clamp(min=0)
        best = err.gather(2, last[:, None, None].expand(n, k, 1)).squeeze(-1)
        for j in range(k):
            take = valid_target[:, j, None] & (err[:, :, j] < d * best)
            best = torch.where(take, err[:, :, j], best)
    else:
        raise ValueError(f"matching={matching!r}: use 'min' or 'code'")
    used = (torch.arange(k, device=pred.device)[None, :] < slots[:, None]) & (targets > 0)[:, None]
    return torch.where(used, best, torch.zeros_like(best)).sum() / (n * k)


def mend(
    x: Tensor,
    edge_index: Tensor,
    kept: Tensor,
    pred_count: Tensor,
    pred_feats: Tensor,
    undirected: bool = True,
) -> tuple[Tensor, Tensor]:
    """The mended graph: the client's *original* subgraph (``x [N, D]``, ``edge_index``) plus,
    for every kept node ``kept[i]``, :func:`slot_counts` generated neighbours with features
    ``pred_feats[i, :c]``, appended after the ``N`` nodes in node order, each linked to its
    node in both directions (``undirected``, the official code's graph) or only from the node
    to it (OpenFGL's, with which the generated nodes send no message to any real node).
    Returns ``(x' [N + G, D], edge_index' [2, E + G or 2G])``.
    """
    counts = slot_counts(pred_count, pred_feats.size(1))
    owner = torch.repeat_interleave(kept, counts)
    slot = torch.arange(pred_feats.size(1), device=x.device).expand(kept.numel(), -1)
    take = slot < counts[:, None]
    new_x = pred_feats[take]  # [G, D], row-major: node by node, slot by slot
    new_ids = x.size(0) + torch.arange(new_x.size(0), device=x.device)
    dense = x.to_dense() if x.is_sparse else x
    links = [torch.stack([owner, new_ids])]
    if undirected:
        links.append(torch.stack([new_ids, owner]))
    return torch.cat([dense, new_x.to(dense.dtype)]), torch.cat([edge_index, *links], dim=1)


def owner_fit(
    x: Tensor, edge_index: Tensor, num_real: int, generator: torch.Generator
) -> float | None:
    r"""How much the generated rows of a mended graph resemble the neighbourhood of the node
    they are attached to, against that of another owner:

    .. math::
        1 - \frac{\sum_g \lVert\hat{\mathbf x}_g - \mathbf m_{o(g)}\rVert^2}
                 {\sum_g \lVert\hat{\mathbf x}_g - \mathbf m_{o(\pi(g))}\rVert^2}

    where ``o(g)`` is the real node that the mended graph (``x [N + G, D]``, ``edge_index``;
    the first ``num_real`` nodes real) links generated node ``g`` to, read from its edges,
    :math:`\mathbf m_v` the mean features of ``v``'s real neighbours (self-loops aside) and
    :math:`\pi` a permutation of the generated rows drawn from ``generator``. Rows without
    a real neighbourhood are left out.

    0 exactly when every generated row is the same vector (the permuted owners are the same
    multiset), about 0 when rows are attached to the wrong nodes, above 0 when each row
    carries something of its own node's neighbourhood. ``None`` with fewer than two rows.
    """
    n = num_real
    src, dst = edge_index
    to_gen = (src < n) & (dst >= n)  # real -> generated: the attachment, in both edge modes
    gen, owner = dst[to_gen] - n, src[to_gen]
    real = (src < n) & (dst < n) & (src != dst)
    dense = x.to_dense() if x.is_sparse else x
    dense = dense.float()
    sums = torch.zeros(n, dense.size(1), device=dense.device).index_add_(
        0, src[real], dense[dst[real]]
    )
    degree = torch.bincount(src[real], minlength=n)
    has = degree[owner] > 0
    gen, owner = gen[has], owner[has]
    if gen.numel() < 2:
        return None
    centre = sums[owner] / degree[owner, None]
    rows = dense[n + gen]
    perm = torch.randperm(gen.numel(), generator=generator).to(gen.device)
    own = ((rows - centre) ** 2).sum()
    other = ((rows - centre[perm]) ** 2).sum()
    return float(1.0 - own / other.clamp_min(1e-12))


def sample_targets(
    x: Tensor, edge_index: Tensor, count: int, num_pred: int, generator: torch.Generator
) -> Tensor:
    """``[count, K, D]``: another client's targets for the cross-client feature loss, as all three
    codes draw them: ``count`` centre nodes uniformly with replacement among the nodes that have
    a neighbour, and ``K`` of each centre's neighbours uniformly with replacement (self-loops
    aside). Drawn on the CPU from ``generator``; zeros if no node has a neighbour."""
    dense = x.to_dense() if x.is_sparse else x
    src, dst = edge_index.cpu()
    keep = src != dst
    src, dst = src[keep], dst[keep]
    if src.numel() == 0:
        return dense.new_zeros(count, num_pred, dense.size(1))
    _, dst, degree, start = _by_source(src, dst, dense.size(0))
    centres = degree.nonzero().flatten()
    centre = centres[torch.randint(centres.numel(), (count,), generator=generator)]
    offset = (torch.rand(count, num_pred, generator=generator) * degree[centre, None]).long()
    neighbours = dst[start[centre, None] + offset]
    return dense[neighbours.to(dense.device)]


class LocSagePlus(nn.Module):
    """The generator with the classifier it is trained through (the loss on the mended
    impaired graph): ``gen`` (:class:`NeighGen`) and ``cls``, a 2-layer GraphSAGE."""

    def __init__(
        self,
        in_channels: int,
        num_classes: int,
        num_pred: int,
        hidden: int = 64,
        latent: int = 128,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        from fgl_flower.models.pyg import GraphSAGE

        self.gen = NeighGen(in_channels, num_pred, hidden, latent, dropout)
        self.cls = GraphSAGE(in_channels, hidden, num_classes, 2, dropout)
