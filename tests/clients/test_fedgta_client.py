"""FedGTA client: the label propagation, moments and smoothing confidence against dense,
written-out versions of the authors' computation on a small graph."""

import math

import numpy as np
import pytest
import torch
from torch_geometric.utils import to_undirected

from fgl_flower.clients.fedgta import label_propagation, moments, smoothing_confidence
from fgl_flower.models.propagate import Adjacency


@pytest.fixture
def toy():
    """A path 0-1-2-3 and a triangle 4-5-6 joined to it by 3-4; nodes 0 and 5 are labelled."""
    ei = to_undirected(torch.tensor([[0, 1, 2, 3, 4, 5, 4], [1, 2, 3, 4, 5, 6, 6]]))
    y = torch.tensor([0, 0, 1, 1, 2, 2, 2])
    train = torch.tensor([True, False, False, False, False, True, False])
    probs = torch.softmax(torch.randn(7, 3, generator=torch.Generator().manual_seed(0)), dim=1)
    return ei, y, train, probs


def dense_lp(ei, y, train, probs, steps, alpha):
    """The code's NonParaLP: D^-1/2 (A + I) D^-1/2, labelled rows one-hot and added again
    after every step."""
    n = y.numel()
    a = np.eye(n)
    a[ei[0].numpy(), ei[1].numpy()] = 1.0
    d = a.sum(1)
    adj = a / np.sqrt(np.outer(d, d))
    f0 = probs.double().numpy().copy()
    f0[train.numpy()] = np.eye(3)[y[train].numpy()]
    out = f0.copy()
    for _ in range(steps):
        out = alpha * adj @ out + (1 - alpha) * f0
        out[train.numpy()] += f0[train.numpy()]
    return out


def test_label_propagation_equals_the_dense_computation(toy):
    ei, y, train, probs = toy
    adj = Adjacency.gcn(ei, 7)
    got = label_propagation(adj, probs, y, train, steps=3, alpha=0.5)
    np.testing.assert_allclose(
        got.numpy(), dense_lp(ei, y, train, probs, 3, 0.5), rtol=1e-5, atol=1e-6
    )
    # alpha = 0: nothing propagates; a labelled row is its label plus the code's boost
    none = label_propagation(adj, probs, y, train, steps=2, alpha=0.0)
    assert torch.allclose(none[~train], probs[~train])
    assert torch.allclose(none[0], torch.tensor([2.0, 0.0, 0.0]))


def test_moments_written_out():
    p = torch.tensor([[0.2, 0.8], [0.6, 0.4], [1.0, 0.0]])
    raw = moments(p, 3, "raw")
    central = moments(p, 3, "central")
    for k in (1, 2, 3):
        for c in (0, 1):
            col = p[:, c].double()
            assert raw[k - 1, c] == pytest.approx(float((col**k).mean()), rel=1e-6)
            assert central[k - 1, c] == pytest.approx(
                float(((col - col.mean()) ** k).mean()), abs=1e-7
            )
    assert torch.allclose(moments(p, 3, "hybrid"), torch.cat([raw, central]))
    assert moments(p, 3, "hybrid").shape == (6, 2)


def test_smoothing_confidence_written_out():
    p = torch.tensor([[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3], [0.5, 0.5, 0.0]])
    degree = torch.tensor([2, 1, 4])
    want = sum(
        d * (3 / math.e + sum(q * math.log(q + 1e-8) for q in row))
        for d, row in zip(degree.tolist(), p.tolist())
    )
    assert float(smoothing_confidence(p, degree)) == pytest.approx(want, rel=1e-6)
    # a sharp label has the largest confidence, C/e per unit of degree; no node is below zero
    assert float(smoothing_confidence(p[:1], degree[:1])) == pytest.approx(2 * 3 / math.e, rel=1e-6)
    assert float(smoothing_confidence(p[1:2], torch.tensor([1]))) == pytest.approx(
        3 / math.e - math.log(3), abs=1e-6
    )
