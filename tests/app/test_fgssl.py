"""FGSSL in-process: FedAvg's traffic, options refused before training, each variant trains
what it says, and the regularisers alive on Cora."""

import json

import pytest

from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess


def rounds(path):
    return [json.loads(line) for line in (path / "rounds.jsonl").read_text().splitlines()]


def probe(record, name):
    return record["probes"][name]["mean"]


@pytest.fixture
def fgssl_flat(flat):
    flat.update({"method": "fgssl", "num-rounds": 2})
    return flat


def test_only_fedavgs_payload_travels(fgssl_flat, tmp_path):
    run_inprocess(fgssl_flat)
    run_inprocess(dict({k: v for k, v in fgssl_flat.items() if not k.startswith("fgssl.")},
                       method="fedavg", **{"out-dir": str(tmp_path / "fedavg")}))
    ours, avg = rounds(tmp_path / "run"), rounds(tmp_path / "fedavg")
    for a, b in zip(ours, avg):
        # the same arrays; the metrics record carries the loss parts and probes besides
        assert abs(a["bytes_down"] - b["bytes_down"]) < 2000 * 3
        assert 0 <= a["bytes_up"] - b["bytes_up"] < 1000 * 3
    assert ours[-1]["eval"] != avg[-1]["eval"]


@pytest.mark.parametrize("update,match", [
    ({"fgssl.variant": "both"}, "variant"),
    ({"model": "sgc"}, "hidden layer"),
    ({"num-layers": 1}, "num-layers"),
    ({"fgssl.tau": 0.0}, "tau"),
    ({"fgssl.strong-edges": 1.0}, "strong-edges"),
])
def test_bad_options_stop_before_training(fgssl_flat, update, match):
    with pytest.raises(ConfigError, match=match):
        run_inprocess(dict(fgssl_flat, **update))


def test_each_variant_trains_its_own_terms(fgssl_flat, tmp_path, caplog):
    """paper: contrast and structure, both from the global model; code: a contrast without it
    (the teacher share is idle, not reported dead); openfgl: the structure term alone."""
    shares = {}
    for variant in ("paper", "code", "openfgl"):
        out = tmp_path / variant
        run_inprocess(dict(fgssl_flat, **{"fgssl.variant": variant, "out-dir": str(out)}))
        last = rounds(out)[-1]
        assert "probes_dead" not in last
        shares[variant] = {k: probe(last, f"fgssl.{k}") for k in ("contrast-share", "structure-share", "teacher-share")}
    assert shares["paper"]["contrast-share"] > 0.1 and shares["paper"]["structure-share"] > 1e-4
    assert shares["paper"]["teacher-share"] == pytest.approx(1.0)
    assert shares["code"]["contrast-share"] > 0.1
    assert shares["code"]["structure-share"] == shares["code"]["teacher-share"] == 0.0
    assert shares["openfgl"]["contrast-share"] == 0.0 and shares["openfgl"]["structure-share"] > 1e-4
    assert "dead" not in caplog.text


def test_a_zero_weight_is_reported_dead(fgssl_flat, tmp_path, caplog):
    run_inprocess(dict(fgssl_flat, **{"fgssl.structure-weight": 0.0}))
    last = rounds(tmp_path / "run")[-1]
    assert "fgssl.structure-share" in last["probes_dead"]
    assert "fgssl.structure-share" in caplog.text


def test_the_regularisers_are_alive_on_cora(data_root, tmp_path):
    """On Cora's Louvain clients both terms take a share of every round's loss, both read the
    global model, and the local representations come to agree with the global model's by class."""
    from fgl_flower.app_defaults import load_app_defaults

    cfg = load_app_defaults()
    cfg.update({"method": "fgssl", "dataset": "Cora", "partition": "louvain", "num-clients": 5,
                "num-rounds": 4, "data-root": str(data_root), "out-dir": str(tmp_path / "cora"),
                "progress": False})
    run_inprocess(cfg)
    recs = rounds(tmp_path / "cora")
    assert all(probe(r, "fgssl.contrast-share") > 0.1 for r in recs)
    assert all(probe(r, "fgssl.structure-share") > 1e-3 for r in recs)
    assert all(probe(r, "fgssl.teacher-share") == pytest.approx(1.0) for r in recs)
    assert probe(recs[-1], "fgssl.class-margin") > probe(recs[0], "fgssl.class-margin") > 0
    assert all("probes_dead" not in r for r in recs)
