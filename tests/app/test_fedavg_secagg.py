"""The FedAvg family's uploads through SecAgg+ (``<method>.secure-aggregation``): the same
runs as in clear, four messages per client and round, sampling, and a client lost during
its training recovered from the others' shares."""

import pytest
from faults import fail_partition
from methods_data import for_method
from run_records import rounds

from fgl_flower.client_app import make_app
from fgl_flower.inprocess import InProcessGrid, run_inprocess
from fgl_flower.parse import parse_run_config
from fgl_flower.server_app import run


@pytest.mark.parametrize("method", ["fedavg", "fedprox", "fedstar", "feddense"])
def test_the_secure_run_is_the_clear_run(flat, tmp_path, method, request):
    for_method(flat, method, request)
    flat.update({"num-rounds": 2, "num-clients": 3})
    if method == "feddense":
        flat["model"] = "gin"
    clear = run_inprocess(flat)
    secure = run_inprocess(
        dict(flat, **{f"{method}.secure-aggregation": True, "out-dir": str(tmp_path / "s")}),
        serialize=True,
    )  # every message through Flower's wire format
    # the mean from fixed point (2^-32) can round to the neighbouring float32: equal to ~1e-7
    for point in ("final", "best_val", "last"):
        numbers = {k: v for k, v in clear[point].items() if isinstance(v, float)}
        assert {k: secure[point][k] for k in numbers} == pytest.approx(numbers, rel=1e-5, abs=1e-7)
    a, b = rounds(tmp_path / "run"), rounds(tmp_path / "s")
    for x, y in zip(a, b):
        assert y["messages_up"] == x["messages_up"] + 3 * 3  # setup, share-keys and unmask replies
        assert y["train"] == pytest.approx(x["train"], rel=1e-5, abs=1e-7)


def test_sampled_rounds_and_a_client_lost_in_training(flat, tmp_path):
    """Each round's protocol runs among its sampled clients; a client that fails in its
    train message (after sharing its keys) is left out and its masks removed."""
    flat.update(
        {
            "num-rounds": 3,
            "num-clients": 4,
            "fraction-train": 0.75,
            "accept-failures": 1,
            "fedavg.secure-aggregation": True,
        }
    )
    cfg = parse_run_config(flat)
    summary = run(InProcessGrid(flat, 4, client_app=make_app([fail_partition(1, {2})])), cfg)
    assert summary["rounds_completed"] == 3
    recs = rounds(tmp_path / "run")
    assert all(len(r["train_clients"]) == 3 for r in recs)
    lost = [r for r in recs if "failures" in r]
    assert [r["round"] for r in lost] == [2] and list(lost[0]["failures"]) == ["1"]
    assert 0 < summary["final"]["test_acc"] <= 1


def test_a_round_of_one_client_is_refused_before_training(flat):
    from fgl_flower.errors import ConfigError

    with pytest.raises(ConfigError, match="at least 2 clients in every round .this run samples 1."):
        run_inprocess(
            dict(
                flat,
                **{"fedavg.secure-aggregation": True, "num-clients": 3, "fraction-train": 0.34},
            )
        )
