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


#: FedGL on the ``cora`` fixture (train loss, test loss per round) measured before the
#: pseudo-graph existed (commit 4574748): graph-weight 0 must keep them.
BEFORE_GRAPH = [
    (1.1026298535377577, 1.6995924433436962),
    (0.85764468087597, 1.499023579020019),
    (0.6695306078840523, 1.2924578653563052),
]


def test_the_pseudo_graph_on_cora_off_at_0_and_alive_above(cora, tmp_path):
    """graph-weight 0 (the default) is FedGL without the pseudo-graph to the digit; at 1 the
    first round trains as before (no graph yet), its evaluation and every later round differ,
    and from round 2 each client trains with pseudo-edges among its nodes."""
    run_inprocess({**cora, "method": "fedgl", "out-dir": str(tmp_path / "w0")})
    run_inprocess(
        {**cora, "method": "fedgl", "fedgl.graph-weight": 1.0, "out-dir": str(tmp_path / "w1")}
    )
    w0, w1 = rounds(tmp_path / "w0"), rounds(tmp_path / "w1")
    got = [(r["train"]["train_loss"], r["eval"]["test_loss"]) for r in w0]
    assert got == [pytest.approx(p, rel=1e-9) for p in BEFORE_GRAPH]
    assert all("fedgl.graph-edges" not in r.get("probes", {}) for r in w0)
    assert w1[0]["train"]["train_loss"] == w0[0]["train"]["train_loss"]
    assert w1[0]["eval"]["test_loss"] != w0[0]["eval"]["test_loss"]
    for a, b in zip(w0[1:], w1[1:]):
        assert a["train"]["train_loss"] != b["train"]["train_loss"]
    for r in w1[1:]:
        assert probe(r, "fedgl.graph-edges") > 1
        assert r["probes"]["fedgl.graph-edges"]["min"] > 1e-3  # alive on every client
        assert probe(r, "fedgl.graph-mass") > 0.01


def test_the_client_adds_the_block_to_its_edges_and_forgets_it_without_one(flat):
    """A block of two edges: training, the upload and the evaluation run on the local edges
    (weight 1) plus them; the probes count them per local edge; a message without a block
    (a client that sat out the fusion) runs on the local edges alone."""
    import torch
    import torch.nn.functional as F
    from flwr.app import ConfigRecord, RecordDict

    from fgl_flower.clients.fedgl import FedGLClient
    from fgl_flower.clients.state import ClientState
    from fgl_flower.datasets import load_client_data
    from fgl_flower.methods.fedgl import GRAPH, PREDICTIONS
    from fgl_flower.parse import parse_run_config
    from fgl_flower.protocol import CONFIG, METRICS
    from fgl_flower.records import record_torch, torch_record

    flat.update({"method": "fedgl", "fedgl.graph-weight": 1.0})
    cfg = parse_run_config(flat)
    client = FedGLClient(cfg, load_client_data(cfg.data_config(), 0), ClientState(RecordDict()), 0)
    g = client.data.data
    block = {"edges": torch.tensor([[0, 3], [5, 1]]), "weight": torch.tensor([0.25, 0.5])}
    config = ConfigRecord({"server-round": 2})
    reply = client.train(RecordDict({GRAPH: torch_record(block), CONFIG: config}), 2)
    local = g.edge_index.size(1)
    assert reply[METRICS]["probe.fedgl.graph-edges"] == pytest.approx(2 / local)
    assert reply[METRICS]["probe.fedgl.graph-mass"] == pytest.approx(0.75 / local)
    edges = torch.cat([g.edge_index, block["edges"]], dim=1)
    weight = torch.cat([torch.ones(local), block["weight"]])
    model = client.learner.model.eval()
    with torch.no_grad():
        logits = model(g.x, edges, weight)
        plain = model(g.x, g.edge_index)
    assert not torch.allclose(logits, plain)
    up = record_torch(reply[PREDICTIONS])
    assert torch.allclose(up["embeddings"], logits, atol=1e-6)
    assert torch.allclose(up["probs"], F.softmax(logits, dim=1), atol=1e-6)
    client.evaluate(RecordDict({GRAPH: torch_record(block), CONFIG: config}), 2)
    assert torch.equal(client.learner.edges[1], weight)
    client.evaluate(RecordDict({CONFIG: config}), 2)
    assert client.learner.edges is None
