"""AdaFGL's client on real data (Cora, Louvain, 10 clients): step 1 is FedAvg to the digit;
step 2 uploads nothing, receives the extractor once, and its mechanism is alive (knowledge
edges, the distillation term, the HCS); a threshold no pair passes kills the knowledge edges
and the run says so."""

import pytest
import torch
from run_records import probe, rounds

from fgl_flower.inprocess import run_inprocess


@pytest.fixture
def ada(cora):
    return {**cora, "method": "adafgl", "num-rounds": 4, "adafgl.fed-rounds": 2}


def test_step_one_is_fedavg_and_step_two_trains_its_own_modules(ada, tmp_path):
    fedavg = {k: v for k, v in ada.items() if not k.startswith("adafgl.")}
    run_inprocess({**fedavg, "method": "fedavg", "out-dir": str(tmp_path / "fedavg")})
    run_inprocess({**ada, "out-dir": str(tmp_path / "ada")})
    fedavg, ada_rounds = rounds(tmp_path / "fedavg"), rounds(tmp_path / "ada")
    for a, b in zip(fedavg[:2], ada_rounds[:2]):  # step 1
        assert a["train"]["train_loss"] == b["train"]["train_loss"]
        assert a["bytes_up"] == b["bytes_up"]
    # round 2's model (the extractor) is evaluated in round 3's messages: FedAvg's numbers
    assert ada_rounds[1]["eval"] == fedavg[1]["eval"]
    third, fourth = ada_rounds[2], ada_rounds[3]
    assert third["bytes_up"] < fedavg[2]["bytes_up"] / 50  # no model goes up in step 2
    assert fourth["bytes_down"] < third["bytes_down"] / 50  # the extractor went down once
    for r in (third, fourth):
        assert probe(r, "adafgl.added-edges") > 0.1
        assert probe(r, "adafgl.kd-share") > 0.01
        assert 0 < probe(r, "adafgl.hcs") <= 1
        assert probe(r, "adafgl.homo-weight") == probe(r, "adafgl.hcs")  # mix: the HCS
    assert "probes_dead" not in fourth
    assert probe(fourth, "adafgl.gain") != 0  # its prediction is not the extractor's


def test_a_threshold_no_pair_passes_kills_the_knowledge_edges(ada, tmp_path):
    run_inprocess({**ada, "adafgl.threshold": 1.0})
    last = rounds(tmp_path / "run")[-1]
    assert probe(last, "adafgl.added-edges") == 0
    assert "adafgl.added-edges" in last["probes_dead"]


def test_the_switch_builds_one_module_by_the_hcs(ada, tmp_path):
    run_inprocess({**ada, "adafgl.fusion": "switch", "adafgl.hcs-threshold": 0.7})
    clients = rounds(tmp_path / "run")[-1]["probes"]
    hcs, weight = clients["adafgl.hcs"]["clients"], clients["adafgl.homo-weight"]["clients"]
    assert {weight[c] for c in weight} <= {0.0, 1.0}
    assert all(weight[c] == float(hcs[c] >= 0.7) for c in weight)
    # a hete-only client has no distillation term, a homo-only one has
    kd = clients.get("adafgl.kd-share", {"clients": {}})["clients"]
    assert set(kd) == {c for c in weight if weight[c] == 1.0}


def test_the_knowledge_a_client_derives_from_the_extractor(flat):
    """P is the extractor's eval-mode softmax; with alpha 1 the topology is the local graph
    alone, so X_K is X propagated over the normalized local adjacency."""
    import torch.nn.functional as F
    from flwr.app import RecordDict

    from fgl_flower.clients.adafgl import AdaFGLClient, Knowledge
    from fgl_flower.clients.state import ClientState
    from fgl_flower.datasets import load_client_data
    from fgl_flower.methods.adafgl import AdaFGLOptions
    from fgl_flower.models import adafgl as ops
    from fgl_flower.parse import parse_run_config

    flat.update({"method": "adafgl", "num-rounds": 4, "adafgl.fed-rounds": 2, "adafgl.alpha": 1.0})
    cfg = parse_run_config(flat)
    client = AdaFGLClient(cfg, load_client_data(cfg.data_config(), 0), ClientState(RecordDict()), 0)
    g = client.data.data
    knowledge = Knowledge(client, AdaFGLOptions.from_config(cfg))
    model = client.learner.model.eval()
    with torch.no_grad():
        assert torch.allclose(knowledge.probs, F.softmax(model(g.x, g.edge_index), dim=1))
    x = g.x.to_dense() if g.x.is_sparse else g.x
    adj = ops.normalize(ops.dense_adjacency(g.edge_index, g.num_nodes), 0.5)
    want = torch.cat([x, adj @ x, adj @ adj @ x, adj @ adj @ adj @ x], dim=1)
    assert torch.allclose(knowledge.x_k, want, atol=1e-5)


def test_step_two_continues_from_the_saved_modules_and_optimizer(ada, tmp_path):
    """Without dropout, two step-2 rounds of one Adam step each end where one round of two
    steps ends: the extractor, the modules and Adam's state carry over between rounds."""
    ada = {**ada, "dropout": 0.0}
    run_inprocess({**ada, "out-dir": str(tmp_path / "two-rounds")})
    run_inprocess(
        {**ada, "num-rounds": 3, "adafgl.epochs": 2, "out-dir": str(tmp_path / "two-steps")}
    )
    rounds_, steps = rounds(tmp_path / "two-rounds")[-1], rounds(tmp_path / "two-steps")[-1]
    assert rounds_["train"]["train_loss"] == pytest.approx(steps["train"]["train_loss"], rel=1e-6)
    assert rounds_["eval"]["test_acc"] == steps["eval"]["test_acc"]
    assert rounds_["eval"]["val_loss"] == pytest.approx(steps["eval"]["val_loss"], rel=1e-6)
