import math

import pytest
import torch
from sklearn.metrics import f1_score

from fgl_flower.metrics import classification_metrics, macro_f1, summarize_clients


def test_macro_f1_matches_sklearn():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 5, (200,), generator=g)
    p = torch.where(torch.rand(200, generator=g) < 0.6, y, torch.randint(0, 5, (200,), generator=g))
    p[p == 4] = 3  # class 4 present in labels only
    assert macro_f1(p, y, 6) == pytest.approx(f1_score(y, p, average="macro"))


def test_classification_metrics_by_hand():
    logits = torch.tensor([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0]])
    y = torch.tensor([0, 1, 1])
    m = classification_metrics(logits, y, 2)
    assert m["acc"] == pytest.approx(2 / 3)
    assert m["loss"] == pytest.approx(float(torch.nn.functional.cross_entropy(logits, y)))


def test_summarize_clients_by_hand():
    vals = [
        {"test_acc": 0.5, "num-test": 10, "test_loss": 1.0},
        {"test_acc": 1.0, "num-test": 30, "test_loss": 3.0},
    ]
    s = summarize_clients(
        vals, ["test_acc", "test_loss"], {"test_acc": "num-test", "test_loss": "num-test"}
    )
    assert s["test_acc"] == pytest.approx((0.5 * 10 + 1.0 * 30) / 40)
    assert s["test_acc_mean"] == pytest.approx(0.75)
    assert s["test_acc_std"] == pytest.approx(0.25)
    assert s["test_acc_worst"] == 0.5
    assert s["test_loss_worst"] == 3.0  # worst loss is the highest
    assert math.isclose(s["test_loss"], 2.5)


def test_minority_accuracy_excludes_the_majority_class():
    from fgl_flower.metrics import majority_class, minority_metrics

    assert majority_class(torch.tensor([2, 2, 1, 0, 2]), 3) == 2
    assert majority_class(torch.tensor([1, 0]), 3) == 0  # ties: lowest class
    target = torch.tensor([0, 1, 1, 2, 2])
    logits = torch.nn.functional.one_hot(torch.tensor([0, 1, 0, 2, 0]), 3).float()
    res = minority_metrics(logits, target, majority=1)  # minority nodes: 0, 3, 4
    assert res == {"minority_acc": 2 / 3, "minority_count": 3.0}
    assert minority_metrics(logits, torch.ones(5, dtype=torch.long), 1)["minority_count"] == 0


def test_pooled_minority_is_weighted_by_minority_counts():
    clients = [
        {"test_minority_acc": 0.5, "num-test-minority": 10.0},
        {"test_minority_acc": 1.0, "num-test-minority": 30.0},
    ]
    out = summarize_clients(
        clients, ["test_minority_acc"], {"test_minority_acc": "num-test-minority"}
    )
    assert out["test_minority_acc"] == pytest.approx((5 + 30) / 40)


def test_eval_weight_client_counts_every_client_once():
    clients = [{"val_acc": 0.5, "num-val": 10.0}, {"val_acc": 1.0, "num-val": 30.0}]
    out = summarize_clients(clients, ["val_acc"], {"val_acc": None})
    assert out["val_acc"] == out["val_acc_mean"] == pytest.approx(0.75)
    assert summarize_clients(clients, ["val_acc"], {"val_acc": "num-val"})[
        "val_acc"
    ] == pytest.approx(0.875)


def test_clients_without_minority_test_nodes_do_not_drag_mean_and_worst_to_zero():
    clients = [
        {"test_minority_acc": 0.8, "num-test-minority": 10.0, "num-local": 50.0},
        {"test_minority_acc": 0.0, "num-test-minority": 0.0, "num-local": 50.0},
        {"test_minority_acc": 0.6, "num-test-minority": 30.0, "num-local": 50.0},
    ]
    counts = {"test_minority_acc": "num-test-minority"}
    for weights in (counts, {"test_minority_acc": "num-local"}):  # eval-weight split / client-size
        out = summarize_clients(clients, ["test_minority_acc"], weights, count_key=counts)
        assert out["test_minority_acc_mean"] == pytest.approx(0.7)
        assert out["test_minority_acc_worst"] == pytest.approx(0.6)
    assert summarize_clients(clients[1:2], ["test_minority_acc"], counts, count_key=counts) == {}


def test_best_round_by_val_loss_is_the_lowest():
    from fgl_flower.results import summarize_rounds

    rounds = [
        {"round": i, "eval": {"val_acc": a, "val_loss": l, "test_acc": t}}
        for i, (a, l, t) in enumerate([(0.5, 0.9, 0.1), (0.9, 0.5, 0.2), (0.8, 0.3, 0.3)], 1)
    ]
    assert summarize_rounds(rounds, "val_acc")["best_val"]["round"] == 2
    best = summarize_rounds(rounds, "val_loss")["best_val"]
    assert best["round"] == 3 and best["selected_by"] == "val_loss"
