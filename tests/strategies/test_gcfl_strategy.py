"""GCFL's server: the split rule on synthetic updates, cluster-wise averaging, GCFL's
accuracy rule, and a whole run with its clusters resumed."""

import json

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, Message, MessageType, MetricRecord, RecordDict

from fgl_flower.config import parse_run_config
from fgl_flower.inprocess import run_inprocess
from fgl_flower.protocol import ARRAYS, METRICS, NUM_EXAMPLES, PARTITION_ID
from fgl_flower.strategies.gcfl import GCFLStrategy, min_cut_split, similarity


def reply(pid: int, w: np.ndarray, n: float = 10.0, **metrics) -> Message:
    content = RecordDict({ARRAYS: ArrayRecord({"w": Array(w.astype(np.float32))}),
                          METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: n, **metrics})})
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


@pytest.fixture
def strategy(flat, messages):
    flat.update({"method": "gcfl", "num-clients": 4})
    return GCFLStrategy(parse_run_config(flat))


def opposite_updates(scale: float = 0.2, seed: int = 0) -> list[np.ndarray]:
    """Clients 0, 1 move along +d, clients 2, 3 along -d (plus small noise): the mean
    update is nearly 0 while each is large, the case GCFL splits."""
    rng = np.random.default_rng(seed)
    d = rng.normal(size=50)
    d *= scale / np.linalg.norm(d)
    return [s * d + 1e-4 * rng.normal(size=50) for s in (1, 1, -1, -1)]


def test_opposite_updates_split_the_cluster_by_min_cut(strategy):
    base = np.ones(50)
    strategy.aggregate_train(1, [reply(p, base) for p in range(4)])  # cluster 0 holds `base`
    assert strategy.clusters.tolist() == [0, 0, 0, 0]
    ups = opposite_updates()
    n = [10.0, 30.0, 20.0, 20.0]
    arrays, _ = strategy.aggregate_train(21, [reply(p, base + ups[p], n[p]) for p in range(4)])
    assert strategy.clusters.tolist() == [0, 0, 1, 1]
    record = strategy.round_record(21)
    assert record["clusters"] == [[0, 1], [2, 3]]
    [norms] = record["update_norms"]  # what the rule read, for the one cluster before the split
    assert norms["mean_norm"] < 0.01 and norms["max_norm"] == pytest.approx(0.2, rel=1e-2)
    assert strategy.splits == [{"cluster": 0, "kept": [0, 1], "new_cluster": 1, "moved": [2, 3]}]
    c0 = arrays["cluster0.w"].numpy()  # each side averages its own uploads, weighted
    np.testing.assert_allclose(c0, base + (10 * ups[0] + 30 * ups[1]) / 40, rtol=1e-6)
    np.testing.assert_allclose(arrays["cluster1.w"].numpy(), base + (ups[2] + ups[3]) / 2, rtol=1e-6)


@pytest.mark.parametrize("case", ["too early", "agreeing", "small updates", "missing client"])
def test_no_split_unless_every_condition_holds(strategy, case):
    base = np.zeros(50)
    strategy.aggregate_train(1, [reply(p, base) for p in range(4)])
    ups = opposite_updates(scale=0.01 if case == "small updates" else 0.2)
    if case == "agreeing":
        ups = [np.abs(u) for u in ups]
    rnd = 20 if case == "too early" else 30
    pids = range(3) if case == "missing client" else range(4)
    strategy.aggregate_train(rnd, [reply(p, base + ups[p]) for p in pids])
    assert strategy.clusters.tolist() == [0, 0, 0, 0] and strategy.splits == []


def test_min_cut_of_two_similarity_blocks():
    ups = np.stack(opposite_updates())
    assert min_cut_split(similarity(ups)) == ([0, 1], [2, 3])
    assert np.allclose(np.diag(similarity(ups)), 2.0)


def test_gcfl_accuracy_rule_keeps_the_best_cached_at_a_split(strategy):
    base = np.zeros(50)
    strategy.aggregate_train(1, [reply(p, base) for p in range(4)])
    before = [reply(p, base, **{"test_acc": 0.9, "num-test": 10.0}) for p in range(4)]
    strategy.aggregate_evaluate(20, before)  # the last evaluation before the split
    ups = opposite_updates()
    strategy.aggregate_train(21, [reply(p, base + ups[p]) for p in range(4)])
    after = [reply(p, base, **{"test_acc": 0.5 + 0.1 * p, "num-test": 10.0}) for p in range(4)]
    metrics = strategy.aggregate_evaluate(21, after)
    assert metrics["test_acc_mean"] == pytest.approx(0.65)
    assert metrics["test_acc_gcfl_mean"] == pytest.approx(0.9)


def test_a_run_splits_and_resumes_with_its_clusters(flat, tmp_path):
    """With a split forced early (eps1 large, eps2 0), the run's clusters, the cluster
    models and GCFL's cache survive an interruption."""
    from test_resume import digest, interrupted

    flat.update({"method": "gcfl", "num-clients": 4, "num-rounds": 5, "gcfl.split-after": 1,
                 "gcfl.eps1": 100.0, "gcfl.eps2": 0.0})
    run_inprocess({**flat, "out-dir": str(tmp_path / "whole")})
    rounds = [json.loads(line) for line in (tmp_path / "whole" / "rounds.jsonl").read_text().splitlines()]
    assert rounds[0]["clusters"] == [[0, 1, 2, 3]]
    assert "splits" in rounds[1] and len(rounds[-1]["clusters"]) >= 2
    flat["out-dir"] = str(tmp_path / "resumed")
    interrupted(flat, fail_round=4)
    run_inprocess({**flat, "resume": True})
    assert digest(tmp_path / "resumed") == digest(tmp_path / "whole")
    resumed = [json.loads(line) for line in (tmp_path / "resumed" / "rounds.jsonl").read_text().splitlines()]
    assert [r["clusters"] for r in resumed] == [r["clusters"] for r in rounds]
