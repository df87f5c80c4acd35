import pytest
import torch
import torch.nn.functional as F

from fgl_flower.models import ACMGCN, MODELS, ACMConv, build_model
from fgl_flower.models.acmgcn import acm_low_pass, dropout_feature_matmul
from fgl_flower.models.sparse import GraphCache


def _graph(n=30, f=20, density=0.15, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(n, f, generator=g) < density).float() * torch.rand(n, f, generator=g)
    ei = torch.randint(0, n, (2, 3 * n), generator=g)
    ei = ei[:, ei[0] != ei[1]]
    return x, torch.cat([ei, ei.flip(0)], 1)


# A path 0-1-2 plus an isolated node 3, both directions stored.
TINY_EI = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])


def _low_dense():
    a = torch.zeros(4, 4)
    a[TINY_EI[1], TINY_EI[0]] = 1.0
    a = a + torch.eye(4)
    return a / a.sum(1, keepdim=True)


def test_low_pass_is_row_normalised_i_plus_a():
    low = acm_low_pass(TINY_EI, 4).to_dense()
    expect = torch.tensor(
        [[1 / 2, 1 / 2, 0, 0], [1 / 3, 1 / 3, 1 / 3, 0], [0, 1 / 2, 1 / 2, 0], [0, 0, 0, 1.0]]
    )
    torch.testing.assert_close(low, expect)
    # Directed edge 0 -> 1: node 1 (the target) aggregates node 0, not vice versa.
    low = acm_low_pass(torch.tensor([[0], [1]]), 2).to_dense()
    torch.testing.assert_close(low, torch.tensor([[1.0, 0.0], [0.5, 0.5]]))
    # Edge weights replace the ones of A; the self-loop keeps weight 1.
    low = acm_low_pass(torch.tensor([[0], [1]]), 2, torch.tensor([3.0])).to_dense()
    torch.testing.assert_close(low, torch.tensor([[1.0, 0.0], [0.75, 0.25]]))


@pytest.mark.parametrize("channel", [0, 1, 2])
def test_each_channel_is_its_filter_when_the_mixing_is_forced(channel):
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    conv = ACMConv(5, 6)
    low = _low_dense()
    filters = [low, torch.eye(4) - low, torch.eye(4)]
    weights = [conv.weight_low, conv.weight_high, conv.weight_id]
    with torch.no_grad():  # a = 0 makes e = 1/2; one column of W_mix then dominates the softmax
        for a in (conv.att_low, conv.att_high, conv.att_id):
            a.zero_()
        conv.att_mix.zero_()
        conv.att_mix[:, channel] = 300.0
    out = conv(x, acm_low_pass(TINY_EI, 4))
    expect = 3 * torch.relu(filters[channel] @ x @ weights[channel])
    torch.testing.assert_close(out, expect)


def test_layer_matches_hand_computed_attention():
    torch.manual_seed(1)
    x = torch.randn(4, 5)
    conv = ACMConv(5, 6)
    low = _low_dense()
    hl = torch.relu(low @ x @ conv.weight_low)
    hh = torch.relu((torch.eye(4) - low) @ x @ conv.weight_high)
    hi = torch.relu(x @ conv.weight_id)
    e = torch.sigmoid(torch.cat([hl @ conv.att_low, hh @ conv.att_high, hi @ conv.att_id], 1))
    alpha = torch.softmax(e @ conv.att_mix / 3, 1)
    expect = 3 * (alpha[:, :1] * hl + alpha[:, 1:2] * hh + alpha[:, 2:] * hi)
    adj = acm_low_pass(TINY_EI, 4)
    torch.testing.assert_close(conv(x, adj), expect)
    a = conv.attention(*conv.channels(x @ conv.weight, adj))
    torch.testing.assert_close(a.sum(1), torch.ones(4))


def test_network_structure_and_init():
    model = ACMGCN(20, 16, 3, num_layers=2, dropout=0.1)
    assert [(c.in_channels, c.out_channels) for c in model.convs] == [(20, 16), (16, 16)]
    assert model.classifier.weight.shape == (3, 16)
    torch.testing.assert_close(model.classifier.bias, torch.full((3,), 0.01))
    bound = (6 / (20 + 16)) ** 0.5
    assert float(model.convs[0].weight_low.detach().abs().max()) <= bound
    assert len(ACMGCN(20, 16, 3, num_layers=3).convs) == 3
    with pytest.raises(ValueError, match="num_layers"):
        ACMGCN(20, 16, 3, num_layers=0)


def test_forward_is_classifier_of_embedding_through_two_layers():
    torch.manual_seed(0)
    x, ei = _graph()
    model = ACMGCN(20, 16, 3, dropout=0.1).eval()
    adj = acm_low_pass(ei, 30)
    h = model.convs[1](torch.relu(model.convs[0](x, adj)), adj)
    torch.testing.assert_close(model.embed(x, ei), h)
    out = model(x, ei)
    assert out.shape == (30, 3)
    torch.testing.assert_close(out, model.classifier(h))


def test_sparse_and_dense_features_give_same_logits_and_grads():
    torch.manual_seed(0)
    x, ei = _graph()
    model = ACMGCN(20, 16, 3).eval()
    dense = model(x, ei)
    dense.square().sum().backward()
    g_dense = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    sparse = model(x.to_sparse(), ei)
    torch.testing.assert_close(sparse, dense, atol=1e-5, rtol=1e-5)
    sparse.square().sum().backward()
    for gs, gd in zip((p.grad for p in model.parameters()), g_dense):
        torch.testing.assert_close(gs, gd, atol=1e-4, rtol=1e-4)


def test_sparse_input_dropout_matches_dense_with_the_same_mask():
    x, _ = _graph()
    xs = x.to_sparse()
    w1 = torch.randn(20, 8, requires_grad=True)
    w2 = w1.detach().clone().requires_grad_(True)
    torch.manual_seed(3)
    out = dropout_feature_matmul(xs, w1, 0.4, True, GraphCache())
    torch.manual_seed(3)  # the same Bernoulli draw over the stored entries
    vals = xs.coalesce().values()
    keep = torch.empty_like(vals).bernoulli_(0.6)
    masked = torch.sparse_coo_tensor(xs.coalesce().indices(), vals * keep / 0.6, x.shape).to_dense()
    torch.testing.assert_close(out, masked @ w2)
    out.square().sum().backward()
    (masked @ w2).square().sum().backward()
    torch.testing.assert_close(w1.grad, w2.grad)
    assert 0 < int((keep == 0).sum()) < vals.numel()
    # Evaluation: no dropout.
    torch.testing.assert_close(dropout_feature_matmul(xs, w1, 0.4, False, GraphCache()), x @ w1)


@pytest.mark.parametrize("sparse", [False, True])
def test_deterministic_under_a_seed(sparse):
    x, ei = _graph()
    xin = x.to_sparse() if sparse else x

    def run():
        torch.manual_seed(7)
        model = build_model("acmgcn", "node", 20, 3, 16, 2, 0.5)
        return model(xin, ei)  # training mode: dropout draws from the seeded RNG

    a, b = run(), run()
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    model = ACMGCN(20, 16, 3, dropout=0.5)
    assert not torch.equal(model(xin, ei), model(xin, ei))  # dropout active in training
    model.eval()
    torch.testing.assert_close(model(xin, ei), model(xin, ei), rtol=0, atol=0)


def test_gradients_reach_every_parameter():
    torch.manual_seed(0)
    x, ei = _graph()
    y = torch.randint(0, 3, (30,))
    model = ACMGCN(20, 16, 3, dropout=0.1)
    F.cross_entropy(model(x.to_sparse(), ei), y).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and bool(p.grad.abs().sum() > 0), name


def test_adjacency_is_cached_per_graph():
    x, ei = _graph()
    model = ACMGCN(20, 16, 3).eval()
    xs = x.to_sparse()
    adj = model.low_pass(xs, ei)
    assert model.low_pass(xs, ei) is adj
    x2, ei2 = _graph(seed=1)
    assert model.low_pass(x2, ei2) is not adj
    torch.testing.assert_close(model.low_pass(x2, ei2).to_dense(), acm_low_pass(ei2, 30).to_dense())
    # Another graph through the same module gives that graph's output.
    torch.testing.assert_close(model(x2.to_sparse(), ei2), model(x2, ei2), atol=1e-5, rtol=1e-5)


def test_registry_and_build_model():
    assert "acmgcn" in MODELS and "acm-gcn" in MODELS and "ACM_GCN" in MODELS
    assert MODELS.get("acmgcn").task == "node"
    model = build_model("acmgcn", "node", 20, 3, 128, 2, 0.1)
    assert isinstance(model, ACMGCN) and model.dropout == 0.1
    assert model.convs[1].weight_low.shape == (128, 128)
    x, ei = _graph()
    assert model.eval()(x, ei).shape == (30, 3)
