"""FedDEP on real data (Cora, Louvain, 10 clients): the prototypes stand apart from the raw
embeddings, the other clients' reconstruction losses reach the generators, the mended
embeddings exist and change predictions; without the cross term nothing crosses, the probe is
idle and the numbers change. And one client's cross gradient, worked centrally."""

import copy

import pytest
import torch
from flwr.app import ConfigRecord, RecordDict
from run_records import probe, rounds

from fgl_flower.clients.feddep import GENERATOR, FedDEPClient
from fgl_flower.clients.state import ClientState
from fgl_flower.datasets import load_client_data
from fgl_flower.inprocess import run_inprocess
from fgl_flower.methods.feddep import GENERATED, GRADIENTS, ROUND_CLIENTS
from fgl_flower.models.feddep import draw_targets, mended_embedding
from fgl_flower.models.fedsage import feature_loss
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import CONFIG, SERVER_ROUND
from fgl_flower.records import record_torch, torch_record
from fgl_flower.seeds import derive_seed

SHORT = {"method": "feddep", "model": "graphsage", "num-rounds": 5, "feddep.encoder-epochs": 20}


def clients_of(record, name):
    return record["probes"].get(name, {}).get("clients", {})


def test_the_mechanism_is_alive_on_cora_and_the_cross_term_matters(cora, tmp_path):
    run_inprocess({**cora, **SHORT, "out-dir": str(tmp_path / "cross")})
    run_inprocess({**cora, **SHORT, "feddep.cross": False, "out-dir": str(tmp_path / "local")})
    cross, local = rounds(tmp_path / "cross"), rounds(tmp_path / "local")
    gen = cross[:3]
    for r in gen:  # every client's prototypes are not its embeddings
        gaps = clients_of(r, "feddep.proto-gap")
        assert len(gaps) == 10 and min(gaps.values()) > 0.01
    # the others' losses reach some generator in some generator round (where a predicted
    # count reaches 1), with a gradient of the order of the client's own
    assert max(max(clients_of(r, "feddep.cross-grad").values()) for r in gen) > 0.1
    for r in cross[3:]:
        assert probe(r, "feddep.generated") > 0
        assert probe(r, "feddep.emb-effect") > 0
    # without the cross term: no query (nothing crosses), the probe idle, other generators
    assert all(r["bytes_up"] < c["bytes_up"] / 10 for r, c in zip(local[:3], gen))
    assert all(max(clients_of(r, "feddep.cross-grad").values(), default=0.0) == 0 for r in local)
    assert local[0]["train"]["gen_loss"] == gen[0]["train"]["gen_loss"]  # round 1: pretrain
    assert any(
        a["train"]["gen_loss"] != b["train"]["gen_loss"] for a, b in zip(local[1:3], gen[1:3])
    )


def test_a_cross_gradient_is_the_reconstruction_loss_against_own_prototypes(flat):
    flat.update(
        {
            "method": "feddep",
            "model": "graphsage",
            "num-clients": 2,
            "num-rounds": 3,
            "feddep.gen-rounds": 2,
            "feddep.encoder-epochs": 3,
            "feddep.beta-n": 2.0,
        }
    )
    cfg = parse_run_config(flat)
    client = FedDEPClient(cfg, load_client_data(cfg.data_config(), 1), ClientState(RecordDict()), 1)
    torch.manual_seed(0)
    feats = torch.rand(6, 5, cfg.hidden)
    pred = torch.tensor([0.5, 1.2, 2.7, 5.0, 9.0, 0.0])
    reply = client.cross_gradients({"feats.0": feats, "pred.0": pred}, 2)
    got = record_torch(reply[GRADIENTS])["grad.0"]
    p = client.prepared()
    draws = torch.Generator().manual_seed(derive_seed(cfg.seed, 1, 2, 0, "feddep-cross"))
    targets = draw_targets(p["target"], p["own"], 6, 5, draws)
    x = feats.detach().clone().requires_grad_(True)
    # slots below the truncated count (0, 1, 2, 5, 5, 0), each to its nearest of all K targets
    err = ((x.unsqueeze(2) - targets.unsqueeze(1)) ** 2).mean(-1).min(-1).values
    used = torch.arange(5)[None, :] < torch.tensor([0, 1, 2, 5, 5, 0])[:, None]
    (err * used).sum().div(6 * 5).backward()
    assert torch.allclose(got, x.grad, atol=1e-7)
    assert got[0].abs().sum() == 0 and got[3].abs().sum() > 0
    # the targets are prototypes: each is one of the client's at most 5 prototype vectors
    protos = torch.unique(p["own"], dim=0)
    assert protos.size(0) <= 5
    rows = targets.reshape(-1, cfg.hidden)
    assert (rows[:, None] - protos[None]).abs().sum(-1).min(1).values.max() < 1e-6


def two_clients(flat, **options):
    flat.update(
        {
            "method": "feddep",
            "model": "graphsage",
            "num-clients": 2,
            "num-rounds": 3,
            "feddep.gen-rounds": 2,
            "feddep.encoder-epochs": 3,
            "feddep.pretrain-epochs": 1,
            "feddep.beta-n": 2.5,
            **options,
        }
    )
    cfg = parse_run_config(flat)
    return cfg, [
        FedDEPClient(cfg, load_client_data(cfg.data_config(), pid), ClientState(RecordDict()), pid)
        for pid in (0, 1)
    ]


def generator_predicting_two(client):
    """The client's pre-trained generator with every count ~2 (so the cross loss and the
    mending use slots), saved back in its state."""
    model = client.generator()
    client.pretrain(model)
    with torch.no_grad():
        model.gen.dgen.bias.add_(2.0)
    client.state.save_module(GENERATOR, model)
    return model


@pytest.mark.parametrize("trainable", ["all", "fgen"])
def test_the_train_step_is_the_central_gradient_of_own_and_cross_losses(
    flat, monkeypatch, trainable
):
    """Client 0's step in a 2-client round is minus the gradient of
    (1/M)[L + beta_n L_n^(0<-1)], computed here through its generator in one graph, with
    beta_n = 2.5 and M = 2 (a plain SGD of lr 1 stands in for Adam, so the step is the
    gradient); with trainable = fgen only the embedding head moves."""
    cfg, (c0, c1) = two_clients(flat, **{"feddep.trainable": trainable})
    before = generator_predicting_two(c0)
    server_round = 1
    query = RecordDict({CONFIG: ConfigRecord({SERVER_ROUND: server_round})})
    generated = record_torch(c0.query("generate", query)[GENERATED])
    cross = {f"{k}.0": v for k, v in generated.items()}
    grad = record_torch(c1.cross_gradients(cross, server_round)[GRADIENTS])["grad.0"]
    assert grad.abs().sum() > 0  # the counts reach slots: the cross term is in the step

    # the central computation: one graph through client 0's generator
    central = copy.deepcopy(before)
    central.zero_grad()
    out = c0.generate(central, server_round)
    own, _ = c0.generator_loss(out)
    p1, k = c1.prepared(), c1.opts.num_pred
    draws = torch.Generator().manual_seed(derive_seed(cfg.seed, 1, server_round, 0, "feddep-cross"))
    targets = draw_targets(p1["target"], p1["own"], out[1].size(0), k, draws)
    full = torch.full((out[1].size(0),), float(k))
    cross_loss = feature_loss(out[1], targets, out[0].detach(), full, "min")
    ((own + 2.5 * cross_loss) / 2).backward()

    sgd = lambda params, lr, wd: torch.optim.SGD(params, lr=1.0)  # noqa: E731
    monkeypatch.setattr("fgl_flower.clients.feddep.make_adam", sgd)
    content = RecordDict(
        {
            CONFIG: ConfigRecord({ROUND_CLIENTS: 2}),
            GRADIENTS: torch_record({"grad": grad}),
        }
    )
    c0.train_generator(content, server_round)
    after = c0.generator()
    moved = set()
    for (name, b), a, c in zip(
        before.named_parameters(), after.parameters(), central.parameters(), strict=True
    ):
        step = b.detach() - a.detach()
        if trainable == "fgen" and not name.startswith("gen.fgen."):
            assert torch.equal(step, torch.zeros_like(step)), name
            continue
        assert torch.allclose(step, c.grad, atol=1e-6, rtol=1e-4), name
        if step.abs().sum() > 0:
            moved.add(name.split(".")[0] + "." + name.split(".")[1])
    assert ("gen.enc1" in moved) == (trainable == "all") and "gen.fgen" in moved


def test_the_query_forward_is_the_train_forward_and_mend_places_it(flat, monkeypatch):
    """query.generate replies exactly the forward the train message recomputes; mend() puts
    each kept node's mended embedding in its row, zeros in the hidden nodes' rows, and counts
    the rounded slots (the feddep.generated probe's numerator)."""
    cfg, (c0, _) = two_clients(flat)
    generator_predicting_two(c0)
    server_round = 2
    query = RecordDict({CONFIG: ConfigRecord({SERVER_ROUND: server_round})})
    replied = record_torch(c0.query("generate", query)[GENERATED])
    seen = []
    forward = c0.generate
    monkeypatch.setattr(c0, "generate", lambda m, r: seen.append(forward(m, r)) or seen[-1])
    c0.train_generator(RecordDict({CONFIG: ConfigRecord({ROUND_CLIENTS: 1})}), server_round)
    assert torch.equal(seen[0][1].detach(), replied["feats"])
    assert torch.equal(seen[0][0].detach(), replied["pred"])

    # mend(): the trained generator once, evaluation mode, seeded by round G + 1
    model, kept = c0.generator(), c0.prepared()["kept"].clone()
    model.eval()
    c0.seed_round(c0.opts.gen_rounds + 1, "feddep-mend")
    x, edges, _, _ = c0.impaired()
    with torch.no_grad():
        pred, gen, _ = model(x, edges)
    saved = c0.mend()
    n = c0.original.data.num_nodes
    hidden = torch.ones(n, dtype=torch.bool)
    hidden[kept] = False
    assert hidden.any() and (~hidden).any()
    assert torch.equal(saved["emb"][hidden], torch.zeros(int(hidden.sum()), gen.size(2)))
    assert torch.allclose(saved["emb"][kept], mended_embedding(pred, gen))
    want = pred.round().clamp(0, gen.size(1))
    assert torch.equal(saved["count"][kept], want) and saved["count"][hidden].abs().sum() == 0
    assert want.sum() > 0  # slots used: the rows are not all zero
    assert saved["emb"][kept].abs().sum() > 0
