"""FedTAD's generator, pseudo-labels, kNN pseudo-graph and diversity loss on small cases."""

import math

import pytest
import torch

from fgl_flower.models.fedtad import ConditionalGenerator, class_labels, diversity_loss, knn_graph


def test_pseudo_labels_split_evenly_with_the_remainder_on_the_last_class():
    assert class_labels(10, 3).tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 2]
    assert torch.bincount(class_labels(100, 7)).tolist() == [14] * 6 + [16]


def test_generator_maps_noise_and_labels_to_node_features():
    g = ConditionalGenerator(noise_dim=8, num_classes=3, num_features=5)
    out = g(torch.randn(4, 8), torch.tensor([0, 1, 2, 2]))
    assert out.shape == (4, 5)
    assert [m.out_features for m in g.hidden if isinstance(m, torch.nn.Linear)] == [64, 128, 256]


def test_knn_graph_links_each_node_to_its_nearest_by_cosine_symmetrically():
    # two tight pairs far apart in angle: with k = 2 (itself and one more) only the pairs link
    x = torch.tensor([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.1, 1.0]])
    edges = knn_graph(x, 2)
    assert sorted(map(tuple, edges.t().tolist())) == [(0, 1), (1, 0), (2, 3), (3, 2)]
    big = knn_graph(torch.randn(30, 6, generator=torch.Generator().manual_seed(0)), 5)
    pairs = set(map(tuple, big.t().tolist()))
    assert all((b, a) in pairs for a, b in pairs) and all(a != b for a, b in pairs)
    assert torch.bincount(big[0], minlength=30).min() >= 4  # k - 1 others at least


def test_diversity_loss_written_out():
    z = torch.randn(5, 3, generator=torch.Generator().manual_seed(1))
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(2), requires_grad=True)
    pairs = [(i, j) for i in range(5) for j in range(5)]
    want = math.exp(
        -sum(float(((z[i] - z[j]) ** 2).mean() * (x[i] - x[j]).abs().mean()) for i, j in pairs) / 25
    )
    got = diversity_loss(z, x)
    assert float(got) == pytest.approx(want, rel=1e-5)
    got.backward()
    assert torch.isfinite(x.grad).all()
