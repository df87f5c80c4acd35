r"""FedHERO's dual-channel GNN with a latent-graph structure learner (spec §2).

**Structure learner** :math:`g_L` (``struct.*``): one GCN layer on the original graph,
:math:`\mathbf S = \sigma(\hat{\mathbf A}\,\mathrm{Dropout}(\mathbf X)\mathbf W_s + b_s)`
with :math:`\sigma` the identity (``activation="none"``, default: the paper names only "a
one-layer GNN") or ReLU (``"relu"``, spec A4: a ReLU unit that is 0 on every node gets no
gradient again; over the rounds most die, the embeddings lose rank, and on Chameleon's
Louvain clients every similarity went to +1, a latent graph picked arbitrarily), then a
multi-head similarity (Eq. 3, ``metric="weighted-cos"``)

.. math::
    \tilde a_{uv} = \frac{1}{N_H}\sum_{h=1}^{N_H}
        \cos\big(\mathbf w^1_h \odot \mathbf s_u,\; \mathbf w^2_h \odot \mathbf s_v\big),

and the kNN graph of Eq. 4 on the top-:math:`k` entries of every row (self included, as
printed). ``latent="binary"`` (default) keeps them as printed, :math:`K_{uv} = 1`, with a
straight-through gradient: the forward uses 1, the backward passes
:math:`\partial\mathcal L/\partial K_{uv}` to :math:`\tilde a_{uv}` (the "differentiability of
the top-k function" the paper relies on), so every row keeps :math:`k` neighbours whatever the
similarities' sign. ``latent="weighted"`` keeps the values, :math:`K_{uv} =
\mathrm{ReLU}(\tilde a_{uv})` (spec A1/A3, superseded: with Adam every kept value turns
negative within a few steps on Chameleon, Squirrel and Actor and the graph empties). Then
:math:`\tilde{\mathbf A} = (\mathbf K + \mathbf K^\top)/2` and :math:`\tilde{\mathbf A}_{norm}
= \mathbf D_{\tilde A}^{-1}\tilde{\mathbf A}`. The latent graph is rebuilt in every forward;
:meth:`LatentGraph.health` measures it (``probe.latent.*`` of the FedHERO client).

**Layers** (Eq. 5), from :math:`\mathbf Z^0 = \mathrm{Dropout}(\mathrm{ReLU}(\mathbf X \mathbf W_0
+ b_0))` (``proj``):

.. math::
    \mathbf Z^l = \mathrm{Dropout}\big(\mathrm{ReLU}\big(\alpha\,(\hat{\mathbf A}\mathbf Z^{l-1}
        \mathbf W^l_{loc} + b^l_{loc}) + (1-\alpha)(\tilde{\mathbf A}_{norm}\mathbf Z^{l-1}
        \mathbf W^l_g + b^l_g)\big)\big)

(global channel ``gconv.*``, local channel ``lconv.*``; without the dual channel both
terms use :math:`\mathbf W^l_g`), and the classifier ``cls`` on
:math:`[\mathbf X \| \mathbf Z^0 \| \dots \| \mathbf Z^L]` (Eq. 6).

**Regulariser** (Eqs. 7-8) on the symmetric :math:`\tilde{\mathbf A}` before normalisation:

.. math::
    \mathcal L_{smooth} = \frac{\lambda}{c}\sum_{u,v}\tilde A_{uv}\|\mathbf x_u-\mathbf x_v\|_2^2
        + \frac{\mu}{c}\|\tilde{\mathbf A}\|_F^2, \qquad c = N^2 \text{ or } 1.

On the binary graph its value depends only on which pairs are kept, so it has no gradient and
λ, μ shape nothing (the value is reported as ``probe.latent.reg``). ``reg_surrogate`` passes
its gradient straight through the top-k as well: that lowers every kept similarity, and on
Chameleon drives them all to -1 within 20 steps, where the top-k picks arbitrarily.

The similarity is computed in row blocks and only the :math:`N\times k` kept entries
live beyond a block, so memory grows as :math:`O(Nk + N_H d N)`, not :math:`O(N^2)`; time
is :math:`O(N_H d N^2)` per forward.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fgl_flower.methods.fedhero import LATENT_GRAPHS, STRUCT_ACTIVATIONS
from fgl_flower.models.node import GCNLayer
from fgl_flower.models.sparse import GraphCache, gcn_adjacency

#: Elements of one row block of the dense similarity (float32: 16 MiB).
BLOCK_ELEMENTS = 1 << 22


class LatentGraph:
    r"""A kNN latent graph: row ``u`` keeps ``weight[u, j]`` towards ``index[u, j]``.

    The graph it stands for is :math:`\tilde{\mathbf A} = (\mathbf K + \mathbf K^\top)/2`
    with :math:`\mathbf K` the kept entries (``index``, ``weight`` ``[N, k]``);
    ``similarity [N, k]`` holds the kept :math:`\tilde a_{uv}` themselves and ``row_mean
    [N]`` each row's mean over all :math:`N` entries (no gradient), for :meth:`health`.
    """

    def __init__(
        self,
        index: Tensor,
        weight: Tensor,
        similarity: Tensor | None = None,
        row_mean: Tensor | None = None,
    ) -> None:
        self.index, self.weight = index, weight
        self.similarity = weight.detach() if similarity is None else similarity
        self.row_mean = row_mean  # [N] mean similarity of every row (all N entries), if known

    @property
    def num_nodes(self) -> int:
        return self.index.size(0)

    def _transpose_sum(self, values: Tensor) -> Tensor:
        """:math:`\\mathbf K^\\top` applied to per-entry ``values [N, k, ...]``: summed into
        the entry's column node."""
        out = values.new_zeros((self.num_nodes, *values.shape[2:]))
        return out.index_add_(0, self.index.reshape(-1), values.reshape(-1, *values.shape[2:]))

    def degree(self) -> Tensor:
        """Row sums of :math:`\\tilde{\\mathbf A}` ``[N]``."""
        return (self.weight.sum(1) + self._transpose_sum(self.weight)) / 2

    def propagate(self, z: Tensor) -> Tensor:
        r""":math:`\mathbf D^{-1}\tilde{\mathbf A}\mathbf z` for ``z [N, d]`` (degrees clamped at 1e-12)."""
        msg = self.weight.unsqueeze(-1) * z[self.index]  # K z, per entry
        out = msg.sum(1) + self._transpose_sum(self.weight.unsqueeze(-1) * z.unsqueeze(1))
        return out / (2 * self.degree().clamp_min(1e-12)).unsqueeze(-1)

    def mutual_weight(self) -> Tensor:
        """Per entry ``(u, v)`` the weight of ``(v, u)`` if it was kept too, else 0 ``[N, k]``."""
        n = self.num_nodes
        rows = torch.arange(n, device=self.index.device).unsqueeze(1).expand_as(self.index)
        keys = (rows * n + self.index).reshape(-1)
        order = torch.argsort(keys)
        sorted_keys = keys[order]
        rev = (self.index * n + rows).reshape(-1)
        pos = torch.searchsorted(sorted_keys, rev).clamp_max(keys.numel() - 1)
        found = sorted_keys[pos] == rev
        flat = self.weight.reshape(-1)
        return torch.where(found, flat[order[pos]], torch.zeros_like(flat)).view_as(self.weight)

    def frobenius_sq(self) -> Tensor:
        r""":math:`\|\tilde{\mathbf A}\|_F^2 = \tfrac12\sum K_{uv}^2 + \tfrac12\sum K_{uv}K_{vu}`."""
        return ((self.weight**2).sum() + (self.weight * self.mutual_weight()).sum()) / 2

    @torch.no_grad()
    def health(self, y: Tensor | None = None, labelled: Tensor | None = None) -> dict[str, float]:
        r"""Whether the graph is alive, and what it links.

        * ``nonempty``: share of nodes whose row of :math:`\tilde{\mathbf A}` has a
          positive weight (0 when every kept value was zeroed);
        * ``weight``: mean kept weight :math:`K_{uv}`; ``similarity``: mean kept
          :math:`\tilde a_{uv}`; ``contrast``: mean over rows of the kept similarities'
          mean minus the row's mean (about 0 when the top-k picks arbitrarily among equal
          similarities: a collapsed metric);
        * ``edges``: node pairs :math:`u \ne v` with :math:`\tilde A_{uv} > 0`, per node;
        * ``targets``: share of nodes that some other node keeps (small when every row
          picks the same few nodes: a collapsed embedding);
        * ``hubs``: share of those kept entries (:math:`u \ne v`, weight > 0) that point at
          the most-kept 1 % of nodes (at least one node; about 0.01 for an even spread);
        * ``homophily`` (with labels ``y [N]``): share of those pairs whose two nodes
          have the same label, over pairs with both nodes in ``labelled [N]`` (bool).
        """
        n = self.num_nodes
        rows = torch.arange(n, device=self.index.device).unsqueeze(1).expand_as(self.index)
        live = (self.weight > 0) & (self.index != rows)
        u, v = rows[live], self.index[live]
        pairs = torch.unique(torch.minimum(u, v) * n + torch.maximum(u, v))
        out = {
            "nonempty": float((self.degree() > 0).float().mean()),
            "weight": float(self.weight.mean()),
            "similarity": float(self.similarity.mean()),
            "contrast": (
                float((self.similarity.mean(1) - self.row_mean).mean())
                if self.row_mean is not None
                else float("nan")
            ),
            "edges": pairs.numel() / max(n, 1),
            "targets": torch.unique(v).numel() / max(n, 1),
        }
        top = max(1, n // 100)
        indegree = torch.bincount(v, minlength=n)
        out["hubs"] = (
            float(indegree.topk(top).values.sum() / v.numel()) if v.numel() else float("nan")
        )
        if y is not None:
            a, b = pairs // n, pairs % n
            if labelled is not None:
                keep = labelled[a] & labelled[b]
                a, b = a[keep], b[keep]
            out["homophily"] = float((y[a] == y[b]).float().mean()) if a.numel() else float("nan")
        return out

    def to_dense(self) -> Tensor:
        """:math:`\\tilde{\\mathbf A}` as a dense ``[N, N]`` matrix (tests, small graphs)."""
        k = torch.zeros(
            self.num_nodes, self.num_nodes, dtype=self.weight.dtype, device=self.weight.device
        )
        k.scatter_(1, self.index, self.weight)
        return (k + k.t()) / 2


def pair_sq_distances(x: Tensor, index: Tensor) -> Tensor:
    r""":math:`\|\mathbf x_u - \mathbf x_{index[u, j]}\|_2^2` ``[N, k]`` for dense ``x [N, F]``,
    in row blocks (no gradient: features are data)."""
    n, k = index.shape
    block = max(1, BLOCK_ELEMENTS // max(1, k * x.size(1)))
    out = x.new_empty(n, k)
    with torch.no_grad():
        for s in range(0, n, block):
            diff = x[s : s + block].unsqueeze(1) - x[index[s : s + block]]
            out[s : s + block] = (diff * diff).sum(-1)
    return out


class StructureLearner(nn.Module):
    """:math:`g_L`: the GCN encoder and the similarity ``metric`` (spec §2.1, §2.7).

    ``activation``: ``relu`` or ``none`` on the encoder's output (see the module docstring).
    ``weighted-cos`` (Eq. 3): per-head scalings ``w1``, ``w2`` ``[N_H, d]``; ``cos``: plain
    cosine, no parameters; ``att``: :math:`\\frac1{N_H}\\sum_h \\mathrm{ReLU}(\\mathbf S\\mathbf
    W_h)\\mathrm{ReLU}(\\mathbf S\\mathbf W_h)^\\top` (``att [N_H, d, d]``); ``gat``:
    :math:`\\frac1{N_H}\\sum_h \\mathrm{LeakyReLU}_{0.2}(\\mathbf a_{h,1}^\\top\\mathbf s_u +
    \\mathbf a_{h,2}^\\top\\mathbf s_v)` (``a1``, ``a2`` ``[N_H, d]``).
    """

    def __init__(
        self,
        in_channels: int,
        hidden: int,
        heads: int,
        metric: str = "weighted-cos",
        latent: str = "binary",
        activation: str = "none",
    ) -> None:
        super().__init__()
        self.encoder = GCNLayer(in_channels, hidden)
        if latent not in LATENT_GRAPHS:
            raise ValueError(
                f"unknown latent graph {latent!r}; use one of {', '.join(LATENT_GRAPHS)}"
            )
        if activation not in STRUCT_ACTIVATIONS:
            raise ValueError(
                f"unknown activation {activation!r}; use one of {', '.join(STRUCT_ACTIVATIONS)}"
            )
        self.metric, self.heads, self.latent, self.activation = metric, heads, latent, activation
        shapes = {
            "weighted-cos": {"w1": (heads, hidden), "w2": (heads, hidden)},
            "cos": {},
            "att": {"att": (heads, hidden, hidden)},
            "gat": {"a1": (heads, hidden), "a2": (heads, hidden)},
        }
        if metric not in shapes:
            raise ValueError(f"unknown metric {metric!r}; use one of {', '.join(shapes)}")
        for name, shape in shapes[metric].items():
            p = nn.Parameter(torch.empty(shape))
            nn.init.xavier_uniform_(p.view(shape[0], -1) if len(shape) > 2 else p)
            self.register_parameter(name, p)

    def embed(self, x: Tensor, adj_t: Tensor) -> Tensor:
        """``S = σ(Â x W_s + b_s)`` ``[N, d]`` for dense ``x [N, F]``."""
        s = adj_t @ (x @ self.encoder.lin.weight.t()) + self.encoder.bias
        return F.relu(s) if self.activation == "relu" else s

    def _factors(self, s: Tensor) -> tuple[Tensor, Tensor]:
        """``P, Q`` with ``ã = P Qᵀ`` (the head mean folded into ``P``)."""
        if self.metric == "cos":
            p = F.normalize(s, dim=-1, eps=1e-8)
            return p, p
        if self.metric == "weighted-cos":
            p = F.normalize(s.unsqueeze(1) * self.w1, dim=-1, eps=1e-8)  # [N, H, d]
            q = F.normalize(s.unsqueeze(1) * self.w2, dim=-1, eps=1e-8)
        else:  # att
            p = q = F.relu(torch.einsum("nd,hde->nhe", s, self.att))
        return p.flatten(1) / self.heads, q.flatten(1)

    def knn(self, s: Tensor, k: int) -> LatentGraph:
        """The top-``k`` similarities of every row (self included) as a :class:`LatentGraph`:
        1 with a straight-through gradient (``binary``) or the values ReLU'd (``weighted``)."""
        n = s.size(0)
        k = min(k, n)
        block = max(1, BLOCK_ELEMENTS // (n * (self.heads if self.metric == "gat" else 1)))
        if self.metric == "gat":
            e1, e2 = s @ self.a1.t(), s @ self.a2.t()  # [N, H]
            sim_rows = lambda a, b: F.leaky_relu(e1[a:b].unsqueeze(1) + e2.unsqueeze(0), 0.2).mean(
                -1
            )  # noqa: E731
        else:
            p, q = self._factors(s)
            sim_rows = lambda a, b: p[a:b] @ q.t()  # noqa: E731
        values, index, means = [], [], []
        for a in range(0, n, block):
            sim = sim_rows(a, min(a + block, n))
            top = sim.topk(k, dim=1)
            values.append(top.values)
            index.append(top.indices)
            means.append(sim.detach().mean(1))
        values, index = torch.cat(values), torch.cat(index)
        weight = values - values.detach() + 1.0 if self.latent == "binary" else F.relu(values)
        return LatentGraph(index, weight, values.detach(), torch.cat(means))


class _LastForward:
    """What :meth:`FedHERONet.regularizer` needs from the last forward; not copied with the
    model (its tensors belong to that forward's autograd graph)."""

    def __init__(self) -> None:
        self.value: tuple[LatentGraph, Tensor, Tensor] | None = None  # latent, features, S

    def __deepcopy__(self, memo: dict) -> _LastForward:
        return _LastForward()


class FedHERONet(nn.Module):
    """FedHERO's model for one client's graph: ``forward(x, edge_index) -> [N, C]`` logits.

    Parameters: ``struct.*`` and ``gconv.*`` (the global channel, federated), ``proj``,
    ``lconv.*`` and ``cls`` (local). With ``in_channels = F``, ``hidden = d``, ``L`` layers,
    ``H`` heads and ``C`` classes there are :math:`(Fd + d) + 2Hd + L(d^2 + d)` global and
    :math:`(Fd + d) + L(d^2 + d) + (F + (L+1)d)C + C` local parameters (spec §2.6).
    :meth:`regularizer` is the latent-graph loss of the last forward.
    """

    def __init__(
        self,
        in_channels: int,
        hidden: int,
        out_channels: int,
        num_layers: int = 2,
        dropout: float = 0.5,
        *,
        alpha: float = 0.2,
        k: int = 20,
        heads: int = 4,
        metric: str = "weighted-cos",
        dual_channel: bool = True,
        lam: float = 0.1,
        mu: float = 0.1,
        reg_norm: str = "n2",
        latent: str = "binary",
        reg_surrogate: bool = False,
        struct_act: str = "none",
    ) -> None:
        super().__init__()
        # Global channel first: clients seeded alike build it alike whatever their local parts.
        self.struct = StructureLearner(in_channels, hidden, heads, metric, latent, struct_act)
        self.gconv = nn.ModuleList(GCNLayer(hidden, hidden) for _ in range(num_layers))
        self.proj = nn.Linear(in_channels, hidden)
        self.lconv = (
            nn.ModuleList(GCNLayer(hidden, hidden) for _ in range(num_layers))
            if dual_channel
            else None
        )
        self.cls = nn.Linear(in_channels + (num_layers + 1) * hidden, out_channels)
        self.alpha, self.k, self.dropout = alpha, k, dropout
        self.lam, self.mu, self.reg_norm, self.reg_surrogate = lam, mu, reg_norm, reg_surrogate
        self._cache = GraphCache()
        self._last = _LastForward()

    def dense_features(self, x: Tensor) -> Tensor:
        return self._cache.get("dense-x", (x,), lambda: x.to_dense() if x.is_sparse else x)

    def latent_graph(self, x: Tensor, edge_index: Tensor) -> LatentGraph:
        """The structure learner's graph for this input (dropout on ``x`` in training)."""
        return self._embed_and_link(x, edge_index)[0]

    def _embed_and_link(self, x: Tensor, edge_index: Tensor) -> tuple[LatentGraph, Tensor]:
        """The latent graph and the embeddings ``S [N, d]`` it was built from."""
        xd = self.dense_features(x)
        adj_t = self._adjacency(edge_index, xd.size(0))
        s = self.struct.embed(F.dropout(xd, self.dropout, self.training), adj_t)
        return self.struct.knn(s, self.k), s

    def _adjacency(self, edge_index: Tensor, n: int) -> Tensor:
        return self._cache.get(
            f"adjacency/{n}", (edge_index,), lambda: gcn_adjacency(edge_index, n)
        )

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        xd = self.dense_features(x)
        adj_t = self._adjacency(edge_index, xd.size(0))
        latent, s = self._embed_and_link(x, edge_index)
        self._last.value = (latent, xd, s.detach())
        z = F.dropout(F.relu(self.proj(xd)), self.dropout, self.training)
        outs = [xd, z]
        for i, g in enumerate(self.gconv):
            loc = g if self.lconv is None else self.lconv[i]
            h = latent.propagate(z @ g.lin.weight.t()) + g.bias
            e = adj_t @ (z @ loc.lin.weight.t()) + loc.bias
            z = F.dropout(
                F.relu(self.alpha * e + (1 - self.alpha) * h), self.dropout, self.training
            )
            outs.append(z)
        return self.cls(torch.cat(outs, dim=1))

    def last_latent_graph(self) -> LatentGraph:
        """The latent graph the last forward built (e.g. the evaluation's)."""
        if self._last.value is None:
            raise RuntimeError("last_latent_graph() needs a forward pass first")
        return self._last.value[0]

    @torch.no_grad()
    def embedding_health(self) -> dict[str, float]:
        r"""The structure learner's embeddings :math:`\mathbf S` of the last forward:
        ``dead_units``, the share of its :math:`d` units that are 0 for every node (a ReLU
        unit that is, learns no more), and
        ``rank``, their effective rank :math:`(\sum_i\sigma_i)^2/\sum_i\sigma_i^2` over the
        singular values (1 when every node's embedding points the same way: then every
        similarity is equal and the top-k picks arbitrarily)."""
        if self._last.value is None:
            raise RuntimeError("embedding_health() needs a forward pass first")
        s = self._last.value[2].float()
        sv = torch.linalg.svdvals(s)
        rank = float(sv.sum() ** 2 / (sv**2).sum()) if float(sv.sum()) > 0 else 0.0
        return {"dead_units": float(((s != 0).sum(0) == 0).float().mean()), "rank": rank}

    def regularizer(self) -> Tensor:
        """:math:`\\mathcal L_{smooth}` of the latent graph built by the last forward.

        On the binary graph its value depends only on which pairs are kept, so its gradient
        is zero (as printed) unless ``reg_surrogate`` passes it straight through the top-k
        to the kept similarities like the propagation's."""
        if self._last.value is None:
            raise RuntimeError("regularizer() needs a forward pass first")
        latent, xd, _ = self._last.value
        if self.struct.latent == "binary" and not self.reg_surrogate:
            latent = LatentGraph(latent.index, latent.weight.detach(), latent.similarity)
        scale = 1.0 / latent.num_nodes**2 if self.reg_norm == "n2" else 1.0
        smooth = (latent.weight * pair_sq_distances(xd, latent.index)).sum()
        return scale * (self.lam * smooth + self.mu * latent.frobenius_sq())


def latent_graph_bytes(num_nodes: int, k: int) -> int:
    """Bytes the kept latent graph holds (int64 index + float32 weight per entry)."""
    return num_nodes * min(k, num_nodes) * (8 + 4)


def similarity_block_rows(num_nodes: int) -> int:
    """Rows of one block of the dense similarity (its transient peak is this × ``N`` floats)."""
    return max(1, BLOCK_ELEMENTS // num_nodes)


__all__ = [
    "LATENT_GRAPHS",
    "FedHERONet",
    "LatentGraph",
    "StructureLearner",
    "latent_graph_bytes",
    "pair_sq_distances",
    "similarity_block_rows",
]
