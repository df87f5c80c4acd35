r"""FGGP's model and losses (Wan et al., "Federated Graph Learning under Domain Shift with
Generalizable Prototypes", AAAI 2024).

Shapes: ``N`` nodes, ``F`` features, ``d`` hidden size, ``C`` classes; ``x [N, F]``;
propagation matrices ``P [N, N]`` with ``P[v, u]`` the weight of ``u``'s message to ``v``,
sparse CSR (the clean graph) or dense (the learned augmented view, whose entries carry
gradients); prototypes ``[P, d]`` for the ``P`` classes a client has.

- :class:`FGGPNet`: a backbone whose hidden layers propagate with any given matrix, the
  official code's GCN family (:class:`GCNBody`) or S2FGL's ACM-GCN (:class:`ACMBody`), and
  the augmentor.
- :class:`Augmentor`: the learnable edge augmentor (GAug-style): a two-layer GCN encoder
  without biases scores every pair, the scores and the global-knowledge graph give edge
  probabilities, and a straight-through relaxed Bernoulli draws a 0/1 graph.
- :func:`prototype_contrast`, :func:`prototype_weights`, :func:`reconstruction_loss`,
  :func:`knn_edges`, :func:`prototype_scores`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fgl_flower.models.acmgcn import ACMGCN
from fgl_flower.models.knn import cosine_topk
from fgl_flower.models.node import GCNLayer, _dims
from fgl_flower.models.sparse import gcn_adjacency


def dense_normalize(a: Tensor) -> Tensor:
    r""":math:`\mathbf D^{-1/2}\mathbf A\mathbf D^{-1/2}`, ``D`` the row sums of ``a [N, N]``
    (no self-loops added; a zero row stays zero)."""
    deg = a.sum(dim=1)
    dinv = deg.clamp(min=1e-12).pow(-0.5) * (deg > 0)
    return dinv[:, None] * a * dinv[None, :]


def to_dense(edge_index: Tensor, num_nodes: int) -> Tensor:
    """The 0/1 matrix ``A [N, N]`` with ``A[u, v] = 1`` for every edge ``u -> v`` (the
    official code's ``adj_orig[src, dst]``: a dense product ``A @ h`` sums, at ``u``, the
    targets of its edges)."""
    a = torch.zeros(num_nodes, num_nodes, device=edge_index.device)
    a[edge_index[0], edge_index[1]] = 1.0
    return a


class GCNBody(nn.Module):
    r"""The official code's GCN family: ``num_layers`` :class:`~fgl_flower.models.node.GCNLayer` s
    (PyG's ``GCNConv`` parameters and initialisation), every layer propagating with a given
    matrix.

    .. math::
        \mathbf H^{(l+1)} = \mathrm{ReLU}\big(\mathbf P\,\mathrm{drop}(\mathbf H^{(l)})
        \mathbf W^{(l)} + \mathbf b^{(l)}\big), \qquad
        \text{logits} = \mathbf P_{\text{out}}\,\mathrm{drop}(\mathbf H^{(L-1)})\mathbf W^{(L-1)}
        + \mathbf b^{(L-1)}

    with no dropout on the raw input; the features are :math:`\mathbf H^{(L-1)}` (after the
    ReLU, before the dropout). ``P``: GCN's :math:`\hat{\mathbf D}^{-1/2}(\mathbf A +
    \mathbf I)\hat{\mathbf D}^{-1/2}`; a sampled 0/1 graph with its diagonal set is
    normalised the same way (:func:`dense_normalize`).
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int,
        dropout: float,
    ) -> None:
        super().__init__()
        d = _dims(in_channels, hidden_channels, out_channels, num_layers)
        self.convs = nn.ModuleList(GCNLayer(a, b) for a, b in zip(d[:-1], d[1:]))
        self.dropout = dropout

    @property
    def head(self) -> str:
        return f"convs.{len(self.convs) - 1}."

    def propagation(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return gcn_adjacency(edge_index, x.size(0))

    output_propagation = propagation

    def dense_propagation(self, a: Tensor) -> Tensor:
        return dense_normalize(a)

    @staticmethod
    def _layer(conv: GCNLayer, h: Tensor, prop: Tensor) -> Tensor:
        return prop @ (h @ conv.lin.weight.t()) + conv.bias

    def features(self, x: Tensor, prop: Tensor) -> Tensor:
        h = x
        for i, conv in enumerate(self.convs[:-1]):
            if i > 0:
                h = F.dropout(h, self.dropout, self.training)
            h = F.relu(self._layer(conv, h, prop))
        return h

    def classify(self, h: Tensor, prop: Tensor | None) -> Tensor:
        return self._layer(self.convs[-1], F.dropout(h, self.dropout, self.training), prop)


class ACMBody(ACMGCN):
    r""":class:`~fgl_flower.models.acmgcn.ACMGCN` (S2FGL's backbone) with its low-pass filter
    given: :math:`\tilde{\mathbf D}^{-1}(\mathbf I + \mathbf A)` of the clean graph, the
    row-normalised sampled graph (its diagonal set) for the augmented view. The features are
    the last ACM layer's output; the classifier is linear, so the output layer propagates
    nothing."""

    head = "classifier."

    def propagation(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return self.low_pass(x, edge_index)

    def output_propagation(self, x: Tensor, edge_index: Tensor) -> None:
        return None

    def dense_propagation(self, a: Tensor) -> Tensor:
        return a / a.sum(dim=1, keepdim=True).clamp(min=1e-12)

    def features(self, x: Tensor, prop: Tensor) -> Tensor:
        return self.filter(x, prop)

    def classify(self, h: Tensor, prop: Tensor | None) -> Tensor:
        return self.classifier(h)


#: The backbones FGGP trains (run option ``model``).
BODIES = {"gcn": GCNBody, "acmgcn": ACMBody}


class FGGPNet(nn.Module):
    """A backbone of :data:`BODIES` (``body``) and FGGP's :class:`Augmentor` (``aug``), whose
    hidden layers propagate with any given matrix: the clean graph's (sparse) or the
    augmentor's sampled graph (dense, with gradients)."""

    uses_edges = True

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int = 2,
        dropout: float = 0.5,
        backbone: str = "gcn",
    ) -> None:
        super().__init__()
        self.body = BODIES[backbone](
            in_channels, hidden_channels, out_channels, num_layers, dropout
        )
        self.aug = Augmentor(in_channels, hidden_channels)

    @property
    def head(self) -> str:
        """State-dict prefix of the classifier layer."""
        return f"body.{self.body.head}"

    def propagation(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """The hidden layers' matrix for the graph ``edge_index``."""
        return self.body.propagation(x, edge_index)

    def output_propagation(self, x: Tensor, edge_index: Tensor) -> Tensor | None:
        """The output layer's matrix for ``edge_index`` (``None``: it propagates nothing)."""
        return self.body.output_propagation(x, edge_index)

    def dense_propagation(self, sampled: Tensor) -> Tensor:
        """The hidden layers' matrix for a sampled 0/1 graph ``[N, N]`` (diagonal set)."""
        return self.body.dense_propagation(sampled)

    def features(self, x: Tensor, prop: Tensor) -> Tensor:
        """``[N, d]``: the last hidden representation, hidden layers propagating with ``prop``."""
        return self.body.features(x, prop)

    def propagate(
        self, x: Tensor, prop: Tensor, out_prop: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """``(features [N, d], logits [N, C])``, ``out_prop`` (default ``prop``) in the output layer."""
        h = self.body.features(x, prop)
        return h, self.body.classify(h, prop if out_prop is None else out_prop)

    def on_graph(self, x: Tensor, edge_index: Tensor) -> tuple[Tensor, Tensor]:
        """``(features [N, d], logits [N, C])`` on the graph ``edge_index``."""
        return self.propagate(
            x, self.propagation(x, edge_index), self.output_propagation(x, edge_index)
        )

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """Logits ``[N, C]`` on the graph ``edge_index``."""
        return self.on_graph(x, edge_index)[1]


class Augmentor(nn.Module):
    r"""FGGP's learnable edge augmentor (the official code's, GAug-style).

    .. math::
        \mathbf H = \mathrm{ReLU}\big(\tilde{\mathbf A}(\tilde{\mathbf A}\mathbf X\mathbf W_1)
        \mathbf W_2\big), \quad \mathbf S = \mathbf H\mathbf H^\top, \quad
        \boldsymbol\Pi = \alpha\,\frac{\mathbf S}{\max\mathbf S} + (1-\alpha)\,\mathbf A_{\text{aug}}

    with :math:`\tilde{\mathbf A}` the normalised global-knowledge graph
    (:func:`dense_normalize` of :math:`\mathbf A_{\text{aug}}`), :math:`\mathbf W_1 [F, d]`,
    :math:`\mathbf W_2 [d, d]`. :meth:`sample` draws
    :math:`\hat{\mathbf A}\sim\mathrm{RelaxedBernoulli}(\boldsymbol\Pi, T)` straight-through
    (0/1 forward, the relaxed sample's gradient backward), keeps its upper triangle
    mirrored and sets the diagonal to 1 (the backbone normalises it).
    """

    def __init__(self, in_channels: int, hidden_channels: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(in_channels, hidden_channels, bias=False)
        self.w2 = nn.Linear(hidden_channels, hidden_channels, bias=False)

    def scores(self, x: Tensor, a_norm: Tensor) -> Tensor:
        """``S [N, N]``, pair scores (>= 0) of the nodes' encodings."""
        h = F.relu(a_norm @ self.w2(a_norm @ self.w1(x)))
        return h @ h.t()

    @staticmethod
    def sample(scores: Tensor, a_aug: Tensor, alpha: float, temperature: float) -> Tensor:
        """The sampled view ``[N, N]`` (class docstring); probabilities kept in
        ``[1e-6, 1 - 1e-6]`` so that the relaxed sample's gradient stays finite."""
        top = scores.max().clamp(min=1e-12)
        probs = (alpha * scores / top + (1 - alpha) * a_aug).clamp(1e-6, 1 - 1e-6)
        u = torch.rand_like(probs).clamp(1e-12, 1 - 1e-12)
        soft = torch.sigmoid((torch.logit(probs) + torch.log(u) - torch.log1p(-u)) / temperature)
        hard = (soft > 0.5).to(soft.dtype)
        sampled = hard + (soft - soft.detach())  # exactly 0/1 forward
        upper = torch.triu(sampled, 1)
        sym = upper + upper.t()
        return sym + torch.diag(1 - torch.diagonal(sym))


def reconstruction_loss(scores: Tensor, a_aug: Tensor) -> Tensor:
    r"""GAug's graph-reconstruction loss:
    :math:`\frac{N^2}{2(N^2 - m)}\,\mathrm{BCEWithLogits}(\mathbf S, \mathbf A_{\text{aug}};
    \text{pos\_weight} = \frac{N^2 - m}{m})`, ``m`` the nonzeros of ``a_aug``."""
    n2, m = float(a_aug.numel()), float(a_aug.sum())
    if m <= 0 or m >= n2:
        return scores.new_zeros(())
    pos_weight = scores.new_tensor((n2 - m) / m)
    return (
        n2
        / (2 * (n2 - m))
        * F.binary_cross_entropy_with_logits(scores, a_aug, pos_weight=pos_weight)
    )


def knn_edges(z: Tensor, k: int) -> Tensor:
    """``[2, N * k']`` edges ``i -> j`` to each node's ``k' = min(k, N - 1)`` nearest
    neighbours ``j`` by cosine similarity of ``z [N, d]`` (itself excluded): the rows and
    columns of sklearn's ``kneighbors_graph(metric="cosine", include_self=False)`` as the
    official code turns them into edges, so that in a message-passing layer (source to
    target) a node's neighbours hear from it."""
    n = z.size(0)
    k = min(k, n - 1)
    if k <= 0:
        return torch.zeros(2, 0, dtype=torch.long, device=z.device)
    nbr = cosine_topk(z, k, self_loops=False).indices
    return torch.stack([torch.arange(n, device=z.device).repeat_interleave(k), nbr.reshape(-1)])


def prototype_weights(
    logits: Tensor, y: Tensor, train_mask: Tensor, num_classes: int
) -> tuple[Tensor, Tensor]:
    r"""``(W [P, N], classes [P])`` whose product with features ``z [N, d]`` gives the class
    prototypes :math:`\pi_c = \sum_v w_{vc}\,\mathbf z_v / (\sum_v w_{vc} + 10^{-6})`, for the
    ``P`` classes present among the pseudo-labels: :math:`w_{vc} = [\hat y_v = c]\max_{c'}
    p_{vc'}`, :math:`p = \mathrm{softmax}(\text{logits})`, training nodes at their label with
    weight 1. The confidences keep their gradient (the official code's)."""
    probs = F.softmax(logits, dim=1)
    conf, pseudo = probs.max(dim=1)
    pseudo = torch.where(train_mask, y, pseudo)
    conf = torch.where(train_mask, torch.ones_like(conf), conf)
    classes = torch.unique(pseudo)
    weights = (F.one_hot(pseudo, num_classes).to(conf.dtype) * conf[:, None]).t()[classes]
    return weights / (weights.sum(dim=1, keepdim=True) + 1e-6), classes


def prototype_contrast(views: Tensor, anchors: Tensor, tau: float) -> Tensor:
    r"""The official code's prototype InfoNCE between the augmented-view prototypes
    ``views [P, d]`` (:math:`\mathbf u`) and the clean-view ones ``anchors [P, d]``
    (:math:`\mathbf v`), both L2-normalised: class :math:`i`'s logits are
    :math:`[\mathbf u_i\cdot\mathbf v_i, \{\mathbf u_i\cdot\mathbf u_j\}_{j\ne i},
    \{\mathbf u_i\cdot\mathbf v_j\}_{j\ne i}]/\tau`, the first the positive; the mean
    cross-entropy over classes (0 for a single class)."""
    p = views.size(0)
    if p < 2:
        return views.sum() * 0.0
    u, v = F.normalize(views, dim=1), F.normalize(anchors, dim=1)
    off = ~torch.eye(p, dtype=torch.bool, device=u.device)
    pos = (u * v).sum(dim=1, keepdim=True)
    intra = (u @ u.t())[off].view(p, p - 1)
    cross = (u @ v.t())[off].view(p, p - 1)
    logits = torch.cat([pos, intra, cross], dim=1) / tau
    return F.cross_entropy(logits, torch.zeros(p, dtype=torch.long, device=u.device))


def prototype_scores(
    z: Tensor, memory: Tensor, labels: Tensor, num_classes: int, k: int, tau: float = 0.1
) -> Tensor:
    r"""``[N, C]`` class scores of the prototype classifier: each node's ``k`` most
    cosine-similar prototypes of ``memory [Q, d]`` (L2-normalised; ``labels [Q]``) vote for
    their class with weights :math:`\mathrm{softmax}(\text{sim}/\tau)` over those ``k``;
    :math:`\min(\text{score} + 10^{-5}, 1)`."""
    sim = F.normalize(z, dim=1) @ memory.t()
    top, idx = sim.topk(min(k, memory.size(0)), dim=1)
    weights = F.softmax(top / tau, dim=1)
    scores = z.new_zeros(z.size(0), num_classes).scatter_add_(1, labels[idx], weights)
    return (scores + 1e-5).clamp(max=1.0)
