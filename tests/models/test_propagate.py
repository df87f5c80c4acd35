"""Message passing as sparse products (models/propagate.py) against PyG's scatter layers,
and the FLOP accounting of sparse products."""

import pytest
import torch
import torch_geometric.nn as pyg_nn
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from fgl_flower.clients.resources import SparseProducts
from fgl_flower.models.propagate import Adjacency, GCNConv, GINConv, propagate


def messy_graph(n: int = 40, e: int = 160, seed: int = 0) -> torch.Tensor:
    """Directed edges with repeats and self-loops, unsorted."""
    g = torch.Generator().manual_seed(seed)
    edges = torch.randint(0, n, (2, e), generator=g)
    return torch.cat([edges, edges[:, :7], torch.stack([torch.arange(5), torch.arange(5)])], 1)


def test_sum_adjacency_is_the_scatter_sum_and_its_transpose():
    ei, n = messy_graph(), 40
    x = torch.randn(n, 6, dtype=torch.float64)
    adj = Adjacency.sum(ei, n)
    dense = torch.zeros(n, n, dtype=torch.float64).index_put_(
        (ei[1], ei[0]), torch.ones(ei.size(1), dtype=torch.float64), accumulate=True
    )
    assert torch.allclose(adj.t.to_dense().double(), dense)
    assert torch.allclose(adj.rev.to_dense().double(), dense.t())
    expected = torch.zeros(n, 6, dtype=torch.float64).index_add_(0, ei[1], x[ei[0]])
    assert torch.allclose(adj.t.double() @ x, expected)


def reference_csr(rows, cols, values, n):
    """The plain construction: a stable sort of the entries by row."""
    order = torch.argsort(rows, stable=True)
    crow = torch.cat(
        [torch.zeros(1, dtype=torch.long), torch.bincount(rows, minlength=n).cumsum(0)]
    )
    return crow, cols[order], values[order]


def reference_gcn(ei, n):
    src, dst = ei
    keep = src != dst
    loop = torch.arange(n)
    src, dst = torch.cat([src[keep], loop]), torch.cat([dst[keep], loop])
    dinv = torch.bincount(dst, minlength=n).float().pow(-0.5)
    w = dinv[src] * dinv[dst]
    return reference_csr(dst, src, w, n), reference_csr(src, dst, w, n)


def assert_same_csr(csr, ref):
    for got, want in zip((csr.crow_indices(), csr.col_indices(), csr.values()), ref):
        assert got.dtype == want.dtype and torch.equal(got, want)  # bit for bit


def tu_like_batch(seed: int = 0) -> tuple[torch.Tensor, int]:
    """Undirected graphs with coalesced edge lists (sorted by source) and isolated nodes,
    numbered one after the other as in a mini-batch."""
    g = torch.Generator().manual_seed(seed)
    parts, offset = [], 0
    for size in (6, 1, 9, 4):
        a = (torch.rand(size, size, generator=g) < 0.5).triu(1)
        parts.append((a | a.T).nonzero().T + offset)
        offset += size + 2  # two isolated nodes after each graph
    return torch.cat(parts, 1), offset


@pytest.mark.parametrize("graph", ["messy", "loop-free", "tu-batch", "empty"])
def test_adjacencies_are_the_stable_sort_construction_bit_for_bit(graph):
    if graph == "tu-batch":
        ei, n = tu_like_batch()
    elif graph == "empty":
        ei, n = torch.zeros(2, 0, dtype=torch.long), 3
    else:
        ei, n = messy_graph(), 40
        if graph == "loop-free":
            ei = ei[:, ei[0] != ei[1]]
    ones = torch.ones(ei.size(1))
    s = Adjacency.sum(ei, n)
    assert_same_csr(s.t, reference_csr(ei[1], ei[0], ones, n))
    assert_same_csr(s.rev, reference_csr(ei[0], ei[1], ones, n))
    want_t, want_rev = reference_gcn(ei, n)
    for gcn in (Adjacency.gcn(ei, n), Adjacency.gcn(ei, n, s)):  # with the sum's matrices: no sort
        assert_same_csr(gcn.t, want_t)
        assert_same_csr(gcn.rev, want_rev)


def test_propagate_backward_uses_the_transpose():
    ei, n = messy_graph(), 40
    adj = Adjacency.gcn(ei, n)
    x = torch.randn(n, 5, requires_grad=True)
    w = torch.randn(n, 5)
    (propagate(adj, x) * w).sum().backward()
    dense = adj.t.to_dense()
    assert torch.allclose(x.grad, dense.t() @ w, atol=1e-5)


@pytest.mark.parametrize("seed", [0, 1])
def test_layers_equal_pyg_on_edge_index(seed):
    ei, n = messy_graph(seed=seed), 40
    x = torch.randn(n, 12, requires_grad=True)
    torch.manual_seed(seed)
    ours_gin = GINConv(nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 8)))
    torch.manual_seed(seed)
    pyg_gin = pyg_nn.GINConv(nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 8)))
    torch.manual_seed(seed)
    ours_gcn = GCNConv(12, 8)
    torch.manual_seed(seed)
    pyg_gcn = pyg_nn.GCNConv(12, 8)
    for ours, pyg, adj in (
        (ours_gin, pyg_gin, Adjacency.sum(ei, n)),
        (ours_gcn, pyg_gcn, Adjacency.gcn(ei, n)),
    ):
        # same parameters, names and initial draws as PyG's layer
        assert {k: v.shape for k, v in ours.state_dict().items()} == {
            k: v.shape for k, v in pyg.state_dict().items()
        }
        assert all(
            torch.equal(a, b) for a, b in zip(ours.state_dict().values(), pyg.state_dict().values())
        )
        out_ours, out_pyg = ours(x, adj), pyg(x, ei)
        assert torch.allclose(out_ours, out_pyg, atol=1e-5)
        g_ours = torch.autograd.grad(out_ours.square().sum(), [x, *ours.parameters()])
        g_pyg = torch.autograd.grad(out_pyg.square().sum(), [x, *pyg.parameters()])
        assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(g_ours, g_pyg))


def test_sparse_products_are_counted_apart_by_their_entries():
    ei, n = messy_graph(), 40
    adj = Adjacency.sum(ei, n)
    x = torch.randn(n, 6, requires_grad=True)
    lin = nn.Linear(6, 3)
    sparse = SparseProducts()
    with FlopCounterMode(display=False, custom_mapping=sparse.mapping()) as counter:
        lin(propagate(adj, x)).sum().backward()
    nnz = ei.size(1)
    assert sparse.flops == 2 * nnz * 6 * 2  # forward and the backward's transposed product
    # the linear layer: forward 2*n*6*3, backward (input and weight gradients) twice that
    assert counter.get_total_flops() == 3 * 2 * n * 6 * 3


def test_gin_projecting_first_is_the_same_layer():
    ei, n = messy_graph(), 40
    x = torch.randn(n, 24, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(0)
    plain = GINConv(
        nn.Sequential(nn.Linear(24, 4), nn.ReLU(), nn.Linear(4, 4)), train_eps=True
    ).double()
    torch.manual_seed(0)
    first = GINConv(
        nn.Sequential(nn.Linear(24, 4), nn.ReLU(), nn.Linear(4, 4)),
        project_first=True,
        train_eps=True,
    ).double()
    with torch.no_grad():
        plain.eps.fill_(0.3)
        first.eps.fill_(0.3)
    adj = Adjacency.sum(ei, n)
    adj = Adjacency(adj.t.double(), adj.rev.double())
    out_plain, out_first = plain(x, adj), first(x, adj)
    assert torch.allclose(out_first, out_plain, rtol=1e-12, atol=1e-12)
    g_plain = torch.autograd.grad(out_plain.square().sum(), [x, *plain.parameters()])
    g_first = torch.autograd.grad(out_first.square().sum(), [x, *first.parameters()])
    assert all(torch.allclose(a, b, rtol=1e-10, atol=1e-12) for a, b in zip(g_plain, g_first))
    # the messages are 4 wide instead of 24
    sparse = SparseProducts()
    with FlopCounterMode(display=False, custom_mapping=sparse.mapping()):
        first(x, adj)
    assert sparse.flops == 2 * ei.size(1) * 4
    with pytest.raises(ValueError, match="starts with nn.Linear"):
        GINConv(nn.Sequential(nn.ReLU(), nn.Linear(4, 4)), project_first=True)
