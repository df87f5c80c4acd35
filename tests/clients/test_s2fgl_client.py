"""S2FGL client and server in-process: FedAvg equivalence, gating, payloads, config checks."""

import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, RecordDict
from run_records import rounds

from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.clients.s2fgl import PROTOTYPES, REPOSITORY, S2FGLClient
from fgl_flower.clients.state import ClientState
from fgl_flower.datasets import load_client_data
from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, CONFIG, METRICS, NUM_EXAMPLES, SERVER_ROUND

ACM = {
    "model": "acmgcn",
    "hidden": 16,
    "dropout": 0.1,
    "optimizer": "sgd",
    "lr": 0.2,
    "weight-decay": 0.0,
    "local-epochs": 4,
    "keep-optimizer-state": False,
    "num-rounds": 3,
    "agg-weight": "local",
    "eval-weight": "client-size",
}


def test_both_switches_off_equals_fedavg_with_the_same_seed(flat, tmp_path):
    flat.update(ACM)
    flat.update({"method": "s2fgl", "s2fgl.lambda1": 0.0, "s2fgl.lambda2": 0.0})
    run_inprocess(flat)
    defaults = load_app_defaults()  # s2fgl's options back to their defaults: fedavg has none
    flat.update(
        {
            "method": "fedavg",
            "out-dir": str(tmp_path / "fedavg"),
            **{k: defaults[k] for k in ("s2fgl.lambda1", "s2fgl.lambda2")},
        }
    )
    run_inprocess(flat)
    ours, fedavg = rounds(tmp_path / "run"), rounds(tmp_path / "fedavg")
    assert [r["eval"] for r in ours] == [r["eval"] for r in fedavg]
    assert [r["train"]["train_loss"] for r in ours] == [r["train"]["train_loss"] for r in fedavg]


def test_auxiliary_losses_start_in_round_two_and_change_the_model(flat, tmp_path):
    flat.update(ACM)
    flat.update({"method": "s2fgl"})
    run_inprocess(flat)
    recs = rounds(tmp_path / "run")
    assert recs[0]["train"]["fkd_loss"] == recs[0]["train"]["fgma_loss"] == 0.0
    assert all(r["train"]["fkd_loss"] > 0 and r["train"]["fgma_loss"] > 0 for r in recs[1:])
    # Round 1 is plain FedAvg; later rounds differ from FedAvg.
    flat.update({"method": "fedavg", "out-dir": str(tmp_path / "fedavg")})
    run_inprocess(flat)
    fedavg = rounds(tmp_path / "fedavg")
    assert recs[0]["eval"] == fedavg[0]["eval"] and recs[2]["eval"] != fedavg[2]["eval"]
    # The repository goes down from round 2: more bytes than round 1.
    assert recs[1]["bytes_down"] > recs[0]["bytes_down"]


def test_reply_carries_model_and_prototypes_weighted_by_node_count(flat):
    flat.update(ACM)
    flat.update({"method": "s2fgl"})
    cfg = parse_run_config(flat)
    data = load_client_data(cfg.data_config(), 0)
    state = ClientState(RecordDict())
    client = S2FGLClient(cfg, data, state, 0)
    content = RecordDict({ARRAYS: ArrayRecord(), CONFIG: ConfigRecord({SERVER_ROUND: 1})})
    reply = client.train(content, 1)
    protos = reply.array_records[PROTOTYPES].to_torch_state_dict()
    assert protos["prototypes"].shape == (data.num_classes, 16)
    assert protos["counts"].sum() == data.data.num_nodes // 3
    assert not any(k.startswith("prototypes") for k in reply.array_records[ARRAYS].keys())
    assert reply.metric_records[METRICS][NUM_EXAMPLES] == data.data.num_nodes
    # Round 2 with a repository: node sets come from the state, the extra losses are on.
    content[REPOSITORY] = ArrayRecord({"anchors": torch.randn(4 * data.num_classes, 16)})
    content[ARRAYS] = reply.array_records[ARRAYS]
    reply2 = S2FGLClient(cfg, data, state, 0).train(content, 2)
    assert reply2.metric_records[METRICS]["fkd_loss"] > 0


@pytest.mark.parametrize(
    "override, message",
    [
        ({"model": "gcn"}, "embed"),
        ({"s2fgl.start-round": 1}, "start-round"),
        ({"s2fgl.eig-mode": "arpack"}, "eig-mode"),
        ({"s2fgl.lambda1": -1.0}, "non-negative"),
        ({"s2fgl.anchor-fraction": 0.0}, "anchor-fraction"),
    ],
)
def test_bad_options_stop_before_the_run(flat, override, message):
    flat.update(ACM)
    flat.update({"method": "s2fgl", **override})
    with pytest.raises(ConfigError, match=message):
        parse_run_config(flat)


def test_eval_dropout_evaluates_in_train_mode_reproducibly(flat):
    flat.update(ACM)
    flat.update({"method": "s2fgl", "dropout": 0.5})
    content = RecordDict({ARRAYS: ArrayRecord(), CONFIG: ConfigRecord({SERVER_ROUND: 1})})

    def evaluate(eval_dropout, server_round=1):
        cfg = parse_run_config({**flat, "s2fgl.eval-dropout": eval_dropout})
        client = S2FGLClient(
            cfg, load_client_data(cfg.data_config(), 0), ClientState(RecordDict()), 0
        )
        return dict(client.evaluate(content, server_round).metric_records[METRICS])

    clean = evaluate(False)
    assert clean == evaluate(False, 2)  # eval mode: no randomness
    noisy = evaluate(True)
    assert noisy != clean and noisy == evaluate(True) and noisy != evaluate(True, 2)
