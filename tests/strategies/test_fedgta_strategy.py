"""FedGTA's server: the aggregation sets and confidence-weighted averages on a hand-worked
case, who receives which model, and the probes of the selection."""

import numpy as np
import pytest
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)

from fgl_flower.errors import FGLError
from fgl_flower.methods.fedgta import STATISTICS
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, METRICS, NUM_EXAMPLES, PARTITION_ID
from fgl_flower.records import array_numpy
from fgl_flower.strategies.fedgta import FedGTAStrategy, aggregation_sets, cosine_matrix

# three clients: m0 and m1 orthogonal, m2 at 45 degrees to both (cos 0.707)
MOMENTS = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])


def test_the_sets_of_a_hand_worked_case():
    sim = cosine_matrix(MOMENTS)
    c = 1 / np.sqrt(2)
    assert np.allclose(sim, [[1, 0, c], [0, 1, c], [c, c, 1]])
    assert aggregation_sets(sim, 0.5) == [[0, 2], [1, 2], [0, 1, 2]]
    assert aggregation_sets(sim, 0.8) == [[0], [1], [2]]  # nobody else: local training
    assert aggregation_sets(sim, -1.0) == [[0, 1, 2]] * 3  # everybody: one FedAvg
    # a client is in its own set even if rounding puts its self-similarity below the bar
    assert aggregation_sets(np.array([[0.9999999]]), 0.99999999) == [[0]]


def reply(pid: int, w: float, moments: np.ndarray, confidence: float) -> Message:
    content = RecordDict(
        {
            ARRAYS: ArrayRecord({"conv.weight": Array(np.array([w], dtype=np.float32))}),
            METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: 10.0}),
            STATISTICS: ArrayRecord(
                {
                    "moments": Array(moments.astype(np.float32)),
                    "confidence": Array(np.array([confidence], dtype=np.float32)),
                }
            ),
        }
    )
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


@pytest.fixture
def strategy(flat, messages):
    flat.update({"method": "fedgta", "num-clients": 4, "fedgta.accept": 0.5})
    s = FedGTAStrategy(parse_run_config(flat))
    s.nodes = {p: 100 + p for p in range(4)}
    return s


def test_confidence_weighted_averages_over_each_clients_set(strategy):
    weights, confidence = [1.0, 2.0, 4.0], [1.0, 3.0, 6.0]
    models, _ = strategy.aggregate_train(
        1, [reply(p, weights[p], MOMENTS[p], confidence[p]) for p in range(3)]
    )
    got = [array_numpy(models[f"client{p}.conv.weight"])[0] for p in range(3)]
    # sets {0, 2}, {1, 2}, {0, 1, 2} weighted by the confidences
    assert got[0] == pytest.approx((1 * 1 + 6 * 4) / 7, rel=1e-6)
    assert got[1] == pytest.approx((3 * 2 + 6 * 4) / 9, rel=1e-6)
    assert got[2] == pytest.approx((1 * 1 + 3 * 2 + 6 * 4) / 10, rel=1e-6)
    record = strategy.round_record(1)["fedgta"]
    assert record["sets"] == [[0, 2], [1, 2], [0, 1, 2]] and record["confidence"] == [1.0, 3.0, 6.0]
    probes = strategy.server_probes(1)
    assert probes["fedgta.accepted"] == pytest.approx((0.5 + 0.5 + 1.0) / 3)
    assert probes["fedgta.similarity-spread"] == pytest.approx(1 / np.sqrt(2), rel=1e-5)


def test_each_client_receives_its_own_model_and_an_untrained_one_nothing(strategy):
    models, _ = strategy.aggregate_train(
        1, [reply(p, float(p + 1), MOMENTS[p], 1.0) for p in range(3)]
    )
    strategy.select([0, 3])  # client 3 has not trained yet: it keeps its seeded model
    for kind, configure in (
        (MessageType.TRAIN, strategy.configure_train),
        (MessageType.EVALUATE, strategy.configure_evaluate),
    ):
        messages = list(configure(2, models, ConfigRecord(), None))
        assert [m.metadata.dst_node_id for m in messages] == [100, 103]
        assert all(m.metadata.message_type == kind for m in messages)
        assert list(messages[0].content[ARRAYS].keys()) == ["conv.weight"]
        assert array_numpy(messages[0].content[ARRAYS]["conv.weight"])[0] == pytest.approx(
            array_numpy(models["client0.conv.weight"])[0]
        )
        assert len(messages[1].content[ARRAYS]) == 0
    # a later round keeps the models of the clients that did not train in it
    models, _ = strategy.aggregate_train(2, [reply(p, 9.0, MOMENTS[p], 1.0) for p in (1, 2)])
    assert array_numpy(models["client0.conv.weight"])[0] == pytest.approx((1 + 3) / 2)
    assert array_numpy(models["client1.conv.weight"])[0] == pytest.approx(9.0)


def test_a_set_without_confidence_stops_the_run(strategy):
    replies = [reply(0, 1.0, MOMENTS[0], 0.0), reply(1, 2.0, MOMENTS[1], 1.0)]
    with pytest.raises(FGLError, match="no edges"):
        strategy.aggregate_train(1, replies)
