"""FedTGP's server: the adaptive margin and the contrastive loss by hand, the trained
prototypes pulled to their classes, and the trainable prototypes checkpointed."""

import math

import numpy as np
import pytest
import torch
from flwr.app import Message, MessageType, MetricRecord, RecordDict

from fgl_flower.methods.fedtgp import PROTOTYPES
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import METRICS, NUM_EXAMPLES, PARTITION_ID
from fgl_flower.records import torch_record
from fgl_flower.strategies.fedtgp import FedTGPStrategy, adaptive_margin, contrastive_loss


def test_the_margin_by_hand():
    """Class means (0, 0), (3, 0), (0, 4): nearest-other distances 3, 3, 4 -> max 4, capped."""
    x = torch.tensor([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0], [0.0, 4.0]])
    y = torch.tensor([0, 1, 2, 2])
    assert adaptive_margin(x, y, 100.0) == pytest.approx(4.0)
    assert adaptive_margin(x, y, 2.5) == 2.5
    assert adaptive_margin(x[:1], y[:1], 100.0) == 0.0


def test_the_contrastive_loss_by_hand():
    """One upload (0, 0) of class 0, prototypes (1, 0) and (0, 2): distances 1 and 2; with
    margin 1 the logits are -(1 + 1), -2: CE = log 2; without, -1, -2: log(1 + e^-1)."""
    x, y = torch.zeros(1, 2), torch.tensor([0])
    p = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    assert float(contrastive_loss(x, y, p, 1.0)) == pytest.approx(math.log(2))
    assert float(contrastive_loss(x, y, p, 0.0)) == pytest.approx(math.log(1 + math.exp(-1)))


def reply(pid, protos, counts):
    content = RecordDict(
        {
            PROTOTYPES: torch_record(
                {
                    "prototypes": torch.tensor(protos, dtype=torch.float32),
                    "counts": torch.tensor(counts),
                }
            ),
            METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: 1.0}),
        }
    )
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


def test_trained_prototypes_sit_by_their_classes_and_resume(flat, messages):
    """Two clients, classes at (5, 0) and (0, 5) (client 1 lacks class 1): after training each
    trained prototype is nearest its own class's uploads; a restored server trains on from
    the same parameters."""
    flat.update(
        {"method": "fedtgp", "hidden": 2, "fedtgp.server-epochs": 50, "fedtgp.server-lr": 0.1}
    )
    s = FedTGPStrategy(parse_run_config(flat))
    replies = [
        reply(0, [[5.0, 0.0], [0.0, 5.0]], [3, 2]),
        reply(1, [[5.2, 0.1], [0.0, 0.0]], [4, 0]),
    ]
    s.aggregate_train(1, replies)
    p = s.prototypes
    assert np.linalg.norm(p[0] - [5, 0]) < np.linalg.norm(p[0] - [0, 5])
    assert np.linalg.norm(p[1] - [0, 5]) < np.linalg.norm(p[1] - [5, 0])
    assert s.present.tolist() == [1, 1]
    records = s.checkpoint_records(1, torch_record({}), None)
    fresh = FedTGPStrategy(parse_run_config(flat))
    fresh.restore(records)
    s.aggregate_train(2, replies)
    fresh.aggregate_train(2, replies)
    assert fresh.prototypes.tolist() == s.prototypes.tolist()


def test_classes_a_client_lacks_do_not_train_the_prototypes(flat, messages):
    """A client's row with count 0 (here a far-away vector) is not training data: the trained
    prototypes are the same whatever that row holds."""
    flat.update({"method": "fedtgp", "hidden": 2, "fedtgp.server-epochs": 5})
    out = []
    for junk in ([0.0, 0.0], [100.0, -100.0]):
        s = FedTGPStrategy(parse_run_config(flat))
        s.aggregate_train(
            1, [reply(0, [[5.0, 0.0], [0.0, 5.0]], [3, 2]), reply(1, [[5.2, 0.1], junk], [4, 0])]
        )
        out.append(s.prototypes.tolist())
    assert out[0] == out[1]
