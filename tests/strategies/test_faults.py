"""Client faults: a round goes on without the clients that failed, within accept-failures."""

import json
import math
from pathlib import Path

import pytest
from faults import fail_partition
from flwr.app import ConfigRecord, Error, Message, MetricRecord, RecordDict
from run_records import rounds

from fgl_flower.client_app import make_app
from fgl_flower.clients.state import ClientState
from fgl_flower.errors import DivergedError
from fgl_flower.inprocess import InProcessGrid
from fgl_flower.parse import parse_run_config
from fgl_flower.server_app import run
from fgl_flower.strategies.grid import ClientFailure, MeteredGrid


def _run(flat, mods, **overrides):
    flat = {**flat, **overrides}
    cfg = parse_run_config(flat)
    return run(InProcessGrid(flat, cfg.num_clients, client_app=make_app(mods)), cfg)


def test_a_round_goes_on_without_a_failed_client_which_comes_back_with_its_state(flat):
    flat.update({"num-rounds": 3, "accept-failures": 1, "method": "local"})
    cfg = parse_run_config(flat)
    grid = InProcessGrid(flat, cfg.num_clients, client_app=make_app([fail_partition(1, {2})]))
    assert run(grid, cfg)["rounds_completed"] == 3
    records = rounds(Path(flat["out-dir"]))
    assert [sorted(r.get("failures", {})) for r in records] == [[], ["1"], []]
    assert "RuntimeError: injected fault (partition 1, round 2)" in records[1]["failures"]["1"]
    assert [r["eval_clients"] for r in records] == [[0, 1, 2], [0, 2], [0, 1, 2]]
    # partition 1 trained in rounds 1 and 3, from the state it kept; the others in all three
    for partition, rounds_trained in ((0, 3), (1, 2), (2, 3)):
        assert _adam_steps(ClientState(grid.context(partition).state)) == {
            rounds_trained * cfg.local_epochs
        }


def _adam_steps(state: ClientState) -> set[int]:
    """The ``step`` counts in a saved Adam state (one per parameter)."""
    meta, packs = state.get_json("learner.optim.meta"), state.load_tensors("learner.optim.tensors")
    offsets, steps = dict.fromkeys(packs, 0), set()
    for name, dtype, shape in meta["layout"]:
        n = math.prod(shape)
        if name.endswith("/step"):
            steps.add(int(packs[dtype][offsets[dtype] : offsets[dtype] + n].item()))
        offsets[dtype] += n
    return steps


def test_more_failures_than_accepted_stop_the_run_naming_round_partition_and_cause(flat):
    with pytest.raises(
        ClientFailure,
        match=r"(?s)Round 2: 1 of 3 clients failed.*accept-failures=0"
        r".*partition 1: RuntimeError: injected fault",
    ):
        _run(flat, [fail_partition(1, {2})], **{"num-rounds": 3})


def test_a_round_where_every_client_fails_stops_the_run(flat):
    mods = [fail_partition(p, {1}) for p in range(3)]
    with pytest.raises(ClientFailure, match="3 of 3 clients failed \\(no reply to go on with\\)"):
        _run(flat, mods, **{"accept-failures": 5})


class _Grid:
    """A grid whose node 11 never answers and whose node 12's message has expired."""

    def get_node_ids(self):
        return [10, 11, 12]

    def send_and_receive(self, messages, timeout=None):
        replies = []
        for m in messages:
            m.metadata.__dict__["_message_id"] = f"m{m.metadata.dst_node_id}"
            if m.metadata.dst_node_id == 10:
                content = RecordDict({"metrics": MetricRecord({"partition-id": 0})})
                replies.append(Message(content, reply_to=m))
            elif m.metadata.dst_node_id == 12:  # Flower's own error, sent by the SuperLink
                reply = Message(Error(code=3, reason="Error: Node Unavailable"), reply_to=m)
                reply.metadata.__dict__["_src_node_id"] = 0
                replies.append(reply)
        return replies


def test_missing_and_superlink_error_replies_are_failures_of_their_partitions(messages):
    grid = MeteredGrid(_Grid(), accept_failures=2)
    grid.partitions = {10: 0, 11: 1, 12: 2}
    msgs = [
        Message(RecordDict({"config": ConfigRecord()}), dst_node_id=n, message_type="train")
        for n in (10, 11, 12)
    ]
    replies = grid.send_and_receive(msgs, timeout=5)
    assert len(replies) == 1
    assert grid.failures == {1: "no reply within 5 s (round-timeout)", 2: "Error: Node Unavailable"}


class _ClaimingGrid:
    """A deployment-like grid (message ids, replies to them) whose node 11 answers in the
    name of partition 0 and whose node 12 names none."""

    def get_node_ids(self):
        return [10, 11, 12]

    def send_and_receive(self, messages, timeout=None):
        replies = []
        for m in messages:
            m.metadata.__dict__["_message_id"] = f"m{m.metadata.dst_node_id}"
            named = {10: {"partition-id": 0}, 11: {"partition-id": 0}, 12: {}}[
                m.metadata.dst_node_id
            ]
            replies.append(
                Message(
                    RecordDict({"metrics": MetricRecord({"train_loss": 1.0, **named})}), reply_to=m
                )
            )
        return replies


def test_a_reply_belongs_to_the_partition_its_node_serves_not_the_one_it_names(messages):
    grid = MeteredGrid(_ClaimingGrid(), accept_failures=2)
    grid.partitions = {10: 0, 11: 1, 12: 2}  # what discovery found
    msgs = [
        Message(RecordDict({"config": ConfigRecord()}), dst_node_id=n, message_type="train")
        for n in (10, 11, 12)
    ]
    replies = grid.send_and_receive(msgs, timeout=5)
    assert [r.metadata.src_node_id for r in replies] == [10]
    assert grid.failures == {
        1: "refused: the reply claims partition 0, but its node serves partition 1",
        2: "refused: the reply names no partition-id",
    }


def _diverging(flat, **overrides):
    # a learning rate far too large for these features: the loss overflows in round 1 or 2
    return {**flat, "num-rounds": 3, "lr": 1e30, "method": "local", **overrides}


def test_a_diverging_client_stops_the_run_with_round_partition_and_cause(flat):
    with pytest.raises(
        DivergedError,
        match=r"Round \d: non-finite values from partition \d: "
        r".*lr=1e\+30.*on-nonfinite=skip",
    ):
        _run(_diverging(flat), [])
    summary = json.loads(open(f"{flat['out-dir']}/summary.json").read())  # strict JSON
    assert "non-finite" in summary["stopped"]


def test_skipped_nonfinite_clients_are_recorded_and_outputs_stay_strict_json(flat):
    """Only partition 0 diverges (its own learning rate is not configurable, so its
    uploads are poisoned by a mod); the others go on."""

    def poison(msg, context, call_next):
        reply = call_next(msg, context)
        if int(context.node_config["partition-id"]) == 0 and msg.metadata.message_type == "train":
            reply.content["metrics"]["train_loss"] = float("nan")
        return reply

    summary = _run(flat, [poison], **{"num-rounds": 2, "method": "local", "on-nonfinite": "skip"})
    records = rounds(Path(flat["out-dir"]))
    assert [r["nonfinite"] for r in records] == [{"0": "train_loss=nan"}] * 2
    assert all(r["eval_clients"] == [1, 2] for r in records)
    assert summary["rounds_completed"] == 2
    for path in ("rounds.jsonl", "summary.json", "config.json"):
        text = open(f"{flat['out-dir']}/{path}").read()
        for line in text.splitlines() if path.endswith("l") else [text]:
            json.loads(line, parse_constant=lambda c: pytest.fail(f"{path} holds {c}"))


def test_model_selection_ignores_rounds_with_nonfinite_metrics():
    from fgl_flower.results import summarize_rounds

    records = [
        {"round": 1, "eval": {"val_loss": 0.9, "val_acc": 0.5}},
        {"round": 2, "eval": {"val_loss": float("nan"), "val_acc": float("nan")}},
        {"round": 3, "eval": {"val_loss": 0.7, "val_acc": 0.6}},
    ]
    assert summarize_rounds(records, "val_loss")["best_val"]["round"] == 3
    assert summarize_rounds(records, "val_acc")["best_val"]["round"] == 3
    assert "val_loss" not in summarize_rounds(records, "val_acc")["last"]  # a NaN in the tail


class _JoiningGrid:
    """Nodes 10 and 11 serve partitions 0 and 1; node 12 joins claiming partition 1."""

    def __init__(self, live):
        self.live = live

    def get_node_ids(self):
        return self.live

    def send_and_receive(self, messages, timeout=None):
        return [
            Message(
                RecordDict({"config": ConfigRecord({"partition-id": 1, "num-partitions": 2})}),
                reply_to=m,
            )
            for m in messages
            if m.metadata.dst_node_id == 12
        ]


def test_a_joining_node_takes_over_a_partition_only_when_its_node_is_gone(messages):
    """A restarted SuperNode gets its partition back; a second node claiming a partition
    whose node is still connected is ignored (it could otherwise hold two partitions)."""
    grid = MeteredGrid(_JoiningGrid([10, 11, 12]))
    grid.partitions = {10: 0, 11: 1}
    assert grid.rediscover({0: 10, 1: 11}, 2, 5) == {0: 10, 1: 11}
    grid = MeteredGrid(_JoiningGrid([10, 12]))
    grid.partitions = {10: 0, 11: 1}
    assert grid.rediscover({0: 10, 1: 11}, 2, 5) == {0: 10, 1: 12}
    assert grid.partitions == {10: 0, 12: 1}
