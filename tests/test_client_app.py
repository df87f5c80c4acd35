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
