"""FedLit's multi-channel GCN: the link-type assignment and E-M step on hand-worked cases, a
channel's propagation on its type's edges only, and the k-means seeding."""

import pytest
import torch

from fgl_flower.models.fedlit import (
    FedLitChannel,
    FedLitNet,
    assign_types,
    build_fedlit,
    canonical_edges,
    edge_embeddings,
    update_centroids,
)


def test_both_directions_of_an_edge_get_one_embedding_and_type():
    h = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    edges = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    canon = canonical_edges(edges)
    assert canon.tolist() == [[0, 0, 1, 1], [1, 1, 2, 2]]
    emb = edge_embeddings(h, canon)
    assert emb.tolist() == [[1, 0, 0, 1], [1, 0, 0, 1], [0, 1, 1, 1], [0, 1, 1, 1]]


def test_assignment_by_cosine_and_the_mean_step_keep_an_empty_type():
    emb = torch.tensor([[2.0, 0.0], [1.0, 0.1], [0.0, 3.0]])
    centroids = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    types = assign_types(emb, centroids)
    assert types.tolist() == [0, 0, 1]
    # by angle, not by distance: [10, 1] is nearer to [10, 10] but points along [1, 0]
    assert assign_types(
        torch.tensor([[10.0, 1.0]]), torch.tensor([[1.0, 0.0], [10.0, 10.0]])
    ).tolist() == [0]
    moved = update_centroids(emb, types, centroids)
    assert torch.allclose(moved[0], torch.tensor([1.5, 0.05]))
    assert torch.allclose(moved[1], torch.tensor([0.0, 3.0]))
    assert torch.equal(moved[2], centroids[2])  # no edges: the centroid stays (not NaN)


def test_a_channel_propagates_on_its_edges_only_and_leaves_other_nodes_empty():
    torch.manual_seed(0)
    ch = FedLitChannel(hidden=2, num_layers=1)
    with torch.no_grad():
        ch.proj.weight.copy_(torch.eye(2))
        ch.proj.bias.zero_()
        ch.convs[0].lin.weight.copy_(torch.eye(2))
        ch.convs[0].bias.fill_(0.5)
    h = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [4.0, 4.0]])
    path = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # 0 - 1 - 2, node 3 not on a type edge
    out = ch(h, path, dropout=0.0, training=False)
    s = 2**-0.5  # D^-1/2 A D^-1/2, no self-loops: degrees 1, 2, 1
    expect = torch.stack([s * h[1], s * h[0] + s * h[2], s * h[1]]) + 0.5
    assert torch.allclose(out[:3], torch.relu(expect))
    assert torch.equal(out[3], torch.zeros(2))  # not in the subgraph: nothing, not even the bias


def test_the_model_sums_the_channels_of_the_types():
    torch.manual_seed(0)
    net = FedLitNet(3, 4, 2, num_types=2, num_layers=1, dropout=0.0).eval()
    x = torch.randn(4, 3)
    edges = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
    types = torch.tensor([0, 0, 1, 1])
    h = net.project(x)
    want = net.classifier(
        net.channels[0](h, edges[:, :2], 0.0, False) + net.channels[1](h, edges[:, 2:], 0.0, False)
    )
    assert torch.allclose(net.classify(h, edges, types), want)


def test_em_step_seeds_by_kmeans_then_assigns_before_moving():
    torch.manual_seed(0)
    net = FedLitNet(2, 2, 2, num_types=2, seed=3)
    with torch.no_grad():
        net.feature1.weight.copy_(torch.eye(2))
        net.feature1.bias.zero_()
    # two groups of edges: along the first axis and along the second
    x = torch.tensor([[1.0, 0.0], [1.1, 0.0], [0.0, 1.0], [0.0, 1.2]])
    edges = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
    first = net.em_step(net.project(x), edges)
    assert bool(net.initialized)
    assert first[0] == first[1] and first[2] == first[3] and first[0] != first[2]


def test_the_epoch_trains_on_the_assignment_made_before_the_centroids_move():
    """Three edges whose embeddings are [h, h] with h = (2, 3), (1, 3), (3, 1) and centroids
    [c, c] with c = (1, 1), (0, 2): the edges go to types 0, 1, 0; the centroids move to the
    means (2.5, 2) and (1, 3), after which the first edge would be type 1. The step returns
    the assignment before the move."""
    net = FedLitNet(2, 2, 2, num_types=2)
    with torch.no_grad():
        net.feature1.weight.copy_(torch.eye(2))
        net.feature1.bias.zero_()
        net.centroids.copy_(torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 2.0, 0.0, 2.0]]))
        net.initialized.fill_(1)
    x = torch.tensor([[2.0, 3.0], [2.0, 3.0], [1.0, 3.0], [1.0, 3.0], [3.0, 1.0], [3.0, 1.0]])
    edges = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 0, 3, 2, 5, 4]])
    assert net.em_step(net.project(x), edges).tolist() == [0, 0, 1, 1, 0, 0]
    assert torch.allclose(net.centroids, torch.tensor([[2.5, 2.0, 2.5, 2.0], [1.0, 3.0, 1.0, 3.0]]))
    assert net.types_of(net.project(x), edges).tolist() == [1, 1, 1, 1, 0, 0]  # after the move


def test_directed_edges_are_normalised_by_source_out_and_target_in_degree():
    from fgl_flower.models.fedlit import both_norm_adjacency

    # 0 -> 1, 0 -> 2, 1 -> 2: out-degrees 2, 1, 0; in-degrees 0, 1, 2
    p = both_norm_adjacency(torch.tensor([[0, 0, 1], [1, 2, 2]]), 3).to_dense()
    s = 2**-0.5
    assert torch.allclose(p, torch.tensor([[0.0, 0.0, 0.0], [s, 0.0, 0.0], [0.5, s, 0.0]]))


def test_too_few_edges_for_the_types_stop_with_a_clear_message():
    net = FedLitNet(2, 2, 2, num_types=4)
    with pytest.raises(Exception, match="lower fedlit.num-types"):
        net.em_step(net.project(torch.randn(2, 2)), torch.tensor([[0, 1], [1, 0]]))


def test_build_fedlit_applies_the_runs_model_init():
    """FedLit builds its own model but honours ``model-init`` (the method registry does not
    mark it ``own_init``): under ``uniform01`` every parameter lies in [0, 1)."""
    model = build_fedlit(
        6, 3, hidden=8, num_types=2, num_layers=2, dropout=0.0, em_iters=1, seed=0, init="uniform01"
    )
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert params.min() >= 0.0 and params.max() < 1.0
    default = build_fedlit(
        6, 3, hidden=8, num_types=2, num_layers=2, dropout=0.0, em_iters=1, seed=0
    )
    assert min(float(p.min()) for p in default.parameters()) < 0.0
