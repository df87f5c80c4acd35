"""What every client checks before it trains."""

import pytest
from flwr.app import RecordDict

from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.clients.state import ClientState
from fgl_flower.datasets import load_client_data
from fgl_flower.errors import FGLError
from fgl_flower.parse import parse_run_config


def _client(split: str) -> FedAvgClient:
    flat = {
        **load_app_defaults(),
        "num-clients": 3,
        "split": split,
        "data.synthetic.num-nodes": 300,
        "progress": False,
    }
    cfg = parse_run_config(flat)
    return FedAvgClient(cfg, load_client_data(cfg.data_config(), 1), ClientState(RecordDict()), 1)


def test_a_client_without_a_training_node_stops_with_the_cause_not_a_nan():
    """The launcher refuses such a split before a run (datasets/class_check.py); a ClientApp
    started some other way (``flwr run`` on a hand-made config) says the same in round 1
    instead of training on an empty loss."""
    _client("0.6,0.2,0.2").check_can_train()
    with pytest.raises(
        FGLError,
        match=r"Partition 1 has no training node \(of its 100; "
        r"split=0.002,0.2,0.798, split-mode=random\)",
    ):
        _client("0.002,0.2,0.798").check_can_train()
