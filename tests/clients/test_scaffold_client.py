"""SCAFFOLD's client on real data (Cora, Louvain, 10 clients, plain SGD): round 1 is FedAvg's
(c = c_i = 0) to the digit, later rounds are not, the correction is of the gradient's order,
and every Delta c_i passes the server's recomputation (no client refused)."""

import pytest
import torch
from flwr.app import ConfigRecord, RecordDict
from run_records import probe, rounds

from fgl_flower.clients.scaffold import CLIENT_CONTROL, ScaffoldClient
from fgl_flower.clients.state import ClientState
from fgl_flower.datasets import load_client_data
from fgl_flower.inprocess import run_inprocess
from fgl_flower.methods.scaffold import CONTROL, DELTA
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, CONFIG
from fgl_flower.records import record_torch, torch_record


@pytest.fixture
def cora(cora):
    """The shared Cora fixture with plain SGD (SCAFFOLD's solver): lr 0.5, 5 local epochs."""
    cora.update({"optimizer": "sgd", "lr": 0.5, "local-epochs": 5})
    return cora


def test_the_control_variates_correct_the_local_steps(cora, tmp_path):
    run_inprocess({**cora, "method": "fedavg", "out-dir": str(tmp_path / "fedavg")})
    run_inprocess({**cora, "method": "scaffold"})
    fedavg, scaffold = rounds(tmp_path / "fedavg"), rounds(tmp_path / "run")
    assert all("failures" not in r for r in scaffold)
    loss = lambda recs: [r["train"]["train_loss"] for r in recs]  # noqa: E731
    assert loss(scaffold)[0] == loss(fedavg)[0]  # round 1: no correction yet
    assert fedavg[0]["eval"] == scaffold[0]["eval"]  # ... and the same mean
    assert loss(scaffold)[1] != loss(fedavg)[1]
    assert probe(scaffold[0], "scaffold.correction") == 0.0
    for r in scaffold[1:]:
        # c - c_i is of the local gradient's order under this heterogeneity, not a rounding
        assert 0.1 < probe(r, "scaffold.correction") < 10
    assert all(probe(r, "scaffold.control-norm") > 0.01 for r in scaffold)


def gradient_at_start(client) -> dict:
    """The gradient of the client's training loss at its current model (no step taken)."""
    model = client.learner.model
    model.train()
    model.zero_grad()
    client.learner.loss_of(client.learner.predictor(model)).backward()
    g = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    model.zero_grad()
    return g


def round_two(start: dict, control: dict) -> RecordDict:
    """A round-2 train message with the global model ``start`` and the control variate."""
    return RecordDict(
        {
            ARRAYS: torch_record(start),
            CONTROL: torch_record(control),
            CONFIG: ConfigRecord({"server-round": 2}),
        }
    )


def test_one_corrected_step_by_hand(flat):
    """One plain SGD step (lr 0.5, no dropout, no weight decay) from the sent x with c and a
    stored c_i: y = x - lr (g + c - c_i); Delta c = (x - y)/lr - c = g - c_i, and the stored
    c_i becomes c_i + Delta c = g, the gradient at x (option II with K = 1)."""
    flat.update(
        {
            "method": "scaffold",
            "optimizer": "sgd",
            "lr": 0.5,
            "local-epochs": 1,
            "weight-decay": 0.0,
            "dropout": 0.0,
        }
    )
    cfg = parse_run_config(flat)
    state = ClientState(RecordDict())
    client = ScaffoldClient(cfg, load_client_data(cfg.data_config(), 0), state, 0)
    x = {k: v.detach().clone() for k, v in client.learner.get_shared().items()}
    gen = torch.Generator().manual_seed(0)
    c = {k: 0.01 * torch.randn(v.shape, generator=gen) for k, v in x.items()}
    ci = {k: 0.01 * torch.randn(v.shape, generator=gen) for k, v in x.items()}
    state.save_tensors(CLIENT_CONTROL, ci)
    g = gradient_at_start(client)
    content = round_two(x, c)
    reply = client.train(content, 2)
    y = record_torch(reply[ARRAYS])
    delta = record_torch(reply[DELTA])
    stored = state.load_tensors(CLIENT_CONTROL)
    for k in x:
        assert torch.allclose(y[k], x[k] - 0.5 * (g[k] + c[k] - ci[k]), atol=1e-6)
        assert torch.allclose(delta[k], g[k] - ci[k], atol=1e-5)
        assert torch.allclose(stored[k], g[k], atol=1e-5)


def test_feddc_is_scaffold_plus_a_live_drift(cora, tmp_path):
    """With alpha = 0 FedDC's clients train as SCAFFOLD's in round 1; its server then adds
    the mean drift, so the global models differ; alpha reaches the loss from round 2."""
    run_inprocess({**cora, "method": "scaffold", "out-dir": str(tmp_path / "scaffold")})
    run_inprocess({**cora, "method": "feddc", "feddc.alpha": 0.0, "out-dir": str(tmp_path / "a0")})
    run_inprocess({**cora, "method": "feddc"})
    scaffold, a0, feddc = (rounds(tmp_path / d) for d in ("scaffold", "a0", "run"))
    assert all("failures" not in r for r in feddc + a0)
    assert a0[0]["train"]["train_loss"] == scaffold[0]["train"]["train_loss"]
    assert a0[0]["eval"] != scaffold[0]["eval"]  # the drift moves the global model
    assert feddc[1]["train"]["train_loss"] != a0[1]["train"]["train_loss"]
    for r in feddc:
        assert probe(r, "feddc.drift") > 0.01 and probe(r, "feddc.drift-share") > 0.01
    assert all(probe(r, "feddc.correction") > 0.1 for r in feddc[1:])


def test_one_feddc_step_by_hand(flat):
    """FedDC: one SGD step from w with a stored drift h, c and c_i: the penalty's gradient at
    w is alpha (w + h - w) = alpha h, so y = w - lr (g + alpha h + c - c_i); the drift becomes
    h + (y - w) and Delta c = (w - y)/lr - c = g + alpha h - c_i."""
    from fgl_flower.clients.feddc import DRIFT, FedDCClient

    flat.update(
        {
            "method": "feddc",
            "optimizer": "sgd",
            "lr": 0.5,
            "local-epochs": 1,
            "weight-decay": 0.0,
            "dropout": 0.0,
            "feddc.alpha": 0.3,
        }
    )
    cfg = parse_run_config(flat)
    state = ClientState(RecordDict())
    client = FedDCClient(cfg, load_client_data(cfg.data_config(), 0), state, 0)
    w = {k: v.detach().clone() for k, v in client.learner.get_shared().items()}
    gen = torch.Generator().manual_seed(1)
    c, ci, h = (
        {k: 0.01 * torch.randn(v.shape, generator=gen) for k, v in w.items()} for _ in range(3)
    )
    state.save_tensors(CLIENT_CONTROL, ci)
    state.save_tensors(DRIFT, h)
    g = gradient_at_start(client)
    content = round_two(w, c)
    reply = client.train(content, 2)
    y, delta = record_torch(reply[ARRAYS]), record_torch(reply[DELTA])
    drift = state.load_tensors(DRIFT)
    for k in w:
        step = g[k] + 0.3 * h[k] + c[k] - ci[k]
        assert torch.allclose(y[k], w[k] - 0.5 * step, atol=1e-6)
        assert torch.allclose(drift[k], h[k] + (y[k] - w[k]), atol=1e-6)
        assert torch.allclose(delta[k], g[k] + 0.3 * h[k] - ci[k], atol=1e-5)
