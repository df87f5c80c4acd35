"""The server checkpoint's records: what goes in comes back, and only under the same config."""

import json

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord

from fgl_flower.errors import ConfigError
from fgl_flower.parse import parse_run_config
from fgl_flower.strategies.base import FGLStrategy
from fgl_flower.strategies.server_state import (
    RESUMABLE_KEYS,
    ServerState,
    config_changes,
    pack_state,
    unpack_state,
)


def _state(**overrides) -> ServerState:
    arrays = ArrayRecord({"w": Array(np.arange(6, dtype=np.float32).reshape(2, 3))})
    return ServerState(
        **{
            "round": 4,
            "arrays": arrays,
            "config": {"lr": 0.1, "seed": 0, "out-dir": "/a"},
            "pending": {"round": 4, "train": {"train_loss": 0.5}, "_arrays": arrays},
            "attributes": {
                "proxies": np.ones((2, 2)),
                "centres": torch.arange(3.0),
                "unset": None,
            },
            "probes_dead": [["latent.nonempty", "1", 0.0]],
            **overrides,
        }
    )


def test_what_is_packed_comes_back():
    records = pack_state(_state())
    assert sorted(records) == ["arrays", "config", "strategy.centres", "strategy.proxies"]
    meta = json.loads(records["config"]["json"])
    assert list(meta) == ["round", "config", "pending", "kinds", "probes_dead"]
    assert "_arrays" not in meta["pending"]  # the arrays are stored once
    assert meta["kinds"] == {"proxies": "numpy", "centres": "torch"}

    back = unpack_state(records, {"lr": 0.1, "seed": 0, "out-dir": "/b"})
    assert back.round == 4
    assert np.array_equal(back.arrays["w"].numpy(), np.arange(6).reshape(2, 3))
    assert back.pending["train"] == {"train_loss": 0.5}
    assert back.pending["_arrays"] is back.arrays
    assert sorted(back.attributes) == ["centres", "proxies"]  # None was not kept
    assert isinstance(back.attributes["proxies"], np.ndarray)
    assert torch.equal(back.attributes["centres"], torch.arange(3.0))
    assert back.probes_dead == [["latent.nonempty", "1", 0.0]]


def test_no_pending_round_stays_none():
    back = unpack_state(pack_state(_state(pending=None)), {"lr": 0.1, "seed": 0})
    assert back.pending is None


def test_another_config_is_refused_naming_the_keys_but_where_it_runs_may_change():
    records = pack_state(_state())
    with pytest.raises(
        ConfigError,
        match=r"another config; differing keys: lr \(0\.1 in the checkpoint, 0\.2 now\), "
        r"model \(None in the checkpoint, 'gat' now\)",
    ):
        unpack_state(records, {"lr": 0.2, "seed": 0, "model": "gat"})
    assert {"resume", "device", "out-dir", "accept-failures"} <= RESUMABLE_KEYS
    assert config_changes({"device": "cpu", "lr": 1}, {"device": "cuda", "lr": 1}) == []


class _Proxies(FGLStrategy):
    checkpointed = ("proxies",)

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.proxies = None


def test_the_strategy_methods_delegate_and_set_its_attributes(flat):
    strategy = _Proxies(parse_run_config(flat))
    strategy.proxies = torch.tensor([1.0, 2.0])
    records = strategy.checkpoint_records(2, ArrayRecord(), None)
    fresh = _Proxies(parse_run_config({**flat, "resume": True}))
    assert fresh.restore(records)[::2] == (2, None)
    assert torch.equal(fresh.proxies, torch.tensor([1.0, 2.0]))
    with pytest.raises(ConfigError, match="differing keys: lr"):
        _Proxies(parse_run_config({**flat, "lr": 0.5})).restore(records)
