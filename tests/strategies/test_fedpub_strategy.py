"""FED-PUB's server: the personalisation weights on a hand-worked case, the personalised
and global averages, who receives which model, and the probes of the weights."""

import math

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

from fgl_flower.methods.fedpub import EMBEDDING
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, METRICS, NUM_EXAMPLES, PARTITION_ID
from fgl_flower.records import array_numpy
from fgl_flower.strategies.fedpub import FedPubStrategy, personalization_weights

# three clients: h1 and h2 orthogonal, h3 between them
EMB = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])


def test_the_weights_of_a_hand_worked_case():
    c = 1 / math.sqrt(2)  # cos(h1, h3) = cos(h2, h3)
    sim, alpha = personalization_weights(EMB, tau=2.0)
    assert np.allclose(sim, [[1, 0, c], [0, 1, c], [c, c, 1]])
    e = math.e
    row0 = np.array([e**2, 1.0, e ** (2 * c)])
    row2 = np.array([e ** (2 * c), e ** (2 * c), e**2])
    assert np.allclose(alpha[0], row0 / row0.sum())
    assert np.allclose(alpha[2], row2 / row2.sum())
    _, cosine = personalization_weights(EMB, tau=2.0, norm="cosine")
    assert np.allclose(cosine[0], np.array([1, 0, c]) / (1 + c))
    # tau = 0: every client averages all alike (FedAvg without the size weights)
    assert np.allclose(personalization_weights(EMB, tau=0.0)[1], 1 / 3)


def reply(pid: int, w: float, emb: np.ndarray, n: float) -> Message:
    content = RecordDict(
        {
            ARRAYS: ArrayRecord({"conv1.lin.weight": Array(np.array([w], dtype=np.float32))}),
            METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: n}),
            EMBEDDING: ArrayRecord({"embedding": Array(emb.astype(np.float32))}),
        }
    )
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


@pytest.fixture
def strategy(flat, messages):
    flat.update({"method": "fedpub", "num-clients": 4, "fedpub.norm-scale": 2.0})
    s = FedPubStrategy(parse_run_config(flat))
    s.nodes = {p: 100 + p for p in range(4)}
    return s


def test_personalised_and_global_averages(strategy):
    weights, sizes = [1.0, 2.0, 4.0], [10.0, 30.0, 60.0]
    replies = [reply(p, w, EMB[p], n) for p, (w, n) in enumerate(zip(weights, sizes))]
    models, _ = strategy.aggregate_train(1, replies)
    _, alpha = personalization_weights(EMB, tau=2.0)
    for p in range(3):
        got = array_numpy(models[f"client{p}.conv1.lin.weight"])[0]
        assert got == pytest.approx(float(alpha[p] @ np.array(weights)), rel=1e-6)
    assert array_numpy(models["global.conv1.lin.weight"])[0] == pytest.approx(0.1 + 0.6 + 2.4)
    record = strategy.round_record(1)["fedpub"]
    assert record["clients"] == [0, 1, 2] and np.allclose(record["weights"], alpha, atol=1e-6)
    probes = strategy.server_probes(1)
    assert probes["fedpub.self-weight"] == pytest.approx(float(np.diag(alpha).mean()), rel=1e-5)
    assert probes["fedpub.weight-spread"] > 0.1


def test_each_client_receives_its_own_model_or_else_the_global_one(strategy):
    replies = [reply(p, float(p + 1), EMB[p], 10.0) for p in range(3)]
    models, _ = strategy.aggregate_train(1, replies)
    strategy.select([0, 3])  # client 3 has not trained yet
    messages = list(strategy.configure_train(2, models, ConfigRecord(), None))
    assert [m.metadata.dst_node_id for m in messages] == [100, 103]
    sent = [array_numpy(m.content[ARRAYS]["conv1.lin.weight"])[0] for m in messages]
    assert sent[0] == pytest.approx(array_numpy(models["client0.conv1.lin.weight"])[0])
    assert sent[1] == pytest.approx(array_numpy(models["global.conv1.lin.weight"])[0])
    assert list(messages[0].content[ARRAYS].keys()) == ["conv1.lin.weight"]
    # a later round keeps the personalised models of clients that did not train in it
    models, _ = strategy.aggregate_train(2, [reply(p, 9.0, EMB[p], 10.0) for p in (1, 2)])
    assert "client0.conv1.lin.weight" in models
    assert array_numpy(models["client1.conv1.lin.weight"])[0] == pytest.approx(9.0)


def test_round_one_sends_nothing(strategy):
    strategy.select([0, 1])
    messages = list(strategy.configure_train(1, ArrayRecord(), ConfigRecord(), None))
    assert all(len(m.content[ARRAYS]) == 0 for m in messages)


def test_cosine_weights_that_sum_to_zero_or_less_stop_the_run():
    from fgl_flower.errors import FGLError

    with pytest.raises(FGLError, match="agg-norm=exp"):
        personalization_weights(
            np.array([[1.0, 0.0], [-1.0, 0.1], [-1.0, -0.1]]), tau=1.0, norm="cosine"
        )
