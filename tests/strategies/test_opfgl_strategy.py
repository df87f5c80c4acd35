"""O-pFGL server: sums-only aggregation, pseudo-graph condensation, the one-shot protocol."""

import numpy as np
import pytest
import torch
from run_records import rounds

from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess
from fgl_flower.methods.opfgl import CondenseOptions
from fgl_flower.models.opfgl import (
    LinkPredictor,
    aligned_share,
    condense,
    propagate_dense,
    synthetic_class_sizes,
)
from fgl_flower.parse import parse_run_config
from fgl_flower.strategies.opfgl import clear_sum, hre_share, pooled_statistics


def _client_sums(feats, labels, num_classes):
    out = {"cnt": torch.zeros(num_classes, dtype=torch.float64)}
    out["present"], out["orig_cnt"] = out["cnt"].clone(), out["cnt"].clone()
    out["s1"] = torch.zeros(num_classes, feats.shape[1], dtype=torch.float64)
    out["s2"] = out["s1"].clone()
    out["hre"] = torch.zeros(2, dtype=torch.float64)
    for c in range(num_classes):
        rows = feats[labels == c]
        if len(rows) >= 2:
            out["cnt"][c], out["present"][c], out["orig_cnt"][c] = len(rows), 1, len(rows)
            out["s1"][c], out["s2"][c] = rows.sum(0), (rows**2).sum(0)
    return out


def test_hre_share_is_added_over_labelled_nodes_of_the_summed_uploads():
    a = {"orig_cnt": torch.tensor([3.0, 2.0, 0.0]), "hre": torch.tensor([4.0, 3.0])}
    b = {"orig_cnt": torch.tensor([0.0, 5.0, 10.0]), "hre": torch.tensor([1.0, 1.0])}
    total = {k: a[k] + b[k] for k in a}
    assert hre_share(total) == pytest.approx(5 / 20)  # 5 nodes added, 20 labelled
    assert hre_share({"orig_cnt": torch.zeros(3), "hre": torch.zeros(2)}) == 0.0


def test_pooled_statistics_from_sums_equal_eq9_and_central_statistics():
    rng = np.random.default_rng(0)
    clients = [
        (torch.from_numpy(rng.normal(size=(n, 4)) + k), torch.from_numpy(rng.integers(0, 3, n)))
        for k, n in enumerate((30, 12, 50))
    ]
    stats = pooled_statistics(clear_sum([_client_sums(x, y, 3) for x, y in clients]))
    for c in range(3):
        parts = [x[y == c] for x, y in clients if (y == c).sum() >= 2]
        n_c = sum(len(p) for p in parts)
        mu = torch.cat(parts).mean(0)
        # Eq. 9 from per-client means and unbiased stds
        within = sum((len(p) - 1) * p.var(0) for p in parts)
        between = sum(len(p) * (p.mean(0) - mu) ** 2 for p in parts)
        var = (within + between) / (n_c - len(parts))
        torch.testing.assert_close(stats.mean[c], mu)
        torch.testing.assert_close(stats.std[c], var.sqrt())
        # equivalently: the central sum of squares over the pooled nodes
        torch.testing.assert_close(var, ((torch.cat(parts) - mu) ** 2).sum(0) / (n_c - len(parts)))
    torch.testing.assert_close(stats.weight.sum(), torch.tensor(1.0, dtype=torch.float64))
    # one client: its own mean and unbiased std
    x, y = clients[0]
    own = pooled_statistics(clear_sum([_client_sums(x, y, 3)]))
    torch.testing.assert_close(own.std[1], x[y == 1].std(0))


def test_server_sees_only_sums():
    a = {
        k: torch.rand(3, 2) if k.startswith("s") else torch.rand(3)
        for k in ("cnt", "present", "orig_cnt", "s1", "s2", "hre")
    }
    b = {k: torch.rand_like(v) for k, v in a.items()}
    total = clear_sum([a, b])
    swapped = clear_sum([{k: a[k] + b[k] for k in a}])  # what a SecAgg protocol would output
    for k in total:
        torch.testing.assert_close(total[k], swapped[k])


def test_link_predictor_pairs_equal_concatenated_mlp_and_adjacency_is_valid():
    torch.manual_seed(0)
    pge = LinkPredictor(5, hidden=8)
    x = torch.randn(4, 5)
    pairs = torch.cat([x.repeat_interleave(4, 0), x.repeat(4, 1)], 1)
    h = torch.relu(pge.bn1(pge.lin1(pairs)))
    ref = pge.lin3(torch.relu(pge.bn2(pge.lin2(h)))).view(4, 4)
    torch.testing.assert_close(pge(x), ref)
    w = pge.adjacency(x, 0.01)
    torch.testing.assert_close(w, w.t())
    assert torch.all(w.diag() == 0)
    nz = w[w > 0]
    assert torch.all((nz >= 0.01) & (nz <= 1))


def test_pseudo_graph_matches_aggregated_class_statistics():
    rng = np.random.default_rng(1)
    clients = [
        (
            torch.from_numpy(rng.normal(loc=c % 3, scale=0.5, size=(40, 6))),
            torch.from_numpy(rng.integers(0, 2, 40)),
        )
        for c in range(2)
    ]
    # statistics of [X || A^X] as a client would upload them (here: arbitrary 12-dim rows)
    stats = pooled_statistics(clear_sum([_client_sums(x, y, 2) for x, y in clients]))
    sizes = synthetic_class_sizes(stats, per_class=1, rate=0.1)  # ceil(0.1 * ~40) nodes
    assert sizes == [int(np.ceil(0.1 * float(o))) for o in stats.orig_count]
    seen: list[tuple[int, float]] = []
    graph = condense(
        stats,
        sizes,
        num_features=3,
        opts=CondenseOptions(steps=1500, lr_feat=0.05, smoothness_alpha=0.0),
        generator_seed=0,
        progress=lambda t, loss: seen.append((t, loss)),
        progress_every=500,
    )
    assert graph.losses[-1] < 0.05 * graph.losses[0]
    assert seen == [(t, graph.losses[t]) for t in (0, 500, 1000, 1500)]
    w = torch.zeros(graph.y.numel(), graph.y.numel())
    w[graph.edge_index[0], graph.edge_index[1]] = graph.edge_weight
    x_prop = propagate_dense(graph.x, w, hops=1).double()
    for c in range(2):
        rows = x_prop[graph.y == c]
        torch.testing.assert_close(rows.mean(0), stats.mean[c], atol=0.1, rtol=0.05)
        torch.testing.assert_close(rows.std(0), stats.std[c], atol=0.1, rtol=0.1)


@pytest.fixture
def opfgl_flat(flat):
    flat.update(
        {
            "method": "opfgl",
            "num-rounds": 1,
            "split-mode": "stratified",
            "split": "0.2,0.4,0.4",
            "dropout": 0.0,
            "opfgl.condense-steps": 30,
            "opfgl.max-steps": 200,
            "opfgl.eval-every": 50,
            "opfgl.patience": 2,
            "opfgl.topk": 1,
            "eval-weight": "client-size",
        }
    )
    return flat


def test_one_shot_one_upload_one_download_per_client(opfgl_flat, tmp_path):
    summary = run_inprocess(opfgl_flat)
    assert summary["rounds_completed"] == 1
    (rec,) = rounds(tmp_path / "run")
    assert rec["upload"]["messages"] == 3 and rec["download"]["messages"] == 3
    stats, pers = rec["phases"]["stats"], rec["phases"]["personalize"]
    # the statistics request and the metric reply carry no payload beyond a few config values
    assert stats["bytes_down"] < 1000 * 3 and pers["bytes_up"] < 2000 * 3
    # (the metric reply also carries the four client probes)
    assert (
        stats["bytes_up"] > 10 * stats["bytes_down"] and pers["bytes_down"] > 2 * pers["bytes_up"]
    )
    assert rec["messages_down"] == rec["messages_up"] == 6  # request+graph down, stats+metrics up
    assert set(rec["clients"]) == {"0", "1", "2"}
    assert "global_test_acc" in rec["eval"] and 0 <= summary["final"]["test_f1_all"] <= 1
    again = run_inprocess(dict(opfgl_flat, **{"out-dir": str(tmp_path / "b")}))
    assert again["final"] == summary["final"]  # deterministic


def test_client_size_weighting_uses_node_counts(opfgl_flat, tmp_path):
    run_inprocess(opfgl_flat)
    (rec,) = rounds(tmp_path / "run")
    clients = rec["clients"].values()
    expect = sum(c["num-local"] * c["test_acc"] for c in clients) / sum(
        c["num-local"] for c in clients
    )
    assert rec["eval"]["test_acc"] == pytest.approx(expect)


@pytest.mark.parametrize(
    "bad, msg",
    [
        ({"num-rounds": 3}, "num-rounds=1"),
        ({"opfgl.variant": "x"}, "variant"),
        ({"opfgl.lp-alpha": 2.0}, "lp-alpha"),
    ],
)
def test_bad_options_fail_before_start(opfgl_flat, bad, msg):
    with pytest.raises(ConfigError, match=msg):
        parse_run_config(dict(opfgl_flat, **bad))


def test_paper_variant_is_selectable_and_differs(opfgl_flat, tmp_path):
    official = run_inprocess(opfgl_flat)
    paper = run_inprocess(
        dict(opfgl_flat, **{"opfgl.variant": "paper", "out-dir": str(tmp_path / "p")})
    )
    assert paper["final"]["test_acc"] != official["final"]["test_acc"]


def test_aligned_share_counts_the_pseudo_nodes_of_classes_with_statistics():
    """With rate = 0 a class nobody sent statistics for still gets its node (it stays noise):
    the client-side coverage cannot see that, pseudo.aligned does."""
    rng = np.random.default_rng(0)
    clients = [
        (torch.from_numpy(rng.normal(size=(20, 6))), torch.from_numpy(rng.integers(0, 2, 20)))
        for _ in range(2)
    ]  # classes 0 and 1 only; class 2 nowhere
    stats = pooled_statistics(clear_sum([_client_sums(x, y, 3) for x, y in clients]))
    sizes = synthetic_class_sizes(stats, per_class=2, rate=0.0)
    assert sizes == [2, 2, 2]
    labels = torch.repeat_interleave(torch.arange(3), torch.tensor(sizes))
    assert aligned_share(stats, labels) == pytest.approx(2 / 3)
    assert (
        aligned_share(stats, labels[labels < 2]) == 1.0 and aligned_share(stats, labels[:0]) == 0.0
    )
