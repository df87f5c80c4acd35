"""FedTAD client: the random-walk topology embedding and the class-wise knowledge
reliability against a written-out loop of the official computation."""

import math

import pytest
import torch
from torch_geometric.utils import to_undirected

from fgl_flower.clients.fedtad import class_reliability, topology_walks


def test_walks_start_at_the_node_and_stay_with_the_codes_probability():
    n, degree = 3, torch.tensor([1, 1, 1])
    walks = topology_walks(degree, 3, torch.Generator().manual_seed(0))
    assert walks.shape == (3, 1 + 2 + 3)
    for col in (0, 1, 3):  # each walk's first node: the node itself
        assert walks[:, col].tolist() == [0.0, 1.0, 2.0]
    # softmax over a row of T = (A + I) * pinv(D): stay with e^(1/d) / (e^(1/d) + n - 1)
    draws = torch.cat(
        [
            topology_walks(torch.ones(n, dtype=torch.long), 2, torch.Generator().manual_seed(s))
            for s in range(2000)
        ]
    )
    stay = float((draws[:, 2] == draws[:, 1]).float().mean())
    assert stay == pytest.approx(math.e / (math.e + n - 1), abs=0.02)


def test_class_reliability_equals_the_written_out_loop():
    ei = to_undirected(torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 4, 4]]))
    x = torch.tensor([[1.0, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1], [1, 0, 0]])
    y = torch.tensor([0, 1, 1, 0, 2])
    train = torch.tensor([True, True, False, True, True])
    got = class_reliability(x, ei, y, train, 3, 2, torch.Generator().manual_seed(5))
    degree = torch.bincount(ei[0], minlength=5) + 1
    h = torch.cat([x, topology_walks(degree, 2, torch.Generator().manual_seed(5))], dim=1)
    want = torch.zeros(3)
    for v in train.nonzero().view(-1).tolist():
        nbrs = ei[1][ei[0] == v].tolist()
        r = (1 + sum(float(torch.cosine_similarity(h[v], h[u], dim=0)) for u in nbrs)) / (
            len(nbrs) + 1
        )
        want[y[v]] += r
    torch.testing.assert_close(got, want)
