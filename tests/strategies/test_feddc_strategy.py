"""FedDC's server: the drifts added back to the clients' mean on a hand-worked case, over
every client that exists, and checkpointed."""

import torch
from flwr.app import Message, MessageType, MetricRecord, RecordDict

from fgl_flower.methods.scaffold import DELTA, STEPS
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, METRICS, NUM_EXAMPLES, PARTITION_ID, START
from fgl_flower.records import record_torch, torch_record
from fgl_flower.strategies.feddc import FedDCStrategy


def reply(pid, theta, delta, start=None):
    content = RecordDict(
        {
            ARRAYS: torch_record({"w": torch.tensor(theta)}),
            DELTA: torch_record({"w": torch.tensor(delta)}),
            METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: 1.0, STEPS: 2.0}),
        }
    )
    if start is not None:
        content[START] = torch_record({"w": torch.tensor(start)})
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


def strategy(flat, population):
    flat.update({"method": "feddc", "lr": 0.5, "local-epochs": 2, "agg-weight": "uniform"})
    s = FedDCStrategy(parse_run_config(flat))
    s.nodes = {p: 100 + p for p in range(population)}
    return s


def test_the_drifts_by_hand(flat, messages):
    """w = (0, 0); theta_1 = (-1, 0), theta_2 = (0, -2): h = theta - w, mean theta =
    (-0.5, -1), mean h = (-0.5, -1): w = (-1, -2). Round 2 from (-1, -2): theta_1 = (-1, -1),
    theta_2 = (-2, -2): h_1 = (-1, 0) + (0, 1) = (-1, 1), h_2 = (0, -2) + (-1, 0) = (-1, -2);
    w = (-1.5, -1.5) + (-1, -0.5) = (-2.5, -2)."""
    s = strategy(flat, 2)
    out, _ = s.aggregate_train(
        1,
        [
            reply(0, [-1.0, 0.0], [1.0, 0.0], start=[0.0, 0.0]),
            reply(1, [0.0, -2.0], [0.0, 2.0], start=[0.0, 0.0]),
        ],
    )
    assert record_torch(out)["w"].tolist() == [-1.0, -2.0]
    assert s.control.tolist() == [0.5, 1.0]  # SCAFFOLD's c, unchanged by the drift
    s.sent = out
    s._start = (2, out)
    out, _ = s.aggregate_train(
        2, [reply(0, [-1.0, -1.0], [0.0, 0.0]), reply(1, [-2.0, -2.0], [0.0, 0.0])]
    )
    assert record_torch(out)["w"].tolist() == [-2.5, -2.0]
    fresh = strategy(flat, 2)
    fresh.restore(s.checkpoint_records(2, out, None))
    assert fresh.drifts.tolist() == s.drifts.tolist() == [[-1.0, 1.0], [-1.0, -2.0]]


def test_the_drift_mean_is_over_every_client(flat, messages):
    """N = 4, two reply: mean h = (h_1 + h_2) / 4 = (-0.25, -0.5); w = (-0.75, -1.5)."""
    s = strategy(flat, 4)
    out, _ = s.aggregate_train(
        1,
        [
            reply(0, [-1.0, 0.0], [1.0, 0.0], start=[0.0, 0.0]),
            reply(1, [0.0, -2.0], [0.0, 2.0], start=[0.0, 0.0]),
        ],
    )
    assert record_torch(out)["w"].tolist() == [-0.75, -1.5]
