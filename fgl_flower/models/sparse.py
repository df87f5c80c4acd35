r"""Fast paths for full-batch training on a fixed graph with sparse features.

Full-batch node classification calls a model many times on the same ``x`` and
``edge_index``. Two things are worth computing once per graph instead of per call:

* the GCN-normalized adjacency :math:`\hat{\mathbf D}^{-1/2}\hat{\mathbf A}\hat{\mathbf D}^{-1/2}`
  as a CSR matrix, so propagation is one sparse-dense product;
* CSR copies of a sparse feature matrix and of its transpose, so that
  :math:`\mathbf X W` and its weight gradient :math:`\mathbf X^\top \mathbf G` are both CSR
  products (PyTorch's COO backward is several times slower).

:class:`GraphCache` keeps them per module, keyed on the identity and version of the
input tensors, so a model applied to another graph recomputes them. Entries are also
shared between modules of one process (a bounded LRU): a client rebuilt for every
message from the same cached data reuses the previous message's adjacency.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import Tensor


def _key(t: Tensor | None) -> tuple:
    if t is None:
        return (None,)
    if t.is_sparse:
        return ("coo", id(t), t._version, tuple(t.shape), t.dtype, t.device)
    return (t.layout, t.data_ptr(), t._version, tuple(t.shape), t.dtype, t.device)


#: Process-wide entries ``key -> (inputs, value)``, least recently used first. Holding the
#: inputs keeps their ids and data pointers from being reused while an entry lives.
_SHARED: OrderedDict[tuple, tuple[tuple, object]] = OrderedDict()
SHARED_ENTRIES = 32


class GraphCache:
    """Per-module cache of tensors derived from a graph's inputs (one entry per name),
    backed by a bounded process-wide cache of the same entries."""

    def __init__(self) -> None:
        # name -> (key, inputs, value)
        self._store: dict[str, tuple[tuple, tuple, object]] = {}

    def __deepcopy__(self, memo: dict) -> GraphCache:
        # A copied model (e.g. fine-tuned beside the original) starts empty and finds the
        # entries in the shared cache; sparse CSR tensors cannot be deep-copied anyway.
        return GraphCache()

    def get(self, name: str, inputs: tuple[Tensor | None, ...], build: Callable[[], object]):
        """``build()``'s value for these inputs; ``build`` must depend on them alone."""
        key = (name, *(_key(t) for t in inputs))
        hit = self._store.get(name)
        if hit is not None and hit[0] == key:
            return hit[2]
        shared = _SHARED.get(key)
        if shared is not None:
            _SHARED.move_to_end(key)
            value = shared[1]
        else:
            value = build()
            _SHARED[key] = (inputs, value)
            while len(_SHARED) > SHARED_ENTRIES:
                _SHARED.popitem(last=False)
        self._store[name] = (key, inputs, value)
        return value


def gcn_adjacency(
    edge_index: Tensor,
    num_nodes: int,
    edge_weight: Tensor | None = None,
    add_self_loops: bool = True,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    r"""The transposed normalized adjacency :math:`\hat{\mathbf A}^\top` as CSR ``[N, N]``,
    so that ``adj_t @ h`` aggregates messages from sources into targets as GCNConv does.

    .. math::
        \hat{\mathbf A} = \hat{\mathbf D}^{-1/2}(\mathbf A + \mathbf I)\hat{\mathbf D}^{-1/2},
        \qquad \hat D_{ii} = \textstyle\sum_j (\mathbf A + \mathbf I)_{ji}

    Bit for bit what PyG's ``gcn_norm`` (remaining self-loops of weight 1, in-degree
    normalisation) followed by ``to_torch_csr_tensor`` builds, without importing PyG.
    ``edge_index [2, E]`` (source, target), ``edge_weight [E]`` (default 1).
    """
    device = edge_index.device
    if add_self_loops:
        keep = edge_index[0] != edge_index[1]
        loop = torch.arange(num_nodes, device=device)
        if edge_weight is not None:  # an existing self-loop keeps its weight
            loop_weight = edge_weight.new_ones(num_nodes)
            loop_weight[edge_index[0][~keep]] = edge_weight[~keep]
            edge_weight = torch.cat([edge_weight[keep], loop_weight])
        edge_index = torch.cat([edge_index[:, keep], torch.stack([loop, loop])], dim=1)
    if edge_weight is None:
        edge_weight = torch.ones(edge_index.size(1), dtype=dtype, device=device)
    row, col = edge_index
    deg = edge_weight.new_zeros(num_nodes).scatter_add_(0, col, edge_weight)
    deg_inv_sqrt = deg.pow_(-0.5)
    deg_inv_sqrt.masked_fill_(deg_inv_sqrt == float("inf"), 0)
    value = deg_inv_sqrt[row] * edge_weight * deg_inv_sqrt[col]
    adj_t = torch.sparse_coo_tensor(
        torch.stack([col, row]), value, (num_nodes, num_nodes), check_invariants=False
    )
    return _csr(adj_t.coalesce())


class _CSRMatmul(torch.autograd.Function):
    """``x @ weight`` for a constant CSR ``x`` with its transpose given for the backward."""

    @staticmethod
    def forward(ctx, x: Tensor, x_t: Tensor, weight: Tensor) -> Tensor:
        ctx.x_t = x_t
        return x @ weight

    @staticmethod
    def backward(ctx, grad: Tensor):
        return None, None, ctx.x_t @ grad


def sparse_features(x: Tensor) -> tuple[Tensor, Tensor]:
    """CSR copies of a sparse COO ``x [N, F]`` and of ``x.T [F, N]``."""
    x = x.coalesce()
    return _csr(x), _csr(x.t().coalesce())


@contextmanager
def quiet_csr() -> Iterator[None]:
    """Build CSR tensors without torch's "Sparse CSR tensor support is in beta" notice, which
    a user cannot act on (torch prints it once, at the first CSR tensor a process builds)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        yield


def _csr(t: Tensor) -> Tensor:
    with quiet_csr():
        return t.to_sparse_csr()


def feature_matmul(x: Tensor, weight: Tensor, cache: GraphCache) -> Tensor:
    """``x @ weight`` (``weight [F, out]``) for dense or sparse ``x [N, F]``; no gradient
    flows into a sparse ``x`` (features are data)."""
    if not x.is_sparse:
        return x @ weight
    x_csr, x_t = cache.get("features", (x,), lambda: sparse_features(x))
    return _CSRMatmul.apply(x_csr, x_t, weight)
