"""FedProto's client: the regulariser by hand; on Cora (Louvain, 10 clients) with weight 0 it
is Local to the digit, with the default weight round 1 is Local's and later rounds are not,
the regulariser carries a share of the loss and nodes sit nearer their class's prototype."""

import pytest
import torch
from run_records import probe, rounds

from fgl_flower.clients.fedproto import margin, prototype_loss
from fgl_flower.inprocess import run_inprocess


def test_the_regulariser_and_the_margin_by_hand():
    """z = (1, 0), (0, 2) of classes 0, 1; prototypes (0, 0), (0, 1): squared errors 1 and 1
    over h = 2 entries -> sample form 0.5 (mean over both nodes), class form 0.5 + 0.5."""
    z, y = torch.tensor([[1.0, 0.0], [0.0, 2.0]]), torch.tensor([0, 1])
    protos = torch.tensor([[0.0, 0.0], [0.0, 1.0]])
    assert float(prototype_loss(z, y, protos, "sample")) == pytest.approx(0.5)
    assert float(prototype_loss(z, y, protos, "class")) == pytest.approx(1.0)
    # node 0: own 1, other sqrt(2); node 1: own 1, other 2; prototypes 1 apart
    assert margin(z, y, protos, torch.tensor([1, 1])) == pytest.approx(((2**0.5 - 1) + 1) / 2)


def test_fedproto_on_cora_is_local_plus_a_live_regulariser(cora, tmp_path):
    run_inprocess({**cora, "method": "local", "out-dir": str(tmp_path / "local")})
    run_inprocess(
        {**cora, "method": "fedproto", "fedproto.weight": 0.0, "out-dir": str(tmp_path / "w0")}
    )
    run_inprocess({**cora, "method": "fedproto"})
    local, w0, proto = (rounds(tmp_path / d) for d in ("local", "w0", "run"))
    loss = lambda recs: [r["train"]["train_loss"] for r in recs]  # noqa: E731
    assert loss(w0) == loss(local)
    assert loss(proto)[0] == loss(local)[0]  # round 1: no global prototypes yet
    assert loss(proto)[1:] != loss(local)[1:]
    for r in proto[1:]:
        assert 0.05 < probe(r, "fedproto.loss-share") < 0.95
        assert probe(r, "fedproto.margin") > 0
    assert all(probe(r, "fedproto.spread") > 0.1 for r in proto)
    assert (
        proto[-1]["bytes_up"] < 0.01 * local[-1].get("bytes_up", 1) or proto[-1]["bytes_up"] < 2e5
    )


def test_fedtgp_on_cora_trains_prototypes_the_clients_follow(cora, tmp_path):
    """FedTGP's clients are FedProto's: round 1 is Local's; later the regulariser, the
    adaptive margin and the server's loss are all alive."""
    run_inprocess({**cora, "method": "local", "out-dir": str(tmp_path / "local")})
    run_inprocess({**cora, "method": "fedtgp", "fedtgp.server-epochs": 20})
    local, tgp = rounds(tmp_path / "local"), rounds(tmp_path / "run")
    assert tgp[0]["train"]["train_loss"] == local[0]["train"]["train_loss"]
    for r in tgp[1:]:
        assert 0.05 < probe(r, "fedtgp.loss-share") < 0.95
        assert probe(r, "fedtgp.margin") > 0
    assert all(probe(r, "fedtgp.adaptive-margin") > 0.1 for r in tgp)
    assert all(probe(r, "fedtgp.spread") > 0.1 for r in tgp)


def test_uploaded_prototypes_are_eval_mode_class_means_of_training_nodes(flat):
    from flwr.app import RecordDict

    from fgl_flower.clients.fedproto import FedProtoClient
    from fgl_flower.clients.state import ClientState
    from fgl_flower.datasets import load_client_data
    from fgl_flower.parse import parse_run_config

    flat.update({"method": "fedproto", "dropout": 0.5})
    cfg = parse_run_config(flat)
    client = FedProtoClient(
        cfg, load_client_data(cfg.data_config(), 0), ClientState(RecordDict()), 0
    )
    g, model = client.data.data, client.learner.model
    model.train()  # prototypes() must switch dropout off itself
    protos, counts = client.prototypes()
    model.eval()
    with torch.no_grad():
        z = model.embed(g.x, g.edge_index)
    for c in range(client.data.num_classes):
        nodes = g.train_mask & (g.y == c)
        assert counts[c] == nodes.sum()
        want = z[nodes].mean(dim=0) if nodes.any() else torch.zeros(z.size(1))
        assert torch.allclose(protos[c], want, atol=1e-6)


def test_a_client_none_of_whose_classes_is_global_trains_alone(flat):
    """Global prototypes for none of the client's classes (it sat out, the others lack them):
    no regulariser, no NaN, and no loss-share probe."""
    from flwr.app import ConfigRecord, RecordDict

    from fgl_flower.clients.fedproto import FedProtoClient
    from fgl_flower.clients.state import ClientState
    from fgl_flower.datasets import load_client_data
    from fgl_flower.methods.fedproto import GLOBAL
    from fgl_flower.parse import parse_run_config
    from fgl_flower.protocol import CONFIG, METRICS
    from fgl_flower.records import torch_record

    flat.update({"method": "fedproto"})
    cfg = parse_run_config(flat)
    client = FedProtoClient(
        cfg, load_client_data(cfg.data_config(), 0), ClientState(RecordDict()), 0
    )
    c, h = client.data.num_classes, cfg.hidden
    content = RecordDict(
        {
            GLOBAL: torch_record(
                {"prototypes": torch.zeros(c, h), "present": torch.zeros(c, dtype=torch.long)}
            ),
            CONFIG: ConfigRecord({"server-round": 2}),
        }
    )
    metrics = client.train(content, 2)[METRICS]
    assert torch.isfinite(torch.tensor(metrics["train_loss"]))
    assert "probe.fedproto.loss-share" not in metrics
