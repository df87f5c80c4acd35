"""FedLoG's model pieces on hand-worked cases: neighbour means, the degree weight, the
adaptation layers' direction (queries move; the code's variant leaves them), the evaluation
mixture."""

import math

import pytest
import torch

from fgl_flower.models.fedlog import (
    AdaptationLayer,
    FedLoGNet,
    MetricBranch,
    NeighborGenerator,
    degree_weight,
    neighbor_mean,
)


def test_neighbor_mean_over_out_neighbours_without_self_loops():
    h = torch.tensor([[1.0], [3.0], [5.0], [7.0]])
    # 0 -> 1, 0 -> 2, 1 -> 0, 2 -> 2 (a self-loop: left out); 3 has none
    edges = torch.tensor([[0, 0, 1, 2], [1, 2, 0, 2]])
    assert neighbor_mean(h, edges).view(-1).tolist() == [4.0, 1.0, 0.0, 0.0]


def test_degree_weight_is_a_sigmoid_around_threshold_plus_one():
    alpha = degree_weight(torch.tensor([4, 0, 10]), threshold=3).view(-1)
    assert alpha.tolist() == pytest.approx([0.5, 1 / (1 + math.e**4), 1 / (1 + math.e**-6)])


def test_adaptation_moves_each_query_by_the_mean_message_of_all_prototypes(monkeypatch):
    """With phi_t = 1 a query moves to q + mean_p (s_p - q) = the prototypes' centroid."""

    class Ones(torch.nn.Module):
        def forward(self, msg):
            return torch.ones(*msg.shape[:-1], 1)

    layer = AdaptationLayer(2)
    layer.trans_mlp = Ones()
    q = torch.tensor([[0.0, 0.0], [4.0, 2.0]])
    protos = torch.tensor([[1.0, 1.0], [3.0, -1.0], [2.0, 3.0]])
    out = layer(q, torch.zeros_like(q), protos)
    assert out.tolist() == [[2.0, 1.0], [2.0, 1.0]]


def test_the_message_reads_the_querys_neighbourhood_and_distance():
    """A real layer: other neighbour embeddings, or other prototypes, move the query
    differently (the message is built from both)."""
    torch.manual_seed(0)
    layer = AdaptationLayer(3)
    torch.nn.init.normal_(layer.trans_mlp[-1].weight)  # the code's gain-0.001 start barely moves
    q, protos = torch.randn(2, 3), torch.randn(4, 3)
    a, b = layer(q, torch.zeros(2, 3), protos), layer(q, torch.ones(2, 3), protos)
    assert not torch.allclose(a, b) and not torch.allclose(
        a, layer(q, torch.zeros(2, 3), protos + 1)
    )


def codes_adaptation_step(layer: AdaptationLayer, q, nb, protos):
    """The official ``clsf_module.forward`` transcribed: edges (row = synthetic node p, col =
    query), messages from the query's neighbourhood, the update averaged over ``row``, and
    the queries' rows ``P..`` of that average added to the queries."""
    p, n = protos.size(0), q.size(0)
    row = torch.arange(p).repeat(n)
    col = torch.arange(p, p + n).repeat_interleave(p)
    x, x_nb = torch.cat([protos, q]), torch.cat([protos, nb])
    diff = x[row] - x[col]
    msg = layer.msg_mlp(torch.cat([x_nb[col], (diff**2).sum(1, keepdim=True)], dim=1))
    trans = diff * layer.trans_mlp(msg)
    total = torch.zeros(p + n, q.size(1)).index_add_(0, row, trans)
    count = torch.zeros(p + n, q.size(1)).index_add_(0, row, torch.ones_like(trans))
    return q + (total / count.clamp(min=1))[p:]


def test_the_codes_adaptation_step_leaves_the_queries_where_they_are():
    """Transcribing the code's edge list and its average over the synthetic-node end shows the
    queries unchanged: what ``adaptation = official`` returns without running the layers."""
    torch.manual_seed(0)
    layer = AdaptationLayer(4)
    torch.nn.init.normal_(layer.trans_mlp[-1].weight)
    q, nb, protos = torch.randn(5, 4), torch.randn(5, 4), torch.randn(6, 4)
    assert torch.equal(codes_adaptation_step(layer, q, nb, protos), q)
    assert not torch.allclose(layer(q, nb, protos), q)  # ours moves them


def test_the_codes_adaptation_leaves_the_normalised_queries_and_learns_nothing():
    torch.manual_seed(0)
    q, nb, protos = torch.randn(5, 4), torch.randn(5, 4), torch.randn(6, 4)
    official, queries = (
        MetricBranch(4, adaptation="official"),
        MetricBranch(4, adaptation="queries"),
    )
    queries.load_state_dict(official.state_dict())
    out = official(q, nb, protos)
    assert (
        torch.allclose(out, torch.nn.functional.layer_norm(q, (4,)), atol=1e-6)
        and official.last_shift == 0.0
    )
    out.sum().backward()
    assert all(p.grad is None for p in official.layers.parameters())
    moved = queries(q, nb, protos)
    assert queries.last_shift > 0 and not torch.allclose(moved, out)


def test_forward_is_the_log_of_the_degree_mixed_branch_probabilities():
    torch.manual_seed(0)
    net = FedLoGNet(6, 4, 3, num_proto=2, threshold=0).eval()
    x = torch.randn(4, 6)
    edges = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    out = net(x, edges)
    h = net.embed(x, edges)
    head, tail = net.branch_log_probs(h, neighbor_mean(h, edges))
    alpha = degree_weight(torch.tensor([1, 2, 1, 0]), 0)
    assert torch.allclose(out.exp(), alpha * head.exp() + (1 - alpha) * tail.exp(), atol=1e-6)
    assert torch.allclose(out.exp().sum(1), torch.ones(4), atol=1e-5)
    assert net.syn_head.shape == (6, 6) and net.prototypes(
        net.embed_synthetic(net.syn_head)
    ).shape == (3, 4)


def test_generator_shapes_and_range():
    gen = NeighborGenerator(5).eval()
    out = gen(torch.randn(3, 5))
    assert out.shape == (3, 5) and out.abs().max() <= 1.0
