"""GCFL's server: the split rule on synthetic updates, cluster-wise averaging, GCFL's
accuracy rule, a whole run with its clusters resumed, GCFL+ (DTW of gradient-norm
sequences), the cluster probe, and the node thresholds on real Chameleon data."""

import json

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, Message, MessageType, MetricRecord, RecordDict
from run_records import rounds

from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess
from fgl_flower.methods.gcfl import GRAD_NORM, GCFLOptions, check_config
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import ARRAYS, METRICS, NUM_EXAMPLES, PARTITION_ID
from fgl_flower.strategies.gcfl import GCFLStrategy, dtw, dtw_distances, min_cut_split, similarity


def reply(pid: int, w: np.ndarray, n: float = 10.0, **metrics) -> Message:
    content = RecordDict(
        {
            ARRAYS: ArrayRecord({"w": Array(w.astype(np.float32))}),
            METRICS: MetricRecord({PARTITION_ID: pid, NUM_EXAMPLES: n, **metrics}),
        }
    )
    return Message(content=content, dst_node_id=1, message_type=MessageType.TRAIN)


@pytest.fixture
def strategy(flat, messages):
    # the synthetic data is a node task: pin its thresholds to the graph defaults these
    # synthetic updates (norm 0.2) were written for
    flat.update({"method": "gcfl", "num-clients": 4, "gcfl.eps1-node": 0.05, "gcfl.eps2-node": 0.1})
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
    np.testing.assert_allclose(
        arrays["cluster1.w"].numpy(), base + (ups[2] + ups[3]) / 2, rtol=1e-6
    )


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
    # what the round records per client (rounds.jsonl, final_clients) carries it too
    assert {m["test_acc_gcfl"] for m in strategy.eval_client_metrics(after).values()} == {0.9}


def test_a_run_splits_and_resumes_with_its_clusters(flat, tmp_path):
    """With a split forced early (eps1 large, eps2 0), the run's clusters, the cluster
    models and GCFL's cache survive an interruption."""
    from faults import interrupted
    from run_records import digest

    flat.update(
        {
            "method": "gcfl",
            "num-clients": 4,
            "num-rounds": 5,
            "gcfl.split-after": 1,
            "gcfl.eps1-node": 100.0,
            "gcfl.eps2-node": 0.0,
        }
    )  # synthetic data: a node task
    run_inprocess({**flat, "out-dir": str(tmp_path / "whole")})
    records = rounds(tmp_path / "whole")
    assert records[0]["clusters"] == [[0, 1, 2, 3]]
    assert "splits" in records[1] and len(records[-1]["clusters"]) >= 2
    assert all("test_acc_gcfl" in m for r in records[1:] for m in r["clients"].values())
    summary = json.loads((tmp_path / "whole" / "summary.json").read_text())
    assert all("test_acc_gcfl" in m for m in summary["final_clients"].values())
    flat["out-dir"] = str(tmp_path / "resumed")
    interrupted(flat, fail_round=4)
    run_inprocess({**flat, "resume": True})
    assert digest(tmp_path / "resumed") == digest(tmp_path / "whole")
    resumed = rounds(tmp_path / "resumed")
    assert [r["clusters"] for r in resumed] == [r["clusters"] for r in records]


# -- GCFL+: DTW distances of gradient-norm sequences ---------------------------------------


def test_dtw_of_hand_worked_sequences():
    """C[i,j] = (a_i - b_j)^2 + min(C[i-1,j-1], C[i-1,j], C[i,j-1]), distance sqrt(C[n,m])."""
    # a = (1, 3, 4), b = (2, 2, 5): squared differences [[1, 1, 16], [1, 1, 4], [4, 4, 1]],
    # C = [[1, 2, 18], [2, 2, 6], [6, 6, 3]]
    assert dtw([1, 3, 4], [2, 2, 5]) == pytest.approx(np.sqrt(3))
    assert dtw([2, 2, 5], [1, 3, 4]) == pytest.approx(np.sqrt(3))
    assert dtw([0, 0, 1], [0, 1, 1]) == 0.0  # a shifted step aligns (Euclidean: 1)
    assert dtw([0, 1, 2], [0, 2]) == pytest.approx(1.0)  # unequal lengths
    d = dtw_distances(np.array([[1, 3, 4], [2, 2, 5], [1, 3, 4]]))
    np.testing.assert_allclose(
        d, [[0, np.sqrt(3), 0], [np.sqrt(3), 0, np.sqrt(3)], [0, np.sqrt(3), 0]]
    )
    # standardized: only the trend counts (a sequence and its double coincide)
    assert dtw_distances(np.array([[1.0, 2, 3], [2, 4, 6]]), standardize=True)[
        0, 1
    ] == pytest.approx(0.0)


@pytest.fixture
def plus(flat, messages):
    flat.update(
        {
            "method": "gcfl",
            "num-clients": 4,
            "gcfl.variant": "gcfl+",
            "gcfl.seq-length": 5,
            "gcfl.eps1-node": 0.05,
            "gcfl.eps2-node": 0.1,
        }
    )
    return GCFLStrategy(parse_run_config(flat))


#: Gradient norms: clients 0, 1 rise, clients 2, 3 fall.
SEQUENCES = np.array(
    [
        [1.0, 2.0, 3.0, 4.0, 5.0],
        [1.1, 2.1, 2.9, 4.2, 5.0],
        [5.0, 4.0, 3.0, 2.0, 1.0],
        [5.0, 4.1, 3.0, 1.9, 1.1],
    ]
)


def plus_reply(pid: int, w: np.ndarray, rnd: int) -> Message:
    return reply(pid, w, **{GRAD_NORM: float(SEQUENCES[pid, rnd])})


@pytest.mark.parametrize("entries", [5, 4])
def test_gcfl_plus_splits_by_the_dtw_of_the_sequences(plus, entries):
    """The updates pull {0, 2} against {1, 3} (GCFL's cosine cut), the gradient-norm
    sequences group {0, 1} against {2, 3}: GCFL+ cuts by the sequences, once every client of
    the cluster has seq-length entries, and then starts them afresh."""
    base = np.ones(50)
    first = 5 - entries
    for i, rnd in enumerate(range(1 + first, 5)):  # no update yet, then zero updates
        plus.aggregate_train(rnd, [plus_reply(p, base, first + i) for p in range(4)])
    d = opposite_updates()
    ups = [d[0], d[2], d[1], d[3]]  # 0, 2 along +d; 1, 3 along -d
    assert min_cut_split(similarity(np.stack(ups))) == ([0, 2], [1, 3])
    plus.aggregate_train(21, [plus_reply(p, base + ups[p], 4) for p in range(4)])
    record = plus.round_record(21)
    assert record["seq_norms"] == {str(p): pytest.approx(SEQUENCES[p, 4]) for p in range(4)}
    if entries < 5:  # the rule holds but the sequences are too short
        assert plus.clusters.tolist() == [0, 0, 0, 0] and plus.splits == []
        assert plus.seq_count.tolist() == [4] * 4
        return
    assert plus.clusters.tolist() == [0, 0, 1, 1]
    [split] = record["splits"]
    assert (split["kept"], split["moved"]) == ([0, 1], [2, 3])
    np.testing.assert_allclose(split["dtw"], dtw_distances(SEQUENCES), atol=1e-6)
    assert plus.seq_count.tolist() == [0] * 4  # every sequence starts afresh
    assert plus.server_probes(21) == {"clusters": 2.0}


def test_gcfl_plus_update_sequences_and_bad_options(flat, messages):
    """``sequence = "update"`` records the norm of dW (from round 2 on); bad values of the
    new options are refused by name."""
    flat.update(
        {"method": "gcfl", "num-clients": 2, "gcfl.variant": "gcfl+", "gcfl.sequence": "update"}
    )
    s = GCFLStrategy(parse_run_config(flat))
    s.aggregate_train(1, [reply(p, np.zeros(4)) for p in range(2)])
    assert s.seq_count.tolist() == [0, 0]
    s.aggregate_train(2, [reply(p, np.full(4, 0.5 * (p + 1))) for p in range(2)])
    assert s.seq_count.tolist() == [1, 1]
    np.testing.assert_allclose(s.seqs[:, -1], [1.0, 2.0])  # |dW| from the cluster model 0
    for key, value, match in [
        ("gcfl.variant", "gcfl++", "gcfl.variant"),
        ("gcfl.sequence", "loss", "gcfl.sequence"),
        ("gcfl.eps1-node", -0.1, "gcfl.eps1-node"),
        ("gcfl.eps2-node", -1.0, "gcfl.eps2-node"),
        ("gcfl.seq-length", 0, "gcfl.seq-length"),
    ]:
        with pytest.raises(ConfigError, match=match):
            check_config(parse_run_config({**flat, key: value}))


def test_thresholds_by_task(flat):
    o = GCFLOptions.from_config(parse_run_config({**flat, "method": "gcfl"}))
    assert o.thresholds("graph") == (0.05, 0.1)  # FedDense's, unchanged
    assert o.thresholds("node") == (o.eps1_node, o.eps2_node) != (0.05, 0.1)


def test_a_gcfl_plus_run_reports_gradient_norms_and_its_cluster_count(flat, tmp_path):
    """A whole run: the clients report their gradient norms, GCFL+ splits, and every round
    records the number of clusters as the server's probe ``clusters``."""
    flat.update(
        {
            "method": "gcfl",
            "num-clients": 4,
            "num-rounds": 4,
            "gcfl.variant": "gcfl+",
            "gcfl.split-after": 1,
            "gcfl.seq-length": 2,
            "gcfl.eps1-node": 100.0,
            "gcfl.eps2-node": 0.0,
        }
    )
    run_inprocess(flat)
    records = rounds(tmp_path / "run")
    assert all(len(r["seq_norms"]) == 4 and min(r["seq_norms"].values()) > 0 for r in records)
    assert GRAD_NORM in records[0]["train"]
    assert "splits" not in records[0] and "splits" in records[1]  # two entries from round 2 on
    for r in records:
        assert r["probes"]["clusters"]["clients"] == {"server": float(len(r["clusters"]))}
    assert records[0]["probes"]["clusters"]["mean"] == 1.0 and len(records[-1]["clusters"]) >= 2


def test_a_gcfl_plus_run_resumes_with_its_sequences(flat, tmp_path):
    """GCFL+'s sequences are server state: a run interrupted between splits resumes equal."""
    from faults import interrupted
    from run_records import digest

    flat.update(
        {
            "method": "gcfl",
            "num-clients": 6,
            "num-rounds": 6,
            "gcfl.variant": "gcfl+",
            "gcfl.split-after": 1,
            "gcfl.seq-length": 3,
            "gcfl.eps1-node": 100.0,
            "gcfl.eps2-node": 0.0,
        }
    )
    run_inprocess({**flat, "out-dir": str(tmp_path / "whole")})
    records = rounds(tmp_path / "whole")
    assert [r["round"] for r in records if "splits" in r] == [3, 6]  # 3 entries, emptied, 3 more
    flat["out-dir"] = str(tmp_path / "resumed")
    interrupted(flat, fail_round=5)
    run_inprocess({**flat, "resume": True})
    assert digest(tmp_path / "resumed") == digest(tmp_path / "whole")
    resumed = rounds(tmp_path / "resumed")
    assert [(r["clusters"], r.get("splits")) for r in resumed] == [
        (r["clusters"], r.get("splits")) for r in records
    ]


# -- real node data: the node thresholds fire ----------------------------------------------


@pytest.mark.parametrize("variant", ["gcfl", "gcfl+"])
def test_gcfl_splits_on_chameleon_with_the_node_thresholds(data_root, tmp_path, variant):
    """FedHERO's Table 3 setting (Chameleon, METIS, 7 clients, GCN, lr 0.005, one full-batch
    Adam step a round) with the default node thresholds: the cluster of all splits within 48
    rounds (measured: in round 47 for both variants, whose rounds are FedAvg's until then).
    With the graph thresholds 0.05/0.1 GCFL never splits here (mean update norm >= 0.128)."""
    from fgl_flower.app_defaults import load_app_defaults

    flat = load_app_defaults()
    flat.update(
        {
            "method": "gcfl",
            "gcfl.variant": variant,
            "dataset": "chameleon",
            "partition": "metis",
            "num-clients": 7,
            "num-rounds": 48,
            "model": "gcn-concat",
            "hidden": 64,
            "num-layers": 2,
            "dropout": 0.5,
            "lr": 0.005,
            "weight-decay": 5e-4,
            "local-epochs": 1,
            "split-mode": "five-group",
            "eval-weight": "client",
            "data.undirected": True,
            "data-root": str(data_root),
            "progress": False,
            "out-dir": str(tmp_path / "run"),
        }
    )
    run_inprocess(flat)
    records = rounds(tmp_path / "run")
    splits = [r["round"] for r in records if "splits" in r]
    assert splits, "GCFL never split on Chameleon with the node thresholds"
    assert splits[0] > 20  # not before split-after (measured: round 47)
    assert (
        records[0]["probes"]["clusters"]["mean"] == 1.0
        and records[-1]["probes"]["clusters"]["mean"] >= 2
    )


def test_the_other_tasks_thresholds_stop_the_run_instead_of_being_ignored(flat):
    from fgl_flower.methods.gcfl import check_config

    flat.update({"method": "gcfl", "gcfl.eps1": 0.01})  # synthetic: a node task
    with pytest.raises(
        ConfigError, match="gcfl.eps1: for graph-level datasets only.*gcfl.eps1-node"
    ):
        check_config(parse_run_config(flat))
    flat.update({"gcfl.eps1": 0.05, "gcfl.eps2-node": 1.0})
    check_config(parse_run_config(flat))  # the node pair is the one that applies
