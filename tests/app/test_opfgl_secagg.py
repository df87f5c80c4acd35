"""O-pFGL's statistics through SecAgg+ (``opfgl.secure-aggregation``): the same run as in
clear, three more exchanges, and a client lost after sharing its keys recovered from the
others' shares."""

import pytest
from faults import fail_partition
from run_records import rounds

from fgl_flower.client_app import make_app
from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import InProcessGrid, run_inprocess
from fgl_flower.parse import parse_run_config
from fgl_flower.server_app import run


@pytest.fixture
def opfgl_flat(flat):
    flat.update(
        {
            "method": "opfgl",
            "num-rounds": 1,
            "num-clients": 4,
            "split-mode": "stratified",
            "split": "0.2,0.4,0.4",
            "dropout": 0.0,
            "opfgl.condense-steps": 30,
            "opfgl.max-steps": 200,
            "opfgl.eval-every": 50,
            "opfgl.patience": 2,
            "opfgl.topk": 1,
            "eval-weight": "client-size",
        }
    )
    return flat


def test_the_secure_run_is_the_clear_run(opfgl_flat, tmp_path):
    clear = run_inprocess(opfgl_flat)
    secure = run_inprocess(
        dict(opfgl_flat, **{"opfgl.secure-aggregation": True, "out-dir": str(tmp_path / "s")}),
        serialize=True,
    )  # every message through Flower's wire format
    assert secure["final"] == clear["final"]
    (a,), (b,) = rounds(tmp_path / "run"), rounds(tmp_path / "s")
    assert a["hre"] == b["hre"] and a["pseudo_graph"]["nodes"] == b["pseudo_graph"]["nodes"]
    assert set(a["phases"]) == {"stats", "condense", "personalize"}
    assert set(b["phases"]) == {
        "secagg-setup",
        "secagg-share-keys",
        "stats",
        "secagg-unmask",
        "condense",
        "personalize",
    }
    assert b["messages_up"] == a["messages_up"] + 3 * 4
    assert (
        b["phases"]["stats"]["bytes_up"] < 1.1 * a["phases"]["stats"]["bytes_up"]
    )  # one int64 per value


def test_a_client_lost_after_sharing_its_keys_is_recovered(opfgl_flat, tmp_path):
    flat = dict(opfgl_flat, **{"opfgl.secure-aggregation": True, "accept-failures": 1})
    cfg = parse_run_config(flat)
    grid = InProcessGrid(flat, 4, client_app=make_app([fail_partition(2, {1}, "query.secagg")]))
    summary = run(grid, cfg)
    (rec,) = rounds(tmp_path / "run")
    assert list(rec["failures"]) == ["2"] and rec["failures"]["2"].startswith("stats:")
    assert rec["phases"]["secagg-unmask"]["messages_up"] == 3  # the others rebuilt its key
    assert summary["rounds_completed"] == 1 and 0 < summary["final"]["test_acc"] <= 1


def test_secure_aggregation_needs_two_clients(opfgl_flat):
    with pytest.raises(ConfigError, match="at least 2 clients in every round"):
        run_inprocess(dict(opfgl_flat, **{"opfgl.secure-aggregation": True, "num-clients": 1}))


def test_a_masked_vector_of_the_wrong_length_is_refused_as_a_dropped_client(opfgl_flat, tmp_path):
    """Partition 2's masked statistics carry one value more than their layout: the sum leaves
    them out (its pairwise masks removed with its key's shares, its private mask kept) and
    names it; the run ends as the one in which partition 2 dropped after sharing its keys."""
    from fgl_flower import attacks

    flat = dict(opfgl_flat, **{"opfgl.secure-aggregation": True, "accept-failures": 1})
    lying = make_app(
        [
            attacks.malicious(
                [2], attacks.masked_length(1, "class-stats"), message_type="query.secagg"
            )
        ]
    )
    summary = run(InProcessGrid(flat, 4, client_app=lying), parse_run_config(flat))
    (rec,) = rounds(tmp_path / "run")
    assert rec["failures"] == {
        "2": "stats: refused: its masked vector is int64"
        + rec["failures"]["2"].split("int64", 1)[1]
    }
    assert "expected int64" in rec["failures"]["2"]
    dropped = dict(flat, **{"out-dir": str(tmp_path / "dropped")})
    grid = InProcessGrid(dropped, 4, client_app=make_app([fail_partition(2, {1}, "query.secagg")]))
    # the dropped run loses partition 2 in a later stage, so only the sum is compared
    run(grid, parse_run_config(dropped))
    (other,) = rounds(tmp_path / "dropped")
    assert rec["hre"] == other["hre"] and summary["rounds_completed"] == 1


def test_clear_statistics_of_another_layout_are_refused_and_named(opfgl_flat, tmp_path):
    from fgl_flower import attacks

    flat = dict(opfgl_flat, **{"accept-failures": 1})
    lying = make_app(
        [
            attacks.malicious(
                [1], attacks.reshaped((1, 1), "class-stats"), message_type="query.stats"
            )
        ]
    )
    run(InProcessGrid(flat, 4, client_app=lying), parse_run_config(flat))
    (rec,) = rounds(tmp_path / "run")
    assert list(rec["failures"]) == ["1"]
    assert (
        rec["failures"]["1"].startswith("stats: refused: class-stats: ")
        and "has shape (1, 1)" in rec["failures"]["1"]
    )
