"""FedFA client: the round's running statistic means restart from 0 and 1 (the paper's
Algorithm 1) or go on from the server's (the official code), and the upload carries them."""

import pytest
import torch
from flwr.app import ConfigRecord, RecordDict

from fgl_flower.clients.fedfa import FedFAClient
from fgl_flower.clients.state import ClientState
from fgl_flower.datasets import load_client_data
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, CONFIG, SERVER_ROUND
from fgl_flower.records import record_torch, torch_record


@pytest.mark.parametrize("statistics", ["reset", "carried"])
def test_the_running_means_restart_or_carry_on(flat, statistics):
    """The server sends running means of 5 and 7; with momentum 0.5 and two augmented
    forwards the upload is 0.25 start + 0.75 (this client's statistics): from (0, 1) when
    reset, from (5, 7) when carried."""
    flat.update(
        {
            "method": "fedfa",
            "model": "acmgcn",
            "local-epochs": 2,
            "fedfa.prob": 1.0,
            "fedfa.momentum": 0.5,
            "fedfa.statistics": statistics,
        }
    )
    cfg = parse_run_config(flat)
    client = FedFAClient(cfg, load_client_data(cfg.data_config(), 0), ClientState(RecordDict()), 0)
    sent = {k: v.clone() for k, v in client.learner.model.state_dict().items()}
    sent["ffa.running_mean"].fill_(5.0)
    sent["ffa.running_std"].fill_(7.0)
    seen = []
    stats = client.learner.model.ffa.statistics
    client.learner.model.ffa.statistics = lambda h, adj: seen.append(stats(h, adj)) or seen[-1]
    content = RecordDict({ARRAYS: torch_record(sent), CONFIG: ConfigRecord({SERVER_ROUND: 2})})
    up = record_torch(client.train(content, 2)[ARRAYS])
    seen = seen[:2]  # the local epochs' (a first reply also counts FLOPs on a copy of the model)
    mean_start, std_start = (0.0, 1.0) if statistics == "reset" else (5.0, 7.0)
    want_mean = 0.25 * mean_start + 0.25 * seen[0][0].mean(0) + 0.5 * seen[1][0].mean(0)
    want_std = 0.25 * std_start + 0.25 * seen[0][1].mean(0) + 0.5 * seen[1][1].mean(0)
    assert torch.allclose(up["ffa.running_mean"], want_mean.detach(), atol=1e-5)
    assert torch.allclose(up["ffa.running_std"], want_std.detach(), atol=1e-5)
