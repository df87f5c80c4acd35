"""Client-level differential privacy (``<method>.dp-*``): noise 0 is the non-DP run bit for
bit, the global model moves by at most the clipping norm, the budget is reported every round
and in the summary, it survives a resume, and SecAgg+ composes with it."""

import numpy as np
import pytest
from faults import fail_partition, interrupted
from flwr.app import ArrayRecord
from methods_data import for_method
from run_records import rounds

from fgl_flower.checkpoint import Checkpointer, run_checkpoint_dir
from fgl_flower.client_app import make_app
from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import InProcessGrid, run_inprocess
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS
from fgl_flower.server_app import run


def dp(method, clip, **more):
    return {
        "agg-weight": "uniform",
        f"{method}.dp-clip": clip,
        **{f"{method}.{k}": v for k, v in more.items()},
    }


@pytest.mark.parametrize("method", ["fedavg", "fedprox", "fedstar", "feddense"])
def test_noise_zero_and_no_update_clipped_is_the_run_without_dp_bit_for_bit(
    flat, tmp_path, method, request
):
    for_method(flat, method, request)
    flat.update({"num-rounds": 3, "agg-weight": "uniform"})
    if method == "feddense":
        flat["model"] = "gin"
    clear = run_inprocess(flat)
    private = run_inprocess({**flat, **dp(method, 1e9), "out-dir": str(tmp_path / "dp")})
    for point in ("final", "best_val", "last"):
        assert private[point] == clear[point]
    for a, b in zip(rounds(tmp_path / "run"), rounds(tmp_path / "dp")):
        assert b["eval"] == a["eval"] and b["clients"] == a["clients"]
        assert b["train"]["dp.clipped"] == 0.0 and "epsilon" not in b["dp"]
    assert "dp" not in clear and private["dp"]["noise_multiplier"] == 0.0


def test_the_global_model_moves_by_at_most_the_clip_norm(flat, tmp_path):
    """Each upload is the start plus an update of norm <= C, so their mean moves <= C."""
    clip = 0.05
    flat.update({"method": "fedavg", "num-rounds": 3, "checkpoint-every": 1, **dp("fedavg", clip)})
    run_inprocess(flat)
    for recs in rounds(tmp_path / "run"):
        assert recs["train"]["dp.clipped"] == 1.0 and recs["train"]["dp.update-norm"] > clip
    arrays = []  # the global model after rounds 1 and 2 (the checkpoint keeps the last round's)
    for r in (1, 2):
        flat_r = dict(flat, **{"num-rounds": r, "out-dir": str(tmp_path / f"r{r}")})
        run_inprocess(flat_r)
        arrays.append(Checkpointer(run_checkpoint_dir(tmp_path / f"r{r}"), 1).load()[ARRAYS])
    moved = np.sqrt(
        sum(
            ((arrays[1][k].numpy().astype(np.float64) - arrays[0][k].numpy()) ** 2).sum()
            for k in arrays[0].keys()
        )
    )
    assert 0 < moved <= clip * (1 + 1e-5)


def test_the_budget_is_reported_every_round_and_spent_at_the_end(flat, tmp_path):
    flat.update({"method": "fedavg", "num-rounds": 4, **dp("fedavg", 1.0, **{"dp-epsilon": 6.0})})
    summary = run_inprocess(flat)
    eps = [r["dp"]["epsilon"] for r in rounds(tmp_path / "run")]
    assert all(a < b for a, b in zip(eps, eps[1:]))
    assert eps[-1] == pytest.approx(6.0, rel=1e-3) and summary["dp"]["epsilon"] == eps[-1]
    assert summary["dp"]["noise_std"] == pytest.approx(summary["dp"]["noise_multiplier"] * 1.0 / 3)


def test_resumed_dp_run_equals_the_uninterrupted_one(flat, tmp_path):
    flat.update(
        {
            "method": "fedavg",
            "num-rounds": 4,
            **dp("fedavg", 0.5, **{"dp-noise": 0.8, "dp-seeded-noise": True}),
        }
    )
    whole = run_inprocess({**flat, "out-dir": str(tmp_path / "whole")})
    flat["out-dir"] = str(tmp_path / "resumed")
    interrupted(flat, fail_round=3)
    resumed = run_inprocess({**flat, "resume": True})
    assert resumed["final"] == whole["final"] and resumed["dp"] == whole["dp"]
    assert [r["dp"] for r in rounds(tmp_path / "resumed")] == [
        r["dp"] for r in rounds(tmp_path / "whole")
    ]


def test_fresh_noise_by_default_and_seeded_noise_repeated(flat, tmp_path):
    flat.update({"method": "fedavg", "num-rounds": 2, **dp("fedavg", 0.5, **{"dp-noise": 0.8})})
    a = run_inprocess(flat)
    b = run_inprocess({**flat, "out-dir": str(tmp_path / "b")})
    assert a["final"]["test_loss"] != b["final"]["test_loss"]
    flat["fedavg.dp-seeded-noise"] = True
    c = run_inprocess({**flat, "out-dir": str(tmp_path / "c")})
    d = run_inprocess({**flat, "out-dir": str(tmp_path / "d")})
    assert c["final"] == d["final"]


def test_a_round_with_a_lost_client_counts_it_as_no_update(flat, tmp_path):
    """Zero-out: the mean stays over the cohort of 3, the lost client adds its w0; the round
    is one release like the others (before, it released nothing, and a client that kept
    failing stalled every DP round)."""
    flat.update(
        {
            "method": "fedavg",
            "num-rounds": 3,
            "accept-failures": 1,
            "checkpoint-every": 1,
            **dp("fedavg", 0.5, **{"dp-noise": 0.8}),
        }
    )
    cfg = parse_run_config(flat)
    run(InProcessGrid(flat, cfg.num_clients, client_app=make_app([fail_partition(1, {2})])), cfg)
    recs = rounds(tmp_path / "run")
    assert [r["dp"]["released"] for r in recs] == [True, True, True]
    assert [r["dp"]["clients"] for r in recs] == [3, 2, 3]
    assert recs[0]["dp"]["epsilon"] < recs[1]["dp"]["epsilon"] < recs[2]["dp"]["epsilon"]
    assert recs[2]["dp"]["epsilon"] == pytest.approx(parse_and_spend(cfg, releases=3), rel=1e-12)
    assert recs[1]["dp"]["noise_std"] == recs[0]["dp"]["noise_std"] == pytest.approx(0.8 * 0.5 / 3)


def test_the_zero_out_mean_of_a_short_round(flat):
    """Two of a cohort of three replied: the mean is w0 + (d_0 + d_2) / 3, not their mean."""
    import torch
    from flwr.app import Message, MessageType, MetricRecord, RecordDict

    from fgl_flower.protocol import METRICS, NUM_EXAMPLES, PARTITION_ID
    from fgl_flower.records import record_torch, torch_record
    from fgl_flower.strategies.fedavg import FedAvgStrategy

    flat.update({"method": "fedavg", **dp("fedavg", 10.0)})
    InProcessGrid(flat, 1)  # messages need the task identity it sets
    s = FedAvgStrategy(parse_run_config(flat))
    s.sent = torch_record({"w": torch.tensor([1.0, 1.0])})

    def reply(pid, w):
        return Message(
            content=RecordDict(
                {
                    ARRAYS: torch_record({"w": torch.tensor(w)}),
                    METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: 1.0}),
                }
            ),
            dst_node_id=1,
            message_type=MessageType.TRAIN,
        )

    out, _ = s.aggregate_train(2, [reply(0, [4.0, 1.0]), reply(2, [1.0, 7.0])])
    assert record_torch(out)["w"].tolist() == [2.0, 3.0]


def parse_and_spend(cfg, releases):
    from fgl_flower.dp.server import CentralDP

    dp = CentralDP.from_config(cfg)
    for r in range(releases):
        dp.privatize(r + 1, ArrayRecord(), cfg.num_clients)
    return dp.spent()


def test_secure_aggregation_composes_with_dp(flat, tmp_path):
    flat.update(
        {
            "method": "fedavg",
            "num-rounds": 2,
            **dp("fedavg", 0.5, **{"dp-noise": 0.8, "dp-seeded-noise": True}),
        }
    )
    clear = run_inprocess(flat)
    secure = run_inprocess(
        {**flat, "fedavg.secure-aggregation": True, "out-dir": str(tmp_path / "s")}
    )
    numbers = {k: v for k, v in clear["final"].items() if isinstance(v, float)}
    assert {k: secure["final"][k] for k in numbers} == pytest.approx(numbers, rel=1e-4, abs=1e-6)
    assert secure["dp"] == clear["dp"]


def test_fedspray_sends_encoder_and_proxies_as_one_clipped_update(flat, tmp_path):
    flat.update({"method": "fedspray", "num-rounds": 2, **dp("fedspray", 0.5, **{"dp-noise": 0.5})})
    summary = run_inprocess(flat)
    recs = rounds(tmp_path / "run")
    assert all(r["train"]["dp.clipped"] == 1.0 for r in recs) and summary["dp"]["epsilon"] > 0
    assert 0 < summary["final"]["test_acc"] <= 1


@pytest.mark.parametrize(
    "more,match",
    [
        ({"agg-weight": "train"}, "set agg-weight=uniform"),
        ({"fedavg.dp-noise": 1.0, "fedavg.dp-epsilon": 4.0}, "either fedavg.dp-noise"),
        ({"fedavg.dp-delta": 1.0}, "strictly between 0 and 1"),
        ({"fedavg.dp-clip": 0.0, "fedavg.dp-epsilon": 4.0}, "need a clipping norm"),
        ({"fedavg.dp-noise": -1.0}, "finite number >= 0"),
        ({"checkpoint-every": 2}, "set checkpoint-every=1"),
    ],
)
def test_dp_options_that_cannot_work_stop_before_training(flat, more, match):
    with pytest.raises(ConfigError, match=match):
        parse_run_config({**flat, "method": "fedavg", **dp("fedavg", 1.0), **more})
