"""APFL client: α's and v's gradients on a hand-worked case, one round of Algorithm 1 against a
reference written from its equations, FedTorch's α step on given numbers, the official
variant's mixed outputs, which personalized model is evaluated, and what travels."""

import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, RecordDict
from torch import nn
from torch.func import functional_call

from fgl_flower.clients.apfl import APFLClient, mixed_parameters, official_alpha_step
from fgl_flower.clients.learner import node_metrics
from fgl_flower.clients.state import ClientState
from fgl_flower.datasets import load_client_data
from fgl_flower.errors import ConfigError
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, CONFIG, METRICS, SERVER_ROUND


def linear(weight):
    m = nn.Linear(2, 2, bias=False)
    m.weight.data = torch.tensor(weight)
    return m


def test_the_mixed_parameters_give_v_alpha_times_and_alpha_the_inner_product():
    """f(M) = CE(x Mᵀ, y) at M = αV + (1−α)W: ∇_M f = (softmax − onehot)ᵀ x by hand; then
    ∇_V = α ∇_M f and ∇_α = ⟨V − W, ∇_M f⟩."""
    v, w = linear([[1.0, -2.0], [0.5, 1.0]]), linear([[0.0, 1.0], [2.0, -1.0]])
    x, y = torch.tensor([[1.0, 3.0]]), torch.tensor([0])
    alpha = torch.tensor(0.3, requires_grad=True)
    loss = nn.functional.cross_entropy(functional_call(v, mixed_parameters(v, w, alpha), (x,)), y)
    loss.backward()
    M = 0.3 * v.weight.detach() + 0.7 * w.weight.detach()
    p = torch.softmax(x @ M.T, -1)
    grad_M = (p - torch.tensor([[1.0, 0.0]])).T @ x  # hand-worked CE gradient
    assert torch.allclose(v.weight.grad, 0.3 * grad_M, atol=1e-6)
    assert w.weight.grad is None  # w's gradient is its own step's
    assert float(alpha.grad) == pytest.approx(
        float(((v.weight - w.weight).detach() * grad_M).sum()), abs=1e-6
    )


def test_fedtorch_alpha_step_on_given_numbers():
    v, w = nn.Linear(2, 1, bias=False), nn.Linear(2, 1, bias=False)
    v.weight.data, w.weight.data = torch.tensor([[1.0, 2.0]]), torch.tensor([[0.0, 1.0]])
    v.weight.grad, w.weight.grad = torch.tensor([[0.5, -1.0]]), torch.tensor([[1.0, 1.0]])
    # Σ (v − w)(α g_v + (1−α) g_w) = 1·(0.2 + 0.6) + 1·(−0.4 + 0.6) = 1.0; + 0.02·0.4
    assert official_alpha_step(v, w, 0.4, 0.1) == pytest.approx(0.4 - 0.1 * 1.008)
    assert official_alpha_step(v, w, 0.4, 10.0) == 0.0  # clipped to [0, 1]


def make(flat, tmp_path, **options):
    flat.update(
        {"method": "apfl", "local-epochs": 3, **{f"apfl.{k}": v for k, v in options.items()}}
    )
    cfg = parse_run_config(flat)
    data = load_client_data(cfg.data_config(), 0)
    return APFLClient(cfg, data, ClientState(RecordDict()), 0)


def round_content(arrays=None):
    return RecordDict({ARRAYS: arrays or ArrayRecord(), CONFIG: ConfigRecord({SERVER_ROUND: 1})})


def test_only_the_global_copy_travels_and_alpha_adapts(flat, tmp_path):
    client = make(flat, tmp_path)
    reply = client.train(round_content(), 1)
    up = reply.array_records[ARRAYS].to_torch_state_dict()
    assert set(up) == set(client.learner.model.state_dict())
    for k, t in up.items():
        assert torch.equal(t, client.learner.model.state_dict()[k])  # w, not v
    local = client.personal.model.state_dict()
    assert any(not torch.equal(t, local[k]) for k, t in up.items())  # v trained apart from w
    m = reply.metric_records[METRICS]
    assert m["probe.alpha"] == client.alpha != 0.5 and m["probe.alpha.moved"] > 0
    fixed = make(flat, tmp_path, adaptive=False)
    fixed.train(round_content(), 1)
    assert fixed.alpha == 0.5


def test_official_variant_mixes_the_outputs(flat, tmp_path):
    client = make(flat, tmp_path, variant="official", alpha=0.25)
    client.train(round_content(), 1)
    g = client.data.data
    with torch.no_grad():
        out = client.mixed(0.25)()
        expected = 0.25 * client.personal.model(g.x, g.edge_index) + 0.75 * client.learner.model(
            g.x, g.edge_index
        )
    assert torch.allclose(out, expected)


def test_alpha_one_is_the_local_model_and_zero_the_global_copy(flat, tmp_path):
    client = make(flat, tmp_path)
    client.train(round_content(), 1)
    g = client.data.data
    client.learner.model.eval()
    client.personal.model.eval()
    with torch.no_grad():
        assert torch.allclose(
            client.mixed(1.0)(), client.personal.model(g.x, g.edge_index), atol=1e-6
        )
        assert torch.allclose(
            client.mixed(0.0)(), client.learner.model(g.x, g.edge_index), atol=1e-6
        )


@pytest.mark.parametrize(
    "override, message",
    [
        ({"apfl.alpha": 1.5}, "must lie in"),
        ({"apfl.variant": "fedtorch"}, "use one of paper, official"),
        ({"apfl.alpha-lr": 0.0}, "positive step size"),
        ({"apfl.evaluate": "global"}, "use one of trained, received"),
    ],
)
def test_bad_options_stop_before_training(flat, override, message):
    with pytest.raises(ConfigError, match=message):
        parse_run_config({**flat, "method": "apfl", **override})


def test_one_round_of_algorithm_1_against_a_reference(flat, tmp_path):
    """Plain SGD, no dropout, no weight decay, v moved away from w: three local steps of
    Algorithm 1 written from its equations (both gradients at the step's start; v's through
    the mixture, α's the inner product ⟨v − w, ∇f(v̄)⟩, clipped) give the client's α, v, w."""
    flat.update({"optimizer": "sgd", "lr": 0.05, "dropout": 0.0, "weight-decay": 0.0})
    client = make(flat, tmp_path, alpha=0.4, **{"alpha-lr": 0.5})
    with torch.no_grad():
        for p in client.personal.model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    g = client.data.data
    model = client.learner.model
    v = {k: t.detach().clone() for k, t in client.personal.model.named_parameters()}
    w = {k: t.detach().clone() for k, t in model.named_parameters()}
    alpha = 0.4

    def loss(params):
        logits = functional_call(model, params, (g.x, g.edge_index))
        return nn.functional.cross_entropy(logits[g.train_mask], g.y[g.train_mask])

    for _ in range(3):
        mix = {k: (alpha * v[k] + (1 - alpha) * w[k]).requires_grad_() for k in v}
        g_mix = torch.autograd.grad(loss(mix), list(mix.values()))
        wr = {k: t.clone().requires_grad_() for k, t in w.items()}
        g_w = torch.autograd.grad(loss(wr), list(wr.values()))
        grad_alpha = float(sum(((v[k] - w[k]) * gm).sum() for k, gm in zip(v, g_mix)))
        v = {k: v[k] - 0.05 * alpha * gm for k, gm in zip(v, g_mix)}
        w = {k: w[k] - 0.05 * gw for k, gw in zip(w, g_w)}
        alpha = min(1.0, max(0.0, alpha - 0.5 * grad_alpha))
    client.train(round_content(), 1)
    assert client.alpha == pytest.approx(alpha, abs=1e-6) and client.alpha != 0.4
    for k, t in client.personal.model.named_parameters():
        assert torch.allclose(t, v[k], atol=1e-5)
    for k, t in model.named_parameters():
        assert torch.allclose(t, w[k], atol=1e-5)
    pinned = make(flat, tmp_path, alpha=0.4, **{"alpha-lr": 1e6})  # a huge step is clipped
    with torch.no_grad():
        for p in pinned.personal.model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    pinned.train(round_content(), 1)
    assert pinned.alpha in (0.0, 1.0)


def test_evaluate_received_reports_the_mixture_with_the_averaged_copy(flat, tmp_path):
    """``apfl.evaluate = "received"``: the train reply carries no evaluation, the evaluate
    message's w is loaded (v and α stay the client's) and the mixture with it is reported;
    the strategy then evaluates on FedAvg's schedule instead of reading train replies."""
    from fgl_flower.strategies.apfl import APFLStrategy

    client = make(flat, tmp_path, evaluate="received")
    reply = client.train(round_content(), 1)
    assert "test_acc" not in reply.metric_records[METRICS]
    averaged = {k: t + 0.1 for k, t in client.learner.model.state_dict().items()}
    res = client.evaluate(round_content(ArrayRecord(averaged)), 1).metric_records[METRICS]
    for k, t in client.learner.model.state_dict().items():
        assert torch.equal(t, averaged[k])
    client.learner.model.eval()
    client.personal.model.eval()
    with torch.no_grad():
        expected = node_metrics(client.mixed(client.alpha)(), client.data)
    assert res["test_acc"] == pytest.approx(expected["test_acc"])
    assert (
        "test_acc"
        in make(flat, tmp_path, evaluate="trained")
        .train(round_content(), 1)
        .metric_records[METRICS]
    )
    assert APFLStrategy(parse_run_config(flat)).evaluates_in_train
    assert not APFLStrategy(
        parse_run_config({**flat, "apfl.evaluate": "received"})
    ).evaluates_in_train


def test_official_alpha_moves_once_per_round(flat, tmp_path):
    """FedTorch steps α at the round's first local step only: three local epochs leave α
    where one epoch does (same seed, same start), while `v` and `w` train on."""
    flat.update({"dropout": 0.0})
    one = make(flat, tmp_path, variant="official")
    one.cfg = parse_run_config({**flat, "local-epochs": 1})
    with torch.no_grad():
        for p in one.personal.model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    three = make(flat, tmp_path, variant="official")  # local-epochs 3
    three.personal.model.load_state_dict(one.personal.model.state_dict())
    one.train(round_content(), 1)
    three.train(round_content(), 1)
    assert one.alpha != 0.5 and three.alpha == pytest.approx(one.alpha, abs=1e-12)
    w1, w3 = one.learner.model.state_dict(), three.learner.model.state_dict()
    assert any(not torch.equal(w1[k], w3[k]) for k in w1)
