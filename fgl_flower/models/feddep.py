r"""FedDEP's prototypes, embedding generator and classifier (Zhang et al., "Deep Efficient
Private Neighbor Generation for Subgraph Federated Learning", SDM 2024, arXiv:2401.04336).

FedDEP is FedSage+ (:mod:`fgl_flower.models.fedsage`) with the generator's targets moved from
raw features to *embeddings*, and the embeddings replaced by *prototypes* before they can leave
a client:

1. an encoder GNN (:class:`EmbeddingEncoder`) trained on the client's labels gives every node
   an embedding :math:`\mathbf h_v\in\mathbb R^H`;
2. the embeddings are clustered into ``P`` = ``num_protos`` groups (:func:`kmeans`) and each
   node is represented by its cluster mean, :math:`\mathbf p(v) = \boldsymbol\mu_{a(v)}`
   (:func:`prototypes`): the generator's targets (the prototypes of a node's hidden
   neighbours, ``[N', K, H]``) and the other clients' targets are prototypes, never a node's
   own embedding;
3. the generator (:class:`LocalDGen`: FedSage+'s :class:`~fgl_flower.models.fedsage.NeighGen`
   producing ``K`` embeddings of width ``H`` instead of ``K`` feature rows) is trained on the
   impaired graph, and the classifier (:class:`FedDEPClassifier`, the codes' Classifier_F)
   takes each node's features *and* the mean of its generated neighbour embeddings
   (:func:`mended_embedding`) instead of a graph with extra nodes.

Shapes: ``N`` nodes of a client's subgraph, ``N'`` of its impaired graph, ``D`` features,
``H`` embedding width, ``K`` generated neighbours at most per node, ``P`` prototypes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import SAGEConv

from fgl_flower.models.fedsage import NeighGen, slot_counts


class EmbeddingEncoder(nn.Module):
    r"""The encoder whose embeddings become prototypes (OpenFGL's and the official code's
    ``Encoder``): ``L`` SAGE layers, ReLU between them and tanh after the last, then a
    linear head to the classes:

    .. math::
        \mathbf h = \tanh(\mathrm{SAGE}_L(\cdots\mathrm{ReLU}(\mathrm{SAGE}_1(\mathbf X)))),
        \quad \mathrm{logits} = \mathbf W\mathbf h + \mathbf b

    ``embed(x [N, D], edge_index) -> h [N, H]``; ``forward -> logits [N, C]`` (dropout after
    each layer in training mode).
    """

    def __init__(
        self, in_channels: int, hidden: int, num_classes: int, num_layers: int, dropout: float
    ) -> None:
        super().__init__()
        dims = [in_channels] + [hidden] * max(num_layers, 1)
        self.convs = nn.ModuleList(SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.head = nn.Linear(hidden, num_classes)
        self.dropout = dropout

    def embed(self, x: Tensor, edge_index: Tensor) -> Tensor:
        x = x.to_dense() if x.is_sparse else x
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            x = torch.tanh(x) if i == len(self.convs) - 1 else F.relu(x)
            x = F.dropout(x, self.dropout, self.training)
        return x

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return self.head(self.embed(x, edge_index))


def kmeans(points: Tensor, k: int, generator: torch.Generator, iters: int = 100) -> Tensor:
    r"""``[N]`` long cluster labels of ``points [N, H]`` by Lloyd's algorithm: ``min(k, N)``
    centres drawn without replacement from ``generator``, then alternately each point to its
    nearest centre (squared Euclidean, ties to the lower index) and each centre to the mean of
    its points, until no label changes or ``iters`` rounds. A centre that loses all its
    points stays where it was. Labels are renumbered ``0..`` in order of first appearance."""
    n = points.size(0)
    if n == 0:
        return torch.zeros(0, dtype=torch.long, device=points.device)
    pts = points.detach().double()
    start = torch.randperm(n, generator=generator)[: min(k, n)].to(points.device)
    centres = pts[start].clone()
    labels = torch.full((n,), -1, dtype=torch.long, device=points.device)
    for _ in range(max(iters, 1)):
        new = torch.cdist(pts, centres).argmin(1)
        if torch.equal(new, labels):
            break
        labels = new
        sums = torch.zeros_like(centres).index_add_(0, labels, pts)
        size = torch.bincount(labels, minlength=centres.size(0))
        keep = size > 0
        centres[keep] = sums[keep] / size[keep, None]
    _, first = torch.unique(labels, return_inverse=True)
    order = torch.full((int(first.max()) + 1,), n, device=points.device)
    order = order.scatter_reduce(0, first, torch.arange(n, device=points.device), "amin")
    return torch.argsort(torch.argsort(order))[first]


def prototypes(embeddings: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    r"""``(P [C, H] the cluster means, p [N, H] every node's prototype P[labels])`` of
    ``embeddings [N, H]`` and their cluster ``labels [N]`` (``0..C-1``, none empty)."""
    c = int(labels.max()) + 1 if labels.numel() else 0
    sums = embeddings.new_zeros(c, embeddings.size(1)).index_add_(0, labels, embeddings)
    means = sums / torch.bincount(labels, minlength=c).clamp_min(1)[:, None].to(sums.dtype)
    return means, means[labels]


def prototype_gap(embeddings: Tensor, node_protos: Tensor) -> float:
    r""":math:`\frac{\sum_v\lVert\mathbf h_v - \mathbf p(v)\rVert}{\sum_v\lVert\mathbf h_v\rVert}`:
    how far the prototypes that leave a client are from the embeddings they stand for (0 when
    every node is its own cluster)."""
    gap = (embeddings - node_protos).norm(dim=1).sum()
    return float(gap / embeddings.norm(dim=1).sum().clamp_min(1e-12))


def draw_targets(
    missing: Tensor,
    own: Tensor,
    count: int,
    num_pred: int,
    generator: torch.Generator,
    empty: str = "sum",
) -> Tensor:
    r"""``[count, K, H]``: a client's targets for another client's generated embeddings, as
    both codes draw them: ``count`` centre nodes ``c`` uniformly with replacement, and for each
    ``K`` slots ``s`` uniformly with replacement among the ``K`` of ``missing [N', K, H]`` (the
    prototypes of the centre's hidden neighbours, zero-padded); a slot deemed empty takes the
    centre's own prototype ``own[c]`` (``[N', H]``). ``empty = "sum"``: the codes' test, the
    *signed* sum of the slot's entries below ``1e-15``, which also replaces every real
    prototype whose entries sum to a negative number; ``"zero"``: only an all-zero slot (no
    hidden neighbour there). Drawn on the CPU from ``generator``; zeros if the client has no
    node."""
    n, k, h = missing.shape
    if n == 0:
        return missing.new_zeros(count, num_pred, h)
    centre = torch.randint(n, (count,), generator=generator).to(missing.device)
    slot = torch.randint(k, (count, num_pred), generator=generator).to(missing.device)
    rows = missing[centre[:, None], slot]  # [count, K, H]
    if empty == "sum":
        is_empty = rows.sum(-1, keepdim=True) < 1e-15
    elif empty == "zero":
        is_empty = rows.abs().sum(-1, keepdim=True) < 1e-15
    else:
        raise ValueError(f"empty={empty!r}: use 'sum' or 'zero'")
    return torch.where(is_empty, own[centre][:, None, :].expand_as(rows), rows)


def slot_mask(pred_count: Tensor, num_pred: int) -> Tensor:
    r"""``[N, K]`` float: slot ``p`` of node ``v`` is used when :math:`p < \min(K,
    \mathrm{round}(\hat n_v))` (the codes' ``MendGraph`` and ``GraphMender`` round)."""
    used = slot_counts(pred_count, num_pred, "round")
    slots = torch.arange(num_pred, device=pred_count.device)
    return (slots[None, :] < used[:, None]).to(pred_count.dtype)


def mended_embedding(pred_count: Tensor, gen: Tensor) -> Tensor:
    r"""``[N, H]``: the mean over all ``K`` slots of a node's generated neighbour embeddings
    ``gen [N, K, H]``, the unused slots (:func:`slot_mask`) counted as zeros:

    .. math::
        \mathbf e_v = \frac1K\sum_{p < \min(K, \mathrm{round}(\hat n_v))}\hat{\mathbf h}_{v,p}

    (the codes' ``mend_emb.mean(dim=1)`` over the zero-filled slots). Differentiable in
    ``gen``; the mask is not."""
    mask = slot_mask(pred_count, gen.size(1)).to(gen.dtype)
    return (gen * mask[..., None]).mean(1)


class FedDEPClassifier(nn.Module):
    r"""The codes' Classifier_F: a GraphSAGE with a second, linear branch that starts from the
    node's mended embedding :math:`\mathbf e_v` (:func:`mended_embedding`) and is chained
    through the layers, each layer adding the branch's current value to its SAGE output:

    .. math::
        \mathbf e^{(l+1)}_v = \mathbf W_l\mathbf e^{(l)}_v + \mathbf b_l,\quad
        \mathbf z^{(l+1)}_v = \mathrm{SAGE}_l(\mathbf z^{(l)})_v + \mathbf e^{(l+1)}_v,\quad
        \mathbf z^{(l+1)}\leftarrow\mathrm{dropout}(\mathrm{ReLU}(\mathbf z^{(l+1)}))
        \ \text{between layers}

    with :math:`\mathbf z^{(0)} = \mathbf X`, :math:`\mathbf e^{(0)} = \mathbf e` (both codes'
    ``x_emb = layer[1](x_emb)``: layer 2 adds :math:`\mathbf W_2(\mathbf W_1\mathbf e +
    \mathbf b_1) + \mathbf b_2`, not a fresh map of :math:`\mathbf e`; the branch has no
    nonlinearity of its own). Its input is one matrix ``[N, D + H]``, the
    features then the mended embedding, so that it is a node model like any other
    (``forward(x, edge_index) -> logits [N, C]``); ``D`` = ``in_channels``.
    """

    def __init__(
        self,
        in_channels: int,
        emb_channels: int,
        hidden: int,
        num_classes: int,
        num_layers: int = 2,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        dims = [in_channels] + [hidden] * (max(num_layers, 1) - 1) + [num_classes]
        self.convs = nn.ModuleList(SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:]))
        # chained: layer l's branch reads layer l-1's (the codes' widths, where emb = hidden)
        emb_in = [emb_channels] + dims[1:-1]
        self.embs = nn.ModuleList(nn.Linear(a, b) for a, b in zip(emb_in, dims[1:]))
        self.in_channels, self.dropout = in_channels, dropout

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        x = x.to_dense() if x.is_sparse else x
        x, e = x[:, : self.in_channels], x[:, self.in_channels :]
        for i, (conv, lin) in enumerate(zip(self.convs, self.embs)):
            e = lin(e)  # chained: the previous layer's branch, not the mended embedding
            x = conv(x, edge_index) + e
            if i < len(self.convs) - 1:
                x = F.dropout(F.relu(x), self.dropout, self.training)
        return x


class LocalDGen(nn.Module):
    r"""The generator with the classifier it is trained through: ``gen`` (FedSage+'s
    :class:`~fgl_flower.models.fedsage.NeighGen`, ``D -> hidden -> latent`` SAGE encoder,
    count head, and ``K`` generated embeddings of width ``H``) and ``cls``
    (:class:`FedDEPClassifier`, 2 layers).

    ``forward(x [N, D], edge_index) -> (n̂ [N], Ĥ [N, K, H], logits [N, C])``, the logits of
    ``cls`` on ``[x, mended_embedding(n̂, Ĥ)]``.
    """

    def __init__(
        self,
        in_channels: int,
        emb_channels: int,
        num_classes: int,
        num_pred: int,
        hidden: int = 64,
        latent: int = 128,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        self.gen = NeighGen(in_channels, num_pred, hidden, latent, dropout, emb_channels)
        self.cls = FedDEPClassifier(in_channels, emb_channels, hidden, num_classes, 2, dropout)

    def forward(self, x: Tensor, edge_index: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x = x.to_dense() if x.is_sparse else x
        count, gen = self.gen(x, edge_index)
        mended = mended_embedding(count, gen)
        return count, gen, self.cls(torch.cat([x, mended.to(x.dtype)], 1), edge_index)
