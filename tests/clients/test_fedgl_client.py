"""FedGL's client on real data (Cora, Louvain, 10 clients)."""

import pytest
from run_records import probe, rounds

from fgl_flower.inprocess import run_inprocess


def test_fedgl_on_cora_is_fedavg_plus_live_pseudo_labels(cora, tmp_path):
    """Round 1 is FedAvg's (no pseudo-labels yet); from round 2 most unlabelled nodes carry
    one and their loss enters training; ssl-weight 0 is FedAvg to the digit."""
    run_inprocess({**cora, "method": "fedavg", "out-dir": str(tmp_path / "fedavg")})
    run_inprocess(
        {**cora, "method": "fedgl", "fedgl.ssl-weight": 0.0, "out-dir": str(tmp_path / "w0")}
    )
    run_inprocess({**cora, "method": "fedgl"})
    fedavg, w0, fedgl = (rounds(tmp_path / d) for d in ("fedavg", "w0", "run"))
    loss = lambda recs: [r["train"]["train_loss"] for r in recs]  # noqa: E731
    assert loss(w0) == loss(fedavg)
    assert loss(fedgl)[0] == loss(fedavg)[0] and loss(fedgl)[1:] != loss(fedavg)[1:]
    for r in fedgl[1:]:
        assert probe(r, "fedgl.pseudo-share") > 0.3
        assert probe(r, "fedgl.ssl-share") > 0.01


def test_which_nodes_learn_from_pseudo_labels_and_what_is_uploaded(flat):
    """Pseudo-labels on every node: the loss covers the non-training ones only (the share
    probe counts them); the upload is the trained model's eval-mode softmax, in node order with
    the global ids."""
    import torch
    import torch.nn.functional as F
    from flwr.app import ConfigRecord, RecordDict

    from fgl_flower.clients.fedgl import FedGLClient
    from fgl_flower.clients.state import ClientState
    from fgl_flower.datasets import load_client_data
    from fgl_flower.methods.fedgl import PREDICTIONS, PSEUDO
    from fgl_flower.parse import parse_run_config
    from fgl_flower.protocol import CONFIG, METRICS
    from fgl_flower.records import record_torch, torch_record

    flat.update({"method": "fedgl", "dropout": 0.5})
    cfg = parse_run_config(flat)
    client = FedGLClient(cfg, load_client_data(cfg.data_config(), 0), ClientState(RecordDict()), 0)
    g = client.data.data
    labels = torch.zeros(g.num_nodes, dtype=torch.long)
    labels[: g.num_nodes // 2] = -1  # half the nodes without a pseudo-label
    content = RecordDict(
        {PSEUDO: torch_record({"labels": labels}), CONFIG: ConfigRecord({"server-round": 2})}
    )
    reply = client.train(content, 2)
    unlabelled = ~g.train_mask
    want = float(((labels >= 0) & unlabelled).sum()) / float(unlabelled.sum())
    assert reply[METRICS]["probe.fedgl.pseudo-share"] == pytest.approx(want)
    assert reply[METRICS]["probe.fedgl.ssl-share"] > 0
    up = record_torch(reply[PREDICTIONS])
    model = client.learner.model.eval()
    with torch.no_grad():
        probs = F.softmax(model(g.x, g.edge_index), dim=1)
    assert torch.allclose(up["probs"], probs, atol=1e-6)
    assert up["nodes"].tolist() == g.global_id.tolist()
