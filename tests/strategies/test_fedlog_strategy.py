"""FedLoG's server: the class-rate weights, the global synthetic nodes (permuted, weighted per
class), the per-class generators built once, what the next round carries, and a last round
without uploads."""

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict

from fgl_flower.methods.fedlog import CLASS_GENERATORS, GENERATOR, GLOBAL, SYNTHETIC
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, METRICS, NUM_EXAMPLES, PARTITION_ID
from fgl_flower.records import record_torch, torch_record
from fgl_flower.strategies.fedlog import FedLoGStrategy, class_weights, global_synthetic


def test_class_weights_by_hand():
    """Class 0: rates 0.2 and 0.6 -> 1/4, 3/4; class 1: nobody -> 1/2 each."""
    w = class_weights(np.array([[0.2, 0.0], [0.6, 0.0]]))
    assert w.ravel().tolist() == pytest.approx([0.25, 0.5, 0.75, 0.5])


def test_global_synthetic_weights_permuted_slots_per_class():
    # 2 clients, 2 classes, k = 2 slots, F = 1: client m's slot j of class c holds 10 m + 2 c + j
    syn = np.array([[[[0.0], [1.0]], [[2.0], [3.0]]], [[[10.0], [11.0]], [[12.0], [13.0]]]])
    rates = np.array([[1.0, 0.0], [1.0, 1.0]])  # class 0: half each; class 1: client 1 only
    perms = np.array([[1, 0], [0, 1]])  # client 0's slots swapped, in every class
    out = global_synthetic(syn, rates, perms)
    assert out[:, :, 0].tolist() == [[0.5 * 1 + 0.5 * 10, 0.5 * 0 + 0.5 * 11], [12.0, 13.0]]


def reply(
    pid: int, syn_value: float, rates: list[float], gen_value: float | None, k: int = 2, upload=True
) -> Message:
    c = len(rates)
    content = RecordDict(
        {
            ARRAYS: torch_record({"embedder.w": torch.tensor([syn_value])})
            if upload
            else ArrayRecord(),
            METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: 1.0}),
        }
    )
    if upload:
        content[SYNTHETIC] = torch_record(
            {
                "syn-head": torch.full((c * k, 3), syn_value),
                "syn-tail": torch.zeros(c * k, 3),
                "class-rate": torch.tensor(rates, dtype=torch.float64),
            }
        )
    if gen_value is not None:
        content[GENERATOR] = torch_record(
            {"fc.weight": torch.full((2, 2), gen_value), "fc.bias": torch.full((2,), gen_value)}
        )
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


def strategy(flat, **options) -> FedLoGStrategy:
    flat.update(
        {
            "method": "fedlog",
            "model": "graphsage",
            "fedlog.num-proto": 2,
            "num-rounds": 3,
            **{f"fedlog.{k}": v for k, v in options.items()},
        }
    )
    s = FedLoGStrategy(parse_run_config(flat))
    s.node_ids = [7]  # one selected node to send to
    return s


def test_aggregation_builds_the_global_nodes_and_the_class_generators_once(flat, messages):
    s = strategy(flat)
    mean, _ = s.aggregate_train(1, [reply(0, 1.0, [1.0, 0.0], 2.0), reply(1, 3.0, [1.0, 3.0], 6.0)])
    assert record_torch(mean)["embedder.w"].tolist() == [
        2.0
    ]  # FedAvg's mean of the reported weights
    # (each client reports 1 under FedLoG's default agg-weight = uniform: the code's plain mean)
    # class 0: (1 + 3) / 2; class 1: client 1 only
    assert s.global_x[:, 0].tolist() == [2.0, 2.0, 3.0, 3.0] and s.global_y.tolist() == [0, 0, 1, 1]
    # generators per class: class 0 -> (2 + 6) / 2 = 4, class 1 -> 6 (client 1 alone)
    assert s.generators.shape == (2, 6) and s.generators[:, 0].tolist() == [4.0, 6.0]
    s.aggregate_train(2, [reply(0, 1.0, [1.0, 0.0], 100.0), reply(1, 3.0, [1.0, 3.0], 100.0)])
    assert s.generators[:, 0].tolist() == [4.0, 6.0]  # built from the first round only
    content = list(s.configure_train(3, mean, ConfigRecord(), None))[0].content
    assert set(content) >= {GLOBAL, CLASS_GENERATORS}
    assert record_torch(content[GLOBAL])["x"].shape == (4, 3)


def test_the_codes_generators_are_not_sent_and_round_one_sends_no_global(flat, messages):
    s = strategy(flat, generators="official")
    content = list(s.configure_train(1, ArrayRecord(), ConfigRecord(), None))[0].content
    assert GLOBAL not in content and CLASS_GENERATORS not in content
    s.aggregate_train(1, [reply(0, 1.0, [1.0, 0.0], 2.0), reply(1, 3.0, [1.0, 3.0], 6.0)])
    content = list(s.configure_train(2, ArrayRecord(), ConfigRecord(), None))[0].content
    assert GLOBAL in content and CLASS_GENERATORS not in content


def test_each_client_s_slots_are_permuted(flat, messages):
    """One client: the global nodes of each class are its k = 6 slots in the seeded
    permutation's order (not the identity for this seed), the same for every class."""
    s = strategy(flat, **{"num-proto": 6})
    slots = torch.arange(12.0).view(12, 1).expand(12, 3)
    msg = reply(0, 0.0, [1.0, 0.0], None, k=6)
    msg.content[SYNTHETIC] = torch_record(
        {
            "syn-head": slots.clone(),
            "syn-tail": slots.clone(),
            "class-rate": torch.tensor([1.0, 0.0], dtype=torch.float64),
        }
    )
    s.aggregate_train(1, [msg])
    order = s.global_x[:6, 0].tolist()
    assert sorted(order) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and order != sorted(order)
    # class 1 (no client trains on it: weight 1/M) follows the same permutation
    assert s.global_x[6:, 0].tolist() == [v + 6 for v in order]


def test_a_round_without_uploads_keeps_the_model(flat, messages):
    s = strategy(flat)
    arrays, metrics = s.aggregate_train(3, [reply(0, 1.0, [1.0, 0.0], None, upload=False)])
    assert arrays is None and metrics is not None
