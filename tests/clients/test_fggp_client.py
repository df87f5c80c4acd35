"""FGGP client: the reply's records, the classifier layer back at its initial weights every
round, the global-knowledge graph kept between rebuilds, and the prototype evaluation."""

import pytest
import torch
from flwr.app import Array, ArrayRecord, RecordDict

from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.clients.fggp import FGGPClient
from fgl_flower.clients.state import ClientState
from fgl_flower.datasets import load_client_data
from fgl_flower.device import cpu_seeded
from fgl_flower.errors import FGLError
from fgl_flower.methods.fggp import MEMORY, PROTOTYPES
from fgl_flower.models.fggp import FGGPNet
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, METRICS


def make_client(**options) -> FGGPClient:
    flat = load_app_defaults()
    flat.update(
        {
            "method": "fggp",
            "num-clients": 3,
            "data.synthetic.num-nodes": 300,
            "local-epochs": 2,
            **options,
        }
    )
    cfg = parse_run_config(flat)
    return FGGPClient(cfg, load_client_data(cfg.data_config(), 1), ClientState(RecordDict()), 1)


@pytest.fixture
def client():
    return make_client()


def head_of(model):
    return {k: v.clone() for k, v in model.state_dict().items() if k.startswith(model.head)}


def test_the_reply_holds_the_body_and_labelled_prototypes(client):
    reply = client.train(RecordDict(), 1)
    assert set(reply.keys()) == {ARRAYS, METRICS, PROTOTYPES}
    model = client.learner.model
    assert set(reply[ARRAYS].keys()) == {
        k for k in model.state_dict() if not k.startswith("body.convs.1.")
    }
    protos = reply[PROTOTYPES]
    g = client.data.data
    classes = protos["classes"].numpy()
    assert protos["prototypes"].numpy().shape == (len(classes), client.cfg.hidden)
    assert list(classes) == sorted(set(classes)) and set(g.y[g.train_mask].tolist()) <= set(classes)
    assert protos["num-classes"].numpy().tolist() == [client.data.num_classes]


def test_the_head_starts_every_round_at_its_initial_weights(client):
    with cpu_seeded(client.cfg.seed):
        initial = head_of(
            FGGPNet(client.data.num_features, client.cfg.hidden, client.data.num_classes)
        )
    client.train(RecordDict(), 1)
    model = client.learner.model
    trained = head_of(model)
    assert not all(torch.equal(trained[k], initial[k]) for k in initial)
    seen = []  # the head at round 2's first forward pass
    propagate = model.propagate

    def spy(*args):
        if not seen:
            seen.append(head_of(model))
        return propagate(*args)

    model.propagate = spy
    client.train(RecordDict(), 2)
    assert all(torch.equal(seen[0][k], initial[k]) for k in initial)


def test_probing_every_kth_step_trains_the_same_and_averages_the_probed_steps(monkeypatch):
    """``fggp.probe-every = 2`` over 3 local steps probes steps 0 and 2: the same trained
    weights as probing every step, and each probe the mean of those two steps' values."""
    seen: list[dict[str, float]] = []
    probes = FGGPClient.gradient_probes

    def spy(*args):
        seen.append(probes(*args))
        return seen[-1]

    monkeypatch.setattr(FGGPClient, "gradient_probes", staticmethod(spy))
    every, sparse = (
        make_client(**{"local-epochs": 3}),
        make_client(**{"local-epochs": 3, "fggp.probe-every": 2}),
    )
    all_steps = every.train(RecordDict(), 1)[METRICS]
    steps = list(seen)
    some_steps = sparse.train(RecordDict(), 1)[METRICS]
    assert len(steps) == 3 and seen[3:] == [steps[0], steps[2]]
    for name in ("fggp.contrast-grad", "fggp.view-grad"):
        assert all_steps[f"probe.{name}"] == pytest.approx(sum(s[name] for s in steps) / 3)
        assert some_steps[f"probe.{name}"] == pytest.approx((steps[0][name] + steps[2][name]) / 2)
    a, b = every.learner.model.state_dict(), sparse.learner.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_the_global_graph_is_kept_until_its_rebuild(client):
    edges, share = client.global_graph(1)
    assert 0 < share < 1
    g = client.data.data
    loops = (edges[0] == edges[1]).sum()
    assert loops == g.num_nodes  # every node hears itself
    with torch.no_grad():
        for p in client.learner.model.parameters():
            p.add_(torch.randn_like(p))
    kept, _ = client.global_graph(1 + client.opts.knn_every - 1)
    assert torch.equal(kept, edges)
    rebuilt, _ = client.global_graph(1 + client.opts.knn_every)
    assert not torch.equal(rebuilt, edges)


def test_evaluation_classifies_with_the_memory(client):
    """No memory: a clear error. With one: the accuracy of the k-NN vote of the memory's
    prototypes over the model's features, by hand."""
    with pytest.raises(FGLError, match="prototype memory"):
        client.evaluate(RecordDict(), 2)
    g, c = client.data.data, client.data.num_classes
    model = client.learner.model.eval()
    z, _ = model.on_graph(g.x, g.edge_index)
    memory = torch.nn.functional.normalize(
        torch.randn(2 * c, z.size(1), generator=torch.Generator().manual_seed(0)), dim=1
    )
    classes = torch.arange(2 * c) % c
    content = RecordDict(
        {
            MEMORY: ArrayRecord(
                {"prototypes": Array(memory.numpy()), "classes": Array(classes.numpy())}
            )
        }
    )
    res = client.evaluate(content, 2)[METRICS]
    sim = torch.nn.functional.normalize(z, dim=1) @ memory.t()
    top, idx = sim.topk(min(client.opts.eval_k, 2 * c), dim=1)
    votes = torch.zeros(g.num_nodes, c).scatter_add_(
        1, classes[idx], torch.softmax(top / 0.1, dim=1)
    )
    want = (votes.argmax(1) == g.y)[g.test_mask].float().mean()
    assert res["test_acc"] == pytest.approx(float(want), abs=1e-6)
    assert -2 <= res["probe.fggp.proto-margin"] <= 2
