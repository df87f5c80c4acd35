"""O-pFGL client: label propagation, homophily, HRE, statistics, distillation weights."""

import numpy as np
import pytest
import torch
from torch_geometric.utils import to_undirected

from fgl_flower.clients.opfgl import (
    class_homophily,
    class_sums,
    distillation_factor,
    label_propagation,
    propagated_rows,
    pseudo_graph_probes,
    reliable_nodes,
    simple_edges,
)
from fgl_flower.metrics import macro_f1


@pytest.fixture
def toy():
    """Two triangles joined by one edge, plus an isolated node 6."""
    ei = to_undirected(torch.tensor([[0, 1, 0, 2, 3, 4, 3], [1, 2, 2, 3, 4, 5, 5]]))
    y = torch.tensor([0, 0, 1, 1, 1, 1, 0])
    train = torch.tensor([True, True, True, False, True, True, False])
    return ei, y, train


def test_homophily_vectorised_equals_naive_loop(toy):
    ei, y, train = toy
    naive = torch.zeros(2, dtype=torch.float64)
    nbrs = {u: set(ei[1][ei[0] == u].tolist()) for u in range(7)}
    for u in train.nonzero().view(-1).tolist():
        lab = [v for v in nbrs[u] if train[v]]
        h = sum(y[v] == y[u] for v in lab) / len(lab) if lab else 0.0
        naive[y[u]] += float(h)
    torch.testing.assert_close(class_homophily(ei, y, train, 2), naive)
    w = distillation_factor(naive)
    torch.testing.assert_close(w, 1 / (1 + torch.log(naive + 1)))


def test_label_propagation_range_train_mass_and_uniform_unreachable(toy):
    ei, y, train = toy
    out = label_propagation(ei, y, train, 2, iters=2, alpha=0.9)
    assert out.min() >= 0 and out.max() <= 1
    assert torch.all(out[train, y[train]] >= 0.1 - 1e-6)  # (1 - alpha) * one-hot survives
    torch.testing.assert_close(out[6], torch.full((2,), 0.5))  # isolated, unlabelled


def test_hre_only_adds_unlabelled_nodes_of_locally_strong_classes():
    # Class 0 is locally strong (a labelled homophilous clique), class 1 weak.
    g = torch.Generator().manual_seed(0)
    n = 60
    y = torch.cat([torch.zeros(40, dtype=torch.long), torch.ones(20, dtype=torch.long)])
    src = torch.randint(0, 40, (300,), generator=g)
    dst = torch.randint(0, 40, (300,), generator=g)
    src2 = torch.randint(40, 60, (60,), generator=g)
    dst2 = torch.randint(40, 60, (60,), generator=g)
    ei = simple_edges(torch.stack([torch.cat([src, src2]), torch.cat([dst, dst2])]), n)
    train = torch.zeros(n, dtype=torch.bool)
    train[:20] = True
    train[40:44] = True
    soft = label_propagation(ei, y, train, 2, 2, 0.9)
    hom = class_homophily(ei, y, train, 2)
    assert hom[0] > hom[1]
    deg = torch.bincount(ei[0], minlength=n)
    idx, labels = reliable_nodes(
        soft, hom, train, deg, topk=1, conf_threshold=0.95, degree_threshold=0
    )
    assert idx.numel() > 0
    assert not train[idx].any()
    assert torch.all(labels == 0)  # only the strongest class is expanded
    assert reliable_nodes(soft, hom, train, deg, 0, 0.95, 0)[0].numel() == 0  # topk=0: off
    big = reliable_nodes(soft, hom, train, deg, 1, 0.95, degree_threshold=10)[0]
    assert set(big.tolist()) <= set(idx.tolist()) and torch.all(deg[big] >= 10)


def test_propagated_rows_equal_dense_formula(toy):
    ei, _, _ = toy
    x = torch.rand(7, 3)
    a = torch.zeros(7, 7)
    a[ei[0], ei[1]] = 1
    a += torch.eye(7)
    d = a.sum(1).pow(-0.5)
    a_hat = d[:, None] * a * d[None, :]
    rows = torch.tensor([4, 0])
    dense = torch.cat([x, a_hat @ x, a_hat @ a_hat @ x], 1)[rows].double()
    np.testing.assert_allclose(propagated_rows(x, ei, rows, hops=2), dense.numpy(), rtol=1e-5)
    np.testing.assert_allclose(
        propagated_rows(x.to_sparse(), ei, rows, hops=2), dense.numpy(), rtol=1e-5
    )


def test_class_sums_skip_classes_with_fewer_than_two_nodes():
    feats = np.arange(12, dtype=float).reshape(4, 3)
    out = class_sums(feats, np.array([0, 0, 2, 0]), np.array([2, 0, 1]), 3)
    assert out["cnt"].tolist() == [3, 0, 0] and out["present"].tolist() == [1, 0, 0]
    assert out["orig_cnt"].tolist() == [2, 0, 0]
    np.testing.assert_allclose(out["s1"][0], feats[[0, 1, 3]].sum(0))
    np.testing.assert_allclose(out["s2"][0], (feats[[0, 1, 3]] ** 2).sum(0))
    assert not out["s1"][1:].any() and out["s1"].dtype == torch.float64


def test_macro_f1_over_all_classes_counts_absent_classes_as_zero():
    y = torch.tensor([0, 0, 1, 1])
    p = torch.tensor([0, 0, 1, 1])
    assert macro_f1(p, y, 4) == 1.0
    assert macro_f1(p, y, 4, all_classes=True) == 0.5


def test_gamma_is_clipped_to_its_bounds(flat):
    from flwr.app import RecordDict

    from fgl_flower.clients.opfgl import OPFGLClient
    from fgl_flower.clients.state import ClientState
    from fgl_flower.datasets import load_client_data
    from fgl_flower.parse import parse_run_config

    flat.update(
        {
            "method": "opfgl",
            "num-rounds": 1,
            "opfgl.beta": 5.0,
            "opfgl.gamma-min": 0.05,
            "opfgl.gamma-max": 0.2,
        }
    )
    cfg = parse_run_config(flat)
    client = OPFGLClient(cfg, load_client_data(cfg.data_config(), 0), ClientState(RecordDict()), 0)
    gamma = client.gamma()
    assert gamma.min() >= 0.05 and gamma.max() <= 0.2 and (gamma == 0.2).any()
    flat["opfgl.variant"] = "paper"  # the paper's gamma is not clipped
    cfg = parse_run_config(flat)
    client = OPFGLClient(cfg, load_client_data(cfg.data_config(), 0), ClientState(RecordDict()), 0)
    assert client.gamma().max() > 0.2


def test_pseudo_graph_probes_count_the_clients_classes_it_covers():
    y_syn = torch.tensor([0, 0, 2, 3])
    edges = torch.tensor([[0, 1, 2], [1, 0, 3]])
    probes = pseudo_graph_probes(y_syn, edges, torch.tensor([0, 1, 1, 2, 0]))
    assert probes == {
        "pseudo.nodes": 4.0,
        "pseudo.coverage": pytest.approx(2 / 3),
        "pseudo.edges": 0.75,
    }
    assert pseudo_graph_probes(y_syn, edges, torch.tensor([1, 4]))["pseudo.coverage"] == 0.0
    empty = pseudo_graph_probes(y_syn[:0], edges[:, :0], torch.tensor([1]))
    assert empty == {"pseudo.nodes": 0.0, "pseudo.coverage": 0.0, "pseudo.edges": 0.0}
