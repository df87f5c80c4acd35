"""FedHERO's latent graph and dual-channel model (spec §2): by hand on small graphs."""

import pytest
import torch
import torch.nn.functional as F

from fgl_flower.models import fedhero
from fgl_flower.models.fedhero import FedHERONet, StructureLearner, pair_sq_distances


def dense_topk(sim: torch.Tensor, k: int, latent: str = "weighted") -> torch.Tensor:
    """Reference: keep the top-k of each row (1s, or their values ReLU'd), symmetrise."""
    keep = torch.zeros_like(sim)
    vals, idx = sim.topk(k, dim=1)
    keep.scatter_(1, idx, torch.ones_like(vals) if latent == "binary" else vals)
    keep = keep.clamp_min(0)
    return (keep + keep.t()) / 2


def test_cosine_knn_by_hand():
    # four nodes: 0 and 1 point the same way, 2 is orthogonal to them, 3 is opposite to 0
    s = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [-1.0, 0.1]])
    learner = StructureLearner(2, 2, heads=1, metric="cos", latent="weighted")
    g = learner.knn(s, k=2)
    assert g.index.shape == (4, 2)
    assert set(g.index[0].tolist()) == {0, 1} and torch.allclose(g.weight[0], torch.ones(2))
    a = g.to_dense()
    assert torch.allclose(a, a.t())  # symmetric
    assert (a >= 0).all()  # negative similarities are dropped
    expected = dense_topk(F.normalize(s) @ F.normalize(s).t(), 2)
    assert torch.allclose(a, expected, atol=1e-6)
    # row-normalised propagation: rows of D^-1 Ã sum to 1
    z = torch.randn(4, 3)
    assert torch.allclose(g.propagate(torch.ones(4, 1)), torch.ones(4, 1))
    assert torch.allclose(g.propagate(z), (a / a.sum(1, keepdim=True)) @ z, atol=1e-6)


def test_binary_knn_by_hand_keeps_k_ones_whatever_the_sign():
    """Eq. 4: 1 on each row's top-k, even where the kept similarity is negative, so no row
    is ever empty (node 3's best other node, 2, has cosine -0.198)."""
    s = torch.tensor([[1.0, 0.0], [2.0, 0.5], [0.1, 1.0], [-1.0, -0.1]])
    g = StructureLearner(2, 2, heads=1, metric="cos").knn(s, k=2)  # binary is the default
    assert torch.equal(g.weight, torch.ones(4, 2))
    assert g.index[3].tolist() == [3, 2] and g.similarity[3, 1] < 0
    a = g.to_dense()
    assert torch.equal(a, dense_topk(F.normalize(s) @ F.normalize(s).t(), 2, "binary"))
    assert a[3, 2] == 0.5 and a[2, 3] == 0.5  # 3 keeps 2, 2 does not keep 3
    weighted = StructureLearner(2, 2, heads=1, metric="cos", latent="weighted").knn(s, k=2)
    assert weighted.to_dense()[3, 2] == 0  # the ReLU'd value drops it
    h = g.health(torch.tensor([0, 0, 1, 1]))
    assert h["nonempty"] == 1.0 and h["weight"] == 1.0
    # kept pairs u != v: {0,1} (mutual), {1,2} (2 keeps 1), {2,3} (3 keeps 2)
    assert h["edges"] == pytest.approx(3 / 4) and h["homophily"] == pytest.approx(2 / 3)
    assert h["targets"] == pytest.approx(3 / 4)  # 0, 1 and 2 are kept by another node
    assert h["hubs"] == pytest.approx(2 / 4)  # node 1 (the top 1 %: one node) holds 2 of 4 entries
    only = torch.tensor([True, True, True, False])
    assert g.health(torch.tensor([0, 0, 1, 1]), only)["homophily"] == pytest.approx(1 / 2)


def test_straight_through_weights_are_one_forward_and_pass_gradients_to_the_similarity():
    torch.manual_seed(0)
    learner = StructureLearner(4, 6, heads=2)
    s = torch.rand(12, 6, requires_grad=True)
    g = learner.knn(s, 4)
    assert torch.equal(g.weight.detach(), torch.ones(12, 4))
    coef = torch.randn(12, 4)
    (g.weight * coef).sum().backward()
    # the gradient of sum(coef * K) w.r.t. w1 equals that of sum(coef * kept similarity)
    grad_st = learner.w1.grad.clone()
    learner.w1.grad = None
    p, q = learner._factors(s)
    sim = (p @ q.t()).gather(1, g.index)
    (sim * coef).sum().backward()
    assert torch.allclose(grad_st, learner.w1.grad, atol=1e-6) and grad_st.abs().sum() > 0


@pytest.mark.parametrize("latent", ["binary", "weighted"])
@pytest.mark.parametrize("metric", ["weighted-cos", "cos", "att", "gat"])
def test_latent_graph_matches_dense_reference(metric, latent):
    torch.manual_seed(0)
    n, d, k = 30, 8, 5
    learner = StructureLearner(6, d, heads=3, metric=metric, latent=latent)
    s = torch.rand(n, d)
    g = learner.knn(s, k)
    if metric == "weighted-cos":
        p = F.normalize(s.unsqueeze(1) * learner.w1, dim=-1)
        q = F.normalize(s.unsqueeze(1) * learner.w2, dim=-1)
        sim = torch.einsum("uhd,vhd->uv", p, q) / 3
    elif metric == "cos":
        sim = F.normalize(s) @ F.normalize(s).t()
    elif metric == "att":
        r = F.relu(torch.einsum("nd,hde->hne", s, learner.att))
        sim = torch.einsum("hue,hve->uv", r, r) / 3
    else:
        sim = F.leaky_relu(
            (s @ learner.a1.t()).unsqueeze(1) + (s @ learner.a2.t()).unsqueeze(0), 0.2
        ).mean(-1)
    a = dense_topk(sim, k, latent)
    assert torch.allclose(g.to_dense(), a, atol=1e-5)
    assert torch.allclose(g.degree(), a.sum(1), atol=1e-5)
    assert torch.allclose(g.frobenius_sq(), (a**2).sum(), atol=1e-5)
    kept = sim.topk(k, dim=1).values
    assert g.health()["contrast"] == pytest.approx(
        float((kept.mean(1) - sim.mean(1)).mean().detach()), abs=1e-5
    )


def test_blocks_change_nothing(monkeypatch):
    torch.manual_seed(1)
    learner = StructureLearner(4, 8, heads=4)
    s = torch.rand(50, 8)
    whole = learner.knn(s, 7)
    monkeypatch.setattr(fedhero, "BLOCK_ELEMENTS", 3 * 50)  # three rows per block
    blocked = learner.knn(s, 7)
    assert torch.equal(whole.index, blocked.index)
    assert torch.allclose(whole.weight, blocked.weight, atol=1e-6)  # BLAS blocking may differ
    x = torch.rand(50, 11)
    ref = ((x.unsqueeze(1) - x[whole.index]) ** 2).sum(-1)
    assert torch.allclose(pair_sq_distances(x, whole.index), ref, atol=1e-5)


def test_k_larger_than_the_graph_keeps_every_pair():
    g = StructureLearner(2, 4, heads=2).knn(torch.rand(3, 4), k=20)
    assert g.index.shape == (3, 3)


def small_graph(n=40, f=12, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.rand(n, f, generator=gen) < 0.3).float()
    ei = torch.randint(0, n, (2, 4 * n), generator=gen)
    ei = torch.cat([ei, ei.flip(0)], 1)
    return x, ei[:, ei[0] != ei[1]]


@pytest.mark.parametrize("latent", ["binary", "weighted"])
def test_regularizer_equals_its_dense_formula(latent):
    torch.manual_seed(0)
    x, ei = small_graph()
    m = FedHERONet(12, 8, 3, num_layers=2, dropout=0.0, k=5, lam=0.3, mu=0.7, latent=latent)
    m.eval()
    m(x, ei)
    a = m.latent_graph(x, ei).to_dense()
    dist = torch.cdist(x, x) ** 2
    n2 = x.size(0) ** 2
    expected = (0.3 * (a * dist).sum() + 0.7 * (a**2).sum()) / n2
    assert torch.allclose(m.regularizer(), expected, rtol=1e-4)
    m.reg_norm = "none"
    assert torch.allclose(m.regularizer(), expected * n2, rtol=1e-4)


def test_the_regularizer_of_the_binary_graph_has_no_gradient_unless_passed_straight_through():
    torch.manual_seed(0)
    x, ei = small_graph()
    m = FedHERONet(12, 8, 3, num_layers=2, dropout=0.0, k=5)
    m(x, ei)
    assert not m.regularizer().requires_grad  # Eq. 7 on 0/1 entries: piecewise constant
    m.reg_surrogate = True
    m(x, ei)
    m.regularizer().backward()
    assert m.struct.w1.grad is not None and m.struct.w1.grad.abs().sum() > 0


def test_gradients_reach_the_structure_learner_through_the_classifier_loss():
    torch.manual_seed(0)
    x, ei = small_graph()
    m = FedHERONet(12, 8, 3, num_layers=2, dropout=0.0, k=5)
    F.cross_entropy(m(x, ei), torch.randint(0, 3, (40,))).backward()  # no regulariser
    for name in (
        "struct.w1",
        "struct.w2",
        "struct.encoder.lin.weight",
        "gconv.0.lin.weight",
        "lconv.0.lin.weight",
        "proj.weight",
        "cls.weight",
    ):
        grad = dict(m.named_parameters())[name].grad
        assert grad is not None and grad.abs().sum() > 0, name


def test_parameter_counts_of_the_spec():
    """Spec §2.6: d_h 64, N_H 4, L 2 on Squirrel (2089 features, 5 classes)."""
    m = FedHERONet(2089, 64, 5, num_layers=2)
    count = lambda *pre: sum(p.numel() for k, p in m.named_parameters() if k.startswith(pre))  # noqa: E731
    assert count("struct.", "gconv.") == 142_592
    assert count("proj.", "lconv.", "cls.") == 153_490
    assert count("struct.") == 2089 * 64 + 64 + 2 * 4 * 64


def test_without_dual_channel_one_weight_set_serves_both_graphs():
    torch.manual_seed(0)
    x, ei = small_graph()
    m = FedHERONet(12, 8, 3, num_layers=2, dropout=0.0, k=5, dual_channel=False)
    assert m.lconv is None and not any(k.startswith("lconv.") for k in m.state_dict())
    assert m(x, ei).shape == (40, 3)


def test_alpha_one_ignores_the_latent_graph_in_the_layers():
    torch.manual_seed(0)
    x, ei = small_graph()
    m = FedHERONet(12, 8, 3, num_layers=2, dropout=0.0, k=5, alpha=1.0).eval()
    before = m(x, ei)
    with torch.no_grad():
        m.struct.w1.mul_(-3.0)  # a different latent graph
    assert torch.allclose(m(x, ei), before)


def test_a_copied_model_does_not_copy_the_last_forward():
    import copy

    x, ei = small_graph()
    m = FedHERONet(12, 8, 3, num_layers=1, k=3)
    m(x, ei)
    clone = copy.deepcopy(m)
    with pytest.raises(RuntimeError, match="forward pass first"):
        clone.regularizer()


def test_concat_gcn_is_fedheros_local_channel_alone():
    from fgl_flower.models import build_model

    torch.manual_seed(0)
    x, ei = small_graph()
    m = build_model("gcn-concat", "node", 12, 3, 8, 2, 0.0)
    assert m(x, ei).shape == (40, 3)
    hero = FedHERONet(12, 8, 3, num_layers=2)
    local = sum(
        p.numel() for k, p in hero.named_parameters() if k.startswith(("proj.", "lconv.", "cls."))
    )
    assert sum(p.numel() for p in m.parameters()) == local


def test_embedding_health_sees_dead_units_and_a_collapsed_rank():
    torch.manual_seed(0)
    x, ei = small_graph()
    m = FedHERONet(12, 8, 3, num_layers=1, dropout=0.0, k=5, struct_act="relu").eval()
    m(x, ei)
    h = m.embedding_health()
    assert 0 <= h["dead_units"] < 1 and 1 < h["rank"] <= 8
    with torch.no_grad():  # every unit but the first off for every node: one direction left
        m.struct.encoder.bias[1:] = -1e6
        m.struct.encoder.bias[0] = 1e6
    m(x, ei)
    h = m.embedding_health()
    assert h["dead_units"] == 7 / 8 and h["rank"] == pytest.approx(1.0)
    assert m.last_latent_graph().health()["contrast"] == pytest.approx(0.0, abs=1e-6)


def test_the_linear_encoder_keeps_signed_units_that_cannot_die():
    """``struct_act="none"`` (default): the GCN layer's output as is, negative entries included; a
    bias that would switch a ReLU unit off for every node only shifts it."""
    torch.manual_seed(0)
    x, ei = small_graph()
    relu = FedHERONet(12, 8, 3, num_layers=1, dropout=0.0, k=5, struct_act="relu").eval()
    linear = FedHERONet(12, 8, 3, num_layers=1, dropout=0.0, k=5).eval()  # the default
    linear.load_state_dict(relu.state_dict())
    xd = linear.dense_features(x)
    adj = linear._adjacency(ei, xd.size(0))
    s_lin, s_relu = linear.struct.embed(xd, adj), relu.struct.embed(xd, adj)
    assert (s_lin < 0).any() and torch.equal(s_relu, s_lin.clamp_min(0))
    with torch.no_grad():
        for m in (relu, linear):
            m.struct.encoder.bias[0], m.struct.encoder.bias[1:] = 1e6, -1e6
    relu(x, ei), linear(x, ei)
    assert relu.embedding_health()["dead_units"] == 7 / 8
    assert linear.embedding_health()["dead_units"] == 0.0
    with pytest.raises(ValueError, match="unknown activation"):
        StructureLearner(4, 8, heads=2, activation="tanh")
