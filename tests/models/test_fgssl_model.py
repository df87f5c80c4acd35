"""FGSSL's views and losses against written-out computations on small cases."""

import math

import torch
import torch.nn.functional as F

from fgl_flower.models.fgssl import (
    class_margin,
    drop_edges,
    edge_difference_distillation,
    mask_features,
    semantic_contrast,
    structure_distillation,
)


def test_views_drop_edges_and_whole_feature_columns():
    torch.manual_seed(0)
    ei = torch.randint(0, 50, (2, 400))
    assert drop_edges(ei, 0.0) is ei
    kept = drop_edges(ei, 0.8)
    assert 40 < kept.size(1) < 120  # about a fifth kept
    x = torch.rand(30, 200) + 0.1
    masked = mask_features(x, 0.5)
    zero_cols = (masked == 0).all(0)
    assert ((masked == 0).any(0) == zero_cols).all()  # a column is zero for every node or none
    assert 60 < int(zero_cols.sum()) < 140
    assert torch.equal(masked[:, ~zero_cols], x[:, ~zero_cols])


def test_semantic_contrast_is_a_supervised_infonce_with_global_samples():
    torch.manual_seed(1)
    h, ht = torch.randn(6, 4), torch.randn(6, 4)
    y = torch.tensor([0, 1, 0, 2, 1, 0])
    mask = torch.tensor([True, True, True, False, True, True])
    tau = 0.5
    idx = mask.nonzero().flatten().tolist()
    total = 0.0
    for i in idx:
        s = {k: float(F.cosine_similarity(h[i], ht[k], dim=0)) / tau for k in idx}
        log_z = math.log(sum(math.exp(v) for v in s.values()))
        pos = [k for k in idx if y[k] == y[i]]
        total += -sum(s[p] - log_z for p in pos) / len(pos)
    assert math.isclose(
        float(semantic_contrast(h, ht, y, mask, tau)), total / len(idx), rel_tol=1e-5
    )


def test_structure_distillation_is_the_kl_over_each_nodes_neighbours():
    torch.manual_seed(2)
    h, ht = torch.randn(5, 3), torch.randn(5, 3)
    # node 0 -> 1, 2, 3; node 1 -> 0; node 4 has no neighbour
    ei = torch.tensor([[0, 0, 0, 1], [1, 2, 3, 0]])
    omega = 0.3
    q = torch.softmax(
        torch.stack([F.cosine_similarity(h[0], h[j], dim=0) for j in (1, 2, 3)]) / omega, 0
    )
    p = torch.softmax(
        torch.stack([F.cosine_similarity(ht[0], ht[j], dim=0) for j in (1, 2, 3)]) / omega, 0
    )
    kl0 = float((p * (p.log() - q.log())).sum())
    # node 1 has one neighbour: p = q = 1 there, so it adds 0; the mean is over nodes 0 and 1
    assert math.isclose(float(structure_distillation(h, ht, ei, omega)), kl0 / 2, rel_tol=1e-5)
    assert float(structure_distillation(h, h, ei, omega)) == 0.0


def test_openfgls_edge_difference_term():
    torch.manual_seed(3)
    h, ht = torch.randn(4, 5), torch.randn(4, 5)
    ei = torch.tensor([[0, 1, 2], [1, 2, 3]])
    expected = 0.0
    for i, j in ei.t().tolist():
        q = torch.softmax((h[i] - h[j]).abs() / 0.1, 0)
        p = torch.softmax((ht[i] - ht[j]).abs() / 0.1, 0)
        expected += float((p * (p.log() - q.log())).sum())
    assert math.isclose(
        float(edge_difference_distillation(h, ht, ei, 0.1)), expected / 3, rel_tol=1e-4
    )


def test_class_margin_is_positive_for_class_clustered_representations():
    y = torch.tensor([0, 0, 1, 1])
    h = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    mask = torch.ones(4, dtype=torch.bool)
    assert class_margin(h, h, y, mask) > 0.8
    assert math.isnan(class_margin(h, h, torch.tensor([0, 1, 2, 3]), mask))  # no same-class pair
