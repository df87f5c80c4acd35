r"""FedLit's multi-channel GCN and its link-type clustering (Xie, Xiong and Yang, "Federated
Node Classification over Graphs with Latent Link-type Heterogeneity", WWW 2023; official code
Oxfordblue7/FedLIT).

A shared projection :math:`\mathbf H = \mathbf X\mathbf W_1 + \mathbf b_1` (``feature1``,
``[N, H]``) gives every edge :math:`(u, v)`, :math:`u < v`, the embedding
:math:`\mathbf e_{uv} = [\mathbf h_u \,\|\, \mathbf h_v]` (``[2H]``; both directions of an
undirected edge share it). The edges are clustered into :math:`K` latent link types by their
cosine similarity to :math:`K` centroids :math:`\mathbf c_k` (a buffer, ``[K, 2H]``); the
type-:math:`k` edges :math:`\mathcal E_k` form a subgraph on which channel :math:`k` runs

.. math::
    \mathbf Z_k^0 = \mathbf H\mathbf W_{2,k} + \mathbf b_{2,k}, \qquad
    \mathbf Z_k^{l} = \mathrm{Dropout}\bigl(\mathrm{ReLU}(\mathbf D_k^{-1/2}\mathbf A_k
        \mathbf D_k^{-1/2}\mathbf Z_k^{l-1}\mathbf W_k^l + \mathbf b_k^l)\bigr)

(``channels.<k>``: ``proj`` and ``L`` GCN layers, no self-loops: DGL's ``GraphConv``; on a
directed graph out-degrees at the source, in-degrees at the target), and a
node's representation is the sum of the channels whose subgraph holds it (a node without a
type-:math:`k` edge gets nothing from channel :math:`k`); ``classifier`` maps it to ``[N, C]``.

The clustering (:meth:`FedLitNet.em_step`, once per local epoch before the forward): an
assignment of every edge to its most similar centroid, then the centroids move to the means
of their edges (``em-iters`` times); the epoch trains on the assignment. The very first step
of a client runs mini-batch k-means instead (scikit-learn's ``MiniBatchKMeans``, one pass,
``batch_size`` 1024, three initialisations: scikit-learn's default when the official code was
written, as it seeds it). Evaluation assigns by the current
centroids without moving them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fgl_flower.errors import FGLError
from fgl_flower.models.node import GCNLayer


def canonical_edges(edge_index: Tensor) -> Tensor:
    """``[2, E]``: each directed edge as ``(min, max)`` of its endpoints (the official
    ``self.edges``), so both directions of an undirected edge get one embedding and type."""
    return torch.stack([edge_index.min(0).values, edge_index.max(0).values])


def edge_embeddings(h: Tensor, edges: Tensor) -> Tensor:
    r"""``[E, 2H]``: :math:`[\mathbf h_u \| \mathbf h_v]` of the canonical ``edges``."""
    return torch.cat([h[edges[0]], h[edges[1]]], dim=1)


def assign_types(emb: Tensor, centroids: Tensor) -> Tensor:
    """``[E]``: the index of each row's most cosine-similar centroid (first on ties)."""
    sim = F.normalize(emb, dim=1, eps=1e-8) @ F.normalize(centroids, dim=1, eps=1e-8).t()
    return sim.argmax(dim=1)


def update_centroids(emb: Tensor, types: Tensor, centroids: Tensor) -> Tensor:
    """``[K, 2H]``: the mean of each type's rows; a type without edges keeps its centroid
    (the official code's mean of nothing is NaN, which then breaks every assignment)."""
    k = centroids.size(0)
    sums = torch.zeros_like(centroids).index_add_(0, types, emb)
    counts = torch.bincount(types, minlength=k).to(emb.dtype)
    return torch.where(counts[:, None] > 0, sums / counts.clamp(min=1)[:, None], centroids)


def kmeans_init(emb: Tensor, k: int, seed: int) -> tuple[Tensor, Tensor]:
    """``(centroids [K, 2H], types [E])`` of one pass of scikit-learn's ``MiniBatchKMeans``
    (``random_state=seed``, ``batch_size=1024``, ``max_iter=1``: the official initialisation)."""
    from sklearn.cluster import MiniBatchKMeans

    data = emb.detach().cpu().double().numpy()
    if len(data) < k:
        raise FGLError(
            f"fedlit: a client graph with {len(data)} directed edges cannot seed "
            f"{k} link types; lower fedlit.num-types or use larger clients."
        )
    km = MiniBatchKMeans(
        n_clusters=k, random_state=seed, batch_size=1024, max_iter=1, n_init=3
    ).fit(data)
    return (
        torch.as_tensor(km.cluster_centers_, dtype=emb.dtype, device=emb.device),
        torch.as_tensor(km.labels_, dtype=torch.long, device=emb.device),
    )


def both_norm_adjacency(
    edge_index: Tensor, num_nodes: int, dtype: torch.dtype = torch.float32
) -> Tensor:
    r"""``[N, N]`` sparse :math:`\mathbf P` with :math:`P_{vu} = d^{out}_u{}^{-1/2}\,
    d^{in}_v{}^{-1/2}` for every edge :math:`u \to v` of ``edge_index [2, E]`` (source, target):
    DGL ``GraphConv``'s ``norm="both"`` without self-loops (on an undirected graph the
    symmetric :math:`\mathbf D^{-1/2}\mathbf A\mathbf D^{-1/2}`)."""
    src, dst = edge_index
    ones = torch.ones(src.numel(), dtype=dtype, device=src.device)
    d_out = torch.zeros(num_nodes, dtype=dtype, device=src.device).index_add_(0, src, ones)
    d_in = torch.zeros(num_nodes, dtype=dtype, device=src.device).index_add_(0, dst, ones)
    value = d_out[src].rsqrt() * d_in[dst].rsqrt()
    return torch.sparse_coo_tensor(
        torch.stack([dst, src]), value, (num_nodes, num_nodes), check_invariants=False
    ).coalesce()


class FedLitChannel(nn.Module):
    """One link type's channel: ``proj`` (H→H) and ``L`` GCN layers (module docstring)."""

    def __init__(self, hidden: int, num_layers: int) -> None:
        super().__init__()
        self.proj = nn.Linear(hidden, hidden)
        self.convs = nn.ModuleList(GCNLayer(hidden, hidden) for _ in range(num_layers))

    def forward(self, h: Tensor, edge_index: Tensor, dropout: float, training: bool) -> Tensor:
        n = h.size(0)
        adj_t = both_norm_adjacency(edge_index, n, h.dtype)
        z = self.proj(h)
        for conv in self.convs:
            z = F.dropout(F.relu(adj_t @ (z @ conv.lin.weight.t()) + conv.bias), dropout, training)
        present = torch.zeros(n, dtype=torch.bool, device=h.device)
        present[edge_index.reshape(-1)] = True
        return z * present[:, None]


class FedLitNet(nn.Module):
    """``forward(x [N, F], edge_index [2, E]) -> [N, C]`` (module docstring).

    Args:
        num_features, hidden, num_classes: the widths.
        num_types: ``K``, the latent link types (channels).
        num_layers: GCN layers per channel.
        dropout: after each GCN layer.
        em_iters: assignment/mean iterations per :meth:`em_step`.
        seed: seeds the first step's k-means.
    """

    def __init__(
        self,
        num_features: int,
        hidden: int,
        num_classes: int,
        num_types: int = 4,
        num_layers: int = 2,
        dropout: float = 0.5,
        em_iters: int = 1,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.dropout, self.em_iters, self.seed = dropout, em_iters, seed
        self.feature1 = nn.Linear(num_features, hidden)
        self.channels = nn.ModuleList(FedLitChannel(hidden, num_layers) for _ in range(num_types))
        self.classifier = nn.Linear(hidden, num_classes)
        self.register_buffer("centroids", torch.zeros(num_types, 2 * hidden))
        self.register_buffer("initialized", torch.zeros((), dtype=torch.long))
        self.last_types: Tensor | None = None  # the type of every edge in the last forward

    @property
    def num_types(self) -> int:
        return len(self.channels)

    def project(self, x: Tensor) -> Tensor:
        """``[N, H]``: the shared projection ``feature1``."""
        return self.feature1(x)

    @torch.no_grad()
    def em_step(self, h: Tensor, edge_index: Tensor) -> Tensor:
        """Cluster the edges of ``h``'s graph and move the centroids; returns the types
        ``[E]`` (per ``edge_index`` column) the epoch trains on: the first call's k-means
        labels, later the assignment to the centroids before they move."""
        emb = edge_embeddings(h.detach(), canonical_edges(edge_index))
        if emb.size(0) == 0:  # no edges: nothing to cluster, every channel is empty
            return torch.zeros(0, dtype=torch.long, device=h.device)
        if not bool(self.initialized):
            centroids, types = kmeans_init(emb, self.num_types, self.seed)
            self.centroids.copy_(centroids)
            self.initialized.fill_(1)
            return types
        types = assign_types(emb, self.centroids)
        for i in range(self.em_iters):
            if i:
                types = assign_types(emb, self.centroids)
            self.centroids.copy_(update_centroids(emb, types, self.centroids))
        return types

    def types_of(self, h: Tensor, edge_index: Tensor) -> Tensor:
        """``[E]``: every edge's type by the current centroids (evaluation)."""
        return assign_types(
            edge_embeddings(h.detach(), canonical_edges(edge_index)), self.centroids
        )

    def classify(self, h: Tensor, edge_index: Tensor, types: Tensor) -> Tensor:
        """``[N, C]`` from the projection ``h`` and the edges' ``types``."""
        self.last_types = types
        out = sum(
            ch(h, edge_index[:, types == k], self.dropout, self.training)
            for k, ch in enumerate(self.channels)
        )
        return self.classifier(out)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        h = self.project(x)
        if not bool(self.initialized) and edge_index.size(
            1
        ):  # never trained: a first step's k-means
            types = kmeans_init(
                edge_embeddings(h.detach(), canonical_edges(edge_index)), self.num_types, self.seed
            )[1]
            return self.classify(h, edge_index, types)
        return self.classify(h, edge_index, self.types_of(h, edge_index))


def build_fedlit(
    num_features: int,
    num_classes: int,
    hidden: int,
    num_types: int,
    num_layers: int,
    dropout: float,
    em_iters: int,
    seed: int,
    init: str = "default",
) -> FedLitNet:
    """A :class:`FedLitNet` initialised by ``INITS[init]`` (the run's ``model-init``); built
    under ``cpu_seeded(seed)`` it is every client's round-1 model."""
    from fgl_flower.models import INITS

    model = FedLitNet(
        num_features, hidden, num_classes, num_types, num_layers, dropout, em_iters, seed
    )
    INITS.get(init)(model)
    return model
