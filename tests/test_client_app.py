"""The ClientApp's own pieces: threads per client, the partition query, the progress mod."""

import logging

import pytest
import torch
from flwr.app import Context, RecordDict
from methods_data import NEEDS, for_method
from run_records import rounds

from fgl_flower.client_app import build_client
from fgl_flower.inprocess import run_inprocess
from fgl_flower.methods import METHODS


def _context(flat, **overrides):
    return Context(
        run_id=0,
        node_id=1,
        node_config={"partition-id": 0, "num-partitions": 3},
        state=RecordDict(),
        run_config=dict(flat, **overrides),
    )


def test_a_client_uses_as_many_threads_as_cpus_it_was_given(flat):
    before = torch.get_num_threads()
    try:
        build_client(_context(flat, **{"cpus-per-client": 2}))
        assert torch.get_num_threads() == 2
        build_client(_context(flat))
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_same_seed_same_numbers_with_two_threads(flat, tmp_path):
    before = torch.get_num_threads()
    try:
        flat["cpus-per-client"] = 2
        a = run_inprocess(dict(flat, **{"out-dir": str(tmp_path / "a")}))
        b = run_inprocess(dict(flat, **{"out-dir": str(tmp_path / "b")}))
    finally:
        torch.set_num_threads(before)
    assert a["final"] == b["final"] and a["best_val"] == b["best_val"]


def test_memoised_pieces_follow_the_config(flat):
    """Per-process caches (client data, initial model, graph-derived tensors) never serve
    a value computed for another config or input."""
    from dataclasses import replace

    from fgl_flower.clients.learner import seeded_model
    from fgl_flower.datasets import load_client_data
    from fgl_flower.models.sparse import GraphCache
    from fgl_flower.parse import parse_run_config

    cfg = parse_run_config(flat)
    data = cfg.data_config()
    a = load_client_data(data, 0)
    assert load_client_data(data, 0) is a
    b = load_client_data(replace(data, split_seed=data.split_seed + 1), 0)
    assert not torch.equal(a.data.train_mask, b.data.train_mask)

    m1, m2 = seeded_model(cfg, "node", 8, 3), seeded_model(cfg, "node", 8, 3)
    assert m1 is not m2 and all(torch.equal(p, q) for p, q in zip(m1.parameters(), m2.parameters()))
    with torch.no_grad():
        next(m1.parameters()).add_(1.0)  # a copy: changing one leaves the next untouched
    m3 = seeded_model(cfg, "node", 8, 3)
    assert all(torch.equal(p, q) for p, q in zip(m2.parameters(), m3.parameters()))
    other = seeded_model(replace(cfg, seed=cfg.seed + 1), "node", 8, 3)
    assert not all(torch.equal(p, q) for p, q in zip(m2.parameters(), other.parameters()))

    x = torch.ones(3)
    first = GraphCache().get("probe", (x,), lambda: x.sum().item())
    assert GraphCache().get("probe", (x,), lambda: -1.0) == first  # shared between modules
    x.add_(1.0)  # in place: a new version of the input
    assert GraphCache().get("probe", (x,), lambda: x.sum().item()) == 6.0


def test_fast_array_records_have_flowers_bytes():
    """records.py writes the bytes Flower's own Array(ndarray) writes, and reads them back."""
    import numpy as np
    from flwr.app import Array

    from fgl_flower.records import array_numpy, array_of

    rng = np.random.default_rng(0)
    for value in (
        rng.random((7, 3), dtype=np.float32),
        np.arange(5),
        np.array(2.5),
        np.zeros((0, 4)),
        rng.random((2, 3)) > 0.5,
        np.asfortranarray(rng.random((3, 2))),
    ):
        ours, flowers = array_of(value), Array(value)
        assert (
            ours.data == flowers.data
            and ours.dtype == flowers.dtype
            and ours.shape == flowers.shape
        )
        back = array_numpy(ours)
        assert back.dtype == value.dtype and np.array_equal(back, value) and back.flags.writeable


class _Client:
    def __init__(self) -> None:
        self.refreshed = 0

    def refresh(self) -> None:
        self.refreshed += 1


def test_live_clients_reuse_a_client_only_for_the_state_it_saved():
    from fgl_flower.client_app import LIVE_TOKEN, LiveClients

    live, built = LiveClients(maxsize=2), []

    def build():
        built.append(_Client())
        return built[-1]

    ctx = Context(run_id=0, node_id=1, node_config={}, state=RecordDict(), run_config={})
    served = []
    live.serve("a", ctx, build, lambda c: served.append(c) or RecordDict())
    live.serve("a", ctx, build, lambda c: served.append(c) or RecordDict())
    assert len(built) == 1 and served[0] is served[1] and served[1].refreshed == 1

    # another process (or a resumed run) wrote the state since: build from it
    moved = Context(run_id=0, node_id=1, node_config={}, state=RecordDict(), run_config={})
    moved.state[LIVE_TOKEN] = ctx.state[LIVE_TOKEN].__class__({"token": "elsewhere"})
    live.serve("a", moved, build, lambda c: RecordDict())
    assert len(built) == 2

    # a failed message drops the client: its state may be half written
    with pytest.raises(RuntimeError):
        live.serve("a", moved, build, lambda c: (_ for _ in ()).throw(RuntimeError("boom")))
    live.serve("a", moved, build, lambda c: RecordDict())
    assert len(built) == 3

    for key in ("b", "c"):  # least recently used first out
        live.serve(
            key,
            Context(run_id=0, node_id=2, node_config={}, state=RecordDict(), run_config={}),
            build,
            lambda c: RecordDict(),
        )
    assert len(live) == 2
    live.serve("a", moved, build, lambda c: RecordDict())
    assert len(built) == 6


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("keep", [True, False])
def test_reused_clients_give_the_numbers_of_fresh_ones(
    flat, method, keep, tmp_path, monkeypatch, request
):
    """A client kept alive between messages computes what one rebuilt from context.state
    computes, for every method, with and without persistent optimizer state."""
    import fgl_flower.client_app as client_app

    builds = []
    real = client_app.build_client
    monkeypatch.setattr(client_app, "build_client", lambda ctx: builds.append(1) or real(ctx))
    for_method(flat, method, request)
    flat.update(
        {
            "num-clients": 3,
            "num-rounds": 3,
            "keep-optimizer-state": keep,
            **({"fedavg.finetune-epochs": 2} if method == "fedavg" else {}),
            **NEEDS.get(method, {}),
        }
    )
    if method == "fedspray":
        flat["fedspray.variant"] = "paper" if keep else "official"
    live = run_inprocess(dict(flat, **{"out-dir": str(tmp_path / "live")}))
    assert len(builds) == 3 and len(client_app._LIVE) == 0  # built once per client, released
    fresh = run_inprocess(
        dict(flat, **{"reuse-clients": False, "out-dir": str(tmp_path / "fresh")})
    )
    assert len(builds) > 3 + 3
    for key in ("final", "best_val", "last"):
        assert live[key] == fresh[key]
    a, b = (rounds(tmp_path / d) for d in ("live", "fresh"))
    assert [(r["train"], r["clients"]) for r in a] == [(r["train"], r["clients"]) for r in b]


@pytest.mark.parametrize("progress", [True, False])
def test_long_client_work_is_reported_unless_progress_is_off(
    flat, tmp_path, monkeypatch, caplog, progress
):
    """Every train and evaluate message that runs past the threshold (here 0 s) gets a line
    with its time (the start line comes from a timer thread, so it is not counted here);
    ``progress=false`` silences them."""
    import fgl_flower.client_app as client_app

    monkeypatch.setattr(client_app, "CLIENT_REPORT_AFTER_S", 0.0)
    flat = dict(
        flat,
        **{
            "out-dir": str(tmp_path),
            "progress": progress,
            "num-rounds": 1,
            "fused-evaluation": False,
        },
    )
    with caplog.at_level(logging.INFO, logger="flwr"):
        run_inprocess(flat)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("client ")]
    if not progress:
        assert lines == []
        return
    clients = list(range(int(flat["num-clients"])))
    for kind in ("train", "evaluate"):
        ended = sorted(
            int(m.split()[1].rstrip(":")) for m in lines if f": {kind} of round 1: done in" in m
        )
        assert ended == clients, lines
