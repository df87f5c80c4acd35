"""FedFA's FFA layer on hand-worked cases: the fusion weights, the neighbourhood statistics,
the identity without noise, the sampled output's formula, training-only action and the
running statistic means."""

import pytest
import torch

from fgl_flower.models.acmgcn import acm_low_pass
from fgl_flower.models.fedfa import FedFANet, FFALayer, fusion_weights

# a path 0 - 1 - 2 (both directions) and one channel-pair of features
EDGES = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
H = torch.tensor([[0.0, 1.0], [3.0, 1.0], [6.0, 4.0]])


def test_fusion_weights_by_hand():
    """v = (0, 1, 3): s = v / (1 + v) = (0, 1/2, 3/4), gamma = 3 s / (5/4) = (0, 1.2, 1.8);
    any constant variance gives 1 everywhere (the official code's scalar sharing)."""
    g = fusion_weights(torch.tensor([0.0, 1.0, 3.0]), eps=0.0)
    assert g.tolist() == pytest.approx([0.0, 1.2, 1.8])
    assert fusion_weights(torch.full((4,), 0.37), 1e-6).tolist() == pytest.approx([1.0] * 4)


def test_statistics_are_over_each_closed_neighbourhood():
    """Node 0 averages {0, 1}: mean (1.5, 1), variance (2.25, 0); node 1 averages {0, 1, 2}:
    mean (3, 2), variance (6, 2)."""
    ffa = FFALayer(2, eps=0.0)
    mu, std = ffa.statistics(H, acm_low_pass(EDGES, 3))
    assert mu[:2].flatten().tolist() == pytest.approx([1.5, 1.0, 3.0, 2.0])
    assert (std[:2] ** 2).flatten().tolist() == pytest.approx([2.25, 0.0, 6.0, 2.0], abs=1e-6)


def test_without_noise_the_layer_is_the_identity(monkeypatch):
    ffa = FFALayer(2, prob=1.0).train()
    monkeypatch.setattr(torch, "randn_like", torch.zeros_like)
    out = ffa(H, acm_low_pass(EDGES, 3))
    assert torch.allclose(out, H, atol=1e-5)
    assert ffa.applied == 1 and ffa.shift == pytest.approx(0.0, abs=1e-5)


def test_the_sampled_statistics_follow_the_fused_variance(monkeypatch):
    """With unit noise: mu_hat = mu + sqrt((gamma_mu + 1) var_nodes(mu)), the same for sigma,
    and X_hat = sigma_hat (X - mu) / sigma + mu_hat; gamma from the sharing variance sent."""
    ffa = FFALayer(2, prob=1.0, eps=1e-6).train()
    ffa.sharing_var_mean.copy_(torch.tensor([0.0, 1.0]))  # gamma_mu = 2 s / sum s = (0, 2)
    monkeypatch.setattr(torch, "randn_like", torch.ones_like)
    adj = acm_low_pass(EDGES, 3)
    mu, std = ffa.statistics(H, adj)
    gamma_mu = torch.tensor([0.0, 2.0])
    mu_hat = mu + ((gamma_mu + 1) * (mu.var(dim=0) + 1e-6)).sqrt()
    sd_hat = std + (2 * (std.var(dim=0) + 1e-6)).sqrt()  # sharing_var_std ones: gamma 1
    expected = (H - mu) / std * sd_hat + mu_hat
    assert torch.allclose(ffa(H, adj), expected, atol=1e-5)


def test_training_only_with_probability_and_the_running_means_move(monkeypatch):
    adj = acm_low_pass(EDGES, 3)
    ffa = FFALayer(2, prob=1.0, momentum=0.5)
    assert torch.equal(ffa.eval()(H, adj), H) and ffa.forwards == 0
    never = FFALayer(2, prob=0.0).train()
    assert torch.equal(never(H, adj), H) and never.forwards == 1 and never.applied == 0
    assert never.running_mean.tolist() == [0.0, 0.0]
    with ffa.train().paused():  # an evaluation that keeps dropout
        assert torch.equal(ffa(H, adj), H) and ffa.forwards == 0
    ffa(H, adj)
    mu, std = ffa.statistics(H, adj)
    assert ffa.running_mean.tolist() == pytest.approx((0.5 * mu.mean(dim=0)).tolist())
    assert ffa.running_std.tolist() == pytest.approx((0.5 + 0.5 * std.mean(dim=0)).tolist())
    assert set(dict(ffa.named_buffers())) == {
        "running_mean",
        "running_std",
        "sharing_var_mean",
        "sharing_var_std",
    }


def test_the_net_augments_the_classifier_input_in_training_only():
    from fgl_flower.models.acmgcn import ACMGCN

    torch.manual_seed(0)
    net = FedFANet(ACMGCN(4, 8, 3), FFALayer(8, prob=1.0))
    x = torch.randn(3, 4)
    net.eval()
    plain = net.backbone(x, EDGES)
    assert torch.equal(net(x, EDGES), plain)
    net.train()
    torch.manual_seed(1)
    out = net(x, EDGES)
    assert out.shape == (3, 3) and net.ffa.applied == 1
    assert (
        "ffa.running_mean" in net.state_dict() and "backbone.classifier.weight" in net.state_dict()
    )
