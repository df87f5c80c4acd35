"""The ClientApp's own pieces: threads per client and the partition query."""

import torch
from flwr.app import Context, RecordDict

from fgl_flower.client_app import build_client
from fgl_flower.inprocess import run_inprocess


def _context(flat, **overrides):
    return Context(run_id=0, node_id=1, node_config={"partition-id": 0, "num-partitions": 3},
                   state=RecordDict(), run_config=dict(flat, **overrides))


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
    from fgl_flower.config import parse_run_config
    from fgl_flower.datasets import load_client_data
    from fgl_flower.models.sparse import GraphCache

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
    for value in (rng.random((7, 3), dtype=np.float32), np.arange(5), np.array(2.5),
                  np.zeros((0, 4)), rng.random((2, 3)) > 0.5, np.asfortranarray(rng.random((3, 2)))):
        ours, flowers = array_of(value), Array(value)
        assert ours.data == flowers.data and ours.dtype == flowers.dtype and ours.shape == flowers.shape
        back = array_numpy(ours)
        assert back.dtype == value.dtype and np.array_equal(back, value) and back.flags.writeable
