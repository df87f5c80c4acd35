"""FedHERO through the ServerApp/ClientApp: what travels, its weights, and bad options."""

import numpy as np
import pytest
import torch
from run_records import rounds
from test_feddense_family import run_recorded

from fgl_flower.errors import ConfigError
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import NUM_EXAMPLES


@pytest.fixture
def hero_flat(flat):
    flat.update(
        {"method": "fedhero", "hidden": 16, "num-layers": 2, "num-rounds": 2, "fedhero.k": 5}
    )
    return flat


def global_channel_size(f: int, d: int, heads: int, layers: int) -> int:
    return (f * d + d) + 2 * heads * d + layers * (d * d + d)


@pytest.mark.parametrize(
    "share,share_f0,prefixes",
    [
        ("global", False, ("struct.", "gconv.")),
        ("global", True, ("struct.", "gconv.", "proj.")),
        ("gcn", False, ("proj.", "gconv.", "lconv.", "cls.")),
        ("all", False, ("struct.", "gconv.", "proj.", "lconv.", "cls.")),
        ("none", False, ()),
    ],
)
def test_only_the_selected_channel_travels(hero_flat, share, share_f0, prefixes):
    hero_flat.update({"fedhero.share": share, "fedhero.share-f0": share_f0})
    summary, uploads, grid = run_recorded(hero_flat)
    assert len(uploads) == 2 * 3
    for record in uploads:
        assert {k.split(".")[0] + "." for k in record} == set(prefixes)
    if share == "global":
        f = grid.context(0).state["learner.model"].to_torch_state_dict()["proj.weight"].shape[1]
        expected = global_channel_size(f, 16, 4, 2) + (f * 16 + 16 if share_f0 else 0)
        assert all(sum(int(np.prod(a.shape)) for a in r.values()) == expected for r in uploads)
        assert summary["resources"]["shared_params"] == expected
        states = [grid.context(p).state["learner.model"].to_torch_state_dict() for p in range(3)]
        assert not torch.equal(states[0]["cls.weight"], states[1]["cls.weight"])  # local channel


def test_clients_are_weighted_by_all_their_nodes(hero_flat):
    from fgl_flower.client_app import make_app
    from fgl_flower.datasets import load_client_data
    from fgl_flower.inprocess import InProcessGrid
    from fgl_flower.protocol import METRICS, PARTITION_ID
    from fgl_flower.server_app import run

    weights: dict[int, float] = {}

    def mod(msg, context, call_next):
        reply = call_next(msg, context)
        if msg.metadata.message_type == "train":
            m = reply.content[METRICS]
            weights[int(m[PARTITION_ID])] = m[NUM_EXAMPLES]
        return reply

    cfg = parse_run_config(hero_flat)
    run(InProcessGrid(hero_flat, 3, client_app=make_app([mod])), cfg)
    for k in range(3):
        data = load_client_data(cfg.data_config(), k).data
        assert weights[k] == data.num_nodes > int(data.train_mask.sum())


def test_a_client_above_max_nodes_stops_with_a_clear_error(hero_flat):
    from flwr.app import RecordDict

    from fgl_flower.clients.fedhero import FedHEROClient
    from fgl_flower.clients.state import ClientState
    from fgl_flower.datasets import load_client_data

    hero_flat["fedhero.max-nodes"] = 10
    cfg = parse_run_config(hero_flat)
    with pytest.raises(ConfigError, match="fedhero.max-nodes=10"):
        FedHEROClient(cfg, load_client_data(cfg.data_config(), 0), ClientState(RecordDict()), 0)


@pytest.mark.parametrize(
    "update,match",
    [
        ({"fedhero.metric": "dot"}, "fedhero.metric"),
        ({"fedhero.share": "struct"}, "fedhero.share"),
        ({"fedhero.reg-norm": "n"}, "fedhero.reg-norm"),
        ({"fedhero.k": 0}, "fedhero.k must be at least 1"),
        ({"fedhero.alpha": 1.5}, "fedhero.alpha"),
        ({"fedhero.lam": -0.1}, "non-negative"),
        ({"fedhero.share": "none", "fedhero.share-f0": True}, "share-f0"),
        ({"fedhero.heads": 0}, "fedhero.heads"),
        ({"fedhero.struct-act": "tanh"}, "fedhero.struct-act"),
    ],
)
def test_bad_options_stop_before_training(hero_flat, update, match):
    with pytest.raises(ConfigError, match=match):
        parse_run_config({**hero_flat, **update})


def test_fedhero_refuses_graph_datasets(hero_flat):
    from fgl_flower.server_app import check_method_task

    hero_flat.update({"dataset": "MUTAG", "model": "gin"})
    with pytest.raises(ConfigError, match="runs node tasks, not graph"):
        check_method_task(parse_run_config(hero_flat))


def test_fedstar_on_node_tasks_shares_only_its_structure_channel(flat):
    """FedHERO's FedStar baseline: the graph model's channels with a per-node head."""
    flat.update({"method": "fedstar", "hidden": 16, "num-layers": 2, "num-rounds": 2})
    summary, uploads, grid = run_recorded(flat)
    shared = (32 * 16 + 16) + 2 * (16 * 16 + 16)  # init Linear(32, h) + L GCN(h, h)
    for record in uploads:
        assert all(k.startswith("struct.") for k in record)
        assert sum(int(np.prod(a.shape)) for a in record.values()) == shared
    assert 0 < summary["final"]["test_acc"] <= 1
    states = [grid.context(p).state["learner.model"].to_torch_state_dict() for p in range(3)]
    assert not torch.equal(states[0]["head.cls.weight"], states[1]["head.cls.weight"])


# -- the latent graph on real heterophilic data -------------------------------------------


def chameleon_flat(data_root, tmp_path, **extra):
    from fgl_flower.app_defaults import load_app_defaults

    flat = load_app_defaults()
    flat.update(
        {
            "method": "fedhero",
            "dataset": "chameleon",
            "partition": "metis",
            "num-clients": 3,
            "data-root": str(data_root),
            "data.undirected": True,
            "split-mode": "five-group",
            "hidden": 64,
            "num-layers": 2,
            "lr": 0.005,
            "weight-decay": 5e-4,
            "progress": False,
            "out-dir": str(tmp_path / "run"),
            **extra,
        }
    )
    return flat


def latent_health_after(flat: dict, steps: int) -> dict:
    """Train one Chameleon client's FedHERO model alone for ``steps`` full-batch Adam steps
    (the run's options) and measure the latent graph of its evaluation forward."""
    from flwr.app import RecordDict

    from fgl_flower.clients.fedhero import FedHEROClient
    from fgl_flower.clients.state import ClientState
    from fgl_flower.datasets import load_client_data

    cfg = parse_run_config(flat)
    client = FedHEROClient(
        cfg, load_client_data(cfg.data_config(), 0), ClientState(RecordDict()), 0
    )
    torch.manual_seed(0)
    for _ in range(steps):
        client.learner.fit(1, extra_loss=client.extra_loss(RecordDict()))
    client.learner.evaluate()
    return client.probe_metrics()


def test_the_latent_graph_stays_alive_on_chameleon(data_root, tmp_path):
    """The default (Eq. 4's 0/1 kNN graph) keeps every node's latent row, and the kept
    similarities stand above the rest of their row, after 30 steps on a real client."""
    health = latent_health_after(chameleon_flat(data_root, tmp_path), 30)
    assert health["latent.nonempty"] == 1.0
    assert health["latent.contrast"] > 0.1
    assert 15 < health["latent.edges"] <= 20 and health["latent.targets"] > 0.05


def test_the_probes_see_the_two_ways_the_latent_graph_dies(data_root, tmp_path):
    """What the probes are for: the ReLU'd weighted graph (spec A1/A3) empties, and the
    regulariser passed straight through drives every kept similarity to -1, where the top-k
    picks arbitrarily (no contrast)."""
    empty = latent_health_after(
        chameleon_flat(data_root, tmp_path, **{"fedhero.latent": "weighted"}), 30
    )
    assert empty["latent.nonempty"] < 0.05
    flat = chameleon_flat(data_root, tmp_path, **{"fedhero.reg-surrogate": True})
    flat_graph = latent_health_after(flat, 30)
    assert flat_graph["latent.nonempty"] == 1.0 and flat_graph["latent.contrast"] < 0.01
    assert flat_graph["latent.similarity"] < -0.9


def test_the_regulariser_is_what_empties_the_weighted_graph(data_root, tmp_path):
    """Without Eq. 7 (lambda = mu = 0) the ReLU'd weighted graph keeps every row over the same
    30 steps in which the printed regulariser empties it (the method page's reading)."""
    flat = chameleon_flat(
        data_root, tmp_path, **{"fedhero.latent": "weighted", "fedhero.lam": 0.0, "fedhero.mu": 0.0}
    )
    health = latent_health_after(flat, 30)
    assert health["latent.nonempty"] > 0.99 and health["latent.contrast"] > 0.05


def test_every_round_records_each_clients_latent_graph_and_a_dead_one_warns(
    data_root, tmp_path, caplog
):
    """Per round and client in rounds.jsonl; the run warns once per client when the graph
    empties, and the summary lists the probes dead at the end (an undefined probe, the
    homophily of an empty graph, is not a divergence)."""
    import logging

    flat = chameleon_flat(
        data_root, tmp_path, **{"num-rounds": 3, "hidden": 16, "fedhero.latent": "weighted"}
    )
    with caplog.at_level(logging.WARNING):
        summary, _, _ = run_recorded(flat)
    warnings = [r.getMessage() for r in caplog.records if "latent.nonempty" in r.getMessage()]
    assert len(warnings) == 3 and all("dead" in w for w in warnings)
    records = rounds(tmp_path / "run")
    assert len(records) == 3
    for r in records:
        assert set(r["probes"]["latent.nonempty"]["clients"]) == {"0", "1", "2"}
        assert {"latent.weight", "latent.edges", "latent.contrast", "latent.homophily"} <= set(
            r["probes"]
        )
        assert not any(k.startswith("probe.") for c in r["clients"].values() for k in c)
    assert records[-1]["probes"]["latent.nonempty"]["max"] < 0.05
    assert set(records[-1]["probes_dead"]["latent.nonempty"]) == {"0", "1", "2"}
    assert summary["probes_dead"]["latent.nonempty"] == ["0", "1", "2"]
