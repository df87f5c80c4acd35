"""FedNova: the normalized average on a hand-worked case, FedAvg when every client takes as
many steps, unequal steps on a graph task, and what travels."""

import json

import numpy as np
import pytest
from methods_data import GRAPH_TASK

from fgl_flower.inprocess import run_inprocess
from fgl_flower.strategies.fednova import nova_average


def rounds(folder):
    return [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]


def test_normalized_average_by_hand():
    """w = 0; client 1: w_1 = (2, 0) after a_1 = 2 steps; client 2: w_2 = (0, 3) after 1 step;
    p = (1/2, 1/2): d = (-1, 0) and (0, -3), tau_eff = 1.5, w+ = -1.5 (d_1 + d_2)/2."""
    w = {"x": np.zeros(2, dtype=np.float32)}
    ups = [{"x": np.array([2.0, 0.0], dtype=np.float32)}, {"x": np.array([0.0, 3.0], dtype=np.float32)}]
    out = nova_average(w, ups, [1.0, 1.0], [2, 1])["x"]
    assert out.dtype == np.float32 and np.allclose(out, [0.75, 2.25])
    # FedAvg's mean would be (1, 1.5): the client with more steps no longer pulls harder
    assert np.allclose(nova_average(w, ups, [1.0, 1.0], [3, 3])["x"], [1.0, 1.5])
    # a client that took no step adds no update but its weight: p = 1/3 each, tau_eff = 1,
    # w+ = -((1/3)(-2, 0)/2 + (1/3)(0, -3)/1) = (1/3, 1)
    assert np.allclose(nova_average(w, ups + [{"x": np.zeros(2, np.float32)}], [1, 1, 1], [2, 1, 0])["x"],
                       [1 / 3, 1.0])


def test_equal_steps_give_fedavg(flat, tmp_path):
    flat.update({"num-rounds": 3})
    fedavg = run_inprocess({**flat, "method": "fedavg", "out-dir": str(tmp_path / "fedavg")})
    nova = run_inprocess({**flat, "method": "fednova"})
    numbers = {k: v for k, v in fedavg["final"].items() if isinstance(v, float)}
    assert {k: nova["final"][k] for k in numbers} == pytest.approx(numbers, rel=1e-5, abs=1e-7)
    recs = rounds(tmp_path / "run")
    assert all(r["probes"]["steps.spread"]["mean"] == 1.0 for r in recs)
    assert nova["probes_dead"]  # the probe says so: FedNova is FedAvg here


def test_unequal_steps_on_a_graph_task_and_the_start_model_sent_once(flat, tmp_path, data_root):
    flat.update({**GRAPH_TASK, "method": "fednova", "num-rounds": 3, "batch-size": 8, "data-root": str(data_root)})
    run_inprocess(flat)
    recs = rounds(tmp_path / "run")
    assert all(r["probes"]["steps.spread"]["mean"] > 1.0 for r in recs)
    assert recs[0]["bytes_up"] > 1.5 * max(recs[1]["bytes_up"], recs[2]["bytes_up"])  # round 1 also carries w_0
