"""Traffic metering: the fast sizes equal Flower's serialized sizes."""

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from fgl_flower.strategies.grid import PayloadSizer, payload_bytes


def _arrays(rng, shapes, dup: bool = False) -> ArrayRecord:
    record = ArrayRecord()
    for i, shape in enumerate(shapes):
        record[f"layer{i}.weight"] = Array(rng.standard_normal(shape).astype(np.float32))
    if dup:  # two identical arrays are one child
        record["copy"] = Array(np.asarray(record["layer0.weight"].numpy()))
        record["zeros-a"] = Array(np.zeros(5, np.float32))
        record["zeros-b"] = Array(np.zeros(5, np.float32))
    return record


def _contents(seed: int) -> list[RecordDict]:
    rng = np.random.default_rng(seed)
    shapes = [(1433, 16), (16,), (16, 7), (7,)]
    metrics = MetricRecord(
        {"train_loss": float(rng.random()), "partition-id": int(rng.integers(1000))}
    )
    same = _arrays(rng, [(3, 3)])
    return [
        RecordDict({"arrays": _arrays(rng, shapes), "metrics": metrics}),
        RecordDict(
            {"arrays": _arrays(rng, shapes, dup=True), "config": ConfigRecord({"a": "x" * seed})}
        ),
        RecordDict(
            {"a": same, "b": same, "c": ArrayRecord(), "d": ArrayRecord()}
        ),  # shared children
        RecordDict({"arrays": ArrayRecord(), "metrics": MetricRecord()}),
        RecordDict(
            {
                "arrays": _arrays(rng, [(int(rng.integers(1, 50)), 4), (2, 2, 2)]),
                "proxies": _arrays(rng, [(7, 8)]),
            }
        ),
        RecordDict(),
    ]


def test_identical_children_are_counted_once_in_a_layout_seen_before():
    sizer = PayloadSizer()
    a, b = np.zeros(5, np.float32), np.ones(5, np.float32)
    distinct = ArrayRecord({"x": Array(a), "y": Array(b)})
    shared = ArrayRecord({"x": Array(a), "y": Array(a.copy())})
    for content in (
        RecordDict({"r": distinct, "s": shared}),  # distinct records
        RecordDict({"r": shared, "s": shared}),  # the same record twice
        RecordDict({"r": distinct, "s": distinct}),
    ):
        assert sizer.size(content) == payload_bytes(content)


def test_sizes_equal_the_serialized_sizes_also_when_a_layout_is_seen_again():
    sizer = PayloadSizer()
    for seed in (0, 1, 2):  # new values, same layouts: cached sizes must still be exact
        for content in _contents(seed):
            assert sizer.size(content) == payload_bytes(content)


def test_arrays_of_several_chunks_are_serialized():
    big = RecordDict({"arrays": ArrayRecord({"w": Array(np.ones((1_500_000,), np.float32))})})
    sizer = PayloadSizer()
    assert sizer.size(big) == payload_bytes(big) == sizer.size(big)


def test_a_federation_of_another_size_stops_at_once_with_the_fix(flat):
    """flwr run . with Flower's 2 default SuperNodes and num-clients=5 set used to wait 600 s."""
    import time

    import pytest

    from fgl_flower.errors import ConfigError
    from fgl_flower.inprocess import InProcessGrid
    from fgl_flower.parse import parse_run_config
    from fgl_flower.server_app import run

    flat["num-clients"] = 5
    t0 = time.monotonic()
    with pytest.raises(
        ConfigError,
        match=r"num-partitions=2 .* num-clients=5.*--run-config "
        r"num-clients=2.*num-supernodes=5",
    ):
        run(InProcessGrid(flat, 2), parse_run_config(flat))
    assert time.monotonic() - t0 < 10


def test_num_clients_left_at_its_default_follows_the_federation(flat):
    """flwr run . with no option: the app's num-clients (-1) becomes the SuperNodes' count on
    the server and on every client, and the run equals one with that count set."""
    import json
    from pathlib import Path

    from fgl_flower.app_defaults import load_app_defaults
    from fgl_flower.config import FOLLOW_FEDERATION
    from fgl_flower.inprocess import InProcessGrid, run_inprocess
    from fgl_flower.parse import parse_run_config
    from fgl_flower.server_app import run

    assert load_app_defaults()["num-clients"] == FOLLOW_FEDERATION
    follow = {**flat, "num-clients": FOLLOW_FEDERATION}
    summary = run(InProcessGrid(follow, 2), parse_run_config(follow))
    fixed = run_inprocess({**flat, "num-clients": 2, "out-dir": flat["out-dir"] + "-fixed"})
    assert summary["num_clients"] == 2
    assert summary["final"] == fixed["final"] and summary["best_val"] == fixed["best_val"]
    written = json.loads((Path(flat["out-dir"]) / "config.json").read_text())
    assert written["num_clients"] == 2


def _count_queries(grid):
    """Wrap ``grid.client_app`` to count the partition queries it answers."""
    from fgl_flower.protocol import PARTITION_QUERY

    app, seen = grid.client_app, []

    def counting(msg, ctx):
        if msg.metadata.message_type.endswith(PARTITION_QUERY):
            seen.append(ctx.node_config["partition-id"])
        return app(msg, ctx)

    grid.client_app = counting
    return seen


def test_many_clients_are_mapped_by_registration_order_and_checked_when_first_addressed(
    flat, monkeypatch
):
    """From LAZY_DISCOVERY_MIN clients on, only the ends and the sampled nodes are asked for
    their partition; the numbers equal discovery by asking every node."""
    from fgl_flower.inprocess import InProcessGrid
    from fgl_flower.parse import parse_run_config
    from fgl_flower.server_app import run
    from fgl_flower.strategies import grid as grid_module

    flat.update({"num-clients": 8, "fraction-train": 0.25, "num-rounds": 2})
    every = run(
        InProcessGrid({**flat, "out-dir": flat["out-dir"] + "-every"}, 8),
        parse_run_config({**flat, "out-dir": flat["out-dir"] + "-every"}),
    )
    monkeypatch.setattr(grid_module, "LAZY_DISCOVERY_MIN", 4)
    lazy_grid = InProcessGrid(flat, 8)
    asked = _count_queries(lazy_grid)
    lazy = run(lazy_grid, parse_run_config(flat))
    assert lazy["final"] == every["final"] and lazy["best_val"] == every["best_val"]
    assert lazy["bytes_up_total"] == every["bytes_up_total"]
    assert asked[:2] == [0, 7] and len(asked) == len(set(asked)) < 8  # each node once, not all


def test_a_registration_order_that_is_not_the_partition_order_falls_back_to_asking_all(
    flat, monkeypatch
):
    from fgl_flower.inprocess import InProcessGrid
    from fgl_flower.parse import parse_run_config
    from fgl_flower.server_app import run
    from fgl_flower.strategies import grid as grid_module

    flat.update({"num-clients": 8, "fraction-train": 0.25, "num-rounds": 2})
    every = run(
        InProcessGrid({**flat, "out-dir": flat["out-dir"] + "-every"}, 8),
        parse_run_config({**flat, "out-dir": flat["out-dir"] + "-every"}),
    )
    monkeypatch.setattr(grid_module, "LAZY_DISCOVERY_MIN", 4)
    shuffled = InProcessGrid(flat, 8)
    shuffled.registration = [0, 2, 1, 4, 3, 6, 5, 7]  # ends right, the middle swapped
    asked = _count_queries(shuffled)
    lazy = run(shuffled, parse_run_config(flat))
    assert lazy["final"] == every["final"] and lazy["best_val"] == every["best_val"]
    assert lazy["bytes_up_total"] == every["bytes_up_total"]
    assert sorted(set(asked)) == list(range(8))  # the fallback asked every node


def test_the_simulation_grid_is_polled_every_10_ms_and_a_deployment_grid_is_left_alone():
    """Each round waits on average half the poll interval after its last reply: 0.1 s (Flower's
    default) cost 4-5 s over the 100 rounds of docs/performance.md's job."""
    from types import SimpleNamespace

    from flwr.superlink.grid.inmemory_grid import InMemoryGrid

    from fgl_flower.strategies.grid import IN_MEMORY_PULL_INTERVAL_S, MeteredGrid

    simulation = InMemoryGrid(state_factory=SimpleNamespace(state=lambda: None))
    assert simulation.pull_interval == 0.1  # Flower's default, which the wrapper lowers
    MeteredGrid(simulation)
    assert simulation.pull_interval == IN_MEMORY_PULL_INTERVAL_S == 0.01
    other = SimpleNamespace(pull_interval=0.1)
    MeteredGrid(other)
    assert other.pull_interval == 0.1
