"""Link metrics against scikit-learn (AUC, AP) and plain brute-force references (Hits@K as
OGB's evaluator, MRR with OGB's tie rule, BCE)."""

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, roc_auc_score

from fgl_flower.link_metrics import link_metrics


def hits_reference(pos, neg, k):
    """OGB linkproppred: 1 if fewer than k negatives, else the share of positives above
    the k-th highest negative score."""
    if len(neg) < k:
        return 1.0
    kth = sorted(neg, reverse=True)[k - 1]
    return sum(1 for s in pos if s > kth) / len(pos)


def mrr_reference(pos, neg):
    """Mean of 1 / rank, rank = 1 + (#neg above + #neg at least as high) / 2."""
    total = 0.0
    for s in pos:
        optimistic = sum(1 for t in neg if t > s)
        pessimistic = sum(1 for t in neg if t >= s)
        total += 1.0 / (1 + 0.5 * (optimistic + pessimistic))
    return total / len(pos)


def softplus(x):
    """log(1 + e^x), written so that large |x| does not overflow."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def bce_reference(pos, neg):
    """-log sigmoid(s) for positives, -log(1 - sigmoid(t)) for negatives, averaged."""
    terms = [softplus(-s) for s in pos] + [softplus(t) for t in neg]
    return sum(terms) / len(terms)


def _random_scores(seed, p, q, levels):
    """Scores on a coarse grid, so ties within and across positives and negatives abound."""
    g = torch.Generator().manual_seed(seed)
    pos = torch.randint(0, levels, (p,), generator=g).float() / 4 - 1
    neg = torch.randint(0, levels, (q,), generator=g).float() / 4 - 1.5
    return pos, neg


@pytest.mark.parametrize("seed", range(40))
def test_equal_to_sklearn_and_references(seed):
    rng = np.random.default_rng(seed)
    p, q = int(rng.integers(1, 60)), int(rng.integers(1, 150))
    levels = int(rng.choice([2, 5, 20, 10_000]))
    pos, neg = _random_scores(seed, p, q, levels)
    ks = (1, 3, 10, 50, 100)
    m = link_metrics(pos, neg, ks=ks)
    y = np.r_[np.ones(p), np.zeros(q)]
    s = np.r_[pos.numpy(), neg.numpy()]
    assert m["auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert m["ap"] == pytest.approx(average_precision_score(y, s), abs=1e-12)
    pl, nl = pos.tolist(), neg.tolist()
    for k in ks:
        assert m[f"hits@{k}"] == pytest.approx(hits_reference(pl, nl, k), abs=1e-12)
    assert m["mrr"] == pytest.approx(mrr_reference(pl, nl), abs=1e-12)
    assert m["loss"] == pytest.approx(bce_reference(pl, nl), rel=1e-9)
    assert set(m) == {"auc", "ap", "mrr", "loss"} | {f"hits@{k}" for k in ks}


def test_hand_worked_example():
    pos = torch.tensor([3.0, 1.0, 0.0])
    neg = torch.tensor([2.0, 1.0, -1.0, -2.0])
    m = link_metrics(pos, neg, ks=(1, 2, 5))
    # pairs won (ties 1/2): 4 + (2 + 0.5) + 2 = 8.5 of 12
    assert m["auc"] == pytest.approx(8.5 / 12)
    # ranks: 1, 1 + (1 + 2) / 2 = 2.5, 3
    assert m["mrr"] == pytest.approx((1 + 1 / 2.5 + 1 / 3) / 3)
    # hits@1: above 2 -> 1 of 3; hits@2: above 1 (strictly) -> 1 of 3; 4 negatives < 5 -> 1
    assert (m["hits@1"], m["hits@2"], m["hits@5"]) == (
        pytest.approx(1 / 3),
        pytest.approx(1 / 3),
        1.0,
    )
    # thresholds 3: P 1/1; 2: (no positive); 1: TP 2 of 4; 0: TP 3 of 5
    assert m["ap"] == pytest.approx((1 + 2 / 4 + 3 / 5) / 3)


def test_perfect_and_reversed_rankings():
    pos, neg = torch.arange(10.0, 20.0), torch.arange(0.0, 10.0)
    best, worst = link_metrics(pos, neg, ks=(5,)), link_metrics(neg, pos, ks=(5,))
    assert best["auc"] == best["ap"] == best["mrr"] == best["hits@5"] == 1.0
    assert worst["auc"] == worst["hits@5"] == 0.0
    assert worst["mrr"] == pytest.approx(1 / 11)


def test_all_tied_scores():
    m = link_metrics(torch.zeros(4), torch.zeros(6), ks=(3,))
    assert m["auc"] == 0.5 and m["ap"] == pytest.approx(0.4)  # the base rate
    assert m["hits@3"] == 0.0 and m["mrr"] == pytest.approx(1 / 4)  # rank 1 + (0 + 6) / 2
    assert m["loss"] == pytest.approx(math.log(2))


def test_empty_inputs_are_zero():
    ks = (10,)
    none = link_metrics(torch.empty(0), torch.empty(0), ks=ks)
    assert none == {"auc": 0.0, "ap": 0.0, "mrr": 0.0, "hits@10": 0.0, "loss": 0.0}
    only_pos = link_metrics(torch.tensor([0.0, 0.0]), torch.empty(0), ks=ks)
    assert only_pos["auc"] == only_pos["hits@10"] == only_pos["mrr"] == 0.0
    assert only_pos["loss"] == pytest.approx(math.log(2))
    only_neg = link_metrics(torch.empty(0), torch.tensor([1.0]), ks=ks)
    assert only_neg["ap"] == 0.0 and only_neg["loss"] == pytest.approx(math.log1p(math.e))


def test_accepts_any_shape_device_dtype_and_gradients():
    pos = torch.tensor([[0.5], [2.0]], requires_grad=True)
    neg = torch.tensor([0.1, -0.3], dtype=torch.float16)
    m = link_metrics(pos, neg, ks=(1,))
    assert m["auc"] == 1.0 and all(isinstance(v, float) for v in m.values())
