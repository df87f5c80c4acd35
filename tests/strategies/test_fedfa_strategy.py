"""FedFA's server: FedAvg's mean plus the client-sharing variance of the running statistic
means, per channel (the paper) or as one scalar (the official code)."""

import numpy as np
import pytest
import torch
from flwr.app import Message, MessageType, MetricRecord, RecordDict

from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, METRICS, NUM_EXAMPLES, PARTITION_ID
from fgl_flower.records import record_torch, torch_record
from fgl_flower.strategies.fedfa import FedFAStrategy, sharing_variance


def test_sharing_variance_by_hand():
    """Statistics (0, 2) and (2, 2): per channel the population variance (1, 0); the scalar
    is the unbiased variance of the four numbers, 3/3 = 1, on every channel."""
    stats = np.array([[0.0, 2.0], [2.0, 2.0]], dtype=np.float32)
    assert sharing_variance(stats, "channel").tolist() == [1.0, 0.0]
    assert sharing_variance(stats, "scalar").tolist() == [1.0, 1.0]


def reply(pid: int, w: float, mean: list[float], n: float, extra: dict | None = None) -> Message:
    arrays = {
        "backbone.w": torch.tensor([w]),
        "ffa.running_mean": torch.tensor(mean),
        "ffa.running_std": torch.tensor([1.0, 1.0]),
        "ffa.sharing_var_mean": torch.ones(2),
        "ffa.sharing_var_std": torch.ones(2),
        **(extra or {}),
    }
    content = RecordDict(
        {ARRAYS: torch_record(arrays), METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: n})}
    )
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


# channel: variance of (0, 4) and of (1, 1); scalar: of (0, 1, 4, 1), unbiased: 9 / 3
@pytest.mark.parametrize("mode,expected", [("channel", [4.0, 0.0]), ("scalar", [3.0, 3.0])])
def test_the_mean_with_the_sharing_variance(flat, messages, mode, expected):
    flat.update({"method": "fedfa", "model": "acmgcn", "fedfa.sharing": mode})
    s = FedFAStrategy(parse_run_config(flat))
    out, _ = s.aggregate_train(1, [reply(0, 1.0, [0.0, 1.0], 1.0), reply(1, 4.0, [4.0, 1.0], 3.0)])
    t = record_torch(out)
    assert t["backbone.w"].tolist() == [3.25]  # FedAvg's weighted mean
    assert t["ffa.running_mean"].tolist() == [3.0, 1.0]  # averaged too, as the official server does
    assert t["ffa.sharing_var_mean"].tolist() == pytest.approx(expected)
    assert t["ffa.sharing_var_std"].tolist() == [0.0, 0.0]
    assert list(t) == [
        "backbone.w",
        "ffa.running_mean",
        "ffa.running_std",
        "ffa.sharing_var_mean",
        "ffa.sharing_var_std",
    ]


def test_one_client_leaves_the_variance_as_it_was(flat, messages):
    flat.update({"method": "fedfa", "model": "acmgcn"})
    s = FedFAStrategy(parse_run_config(flat))
    out, _ = s.aggregate_train(1, [reply(0, 1.0, [0.0, 1.0], 1.0)])
    assert record_torch(out)["ffa.sharing_var_mean"].tolist() == [1.0, 1.0]


def test_a_batch_norm_running_mean_is_only_averaged(flat, messages):
    """A backbone BatchNorm's ``running_mean`` has no sharing variance beside it: FedAvg's mean,
    and no ``sharing_var_mean`` key is made up for it."""
    flat.update({"method": "fedfa", "model": "acmgcn"})
    s = FedFAStrategy(parse_run_config(flat))
    out, _ = s.aggregate_train(
        1,
        [
            reply(0, 1.0, [0.0, 1.0], 1.0, {"bn.running_mean": torch.tensor([2.0])}),
            reply(1, 4.0, [4.0, 1.0], 1.0, {"bn.running_mean": torch.tensor([4.0])}),
        ],
    )
    t = record_torch(out)
    assert t["bn.running_mean"].tolist() == [3.0]
    assert "bn.sharing_var_mean" not in t
    assert t["ffa.sharing_var_mean"].tolist() == [4.0, 0.0]
