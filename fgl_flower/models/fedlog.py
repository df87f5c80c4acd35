r"""FedLoG's local model (Kim et al., "Subgraph Federated Learning for Local Generalization",
ICLR 2025), as the official code (sung-won-kim/FedLoG) builds it.

A GraphSAGE embedder maps nodes to :math:`\mathbf h \in \mathbb R^{d}`. Each class has
``k`` learnable synthetic nodes per branch (*head* and *tail*, ``[C k, F]`` features embedded
through the same embedder, each node its own only neighbour); a branch's class prototype is
the mean of its class's synthetic embeddings. A branch first layer-normalises the query
embeddings, then (``adaptation = queries``) moves each query by messages from every
prototype node, EGNN-style:

.. math::
    \mathbf d_{pq} = \mathbf s_p - \mathbf q,\qquad
    \mathbf m_{pq} = \phi_m\bigl([\bar{\mathbf h}_{N(q)} \,\|\, \lVert\mathbf d_{pq}\rVert^2]\bigr),\qquad
    \mathbf q \leftarrow \mathbf q + \tfrac{1}{P}\textstyle\sum_p \mathbf d_{pq}\,\phi_t(\mathbf m_{pq})

(:math:`\bar{\mathbf h}_{N(q)}` the mean embedding of the query's neighbours), and classifies by
the negative squared distance to the prototypes. The two branches are mixed by the query's
degree, :math:`\alpha = \sigma(\deg - (\tau + 1))`:
:math:`\log p = \alpha \log p_{\text{head}} + (1 - \alpha) \log p_{\text{tail}}` in training,
:math:`p = \alpha p_{\text{head}} + (1 - \alpha) p_{\text{tail}}` in evaluation.

``adaptation = official``: the code averages the messages at the *prototype* end of each edge
and adds only the query rows of that average, which are zero, so the queries stay as
layer-normalised (the layers' parameters exist, travel, and receive no gradient).

:class:`NeighborGenerator` maps a node's features to a generated neighbour's (the code's
``neighGen``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn.models import GraphSAGE

ADAPTATIONS = ("queries", "official")


class NeighborGenerator(nn.Module):
    """``F -> 256 -> 512 -> F``: ReLU, ReLU, dropout 0.5, tanh (features of one generated
    neighbour per node)."""

    def __init__(self, num_features: int, dropout: float = 0.5) -> None:
        super().__init__()
        self.fc1 = nn.Linear(num_features, 256)
        self.fc2 = nn.Linear(256, 512)
        self.fc_flat = nn.Linear(512, num_features)
        self.dropout = dropout

    def forward(self, x: Tensor) -> Tensor:
        x = F.relu(self.fc2(F.relu(self.fc1(x))))
        return torch.tanh(self.fc_flat(F.dropout(x, self.dropout, self.training)))


class AdaptationLayer(nn.Module):
    """One message step from the prototype (synthetic) nodes to the queries (module doc)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.msg_mlp = nn.Sequential(
            nn.Linear(hidden + 1, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU()
        )
        last = nn.Linear(hidden, 1, bias=False)
        nn.init.xavier_uniform_(last.weight, gain=0.001)
        self.trans_mlp = nn.Sequential(
            nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), last
        )

    def forward(self, queries: Tensor, neighbors: Tensor, protos: Tensor) -> Tensor:
        """``queries [Q, d]``, their neighbours' mean ``[Q, d]``, ``protos [P, d]`` -> the
        moved queries ``[Q, d]`` (every prototype sends to every query)."""
        q, p = queries.size(0), protos.size(0)
        diff = protos.unsqueeze(0) - queries.unsqueeze(1)  # [Q, P, d]: s_p - q
        dist = (diff * diff).sum(-1, keepdim=True)  # [Q, P, 1]
        msg = self.msg_mlp(torch.cat([neighbors.unsqueeze(1).expand(q, p, -1), dist], dim=-1))
        return queries + (diff * self.trans_mlp(msg)).mean(dim=1)


class MetricBranch(nn.Module):
    """LayerNorm of the queries, then ``layers`` :class:`AdaptationLayer` steps (the code's
    ``clsf``)."""

    def __init__(self, hidden: int, layers: int = 2, adaptation: str = "queries") -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(AdaptationLayer(hidden) for _ in range(layers))
        self.adaptation = adaptation
        self.last_shift = 0.0  # ||adapted - normalised|| / ||normalised|| of the last call

    def forward(self, queries: Tensor, neighbors: Tensor, protos: Tensor) -> Tensor:
        q = self.norm(queries)
        if self.adaptation == "official":
            self.last_shift = 0.0
            return q
        out = q
        for layer in self.layers:
            out = layer(out, neighbors, protos)
        with torch.no_grad():
            self.last_shift = float((out - q).norm() / q.norm().clamp_min(1e-12))
        return out


def code_linear(in_features: int, out_features: int) -> nn.Linear:
    """A linear layer initialised as the code's ``Linear``: weight and bias
    ``U(-1/sqrt(out), 1/sqrt(out))``."""
    layer = nn.Linear(in_features, out_features)
    bound = 1.0 / math.sqrt(out_features)
    nn.init.uniform_(layer.weight, -bound, bound)
    nn.init.uniform_(layer.bias, -bound, bound)
    return layer


def degree_weight(deg: Tensor, threshold: int) -> Tensor:
    r""":math:`\alpha = \sigma(\deg - (\tau + 1))`, the head branch's weight ``[N, 1]``."""
    return torch.sigmoid(deg.float() - (threshold + 1)).unsqueeze(1)


def neighbor_mean(h: Tensor, edge_index: Tensor) -> Tensor:
    """Each node's mean over its out-neighbours ``[N, d]`` (self-loops left out; zero without
    neighbours)."""
    src, dst = edge_index[:, edge_index[0] != edge_index[1]]
    total = torch.zeros_like(h).index_add_(0, src, h[dst])
    count = torch.bincount(src, minlength=h.size(0)).clamp(min=1).to(h.dtype)
    return total / count.unsqueeze(1)


class FedLoGNet(nn.Module):
    """Embedder (GraphSAGE ``F -> 2d -> d``, dropout 0.5), the pretraining classifier
    ``d -> C``, the head and tail branches and their synthetic nodes ``syn_head``,
    ``syn_tail`` ``[C k, F]`` (xavier-uniform, class-major).

    ``forward(x, edge_index)`` returns the evaluation's log-probabilities ``[N, C]``
    (:meth:`log_mixture` of :meth:`branch_log_probs`).
    """

    uses_edges = True

    def __init__(
        self,
        num_features: int,
        hidden: int,
        num_classes: int,
        num_proto: int = 20,
        threshold: int = 3,
        adaptation: str = "queries",
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        self.num_classes, self.num_proto, self.threshold = num_classes, num_proto, threshold
        self.embedder = GraphSAGE(
            num_features, 2 * hidden, num_layers=2, out_channels=hidden, dropout=dropout
        )
        self.classifier = code_linear(hidden, num_classes)
        self.head = MetricBranch(hidden, 2, adaptation)
        self.tail = MetricBranch(hidden, 2, adaptation)
        self.syn_head = nn.Parameter(torch.empty(num_classes * num_proto, num_features))
        self.syn_tail = nn.Parameter(torch.empty(num_classes * num_proto, num_features))
        nn.init.xavier_uniform_(self.syn_head)
        nn.init.xavier_uniform_(self.syn_tail)

    def embed(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return self.embedder(x.to_dense() if x.is_sparse else x, edge_index)

    def embed_synthetic(self, syn: Tensor) -> Tensor:
        """Synthetic nodes, each its own only neighbour, ``[C k, d]``."""
        loops = torch.arange(syn.size(0), device=syn.device).repeat(2, 1)
        return self.embedder(syn, loops)

    def prototypes(self, syn_h: Tensor) -> Tensor:
        """``[C, d]``: the mean of each class's ``k`` synthetic embeddings."""
        return syn_h.view(self.num_classes, self.num_proto, -1).mean(1)

    def synthetic_embeddings(self) -> tuple[Tensor, Tensor]:
        """The head and tail branches' synthetic nodes through the embedder, ``[C k, d]`` each."""
        return self.embed_synthetic(self.syn_head), self.embed_synthetic(self.syn_tail)

    def branch_log_probs(
        self, h: Tensor, neighbors: Tensor, syn: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, Tensor]:
        """Per branch, ``log softmax(-||q - proto||^2)`` ``[Q, C]`` of queries ``h [Q, d]``
        with their neighbours' mean embeddings ``neighbors [Q, d]`` (``syn``: the
        :meth:`synthetic_embeddings` of this step, computed if not given)."""
        syn = self.synthetic_embeddings() if syn is None else syn
        out = []
        for branch, syn_h in zip((self.head, self.tail), syn):
            q = branch(h, neighbors, syn_h)
            dist = (q.unsqueeze(1) - self.prototypes(syn_h).unsqueeze(0)).pow(2).sum(-1)
            out.append(F.log_softmax(-dist, dim=1))
        return out[0], out[1]

    @staticmethod
    def log_mixture(head: Tensor, tail: Tensor, alpha: Tensor) -> Tensor:
        """``log(alpha p_head + (1 - alpha) p_tail)`` (the evaluation's mixture)."""
        return torch.logaddexp(
            alpha.clamp_min(1e-30).log() + head, (1 - alpha).clamp_min(1e-30).log() + tail
        )

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        h = self.embed(x, edge_index)
        head, tail = self.branch_log_probs(h, neighbor_mean(h, edge_index))
        deg = torch.bincount(edge_index[0], minlength=h.size(0))
        return self.log_mixture(head, tail, degree_weight(deg, self.threshold))
