"""S2FGL maths: PageRank/SALC, prototypes, repository, FKD and FGMA (spec §3)."""

import numpy as np
import pytest
import torch
from torch_geometric.utils import erdos_renyi_graph

from fgl_flower.models.s2fgl import (
    anchor_subsets,
    build_repository,
    class_prototypes,
    fgma_loss,
    fkd_loss,
    knn_cosine_graph,
    laplacian,
    personalized_pagerank,
    projection_mse,
    salc,
    spectral_basis,
    top_training_nodes,
)


def graph(n=60, p=0.08, seed=0):
    torch.manual_seed(seed)
    ei = erdos_renyi_graph(n, p)
    train = torch.zeros(n, dtype=torch.bool)
    train[torch.randperm(n)[: int(0.6 * n)]] = True
    return ei, train


def test_pagerank_solves_its_fixed_point():
    ei, _ = graph()
    n, alpha = 60, 0.85
    p = personalized_pagerank(ei, n, alpha)
    a = torch.zeros(n, n, dtype=torch.float64)
    a[ei[0], ei[1]] = 1.0
    w = a / (a.sum(1, keepdim=True) + 1e-6)
    # P = (I - (1-a) W)^-1  <=>  P = I + (1-a) W P
    assert torch.allclose(p, torch.eye(n, dtype=torch.float64) + (1 - alpha) * w @ p, atol=1e-10)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_salc_ranks_every_training_node_above_every_other(seed):
    ei, train = graph(seed=seed)
    score = salc(personalized_pagerank(ei, 60), train)
    assert score[train].min() >= 1.85 - 1e-9 and score[~train].max() <= 0.33  # spec §3.1 fact
    for divisor in (3, 5):
        chosen = top_training_nodes(score, train, divisor)
        assert len(chosen) == 60 // divisor and bool(train[chosen].all())


def test_top_training_nodes_never_returns_unlabelled_nodes():
    score = torch.tensor([9.0, 8.0, 7.0, 1.0, 0.5, 0.1])  # the best nodes are unlabelled
    train = torch.tensor([False, False, True, True, True, True])
    assert top_training_nodes(score, train, 2).tolist() == [2]  # top 3 = {0, 1, 2}, labelled: 2


def test_class_prototypes_are_class_means_and_zero_when_absent():
    h = torch.arange(12.0).view(6, 2)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    protos, counts = class_prototypes(h, y, torch.tensor([0, 1, 2]), num_classes=4)
    assert counts.tolist() == [2, 1, 0, 0]
    assert torch.equal(protos, torch.tensor([[1.0, 2.0], [4.0, 5.0], [0.0, 0.0], [0.0, 0.0]]))


def test_repository_shape_and_count_weighted_anchor_means():
    m, c, d = 4, 3, 5
    protos = torch.randn(m, c, d)
    counts = torch.tensor([[1, 0, 2], [3, 0, 0], [0, 0, 1], [2, 0, 5]], dtype=torch.float32)
    subsets = [np.array([0, 1]), np.array([2, 3]), np.array([0, 3])]
    repo = build_repository(protos, counts, subsets)
    assert repo.shape == (len(subsets) * c, d)
    # class 0, anchor 0 (clients 0, 1): (1 * H_0 + 3 * H_1) / 4
    assert torch.allclose(repo[0], (protos[0, 0] + 3 * protos[1, 0]) / 4, atol=1e-6)
    # class 2, anchor 2 (clients 0, 3): (2 * H_0 + 5 * H_3) / 7; class-major rows
    assert torch.allclose(repo[2 * 3 + 2], (2 * protos[0, 2] + 5 * protos[3, 2]) / 7, atol=1e-6)
    assert torch.equal(repo[3:6], torch.zeros(3, d))  # class 1: nobody has it


def test_anchor_subsets_draw_floor_of_fraction_distinct_clients():
    subsets = anchor_subsets(10, 4, 0.7, np.random.default_rng(0))
    assert len(subsets) == 4 and all(len(set(s)) == len(s) == 7 for s in subsets)
    assert len(anchor_subsets(3, 4, 0.7, np.random.default_rng(0))[0]) == 2


def test_fkd_is_zero_for_identical_models_and_positive_otherwise():
    torch.manual_seed(0)
    h, repo = torch.randn(20, 8), torch.randn(12, 8)
    repo[3] = 0.0  # an empty anchor
    assert fkd_loss(h, h, repo).abs() < 1e-7
    assert fkd_loss(h + torch.randn(20, 8), h, repo) > 1e-4


def test_knn_graph_keeps_self_and_k_neighbours_per_row():
    torch.manual_seed(0)
    s = knn_cosine_graph(torch.randn(15, 4), k=3)
    assert ((s != 0).sum(1) == 4).all() and torch.allclose(s.diagonal(), torch.ones(15))
    assert torch.allclose(laplacian((s + s.T) / 2).sum(1), torch.zeros(15), atol=1e-6)


@pytest.mark.parametrize("mode", ["dense-sym", "eigsh-asym"])
def test_spectral_basis_is_orthonormal_and_ordered(mode):
    torch.manual_seed(0)
    x = torch.randn(40, 6, dtype=torch.float64)
    low, high = spectral_basis(x, k_sim=3, k_eig=10, mode=mode)
    assert low.shape == high.shape == (40, 10)
    if mode == "dense-sym":
        eye = torch.eye(10, dtype=torch.float64)
        assert torch.allclose(low.T @ low, eye, atol=1e-8) and torch.allclose(
            high.T @ high, eye, atol=1e-8
        )
        s = knn_cosine_graph(x, 3)
        lap = laplacian((s + s.T) / 2)
        lam_low = (low * (lap @ low)).sum(0)
        lam_high = (high * (lap @ high)).sum(0)
        assert (lam_low[:-1] <= lam_low[1:] + 1e-9).all() and (
            lam_high[:-1] >= lam_high[1:] - 1e-9
        ).all()
        assert lam_low.max() <= lam_high.min()
    else:
        assert torch.allclose(low.norm(dim=0), torch.ones(10, dtype=torch.float64), atol=1e-6)


def test_spectral_basis_shrinks_to_half_the_nodes():
    low, high = spectral_basis(torch.randn(12, 4), k_eig=10)
    assert low.shape == high.shape == (12, 6)


@pytest.mark.parametrize("n", [0, 1])
def test_fewer_than_two_fgma_nodes_give_empty_sets_and_no_loss(n):
    """With k = floor(n/2) = 0 the sets are empty (``vecs[:, -0:]`` would have taken every
    column as the high set) and FGMA adds nothing, not NaN."""
    z = torch.randn(n, 4, requires_grad=True)
    low, high = spectral_basis(z)
    assert low.shape == high.shape == (n, 0)
    loss = fgma_loss(z, (low, high), z.detach() + 1, (low, high))
    assert loss.item() == 0.0


def test_projection_mse_equals_the_explicit_rank_one_projections():
    torch.manual_seed(0)
    xa, xb = torch.randn(30, 7, dtype=torch.float64), torch.randn(30, 7, dtype=torch.float64)
    ua, _ = spectral_basis(xa, k_eig=5)
    ub, _ = spectral_basis(xb, k_eig=5)
    explicit = sum(
        torch.mean(
            (torch.outer(ua[:, m], ua[:, m]) @ xa - torch.outer(ub[:, m], ub[:, m]) @ xb) ** 2
        )
        for m in range(5)
    )
    assert torch.allclose(projection_mse(ua, xa, ub, xb), explicit, atol=1e-10)


def test_fgma_is_zero_for_identical_features_and_has_gradient_otherwise():
    torch.manual_seed(0)
    z = torch.randn(25, 6)
    basis = spectral_basis(z)
    assert fgma_loss(z, basis, z, basis).abs() < 1e-6
    zl = (z + 0.5 * torch.randn(25, 6)).requires_grad_()
    loss = fgma_loss(zl, spectral_basis(zl), z, basis)
    loss.backward()
    assert loss > 0 and zl.grad.abs().sum() > 0


@pytest.mark.parametrize("mode", ["dense-sym", "eigsh-asym"])
def test_the_code_cap_takes_what_arpack_allows(mode):
    """cap="code": min(k, n - 1) eigenvectors each, as the official code's eigsh(k=10) on a
    12-node graph (the two sets then overlap)."""
    low, high = spectral_basis(torch.randn(12, 4), k_eig=10, mode=mode, cap="code")
    assert low.shape == high.shape == (12, 10)
    assert torch.allclose(low.T @ low, torch.eye(10, dtype=low.dtype), atol=1e-4)
