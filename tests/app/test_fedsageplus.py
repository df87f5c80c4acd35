"""FedSage+ in-process: what travels in each phase, options refused before training, OpenFGL's
one-way edges and a generator alone reported for what they are, and the mechanism's probes on
Wisconsin."""

import json

import pytest
from run_records import rounds

from fgl_flower.datasets import load_client_data
from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess
from fgl_flower.parse import parse_run_config


@pytest.fixture
def sage_flat(flat):
    flat.update(
        {
            "method": "fedsageplus",
            "model": "graphsage",
            "num-rounds": 3,
            "fedsageplus.gen-rounds": 2,
            "fedsageplus.pretrain-epochs": 5,
            "fedsageplus.hidden-portion": 0.8,
        }
    )
    return flat


def test_what_travels(sage_flat, tmp_path):
    """Generator rounds: per client a generate query, a cross-gradient query and a train
    message; up go the generated features of its training nodes (float32 [T, K, D]) and, for
    every other client, their gradient; no model. The first classifier round: the traffic of
    FedAvg's first (and, as here, last) round."""
    run_inprocess(sage_flat)
    run_inprocess(
        dict(
            {k: v for k, v in sage_flat.items() if not k.startswith("fedsageplus.")},
            method="fedavg",
            **{"num-rounds": 1, "out-dir": str(tmp_path / "fedavg")},
        )
    )
    ours, avg = rounds(tmp_path / "run"), rounds(tmp_path / "fedavg")
    clients = len(ours[0]["train_clients"])
    cfg = parse_run_config(sage_flat)
    k, d = 5, 32  # num-pred, the synthetic graph's features
    payloads = [
        4 * int(load_client_data(cfg.data_config(), p).data.train_mask.sum()) * k * d
        for p in range(clients)
    ]  # training nodes are never hidden
    for r in ours[:2]:
        assert r["messages_up"] == 3 * clients
        # each client's features once, then every other client's gradient for them
        assert clients * sum(payloads) < r["bytes_up"] < clients * sum(payloads) + 30_000
    # no classifier is evaluated before it trains: the summary's rounds are classifier rounds
    assert [("eval" in r) for r in ours] == [False, False, True]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["best_val"]["round"] == 3
    assert ours[2]["bytes_down"] == pytest.approx(avg[0]["bytes_down"], abs=3000)
    assert ours[2]["bytes_up"] == pytest.approx(avg[0]["bytes_up"], abs=5000)


@pytest.mark.parametrize(
    "update,match",
    [
        ({"fedsageplus.gen-rounds": 3}, "no classifier round"),
        ({"fedsageplus.matching": "greedy"}, "matching"),
        ({"fedsageplus.hidden-portion": 1.0}, "hidden-portion"),
        ({"fedsageplus.trainable": "enc"}, "trainable"),
    ],
)
def test_bad_options_stop_before_training(sage_flat, update, match):
    with pytest.raises(ConfigError, match=match):
        run_inprocess(dict(sage_flat, **update))


def test_one_way_edges_change_no_prediction_and_are_reported_dead(sage_flat, tmp_path, caplog):
    """OpenFGL's mended graph (generated nodes linked one way, from the real node) gives the
    real nodes exactly their original logits."""
    run_inprocess(dict(sage_flat, **{"fedsageplus.undirected": False}))
    last = rounds(tmp_path / "run")[-1]
    assert last["probes"]["fedsageplus.generated"]["mean"] > 0
    assert last["probes"]["fedsageplus.feature-effect"]["mean"] == 0.0
    assert "fedsageplus.feature-effect" in last["probes_dead"]
    assert "fedsageplus.feature-effect" in caplog.text


def test_without_the_cross_term_nothing_is_exchanged(sage_flat, tmp_path):
    run_inprocess(dict(sage_flat, **{"fedsageplus.cross": False}))
    recs = rounds(tmp_path / "run")
    clients = len(recs[0]["train_clients"])
    assert all(r["messages_up"] == clients for r in recs[:2])  # the train replies only
    assert all(
        "fedsageplus.cross-grad" not in r.get("probes_dead", {}) for r in recs
    )  # it idles, not dies


def test_the_mechanism_on_wisconsin(data_root, tmp_path):
    """On Wisconsin's Louvain clients the other clients' feature losses reach each generator,
    the mended graphs carry generated neighbours, and these change the real nodes' logits; but
    the generated rows are no closer to their own node's neighbourhood than to another node's
    (``fedsageplus.owner-fit`` dead on every client, as in the runs on
    docs/methods/fedsageplus.md: the finding this pins)."""
    from fgl_flower.app_defaults import load_app_defaults

    cfg = load_app_defaults()
    cfg.update(
        {
            "method": "fedsageplus",
            "dataset": "Wisconsin",
            "partition": "louvain",
            "num-clients": 3,
            "num-rounds": 2,
            "fedsageplus.gen-rounds": 1,
            "fedsageplus.num-pred": 2,
            "data.undirected": "true",
            "untrained-classes": "allow",
            "model": "graphsage",
            "data-root": str(data_root),
            "out-dir": str(tmp_path / "wisconsin"),
            "progress": False,
        }
    )
    run_inprocess(cfg)
    recs = rounds(tmp_path / "wisconsin")
    assert recs[0]["probes"]["fedsageplus.cross-grad"]["min"] > 0.01
    assert recs[1]["probes"]["fedsageplus.generated"]["min"] > 0.01
    assert recs[1]["probes"]["fedsageplus.feature-effect"]["min"] > 0.01
    assert recs[1]["probes"]["fedsageplus.owner-fit"]["max"] < 0.05
    assert "probes_dead" not in recs[0]
    assert list(recs[1]["probes_dead"]) == ["fedsageplus.owner-fit"]


def test_the_other_clients_gradients_change_the_generators(sage_flat, tmp_path):
    """Without the cross term the generator rounds' own losses after the first step differ:
    the gradients the others returned moved each generator."""
    run_inprocess(sage_flat)
    run_inprocess(
        dict(sage_flat, **{"fedsageplus.cross": False, "out-dir": str(tmp_path / "alone")})
    )
    joint, alone = rounds(tmp_path / "run"), rounds(tmp_path / "alone")
    assert joint[0]["train"] == alone[0]["train"]  # the same first forward
    assert joint[1]["train"]["feature_loss"] != alone[1]["train"]["feature_loss"]


def test_classifier_rounds_keep_the_mended_graph_not_the_generator(sage_flat, tmp_path):
    """Once a client has mended its graph, its state holds the generated rows and edges but
    no generator (on Cora its feature head and Adam moments made a 189 MB checkpoint per
    client and round): the classifier rounds' checkpoints hold none, and a run interrupted
    in a classifier round resumes to the uninterrupted numbers from those checkpoints."""
    from faults import interrupted
    from run_records import digest

    from fgl_flower.checkpoint import client_dir, read_records

    sage_flat.update({"num-rounds": 5, "checkpoint-every": 1})
    whole = tmp_path / "whole"
    run_inprocess({**sage_flat, "out-dir": str(whole)})
    folder = client_dir(whole / "checkpoint", 0)
    state = read_records(sorted(folder.iterdir())[-1])  # its last round's: a classifier round
    assert "fedsageplus.mended" in state and not any(k.startswith("fedsageplus.gen") for k in state)
    assert set(state["fedsageplus.mended"]) == {"generated", "edge_index"}

    flat = {**sage_flat, "out-dir": str(tmp_path / "resumed")}
    interrupted(flat, fail_round=4)
    run_inprocess({**flat, "resume": True})
    assert [r["round"] for r in rounds(tmp_path / "resumed")] == list(range(1, 6))
    assert digest(tmp_path / "resumed") == digest(whole)


def test_a_new_run_in_a_used_folder_replaces_the_old_client_checkpoints(sage_flat, tmp_path):
    """FedSage+'s clients fill their state in a query before their first train message; the
    first checkpoint of a new run must still clear the files an earlier run left (else the
    older run's round 4 stayed beside this run's files, the newest, for a resume to take)."""
    from fgl_flower.checkpoint import client_dir

    run_inprocess({**sage_flat, "num-rounds": 4})
    run_inprocess({**sage_flat, "seed": 1})
    folder = client_dir(tmp_path / "run" / "checkpoint", 0)
    assert sorted(p.name for p in folder.iterdir()) == [
        "round-000002.records",
        "round-000003.records",
    ]
