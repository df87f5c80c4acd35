"""MOON's client: the contrast on a hand-worked case; on real data (Cora) mu = 0 is FedAvg to
the digit, the contrast starts once a client has a previous model and carries a share of the
loss; on graph classification (MUTAG, GIN) it contrasts the pooled representations."""

import math

import pytest
import torch
from methods_data import GRAPH_TASK
from run_records import probe, rounds

from fgl_flower.clients.moon import model_contrast
from fgl_flower.inprocess import run_inprocess


def test_the_contrast_by_hand():
    """z = z_glob = (1, 0), z_prev = (0, 1), tau = 0.5: logits (2, 0), l = log(1 + e^-2);
    the roles swapped: log(1 + e^2)."""
    z, a, b = torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    assert float(model_contrast(z, a, b, 0.5)) == pytest.approx(math.log(1 + math.exp(-2)))
    assert float(model_contrast(z, b, a, 0.5)) == pytest.approx(math.log(1 + math.exp(2)))
    # scale-free (cosines): a longer z changes nothing
    assert float(model_contrast(3 * z, a, b, 0.5)) == pytest.approx(math.log(1 + math.exp(-2)))


def test_moon_on_cora_is_fedavg_plus_a_live_contrast(cora, tmp_path):
    run_inprocess({**cora, "method": "fedavg", "out-dir": str(tmp_path / "fedavg")})
    run_inprocess({**cora, "method": "moon", "moon.mu": 0.0, "out-dir": str(tmp_path / "mu0")})
    run_inprocess({**cora, "method": "moon"})
    fedavg, mu0, moon = (rounds(tmp_path / d) for d in ("fedavg", "mu0", "run"))
    loss = lambda recs: [r["train"]["train_loss"] for r in recs]  # noqa: E731
    assert loss(mu0) == loss(fedavg)
    assert loss(moon)[0] == loss(fedavg)[0]  # round 1: no client has a previous model
    assert loss(moon)[1:] != loss(fedavg)[1:]
    assert "moon.contrast-share" not in moon[0].get("probes", {})
    for r in moon[1:]:
        assert 0.05 < probe(r, "moon.contrast-share") < 0.95
        assert -1 <= probe(r, "moon.sim-gap") <= 1


def test_moon_on_graph_classification(flat, data_root, tmp_path):
    flat.update({**GRAPH_TASK, "method": "moon", "num-rounds": 2, "data-root": str(data_root)})
    run_inprocess(flat)
    recs = rounds(tmp_path / "run")
    assert probe(recs[1], "moon.contrast-share") > 0.05


@pytest.mark.parametrize("option", ["mu", "tau", "nodes"])
def test_the_options_reach_the_loss(cora, tmp_path, option):
    """mu scales the contrast's share; tau and the contrasted nodes change it; a larger mu
    pulls the local representation towards the global model's and from the previous one's
    (sim-gap grows)."""
    cora["num-rounds"] = 2
    small, large = {"mu": (0.1, 10.0), "tau": (0.1, 1.0), "nodes": ("train", "all")}[option]
    for name, value in (("small", small), ("large", large)):
        run_inprocess(
            {**cora, "method": "moon", f"moon.{option}": value, "out-dir": str(tmp_path / name)}
        )
    a, b = rounds(tmp_path / "small")[1], rounds(tmp_path / "large")[1]
    share = lambda r: probe(r, "moon.contrast-share")  # noqa: E731
    if option == "mu":
        assert share(b) > share(a) + 0.2
        assert probe(b, "moon.sim-gap") > probe(a, "moon.sim-gap")
    else:
        assert share(b) != share(a)  # the same to the digit if the option were ignored
