"""Robust aggregation (``aggregation``): each rule on a hand-worked round with one outlier,
the methods that offer it (their server averages through FedAvg's), the combinations
refused, and a run that shrugs off a sign-flipping client."""

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord
from run_records import rounds

from fgl_flower import attacks
from fgl_flower.client_app import make_app
from fgl_flower.errors import ConfigError, FGLError
from fgl_flower.inprocess import InProcessGrid
from fgl_flower.methods import METHODS
from fgl_flower.parse import parse_run_config
from fgl_flower.server_app import run
from fgl_flower.strategies import robust
from fgl_flower.strategies.fedavg import FedAvgStrategy


def _records(*values):
    return [
        ArrayRecord(
            {"w": Array(np.array(v, dtype=np.float32)), "n": Array(np.array([3], dtype=np.int64))}
        )
        for v in values
    ]


HONEST = ([1.0, 0.0], [2.0, 1.0], [3.0, 2.0], [4.0, 3.0])
OUTLIER = [100.0, -100.0]


def _w(record):
    return record["w"].numpy().tolist()


def test_the_mean_is_fedavgs_and_the_outlier_drags_it():
    out = robust.aggregate("mean", _records(*HONEST, OUTLIER), [1, 1, 1, 1, 1], 1)
    assert _w(out) == pytest.approx([22.0, -18.8])
    assert out["n"].numpy().tolist() == [3] and out["n"].numpy().dtype == np.int64


def test_the_median_and_trimmed_mean_ignore_one_outlier_per_coordinate():
    records = _records(*HONEST, OUTLIER)
    assert _w(robust.aggregate("median", records, [1] * 5, 1)) == [3.0, 1.0]
    # f = 1: cut the largest and the smallest of each coordinate, average the 3 left
    assert _w(robust.aggregate("trimmed-mean", records, [1] * 5, 1)) == pytest.approx([3.0, 1.0])
    assert _w(robust.aggregate("trimmed-mean", records, [1] * 5, 0)) == pytest.approx([22.0, -18.8])
    with pytest.raises(FGLError, match="needs more than 4 of them, this round has 4"):
        robust.aggregate("trimmed-mean", records[:4], [1] * 4, 2)
    assert robust.aggregate("median", records, [1] * 5, 1)["w"].numpy().dtype == np.float32


def test_krum_picks_an_honest_upload_and_multi_krum_averages_the_honest_ones():
    records = _records(*HONEST, OUTLIER)
    # n = 5, f = 1: each scored by its n - f - 2 = 2 nearest; the middle ones score best
    assert robust.selected_by("krum", records, 1) == [1]
    assert _w(robust.aggregate("krum", records, [1] * 5, 1)) == [2.0, 1.0]
    assert robust.selected_by("multi-krum", records, 1) == [0, 1, 2, 3]
    # the kept uploads' plain mean: a claimed size (here 5) buys nothing
    assert _w(robust.aggregate("multi-krum", records, [1, 1, 1, 5, 1], 1)) == pytest.approx(
        [2.5, 1.5]
    )


def test_the_methods_that_offer_it_average_through_fedavgs_rule():
    able = [name for name, spec in METHODS.items() if spec.robust_aggregation]
    assert {"fedavg", "fedprox", "fedstar", "feddense"} <= set(able)
    for name in able:
        assert (
            METHODS.get(name).strategy_class().aggregate_train is FedAvgStrategy.aggregate_train
        ), name


@pytest.mark.parametrize(
    ("more", "why"),
    [
        (
            {"method": "gcfl"},
            "gcfl's server does not average through the robust rules; methods that do: apfl, fedavg",
        ),
        ({"fedavg.dp-clip": 1.0, "agg-weight": "uniform"}, "the DP noise is sized for the mean"),
        ({"fedavg.secure-aggregation": True}, "the server sees only the sum"),
        ({"malicious-clients": -1}, "malicious-clients must be non-negative"),
        (
            {"aggregation": "trimmed-mean", "accept-failures": 1},
            "needs 3 uploads a round, but a round may keep only 2",
        ),
        (
            {"aggregation": "krum", "num-clients": 4},
            "needs 5 uploads a round, but a round may keep only 4",
        ),
    ],
)
def test_combinations_it_cannot_serve_stop_before_training(flat, more, why):
    with pytest.raises(ConfigError, match=why):
        parse_run_config({**flat, "method": "fedavg", "aggregation": "median", **more})
    assert robust.needed("median", 2) == 1 and robust.needed("multi-krum", 2) == 7


def test_aggregation_names_its_choices(flat):
    with pytest.raises(
        ConfigError, match="aggregation='avg': use one of 'mean', 'median', 'trimmed-mean'"
    ):
        parse_run_config({**flat, "aggregation": "avg"})


@pytest.mark.parametrize("rule", ["median", "multi-krum"])
def test_a_robust_rule_keeps_a_sign_flipping_client_from_the_model(flat, tmp_path, rule):
    """One client of five uploads w0 - 10 dw from round 2 on: FedAvg's accuracy falls from 0.98
    to 0.51 in 6 rounds; Multi-Krum drops that client every round and stays at the clean run's;
    the median, pulled to one side by a client that is always on it, recovers part (0.71)."""
    flat.update(
        {"method": "fedavg", "num-rounds": 6, "num-clients": 5, "data.synthetic.num-nodes": 500}
    )

    def final(out, **more):
        run_flat = {**flat, **more, "out-dir": str(tmp_path / out)}
        mods = [attacks.malicious([4], attacks.sign_flipped(10.0))] if out != "clean" else []
        grid = InProcessGrid(run_flat, 5, client_app=make_app(mods))
        return run(grid, parse_run_config(run_flat))["final"]["test_acc"]

    clean, mean, robust_acc = final("clean"), final("mean"), final("robust", aggregation=rule)
    assert mean < clean - 0.3, (clean, mean)
    if rule == "multi-krum":
        assert robust_acc > clean - 0.02, (clean, robust_acc)
    else:
        assert robust_acc > mean + 0.15, (mean, robust_acc)
    recs = rounds(tmp_path / "robust")
    assert all(r["aggregation"]["rule"] == rule for r in recs)
    if rule == "multi-krum":
        assert all(4 not in r["aggregation"]["kept"] for r in recs[1:])
