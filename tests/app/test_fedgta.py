"""FedGTA in-process: what travels, options refused before training, a selection that
accepts everybody reported dead, and the topology-aware selection alive on Cora."""

import numpy as np
import pytest
from run_records import rounds

from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess


@pytest.fixture
def gta_flat(flat):
    flat.update({"method": "fedgta", "num-rounds": 3})
    return flat


def test_the_moments_and_the_confidence_travel_beside_fedavgs_payload(gta_flat, tmp_path):
    """Per client and round, up: FedAvg's payload plus 2K x C moments (hybrid) and one
    confidence; down: one model, as FedAvg (its own average; nothing in round 1)."""
    run_inprocess(gta_flat)
    run_inprocess(dict(gta_flat, method="fedavg", **{"out-dir": str(tmp_path / "fedavg")}))
    gta, avg = rounds(tmp_path / "run"), rounds(tmp_path / "fedavg")
    classes, k = 4, 6  # the app defaults' synthetic graph; K
    statistics = 4 * (2 * k * classes + 1)
    framing = 1500  # one more record, its array headers and the confidence probe
    for g, a in zip(gta, avg):
        extra = (g["bytes_up"] - a["bytes_up"]) / 3
        assert statistics < extra < statistics + framing
        assert g["bytes_down"] == a["bytes_down"]
    assert set(gta[0]["fedgta"]) == {"clients", "similarity", "sets", "confidence"}
    assert all(c > 0 for c in gta[0]["fedgta"]["confidence"])


@pytest.mark.parametrize(
    "update,match",
    [
        ({"fedgta.moment-type": "mixed"}, "moment-type"),
        ({"fedgta.accept": 1.0}, "accept"),
        ({"fedgta.lp-alpha": 1.5}, "lp-alpha"),
        ({"fedgta.temperature": 0.0}, "temperature"),
        ({"fedgta.num-moments": 0}, "num-moments"),
    ],
)
def test_bad_options_stop_before_training(gta_flat, update, match):
    with pytest.raises(ConfigError, match=match):
        run_inprocess(dict(gta_flat, **update))


def test_accepting_everybody_is_one_fedavg_and_reported_dead(gta_flat, tmp_path, caplog):
    run_inprocess(dict(gta_flat, **{"fedgta.accept": -1.0}))
    recs = rounds(tmp_path / "run")
    assert all(s == [0, 1, 2] for r in recs for s in r["fedgta"]["sets"])
    assert "fedgta.accepted" in recs[-1]["probes_dead"]
    assert "fedgta.accepted" in caplog.text


def test_the_topology_aware_selection_is_alive_on_cora(data_root, tmp_path):
    """On Cora's Louvain clients the moments of the propagated predictions differ: each
    client averages some others but not all, and the sets differ between clients."""
    from fgl_flower.app_defaults import load_app_defaults

    cfg = load_app_defaults()
    cfg.update(
        {
            "method": "fedgta",
            "dataset": "Cora",
            "partition": "louvain",
            "num-clients": 10,
            "num-rounds": 5,
            "data-root": str(data_root),
            "out-dir": str(tmp_path / "cora"),
            "progress": False,
        }
    )
    run_inprocess(cfg)
    recs = rounds(tmp_path / "cora")
    for r in recs:
        accepted = r["probes"]["fedgta.accepted"]["clients"]["server"]
        assert 0.1 < accepted < 0.9
        assert len({tuple(s) for s in r["fedgta"]["sets"]}) > 2
        sim = np.array(r["fedgta"]["similarity"])
        assert sim.min() < 0.5 < sim[~np.eye(10, dtype=bool)].max()
        assert "probes_dead" not in r
    assert recs[-1]["eval"]["test_acc"] > 0.75
