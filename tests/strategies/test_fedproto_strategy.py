"""FedProto's server: the global prototypes by hand under both rules, what travels, what is
refused and checkpointed."""

import numpy as np
import pytest
import torch
from flwr.app import ConfigRecord, Message, MessageType, MetricRecord, RecordDict

from fgl_flower.methods.fedproto import GLOBAL, PROTOTYPES
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import METRICS, NUM_EXAMPLES, PARTITION_ID
from fgl_flower.records import record_torch, torch_record
from fgl_flower.strategies.fedproto import FedProtoStrategy, global_prototypes, spread

#: two clients, three classes, h = 2; client 0 has no node of class 2, client 1 none of class 0
P0 = np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
P1 = np.array([[0.0, 0.0], [0.0, 4.0], [3.0, 3.0]])
N0, N1 = np.array([2, 1, 0]), np.array([0, 5, 4])


def test_global_prototypes_by_hand():
    """official: the mean over the clients that have the class: (1, 0), (0, 3), (3, 3).
    openfgl: weights n = (1, 3) -> (1/4, 3/4) over both, zeros included: (1/4, 0), (0, 3.5),
    (9/4, 9/4)."""
    out, present = global_prototypes([P0, P1], [N0, N1], [1.0, 3.0], "official")
    assert out.tolist() == [[1.0, 0.0], [0.0, 3.0], [3.0, 3.0]] and present.tolist() == [1, 1, 1]
    out, _ = global_prototypes([P0, P1], [N0, N1], [1.0, 3.0], "openfgl")
    assert out.tolist() == [[0.25, 0.0], [0.0, 3.5], [2.25, 2.25]]
    out, present = global_prototypes([P0], [N0], [1.0], "official")
    assert present.tolist() == [1, 1, 0] and out[2].tolist() == [0.0, 0.0]
    # spread: distances between (1, 0), (0, 3), (3, 3): sqrt(10), sqrt(13), 3 over mean norm
    norms = np.mean([1.0, 3.0, np.sqrt(18)])
    assert spread(*global_prototypes([P0, P1], [N0, N1], [1, 1], "official")) == pytest.approx(
        np.mean([np.sqrt(10), np.sqrt(13), 3.0]) / norms
    )


def reply(pid, protos, counts, n=1.0):
    content = RecordDict(
        {
            PROTOTYPES: torch_record(
                {
                    "prototypes": torch.tensor(protos, dtype=torch.float32),
                    "counts": torch.tensor(counts),
                }
            ),
            METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: n}),
        }
    )
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


def test_the_strategy_sends_refuses_and_checkpoints(flat, messages):
    flat.update({"method": "fedproto", "agg-weight": "uniform"})
    s = FedProtoStrategy(parse_run_config(flat))
    assert GLOBAL not in s.round_content(1, torch_record({}), ConfigRecord({}))
    arrays, _ = s.aggregate_train(1, [reply(0, P0, N0), reply(1, P1, N1)])
    assert arrays is None  # no model is averaged
    sent = record_torch(s.round_content(2, torch_record({}), ConfigRecord({}))[GLOBAL])
    assert sent["prototypes"].tolist() == [[1.0, 0.0], [0.0, 3.0], [3.0, 3.0]]
    assert s.reply_problem(2, reply(0, P0, [2, 1, 0])) is None
    assert "not whole numbers" in s.reply_problem(2, reply(0, P0, [2.5, 1, 0]))
    assert "not prototypes [C, h] with counts [C]" in s.reply_problem(2, reply(0, P0, [2, 1]))
    fresh = FedProtoStrategy(parse_run_config(flat))
    fresh.restore(s.checkpoint_records(1, torch_record({}), None))
    assert fresh.prototypes.tolist() == s.prototypes.tolist()
