"""FedGL's server: the pseudo-label fusion and the pseudo-graph by hand, each client's labels
and graph block in its own node order, what is refused, and the state checkpointed."""

import numpy as np
import pytest
import torch
from flwr.app import ConfigRecord, Message, MessageType, MetricRecord, RecordDict

from fgl_flower.methods.fedgl import GRAPH, PREDICTIONS, PSEUDO
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import METRICS, NUM_EXAMPLES, PARTITION_ID
from fgl_flower.records import record_torch, torch_record
from fgl_flower.strategies.fedgl import (
    FedGLStrategy,
    block_of,
    classes_of,
    fuse,
    fuse_mean,
    labels_of,
    pseudo_graph,
)


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


def reply(pid, probs, nodes, emb=None):
    probs = torch.tensor(probs)
    emb = probs.log() if emb is None else torch.tensor(emb)
    content = RecordDict(
        {
            PREDICTIONS: torch_record(
                {"probs": probs, "embeddings": emb, "nodes": torch.tensor(nodes)}
            ),
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
    nan = float("nan")
    assert "not finite" in s.reply_problem(1, reply(0, [[nan, 0.5]], [3]))
    assert "not finite" in s.reply_problem(1, reply(0, [[0.1, 0.9]], [3], [[1.0, float("inf")]]))
    assert "not embeddings" in s.reply_problem(1, reply(0, [[0.1, 0.9]], [3], [[1.0]]))
    # a client with another number of classes is the odd one out, not a crash
    s.nodes = {0: 100, 1: 101, 2: 102}
    replies = [
        reply(0, [[0.1, 0.9]], [3]),
        reply(1, [[0.2, 0.8]], [4]),
        reply(2, [[0.2, 0.3, 0.5]], [5]),
    ]
    refused = s.screen_agreement(replies, {}, MessageType.TRAIN, classes_of, "classes")
    assert list(refused) == [2]


def dense_reference(emb, k):
    """The pseudo-graph as dense matrices, written from the formula (no ties in ``emb``):
    Z = top-k of max(E E^T, 0) per row, rows normalised; diagonal set to 1; S = D^-1/2 Z^T
    D^-1/2 with D Z's row sums; S[i, j] is the weight of edge j -> i; the diagonal is not
    sent."""
    sim = np.maximum(emb @ emb.T, 0)
    z = np.zeros_like(sim)
    for i, row in enumerate(sim):
        top = np.argsort(-row)[:k]
        z[i, top] = row[top]
    z /= z.sum(axis=1, keepdims=True)
    np.fill_diagonal(z, 1.0)
    d = z.sum(axis=1) ** -0.5
    s = d[:, None] * z.T * d[None, :]
    np.fill_diagonal(s, 0.0)
    return s


def as_dense(edges, weight, n):
    out = np.zeros((n, n))
    out[edges[1], edges[0]] = weight  # target row, source column
    return out


def test_the_pseudo_graph_by_hand():
    """e0 = (1, 0), e1 = (2, 0), e2 = (0, 1), e3 = (-1, 0); k = 2. Dot products clipped at 0:
    row 0 (1, 2, 0, 0) keeps 1 and itself: Z0 = (1/3, 2/3); row 1 (2, 4, 0, 0): Z1 = (1/3,
    2/3); rows 2 and 3 have only themselves (e3 . e0 < 0 is cut). With the diagonal 1 the row
    sums are r0 = 1 + 2/3, r1 = 1 + 1/3, r2 = r3 = 1, so edge 0 -> 1 weighs (2/3) / sqrt(r0 r1)
    = 1/sqrt(5) and 1 -> 0 (1/3) / sqrt(r0 r1) = 1/sqrt(20): the graph is not symmetric (each
    node sends to its own top-k, OpenFGL's transposed normalisation)."""
    emb = np.array([[1.0, 0], [2, 0], [0, 1], [-1, 0]])
    edges, weight = pseudo_graph(emb, 2)
    got = {(int(a), int(b)): w for (a, b), w in zip(edges.T, weight)}
    assert got.keys() == {(0, 1), (1, 0)}
    assert got[(0, 1)] == pytest.approx(1 / np.sqrt(5))
    assert got[(1, 0)] == pytest.approx(1 / np.sqrt(20))
    # k = 1: row 0 keeps node 1 alone (2 > 1), Z0 = (0, 1), r0 = 2; row 1 keeps itself, r1 = 1
    edges, weight = pseudo_graph(emb, 1)
    assert edges.tolist() == [[0], [1]] and weight == pytest.approx([1 / np.sqrt(2)])
    # a zero embedding has no positive similarity: no edge, no division by zero
    edges, weight = pseudo_graph(np.zeros((3, 2)), 2)
    assert edges.shape == (2, 0) and weight.shape == (0,)
    # random embeddings: the dense formula, whatever the block size (1 row, 7 rows, all)
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(23, 4))
    want = dense_reference(emb, 5)
    for block in (1, 7 * 23, 1 << 23):
        edges, weight = pseudo_graph(emb, 5, block_entries=block)
        np.testing.assert_allclose(as_dense(edges, weight, 23), want, atol=1e-12)
    # k beyond the nodes keeps every positive pair
    np.testing.assert_allclose(
        as_dense(*pseudo_graph(emb, 100), 23), dense_reference(emb, 23), atol=1e-12
    )


def test_the_fused_embeddings_and_each_clients_block():
    """Node 7 on A (rate 1/4, e = (4, 0)) and B (3/4, (0, 4)): (1, 3); node 5 on A only: its
    own. A block keeps the edges between two of the client's nodes, as positions in its node
    order."""
    ids, e = fuse_mean(
        [np.array([[4.0, 0], [1, 1]]), np.array([[0.0, 4]])],
        [np.array([7, 5]), np.array([7])],
        [0.25, 0.75],
    )
    assert ids.tolist() == [5, 7] and e.tolist() == [[1, 1], [1, 3]]
    edges = np.array([[10, 11, 12, 13], [11, 10, 10, 12]])
    weight = np.array([0.1, 0.2, 0.3, 0.4])
    local, w = block_of(edges, weight, np.array([11, 12, 10]))
    assert local.tolist() == [[2, 0, 1], [0, 2, 2]] and w.tolist() == [0.1, 0.2, 0.3]
    local, w = block_of(edges, weight, np.array([13, 99]))
    assert local.shape == (2, 0) and w.shape == (0,)


def test_the_graph_travels_in_train_and_evaluate_messages_and_resumes(flat, messages):
    flat.update({"method": "fedgl", "agg-weight": "uniform", "fedgl.graph-weight": 0.5})
    s = FedGLStrategy(parse_run_config(flat))
    s.nodes = {0: 100, 1: 101}
    s.select([0, 1])
    s.client_nodes = {0: np.array([5, 2, 9]), 1: np.array([0])}
    s.graph_edges, s.graph_weight = np.array([[2, 9, 0], [9, 5, 2]]), np.array([0.5, 0.25, 1.0])
    for configure in (s.configure_train, s.configure_evaluate):
        sent = configure(2, torch_record({}), ConfigRecord({}), None)
        got = {m.metadata.dst_node_id: record_torch(m.content[GRAPH]) for m in sent}
        assert got[100]["edges"].tolist() == [[1, 2], [2, 0]]
        assert got[100]["weight"].tolist() == [0.5, 0.25]
        assert got[101]["edges"].shape == (2, 0)
        assert all(PSEUDO not in m.content for m in sent)  # no labels fused yet
    fresh = FedGLStrategy(parse_run_config(flat))
    fresh.restore(s.checkpoint_records(1, torch_record({}), None))
    assert fresh.graph_edges.tolist() == s.graph_edges.tolist()
    assert fresh.graph_weight.tolist() == s.graph_weight.tolist()


def test_graph_weight_needs_a_backbone_that_reads_edge_weights(flat):
    from fgl_flower.errors import ConfigError

    flat.update({"method": "fedgl", "fedgl.graph-weight": 0.5, "model": "graphsage"})
    with pytest.raises(ConfigError, match="ignores edge weights"):
        parse_run_config(flat)
    flat.update({"fedgl.graph-weight": 0.0})
    parse_run_config(flat)
    flat.update({"fedgl.graph-weight": 0.5, "model": "gcn", "fedgl.k": 0})
    with pytest.raises(ConfigError, match="fedgl.k"):
        parse_run_config(flat)
