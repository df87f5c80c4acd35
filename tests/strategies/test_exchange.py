"""One metered exchange: its replies, cost and failures, and how the round loop and O-pFGL
book them (the round's record; a phase of the one shot)."""

import math

import pytest
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from fgl_flower.errors import DivergedError
from fgl_flower.parse import parse_run_config
from fgl_flower.strategies.base import FGLStrategy
from fgl_flower.strategies.exchange import TRAFFIC, exchange, failure_list
from fgl_flower.strategies.grid import ClientFailure, MeteredGrid
from fgl_flower.strategies.opfgl import OPFGLStrategy
from fgl_flower.strategies.run_state import RunState

NODES = {0: 10, 1: 11, 2: 12}  # partition id -> node id


class _Grid:
    """Nodes 10, 11, 12 serving partitions 0, 1, 2, each replying with its metrics
    (``losses[partition]`` as its train loss), in reverse order."""

    def __init__(self, losses=(1.0, 1.0, 1.0)) -> None:
        self.losses = losses

    def get_node_ids(self):
        return list(NODES.values())

    def send_and_receive(self, messages, timeout=None):
        replies = []
        for m in messages:
            m.metadata.__dict__["_message_id"] = f"m{m.metadata.dst_node_id}"
            pid = m.metadata.dst_node_id - 10
            metrics = {"partition-id": pid, "num-examples": 10, "train_loss": self.losses[pid]}
            replies.append(Message(RecordDict({"metrics": MetricRecord(metrics)}), reply_to=m))
        return replies[::-1]


def _metered(accept_failures=0, **grid) -> MeteredGrid:
    metered = MeteredGrid(_Grid(**grid), accept_failures=accept_failures)
    metered.partitions = {n: p for p, n in NODES.items()}
    return metered


def _train(nodes=NODES.values()) -> list[Message]:
    content = RecordDict({"config": ConfigRecord({"server-round": 1})})
    return [Message(content, dst_node_id=n, message_type="train") for n in nodes]


def _pids(replies) -> list[int]:
    return [int(r.content["metrics"]["partition-id"]) for r in replies]


def test_an_exchange_reports_sorted_replies_cost_and_no_failure(messages):
    seen = {}

    def received(replies):
        seen["received"] = _pids(replies)
        return replies[1:]

    def screen(sent, replies):
        seen["screened"] = (len(sent), _pids(replies))
        return {}

    done = exchange(_metered(), _train(), screen, timeout=5, prefix="Round 1: ", received=received)
    assert _pids(done.replies) == [1, 2]
    assert seen == {"received": [0, 1, 2], "screened": (3, [1, 2])}  # received, then screened
    assert sorted(done.traffic) == sorted(TRAFFIC)
    assert done.traffic["messages_down"] == done.traffic["messages_up"] == 3
    assert done.traffic["bytes_down"] > 0 and done.traffic["bytes_up"] > 0
    assert done.time_s >= 0 and done.failures == {}


def test_a_refused_reply_is_a_failure_whose_traffic_still_counts(messages):
    done = exchange(
        _metered(accept_failures=1), _train(), lambda s, r: {1: "bad"}, timeout=5, prefix="x"
    )
    assert _pids(done.replies) == [0, 2]
    assert done.failures == {1: "refused: bad"}
    assert done.traffic["messages_up"] == 3
    assert failure_list(done.failures) == "partition 1: refused: bad"


def test_too_many_failures_raise_with_the_callers_prefix(messages):
    with pytest.raises(ClientFailure, match=r"^Round 7: 1 of 3 clients failed \(accept-failures=0"):
        exchange(_metered(), _train(), lambda s, r: {2: "bad"}, timeout=5, prefix="Round 7: ")


def _run(strategy, metered) -> RunState:
    strategy.nodes, strategy.node_ids = dict(NODES), list(NODES.values())
    return RunState(metered, ArrayRecord(), 1, 5.0, ConfigRecord(), ConfigRecord())


def test_the_round_loop_adds_each_exchange_into_the_round_record(flat, messages):
    strategy = FGLStrategy(parse_run_config({**flat, "accept-failures": 1}))
    run = _run(strategy, _metered(accept_failures=1))
    record = {"round": 2}
    strategy.round_exchange(run, record, _train())
    first = {k: record[k] for k in TRAFFIC}
    assert first["messages_down"] == 3 and not run.lost_nodes
    strategy.screen = lambda rnd, sent, replies: {0: f"round {rnd}"}
    replies = strategy.round_exchange(run, record, _train())
    assert _pids(replies) == [1, 2]
    assert {k: record[k] for k in TRAFFIC} == {k: 2 * v for k, v in first.items()}
    assert record["time_s"] > 0
    assert record["failures"] == {"0": "refused: round 2"} and run.lost_nodes


def test_the_round_loop_drops_non_finite_replies_and_o_pfgl_keeps_them(flat, messages):
    """The round loop's exchanges leave out non-finite replies (``on-nonfinite=skip``) or
    stop; O-pFGL's phases do neither, as before the exchange was shared."""
    strategy = FGLStrategy(parse_run_config({**flat, "on-nonfinite": "skip"}))
    run = _run(strategy, _metered(losses=(1.0, math.nan, 1.0)))
    record = {"round": 1}
    assert _pids(strategy.round_exchange(run, record, _train())) == [0, 2]
    assert record["nonfinite"] == {"1": "train_loss=nan"}
    stop = FGLStrategy(parse_run_config({**flat, "on-nonfinite": "stop"}))
    with pytest.raises(DivergedError, match="Round 1: non-finite values from partition 1"):
        stop.round_exchange(
            _run(stop, _metered(losses=(1.0, math.nan, 1.0))), {"round": 1}, _train()
        )

    opfgl = OPFGLStrategy(parse_run_config({**flat, "method": "opfgl", "num-rounds": 1}))
    run = _run(opfgl, _metered(losses=(1.0, math.nan, 1.0)))
    phases, failures = {}, {}
    assert _pids(opfgl.phase_exchange(run, "personalize", _train(), phases, failures)) == [0, 1, 2]
    assert failures == {}


def test_an_o_pfgl_phase_keeps_its_cost_and_names_itself_in_failures(flat, messages):
    cfg = parse_run_config({**flat, "method": "opfgl", "num-rounds": 1, "accept-failures": 1})
    opfgl = OPFGLStrategy(cfg)
    run = _run(opfgl, _metered(accept_failures=1))
    opfgl.screen = lambda rnd, sent, replies: {2: f"round {rnd}"}
    phases, failures = {}, {}
    assert _pids(opfgl.phase_exchange(run, "stats", _train(), phases, failures)) == [0, 1]
    assert sorted(phases["stats"]) == sorted(("time_s", *TRAFFIC))
    assert phases["stats"]["messages_up"] == 3
    assert failures == {"2": "stats: refused: round 1"}
    run.metered.accept_failures = 0
    with pytest.raises(ClientFailure, match=r"^O-pFGL personalize phase: 1 of 3 clients failed"):
        opfgl.phase_exchange(run, "personalize", _train(), phases, failures)
