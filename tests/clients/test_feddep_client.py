"""FedDEP on real data (Cora, Louvain, 10 clients): the prototypes stand apart from the raw
embeddings, the other clients' reconstruction losses reach the generators, the mended
embeddings exist and change predictions; without the cross term nothing crosses, the probe is
idle and the numbers change. And one client's cross gradient, worked centrally."""

import torch
from flwr.app import RecordDict
from run_records import probe, rounds

from fgl_flower.clients.feddep import FedDEPClient
from fgl_flower.clients.state import ClientState
from fgl_flower.datasets import load_client_data
from fgl_flower.inprocess import run_inprocess
from fgl_flower.methods.feddep import GRADIENTS
from fgl_flower.models.feddep import draw_targets
from fgl_flower.parse import parse_run_config
from fgl_flower.records import record_torch
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
