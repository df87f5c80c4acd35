"""FedGL's server: the pseudo-label fusion by hand, each client's labels in its own node
order, what is refused, and the state checkpointed."""

import numpy as np
import torch
from flwr.app import ConfigRecord, Message, MessageType, MetricRecord, RecordDict

from fgl_flower.methods.fedgl import PREDICTIONS, PSEUDO
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import METRICS, NUM_EXAMPLES, PARTITION_ID
from fgl_flower.records import record_torch, torch_record
from fgl_flower.strategies.fedgl import FedGLStrategy, classes_of, fuse, labels_of


def test_the_fusion_by_hand():
    """Node 0 only on client A (0.9 for class 1): label 1. Node 1 on both: A (0.6, 0.4) with
    rate 1/4, B (0.3, 0.7) with 3/4, threshold 0.5: (0.15, 0.525) / 1 -> 1. Node 2 only on B
    with (0.5, 0.5) at the threshold: kept, argmax 0. Node 3 only on B, (0.4, 0.45, ...) all
    below: no label."""
    a = np.array([[0.1, 0.9], [0.6, 0.4]])
    b = np.array([[0.3, 0.7], [0.5, 0.5], [0.45, 0.55]])
    fused = fuse([a, b], [np.array([0, 1]), np.array([1, 2, 3])], [0.25, 0.75], 0.5)
    assert fused.tolist() == [[0, 1, 2, 3], [1, 1, 0, 1]]
    fused = fuse([a, b], [np.array([0, 1]), np.array([1, 2, 3])], [0.25, 0.75], 0.6)
    assert fused[1].tolist() == [1, 1, -1, -1]
    # the weights decide node 1: A (0.9, 0) at 3/4 against B (0, 0.6) at 1/4 -> class 0;
    # swapped -> class 1
    a2, b2 = np.array([[0.9, 0.1]]), np.array([[0.4, 0.6]])
    one = [np.array([1]), np.array([1])]
    assert fuse([a2, b2], one, [0.75, 0.25], 0.5)[1].tolist() == [0]
    assert fuse([a2, b2], one, [0.25, 0.75], 0.5)[1].tolist() == [1]
    # a huge node id costs nothing: only the ids uploaded are kept
    assert fuse([a2], [np.array([2**31 - 2])], [1.0], 0.5).tolist() == [[2**31 - 2], [0]]
    assert labels_of(fused, np.array([3, 1, 7])).tolist() == [-1, 1, -1]


def reply(pid, probs, nodes):
    content = RecordDict(
        {
            PREDICTIONS: torch_record({"probs": torch.tensor(probs), "nodes": torch.tensor(nodes)}),
            METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: 1.0}),
        }
    )
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


def test_labels_travel_in_each_clients_order_and_resume(flat, messages):
    flat.update({"method": "fedgl", "agg-weight": "uniform"})
    s = FedGLStrategy(parse_run_config(flat))
    s.nodes = {0: 100, 1: 101}
    s.select([0, 1])
    s.labels = fuse(
        [np.array([[0.1, 0.9], [0.8, 0.2]]), np.array([[0.7, 0.3]])],
        [np.array([5, 2]), np.array([0])],
        [0.5, 0.5],
        0.5,
    )
    s.client_nodes = {0: np.array([5, 2]), 1: np.array([0])}
    sent = s.configure_train(2, torch_record({}), ConfigRecord({}), None)
    got = {m.metadata.dst_node_id: record_torch(m.content[PSEUDO])["labels"].tolist() for m in sent}
    assert got == {100: [1, 0], 101: [0]}
    fresh = FedGLStrategy(parse_run_config(flat))
    fresh.restore(s.checkpoint_records(1, torch_record({}), None))
    assert fresh.labels.tolist() == s.labels.tolist()
    assert {p: v.tolist() for p, v in fresh.client_nodes.items()} == {0: [5, 2], 1: [0]}


def test_malformed_predictions_are_refused(flat, messages):
    flat.update({"method": "fedgl"})
    s = FedGLStrategy(parse_run_config(flat))
    assert s.reply_problem(1, reply(0, [[0.1, 0.9]], [3])) is None
    assert "not rows of probabilities" in s.reply_problem(1, reply(0, [[0.6, 0.9]], [3]))
    assert "node ids repeat" in s.reply_problem(1, reply(0, [[0.1, 0.9], [0.5, 0.5]], [3, 3]))
    assert "not whole numbers" in s.reply_problem(1, reply(0, [[0.1, 0.9]], [-1]))
    # a client with another number of classes is the odd one out, not a crash
    s.nodes = {0: 100, 1: 101, 2: 102}
    replies = [
        reply(0, [[0.1, 0.9]], [3]),
        reply(1, [[0.2, 0.8]], [4]),
        reply(2, [[0.2, 0.3, 0.5]], [5]),
    ]
    refused = s.screen_agreement(replies, {}, MessageType.TRAIN, classes_of, "classes")
    assert list(refused) == [2]
