import numpy as np
import pytest
import torch

from fgl_flower.datasets import contextual_sbm
from fgl_flower.errors import ConfigError


def _homophily(data) -> float:
    ei = data.edge_index
    return float((data.y[ei[0]] == data.y[ei[1]]).float().mean())


def test_deterministic_and_seeded():
    a, b, c = contextual_sbm(seed=1), contextual_sbm(seed=1), contextual_sbm(seed=2)
    assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index)
    assert not torch.equal(a.edge_index, c.edge_index)


@pytest.mark.parametrize("h", [0.1, 0.5, 0.9])
def test_homophily_close_to_requested(h):
    data = contextual_sbm(num_nodes=2000, homophily=h)
    assert abs(_homophily(data) - h) < 0.03
    assert data.is_undirected() and not data.has_self_loops()


def test_defaults_and_degree():
    data = contextual_sbm()
    assert data.x.shape == (1000, 32) and data.num_classes == 4
    assert np.bincount(data.y.numpy()).tolist() == [250] * 4
    assert 7.0 < data.edge_index.size(1) / 1000 < 8.5


def test_imbalance_geometric():
    counts = np.bincount(contextual_sbm(imbalance=0.5).y.numpy())
    assert counts.sum() == 1000 and all(counts[:-1] > counts[1:])
    assert 1.8 < counts[0] / counts[1] < 2.2


def test_invalid():
    with pytest.raises(ConfigError):
        contextual_sbm(homophily=1.5)


def test_default_is_learnable_by_gcn():
    from torch_geometric.nn import GCNConv

    torch.manual_seed(0)
    data = contextual_sbm()
    perm = torch.randperm(1000)
    train, test = perm[:600], perm[600:]
    conv1, conv2 = GCNConv(32, 32), GCNConv(32, 4)
    opt = torch.optim.Adam([*conv1.parameters(), *conv2.parameters()], lr=0.01, weight_decay=5e-4)
    for _ in range(60):
        opt.zero_grad()
        out = conv2(conv1(data.x, data.edge_index).relu(), data.edge_index)
        torch.nn.functional.cross_entropy(out[train], data.y[train]).backward()
        opt.step()
    acc = (out.argmax(1)[test] == data.y[test]).float().mean()
    assert acc > 0.6  # chance is 0.25
