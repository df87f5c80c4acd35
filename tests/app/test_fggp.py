"""FGGP in-process: what travels, options refused before training, cut terms reported dead,
and the mechanism alive on Cora (the prototype memory classifies: shuffle its classes and
the accuracy falls)."""

import numpy as np
import pytest
from run_records import probe, rounds

from fgl_flower.datasets import load_client_data
from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess
from fgl_flower.models.fggp import FGGPNet
from fgl_flower.parse import parse_run_config
from fgl_flower.records import torch_record
from fgl_flower.strategies.grid import payload_bytes


@pytest.fixture
def fggp_flat(flat):
    flat.update({"method": "fggp", "num-rounds": 2})
    return flat


def test_what_travels(fggp_flat, tmp_path):
    """Up: the GCN and augmentor weights (the classifier layer only under head=aggregate) and
    each client's class prototypes; down after round 1: the weights and the memory (the
    records themselves: tests/clients/test_fggp_client.py)."""
    run_inprocess(fggp_flat)
    run_inprocess(dict(fggp_flat, **{"fggp.head": "aggregate", "out-dir": str(tmp_path / "agg")}))
    reset, agg = rounds(tmp_path / "run"), rounds(tmp_path / "agg")
    cfg = parse_run_config(fggp_flat)
    data = load_client_data(cfg.data_config(), 0)
    h = cfg.hidden
    weights = FGGPNet(data.num_features, h, data.num_classes).state_dict()
    sent = payload_bytes(
        torch_record({k: v for k, v in weights.items() if not k.startswith("body.convs.1.")})
    )
    clients = len(reset[0]["train_clients"])
    head = payload_bytes(torch_record(weights)) - sent
    for a, b in zip(reset, agg):
        assert b["bytes_up"] - a["bytes_up"] == pytest.approx(clients * head, abs=50 * clients)
    prototypes = reset[0]["fggp"]["uploaded"] * (4 * h + 8)  # round 1: train replies only
    assert reset[0]["bytes_up"] == pytest.approx(
        clients * sent + prototypes, abs=3000 * clients
    )  # + metrics
    first, last = reset[0]["fggp"]["memory"], reset[1]["fggp"]["memory"]
    assert first == sum(reset[0]["fggp"]["clusters"].values())
    # round 2: its train messages with round 1's memory, then the final evaluation's with its own
    memory = (first + last) * (4 * h + 8)
    assert reset[1]["bytes_down"] == pytest.approx(
        clients * 2 * sent + clients * memory, abs=2 * 1500 * clients
    )


@pytest.mark.parametrize(
    "update,match",
    [
        ({"fggp.head": "local"}, "fggp.head"),
        ({"fggp.evaluate": "head"}, "head=aggregate"),
        ({"model": "graphsage"}, "is not one"),
        ({"num-layers": 1}, "num-layers"),
        ({"fggp.alpha": 1.5}, "alpha"),
        ({"fggp.tau": 0.0}, "tau"),
        ({"fggp.knn-k": 0}, "knn-k"),
        ({"fggp.probe-every": 0}, "probe-every"),
    ],
)
def test_bad_options_stop_before_training(fggp_flat, update, match):
    with pytest.raises(ConfigError, match=match):
        run_inprocess(dict(fggp_flat, **update))


def test_a_client_too_large_for_the_dense_view_stops_with_advice(fggp_flat):
    with pytest.raises(Exception, match="dense-max-nodes"):
        run_inprocess(dict(fggp_flat, **{"fggp.dense-max-nodes": 50}))


def test_cut_terms_are_reported_dead(fggp_flat, tmp_path, monkeypatch, caplog):
    """Features detached on their way into the prototypes (the confidences still carry a
    gradient to the classifier) and a detached edge sample (the augmentor learns only to
    reconstruct): the loss values are there, both probes read dead."""
    import fgl_flower.clients.fggp as client
    from fgl_flower.models.fggp import Augmentor, FGGPNet

    propagate, sample = FGGPNet.propagate, Augmentor.sample

    def detached_features(self, *args):
        h, logits = propagate(self, *args)
        return h.detach(), logits

    monkeypatch.setattr(FGGPNet, "propagate", detached_features)
    monkeypatch.setattr(client.Augmentor, "sample", staticmethod(lambda *a: sample(*a).detach()))
    run_inprocess(fggp_flat)
    last = rounds(tmp_path / "run")[-1]
    assert last["train"]["contrast_loss"] > 0 and last["train"]["view_loss"] > 0
    assert set(last["probes_dead"]) == {"fggp.contrast-grad", "fggp.view-grad"}
    assert "fggp.contrast-grad" in caplog.text


def test_the_mechanism_is_alive_on_cora(data_root, tmp_path, monkeypatch):
    """On Cora's Louvain clients the contrast and the augmented view move the model, the
    global model's k-NN graph adds edges, the server keeps clustered prototypes of every
    class, and they classify: with the memory's classes shuffled the accuracy falls to
    near chance."""
    import fgl_flower.strategies.fggp as server
    from fgl_flower.app_defaults import load_app_defaults

    cfg = load_app_defaults()
    cfg.update(
        {
            "method": "fggp",
            "dataset": "Cora",
            "partition": "louvain",
            "num-clients": 5,
            "num-rounds": 4,
            "data-root": str(data_root),
            "out-dir": str(tmp_path / "cora"),
            "progress": False,
        }
    )
    run_inprocess(cfg)
    recs = rounds(tmp_path / "cora")
    assert all("probes_dead" not in r for r in recs)
    assert all(
        probe(r, "fggp.contrast-grad") > 0.1 and probe(r, "fggp.view-grad") > 1e-3 for r in recs
    )
    assert all(probe(r, "fggp.knn-new-edges") > 0.1 for r in recs)
    assert sorted(recs[-1]["fggp"]["clusters"]) == [str(c) for c in range(7)]
    assert probe(recs[-1], "fggp.proto-margin") > 0
    accuracy = recs[-1]["eval"]["test_acc"]
    assert accuracy > 0.6

    enqueue = server.enqueue
    rng = np.random.default_rng(0)
    monkeypatch.setattr(
        server,
        "enqueue",
        lambda m, c, new, labels, cap: enqueue(m, c, new, rng.permutation(labels), cap),
    )
    run_inprocess(dict(cfg, **{"out-dir": str(tmp_path / "shuffled")}))
    assert rounds(tmp_path / "shuffled")[-1]["eval"]["test_acc"] < accuracy / 2
