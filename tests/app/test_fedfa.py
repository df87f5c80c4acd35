"""FedFA in-process: what travels, options refused before training, FedAvg when nothing is
augmented, and the augmentation alive on Cora with the federation's statistics shaping it."""

import pytest
from run_records import rounds

from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess


@pytest.fixture
def fa_flat(flat):
    flat.update({"method": "fedfa", "model": "acmgcn", "num-rounds": 3, "local-epochs": 2})
    return flat


def test_the_model_and_the_statistics_travel_both_ways(fa_flat, tmp_path):
    """Up and down: the backbone's parameters and the FFA layer's four [hidden] buffers, as
    FedAvg's messages carry a model."""
    from fgl_flower.models.acmgcn import ACMGCN

    run_inprocess(fa_flat)
    recs = rounds(tmp_path / "run")
    hidden, features, classes = 64, 32, 4  # the app defaults' synthetic graph and width
    model_bytes = (
        sum(p.numel() for p in ACMGCN(features, hidden, classes).parameters()) + 4 * hidden
    ) * 4
    slack = 12000  # 22 arrays' headers, record framing, the metrics: far below a model
    for r in recs:
        assert model_bytes < r["bytes_up"] / 3 < model_bytes + slack
    # down: nothing in round 1 (the clients build the seeded model), then one model a round
    # (training and the previous round's evaluation share it), two in the last (the final
    # evaluation apart)
    assert recs[0]["bytes_down"] / 3 < slack
    assert model_bytes < recs[1]["bytes_down"] / 3 < model_bytes + slack
    assert 2 * model_bytes < recs[2]["bytes_down"] / 3 < 2 * (model_bytes + slack)


@pytest.mark.parametrize(
    "update,match",
    [
        ({"model": "gcn"}, "embed"),
        ({"fedfa.sharing": "median"}, "sharing"),
        ({"fedfa.prob": 1.5}, "prob"),
    ],
)
def test_bad_options_stop_before_training(fa_flat, update, match):
    with pytest.raises(ConfigError, match=match):
        run_inprocess(dict(fa_flat, **update))


def test_without_augmentation_it_is_fedavg(fa_flat, tmp_path):
    fedavg = run_inprocess({**fa_flat, "method": "fedavg", "out-dir": str(tmp_path / "fedavg")})
    fedfa = run_inprocess({**fa_flat, "fedfa.prob": 0.0})
    numbers = {k: v for k, v in fedavg["final"].items() if isinstance(v, float)}
    assert {k: fedfa["final"][k] for k in numbers} == pytest.approx(numbers, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("sharing", ["channel", "scalar"])
def test_the_augmentation_is_alive_on_cora(data_root, tmp_path, sharing):
    """On Cora's Louvain clients every augmented forward moves the classifier's input by more
    than a few percent, the clients' statistics differ (a positive sharing variance), and under
    the paper's per-channel sharing they spread the fusion weights over the channels (from
    round 2, when the first variance arrives); the official scalar sharing gives every channel
    weight 1. It fails if the augmentation or the federation's part of it dies."""
    from fgl_flower.app_defaults import load_app_defaults

    cfg = load_app_defaults()
    cfg.update(
        {
            "method": "fedfa",
            "model": "acmgcn",
            "dataset": "Cora",
            "partition": "louvain",
            "num-clients": 3,
            "num-rounds": 4,
            "local-epochs": 4,
            "fedfa.sharing": sharing,
            "data-root": str(data_root),
            "out-dir": str(tmp_path / "cora"),
            "progress": False,
        }
    )
    summary = run_inprocess(cfg)
    recs = rounds(tmp_path / "cora")
    assert sum(r["probes"]["ffa.applied"]["mean"] for r in recs) > 0
    for r in recs:
        if "ffa.shift" in r["probes"]:
            assert r["probes"]["ffa.shift"]["min"] > 0.05
        assert r["probes"]["sharing-var"]["clients"]["server"] > 0
    for r in recs[1:]:
        gamma_std = r["probes"]["ffa.gamma-std"]["min"]
        assert gamma_std > 0.1 if sharing == "channel" else gamma_std < 1e-6
    assert summary["final"]["test_acc"] > 0.3  # learning (chance: 1/7)
