"""FedNova: the normalized average on a hand-worked case and through the strategy over two
rounds, FedAvg when every client takes as many steps, unequal steps on a graph task (counted
as epochs x batches), and what travels."""

import numpy as np
import pytest
import torch
from flwr.app import Message, MessageType, MetricRecord, RecordDict
from methods_data import GRAPH_TASK
from run_records import rounds

from fgl_flower.datasets import load_client_data
from fgl_flower.inprocess import run_inprocess
from fgl_flower.methods.fednova import STEPS
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, METRICS, NUM_EXAMPLES, PARTITION_ID, START
from fgl_flower.records import record_torch, torch_record
from fgl_flower.strategies.fednova import FedNovaStrategy, nova_average
from fgl_flower.strategies.grid import ClientFailure


def test_normalized_average_by_hand():
    """w = 0; client 1: w_1 = (2, 0) after a_1 = 2 steps; client 2: w_2 = (0, 3) after 1 step;
    p = (1/2, 1/2): d = (-1, 0) and (0, -3), tau_eff = 1.5, w+ = -1.5 (d_1 + d_2)/2."""
    w = {"x": np.zeros(2, dtype=np.float32)}
    ups = [
        {"x": np.array([2.0, 0.0], dtype=np.float32)},
        {"x": np.array([0.0, 3.0], dtype=np.float32)},
    ]
    out = nova_average(w, ups, [1.0, 1.0], [2, 1])["x"]
    assert out.dtype == np.float32 and np.allclose(out, [0.75, 2.25])
    # FedAvg's mean would be (1, 1.5): the client with more steps no longer pulls harder
    assert np.allclose(nova_average(w, ups, [1.0, 1.0], [3, 3])["x"], [1.0, 1.5])
    # a client that took no step adds no update but its weight: p = 1/3 each, tau_eff = 1,
    # w+ = -((1/3)(-2, 0)/2 + (1/3)(0, -3)/1) = (1/3, 1)
    assert np.allclose(
        nova_average(w, ups + [{"x": np.zeros(2, np.float32)}], [1, 1, 1], [2, 1, 0])["x"],
        [1 / 3, 1.0],
    )


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
    flat.update(
        {
            **GRAPH_TASK,
            "method": "fednova",
            "num-rounds": 3,
            "batch-size": 8,
            "data-root": str(data_root),
        }
    )
    run_inprocess(flat)
    recs = rounds(tmp_path / "run")
    # a_k = local-epochs x batches: the train-weighted mean and the spread of exactly those counts
    cfg = parse_run_config(flat)
    n = np.array([load_client_data(cfg.data_config(), k).num_train for k in range(3)], dtype=float)
    a = cfg.local_epochs * np.ceil(n / 8)
    assert a.max() > a.min()
    for r in recs:
        assert r["train"]["fednova.steps"] == pytest.approx(float((n * a).sum() / n.sum()))
        assert r["probes"]["steps.spread"]["mean"] == pytest.approx(a.max() / a.min())
    assert recs[0]["bytes_up"] > 1.5 * max(
        recs[1]["bytes_up"], recs[2]["bytes_up"]
    )  # round 1 also carries w_0


def nova_reply(
    pid: int, w: list[float], n: float, steps: int, start: list[float] | None = None
) -> Message:
    content = RecordDict(
        {
            ARRAYS: torch_record({"w": torch.tensor(w)}),
            METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: n, STEPS: float(steps)}),
        }
    )
    if start is not None:
        content[START] = torch_record({"w": torch.tensor(start)})
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


def test_the_strategy_over_two_rounds_with_unequal_steps_and_weights(flat, messages):
    """Round 1 from the clients' w_0 = (0, 0): w_1 = (2, 0) after 2 steps, n = 1; w_2 = (0, 3)
    after 1 step, n = 3. p = (1/4, 3/4), d = (-1, 0) and (0, -3), tau_eff = 1.25:
    w+ = -1.25 (-1/4, -9/4) = (0.3125, 2.8125) (FedAvg: (0.5, 2.25); unweighted: (0.75, 2.25)).
    Round 2 from what was sent, (1, 1): (3, 1) after 4 steps, n = 1; (1, -2) after 3 steps,
    n = 3: d = (-1/2, 0) and (0, 1), tau_eff = 3.25, w+ = (1, 1) - 3.25 (-1/8, 3/4)."""
    flat.update({"method": "fednova"})
    s = FedNovaStrategy(parse_run_config(flat))
    out, _ = s.aggregate_train(
        1,
        [
            nova_reply(0, [2.0, 0.0], 1, 2, start=[0.0, 0.0]),
            nova_reply(1, [0.0, 3.0], 3, 1, start=[0.0, 0.0]),
        ],
    )
    assert record_torch(out)["w"].tolist() == [0.3125, 2.8125]
    assert s.server_probes(1) == {"steps.spread": 2.0}
    s.sent = torch_record({"w": torch.tensor([1.0, 1.0])})
    out, _ = s.aggregate_train(
        2, [nova_reply(0, [3.0, 1.0], 1, 4), nova_reply(1, [1.0, -2.0], 3, 3)]
    )
    assert record_torch(out)["w"].tolist() == [1.40625, -1.4375]


def test_clients_that_started_from_different_models_stop_the_run_or_the_odd_one_is_refused(
    flat, messages
):
    flat.update({"method": "fednova"})
    s = FedNovaStrategy(parse_run_config(flat))
    with pytest.raises(ClientFailure, match="started round 1 from different models"):
        s.aggregate_train(
            1,
            [
                nova_reply(0, [2.0, 0.0], 1, 2, start=[0.0, 0.0]),
                nova_reply(1, [0.0, 3.0], 3, 1, start=[0.0, 1.0]),
            ],
        )
    replies = [nova_reply(p, [2.0, 0.0], 1, 2, start=[0.0, float(p == 1)]) for p in range(3)]
    start, refused = s.agreed_start(1, replies)
    assert record_torch(start)["w"].tolist() == [0.0, 0.0]
    assert refused == {1: "its start model (round 1's w0) differs from the other clients'"}
