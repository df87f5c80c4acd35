"""SCAFFOLD's server: the control variate's update on a hand-worked case (full and partial
participation, the server step), its check of each client's Delta c_i, and c checkpointed."""

import numpy as np
import pytest
import torch
from flwr.app import ConfigRecord, Message, MessageType, MetricRecord, RecordDict

from fgl_flower.methods.scaffold import CONTROL, DELTA, STEPS
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, METRICS, NUM_EXAMPLES, PARTITION_ID, START
from fgl_flower.records import record_torch, torch_record
from fgl_flower.strategies.scaffold import ScaffoldStrategy


def reply(pid, y, delta, start=None, steps=2, n=1.0):
    content = RecordDict(
        {
            ARRAYS: torch_record({"w": torch.tensor(y)}),
            DELTA: torch_record({"w": torch.tensor(delta)}),
            METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: n, STEPS: float(steps)}),
        }
    )
    if start is not None:
        content[START] = torch_record({"w": torch.tensor(start)})
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


def strategy(flat, population=2, **options):
    flat.update({"method": "scaffold", "lr": 0.5, "local-epochs": 2, "agg-weight": "uniform"})
    flat.update({f"scaffold.{k}": v for k, v in options.items()})
    s = ScaffoldStrategy(parse_run_config(flat))
    s.nodes = {p: 100 + p for p in range(population)}
    return s


def test_round_one_and_two_by_hand(flat, messages):
    """x = (0, 0), K = 2, lr = 0.5 (K lr = 1). Round 1: y_1 = (-1, 0), y_2 = (0, -2), so
    Delta c_1 = (1, 0), Delta c_2 = (0, 2) and c = (1/2)(1, 2); x = (-0.5, -1).
    Round 2 from x = (-0.5, -1): y_1 = (-1.5, -1), Delta c_1 = (1, 0) - c = (0.5, -1);
    y_2 = (-0.5, -2), Delta c_2 = (0, 1) - c = (-0.5, 0); c += (1/2)(0, -1) = (0.5, 0.5)."""
    s = strategy(flat)
    replies = [
        reply(0, [-1.0, 0.0], [1.0, 0.0], start=[0.0, 0.0]),
        reply(1, [0.0, -2.0], [0.0, 2.0], start=[0.0, 0.0]),
    ]
    s._start = (1, torch_record({"w": torch.zeros(2)}))
    assert [s.delta_problem(r) for r in replies] == [None, None]
    out, _ = s.aggregate_train(1, replies)
    assert record_torch(out)["w"].tolist() == [-0.5, -1.0]
    assert s.control.tolist() == [0.5, 1.0] and s.server_probes(1)["scaffold.control-norm"] == (
        pytest.approx(np.sqrt(1.25))
    )
    # round 2: c travels with the model
    s.select([0, 1])
    sent = list(s.configure_train(2, out, ConfigRecord({}), None))
    assert record_torch(sent[0].content[CONTROL])["w"].tolist() == [0.5, 1.0]
    s.sent = out
    s._start = (2, out)
    replies = [reply(0, [-1.5, -1.0], [0.5, -1.0]), reply(1, [-0.5, -2.0], [-0.5, 0.0])]
    assert [s.delta_problem(r) for r in replies] == [None, None]
    out, _ = s.aggregate_train(2, replies)
    assert record_torch(out)["w"].tolist() == [-1.0, -1.5]
    assert s.control.tolist() == [0.5, 0.5]


def test_partial_participation_and_the_server_step(flat, messages):
    """N = 4 clients, 2 reply: c = (1/N) sum Delta c_i = (0.25, 0.5); eta_g = 2 doubles the
    step from x to the clients' mean: x = 2 (-0.5, -1) = (-1, -2)."""
    s = strategy(flat, population=4, **{"server-lr": 2.0})
    replies = [
        reply(0, [-1.0, 0.0], [1.0, 0.0], start=[0.0, 0.0]),
        reply(1, [0.0, -2.0], [0.0, 2.0], start=[0.0, 0.0]),
    ]
    out, _ = s.aggregate_train(1, replies)
    assert record_torch(out)["w"].tolist() == [-1.0, -2.0]
    assert s.control.tolist() == [0.25, 0.5]


def test_a_delta_that_is_not_the_clients_own_is_refused(flat, messages):
    s = strategy(flat)
    s._start = (1, torch_record({"w": torch.zeros(2)}))
    assert s.delta_problem(reply(0, [-1.0, 0.0], [1.0, 0.0])) is None
    # float32 rounding passes; a change of 1e-3 does not (it would move c for everyone)
    assert s.delta_problem(reply(0, [-1.0, 0.0], [1.0 + 1e-7, 0.0])) is None
    why = s.delta_problem(reply(0, [-1.0, 0.0], [1.0 + 1e-3, 0.0]))
    assert why is not None and why.startswith(f"{DELTA}: differs from (x - y)/(K lr) - c")


def test_the_control_variate_is_checkpointed(flat, messages):
    s = strategy(flat)
    s.aggregate_train(
        1,
        [
            reply(0, [-1.0, 0.0], [1.0, 0.0], start=[0.0, 0.0]),
            reply(1, [0.0, -2.0], [0.0, 2.0], start=[0.0, 0.0]),
        ],
    )
    records = s.checkpoint_records(1, torch_record({"w": torch.zeros(2)}), None)
    fresh = strategy(flat)
    fresh.restore(records)
    assert fresh.control.tolist() == [0.5, 1.0]


def test_the_server_step_starts_from_x_and_c_ignores_the_weights(flat, messages):
    """x = (1, 1), K = 2, lr = 0.5; weights n = (1, 3) under agg-weight = train: the mean is
    (1/4)(0, 1) + (3/4)(1, 0) = (0.75, 0.25); eta_g = 2: x + 2 (mean - x) = (0.5, -0.5).
    Delta c = (x - y)/1 - 0 = (1, 0) and (0, 1): c = (1/2)(1, 1), unweighted."""
    s = strategy(flat, **{"server-lr": 2.0})
    s.cfg = parse_run_config({**flat, "agg-weight": "train"})
    start = [1.0, 1.0]
    replies = [
        reply(0, [0.0, 1.0], [1.0, 0.0], start=start, n=1.0),
        reply(1, [1.0, 0.0], [0.0, 1.0], start=start, n=3.0),
    ]
    out, _ = s.aggregate_train(1, replies)
    assert record_torch(out)["w"].tolist() == [0.5, -0.5]
    assert s.control.tolist() == [0.5, 0.5]


def test_the_check_uses_the_reported_step_count(flat, messages):
    """K = 4 steps (a graph client's epochs x batches): Delta c = (x - y)/(4 lr) = (0.5, 0)."""
    s = strategy(flat)
    s._start = (1, torch_record({"w": torch.zeros(2)}))
    assert s.delta_problem(reply(0, [-1.0, 0.0], [0.5, 0.0], steps=4)) is None
    assert s.delta_problem(reply(0, [-1.0, 0.0], [1.0, 0.0], steps=4)) is not None
