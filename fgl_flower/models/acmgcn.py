r"""ACM-GCN (Luan et al., NeurIPS 2022): adaptive channel mixing of low-pass, high-pass
and identity filters, in the configuration of S2FGL's official code (spec ``s2fgl.md`` §2).

Every layer filters its input three ways and mixes the three channels with per-node
attention weights, so each node chooses how much it relies on smoothing (homophily),
on sharpening (heterophily) or on its own features.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.index import index2ptr
from torch_geometric.utils import scatter, to_torch_csr_tensor

from fgl_flower.models.sparse import GraphCache, _CSRMatmul, quiet_csr


def acm_low_pass(
    edge_index: Tensor,
    num_nodes: int,
    edge_weight: Tensor | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    r"""The row-normalised low-pass filter :math:`\hat{\mathbf A}_{\text{low}} =
    \tilde{\mathbf D}^{-1}(\mathbf I + \mathbf A)` as CSR ``[N, N]``.

    Row :math:`i` averages node :math:`i` and its in-neighbours (the sources of the edges
    pointing to :math:`i`, as in PyG's message passing), weighted by ``edge_weight``
    (default 1). A unit self-loop is always added and duplicate edges are summed, as in
    the dense :math:`\mathbf I + \mathbf A` of the official code.
    """
    device = edge_index.device
    loop = torch.arange(num_nodes, device=device)
    w = (
        torch.ones(edge_index.size(1), dtype=dtype, device=device)
        if edge_weight is None
        else edge_weight.to(dtype)
    )
    row = torch.cat([edge_index[1], loop])  # target
    col = torch.cat([edge_index[0], loop])  # source
    val = torch.cat([w, torch.ones(num_nodes, dtype=dtype, device=device)])
    deg = scatter(val, row, 0, dim_size=num_nodes, reduce="sum")
    with (
        torch.sparse.check_sparse_tensor_invariants(enable=False),
        quiet_csr(),
    ):  # built valid; no notice
        return to_torch_csr_tensor(
            torch.stack([row, col]), val / deg[row], size=(num_nodes, num_nodes)
        )


def _csr_structure(x: Tensor) -> tuple[Tensor, ...]:
    """Index arrays of CSR copies of a sparse COO ``x [N, F]`` and ``x.T [F, N]``, the values
    of ``x`` in CSR order, and the permutation taking them to the order of ``x.T``."""
    x = x.coalesce()  # row-major order, i.e. CSR order
    (r, c), v = x.indices(), x.values()
    n, f = x.shape
    perm = torch.argsort(c * n + r)
    return index2ptr(r, n), c, v, index2ptr(c[perm], f), r[perm], perm


def dropout_feature_matmul(
    x: Tensor, weight: Tensor, p: float, training: bool, cache: GraphCache
) -> Tensor:
    """``dropout(x) @ weight`` for dense or sparse ``x [N, F]`` (``weight [F, out]``).

    For sparse ``x`` only the stored entries are dropped, which has the same distribution
    as dense dropout (zeros stay zero); the CSR index arrays are built once per ``x``.
    No gradient flows into a sparse ``x``.
    """
    if not x.is_sparse:
        return F.dropout(x, p, training) @ weight
    crow, col, v, crow_t, col_t, perm = cache.get(
        "feature_structure", (x,), lambda: _csr_structure(x)
    )
    if training and p > 0:
        v = v * torch.empty_like(v).bernoulli_(1 - p) / (1 - p)
    n, f = x.shape
    with quiet_csr():
        x_csr = torch.sparse_csr_tensor(crow, col, v, (n, f), check_invariants=False)
        x_t = torch.sparse_csr_tensor(crow_t, col_t, v[perm], (f, n), check_invariants=False)
    return _CSRMatmul.apply(x_csr, x_t, weight)


class ACMConv(nn.Module):
    r"""One ACM-GCN layer: three filtered channels mixed by node-wise attention.

    .. math::
        \mathbf H_L = \mathrm{ReLU}(\hat{\mathbf A}_{\text{low}}\mathbf H\mathbf W_L),\quad
        \mathbf H_H = \mathrm{ReLU}(\hat{\mathbf A}_{\text{high}}\mathbf H\mathbf W_H),\quad
        \mathbf H_I = \mathrm{ReLU}(\mathbf H\mathbf W_I),

        \boldsymbol\alpha = \mathrm{softmax}\Big(\sigma\big([\mathbf H_L\mathbf a_L,\
        \mathbf H_H\mathbf a_H,\ \mathbf H_I\mathbf a_I]\big)\,\mathbf W_{\text{mix}} / T\Big),
        \qquad T = 3,

        \mathbf H' = 3\,(\boldsymbol\alpha_L\odot\mathbf H_L + \boldsymbol\alpha_H\odot
        \mathbf H_H + \boldsymbol\alpha_I\odot\mathbf H_I),

    with :math:`\hat{\mathbf A}_{\text{high}} = \mathbf I - \hat{\mathbf A}_{\text{low}}`
    (see :func:`acm_low_pass`), the softmax taken per node (row) and each
    :math:`\boldsymbol\alpha_\cdot` a per-node scalar. No LayerNorm and no biases, as in
    the code the spec follows. All parameters are Xavier-uniform initialised.

    Shapes:
        input ``x [N, in_channels]``, ``adj_low`` CSR ``[N, N]``;
        output ``[N, out_channels]``.
    """

    temperature = 3.0

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        # Stored [in, out], so the layer computes H @ W.
        self.weight_low = nn.Parameter(torch.empty(in_channels, out_channels))
        self.weight_high = nn.Parameter(torch.empty(in_channels, out_channels))
        self.weight_id = nn.Parameter(torch.empty(in_channels, out_channels))
        self.att_low = nn.Parameter(torch.empty(out_channels, 1))
        self.att_high = nn.Parameter(torch.empty(out_channels, 1))
        self.att_id = nn.Parameter(torch.empty(out_channels, 1))
        self.att_mix = nn.Parameter(torch.empty(3, 3))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for p in self.parameters():
            nn.init.xavier_uniform_(p)

    @property
    def weight(self) -> Tensor:
        r""":math:`[\mathbf W_L \,\|\, \mathbf W_H \,\|\, \mathbf W_I]`, ``[in, 3 * out]``."""
        return torch.cat([self.weight_low, self.weight_high, self.weight_id], dim=1)

    def forward(self, x: Tensor, adj_low: Tensor) -> Tensor:
        return self.mix(x @ self.weight, adj_low)

    def channels(self, xw: Tensor, adj_low: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        r"""The filtered channels :math:`(\mathbf H_L, \mathbf H_H, \mathbf H_I)` from the
        projected input ``xw = x @ self.weight``."""
        d = self.out_channels
        # One sparse product serves both graph filters: A_high H W = H W - A_low H W.
        smooth = adj_low @ xw[:, : 2 * d]
        h_low = F.relu(smooth[:, :d])
        h_high = F.relu(xw[:, d : 2 * d] - smooth[:, d:])
        h_id = F.relu(xw[:, 2 * d :])
        return h_low, h_high, h_id

    def attention(self, h_low: Tensor, h_high: Tensor, h_id: Tensor) -> Tensor:
        r"""Mixing weights :math:`\boldsymbol\alpha` ``[N, 3]`` (columns: low, high,
        identity; rows sum to 1)."""
        e = torch.sigmoid(
            torch.cat([h_low @ self.att_low, h_high @ self.att_high, h_id @ self.att_id], 1)
        )
        return torch.softmax(e @ self.att_mix / self.temperature, dim=1)

    def mix(self, xw: Tensor, adj_low: Tensor) -> Tensor:
        """The layer output from the projected input ``xw = x @ self.weight``."""
        h_low, h_high, h_id = self.channels(xw, adj_low)
        a = self.attention(h_low, h_high, h_id)
        return 3 * (a[:, 0:1] * h_low + a[:, 1:2] * h_high + a[:, 2:3] * h_id)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"


class ACMGCN(nn.Module):
    r"""ACM-GCN node classifier (Luan et al., 2022), as used by S2FGL (spec ``s2fgl.md`` §2):
    ``num_layers`` :class:`ACMConv` layers followed by a linear classifier.

    .. math::
        \mathbf h = \mathrm{ACM}_L\big(\dots\mathrm{dropout}(\mathrm{ReLU}(
        \mathrm{ACM}_1(\mathrm{dropout}(\mathbf X))))\big),\qquad
        \mathbf z = \mathbf h\mathbf W_{\text{out}} + \mathbf b_{\text{out}}

    With ``num_layers=2``, ``hidden_channels=128`` and ``dropout=0.1`` this is S2FGL's
    backbone: :math:`F\to128\to128` ACM layers, then :math:`128\to C`. Unlike the other
    backbones, dropout also acts on the raw input (only on stored entries of a sparse
    ``x``). ``forward`` returns logits (the code's ``log_softmax`` is left to the loss);
    :meth:`embed` returns the representation :math:`\mathbf h` ``[N, hidden_channels]``
    and ``self.classifier(h)`` the logits from it.

    The filter :math:`\hat{\mathbf A}_{\text{low}}` (:func:`acm_low_pass`) and CSR copies
    of sparse features are built once per graph and reused across calls.

    Shapes:
        input ``x [N, in_channels]`` (dense or sparse COO), ``edge_index [2, E]``,
        optional ``edge_weight [E]``; output ``[N, out_channels]``.
    """

    uses_edges = True

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int = 2,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"ACM-GCN needs num_layers >= 1 (got {num_layers}).")
        self.dropout = dropout
        self.convs = nn.ModuleList(
            [ACMConv(in_channels, hidden_channels)]
            + [ACMConv(hidden_channels, hidden_channels) for _ in range(num_layers - 1)]
        )
        self.classifier = nn.Linear(hidden_channels, out_channels)
        self._cache = GraphCache()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for conv in self.convs:
            conv.reset_parameters()
        nn.init.xavier_uniform_(self.classifier.weight)
        nn.init.constant_(self.classifier.bias, 0.01)

    def low_pass(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        r""":math:`\hat{\mathbf A}_{\text{low}}` for this graph (cached)."""
        n, dtype = x.size(0), x.dtype
        build = lambda: acm_low_pass(edge_index, n, edge_weight, dtype)
        adj = self._cache.get("low_pass", (edge_index, edge_weight), build)
        if adj.size(0) != n or adj.dtype != dtype:  # same edges on another node set: rare
            adj = build()
        return adj

    def embed(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        """Node representations after the last ACM layer, ``[N, hidden_channels]``."""
        return self.filter(x, self.low_pass(x, edge_index, edge_weight))

    def filter(self, x: Tensor, adj: Tensor) -> Tensor:
        r""":meth:`embed` with a given low-pass filter ``adj [N, N]`` (sparse CSR or dense, e.g.
        a learned graph's, whose entries may carry gradients)."""
        first = self.convs[0]
        h = first.mix(
            dropout_feature_matmul(x, first.weight, self.dropout, self.training, self._cache), adj
        )
        for conv in self.convs[1:]:
            h = F.dropout(F.relu(h), self.dropout, self.training)
            h = conv(h, adj)
        return h

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        return self.classifier(self.embed(x, edge_index, edge_weight))
