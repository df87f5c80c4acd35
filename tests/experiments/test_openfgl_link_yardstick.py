"""experiments/baselines/openfgl_link_yardstick.py: the training negatives it exports are fixed
and clash with no positive or held-out negative, its records key every run and are not run
again, the paired interval, and its in-process ReLU-and-dropout variant of ours is undone."""

import json

import numpy as np
import pytest
import torch


@pytest.fixture(scope="module")
def link(experiment_script):
    return experiment_script("baselines/openfgl_link_yardstick.py")


def _split():
    from fgl_flower.datasets.link_splits import split_edges

    gen = torch.Generator().manual_seed(0)
    edges = torch.randint(0, 40, (2, 120), generator=gen)
    return split_edges(edges, 40, (0.8, 0.1, 0.1), [0, 3])


def _keys(pairs, n):
    u, v = pairs.numpy()
    assert (u < v).all()
    return set((u * n + v).tolist())


def test_training_negatives_are_fixed_and_clash_with_nothing(link):
    e = _split()
    neg = link.train_negatives(e, 0, 3)
    assert torch.equal(neg, link.train_negatives(e, 0, 3))
    assert not torch.equal(neg, link.train_negatives(e, 1, 3))
    n = e.num_nodes
    got = _keys(neg, n)
    assert len(got) == neg.size(1) == e.train_pos.size(1)
    taken = set()
    for part in (e.train_pos, e.val_pos, e.test_pos, e.val_neg, e.test_neg):
        taken |= _keys(part, n)
    assert not got & taken


def test_runs_are_recorded_per_side_and_job(link, tmp_path, monkeypatch):
    path = tmp_path / "runs.jsonl"
    records = link.Records(path)
    records.add("fedavg", "Cora", "openfgl", 0, {"test_auc": 83.0, "best_round": 5})
    again = link.Records(path)
    assert again.get("fedavg", "Cora", "openfgl", 0)["test_auc"] == 83.0
    assert again.get("fedavg", "Cora", "ours", 0) is None
    assert again.get("fedavg", "CiteSeer", "openfgl", 0) is None
    monkeypatch.setitem(link.JOB, "num-rounds", 50)
    assert link.Records(path).get("fedavg", "Cora", "openfgl", 0) is None
    assert json.loads(path.read_text())["job"]["task"] == "link"


def test_the_paired_interval(link):
    assert link.paired([85.0, 86.0, 87.0], [84.0, 84.0, 84.0]) == "+2.00 [-0.48, +4.48]"
    assert link.paired([85.0], [84.0]) == "+1.00"


def test_relu_dropout_is_undone(link):
    from fgl_flower.clients import learner

    cls = learner.LinkLearner
    build = cls.__dict__["build"]
    with link.relu_dropout(True):
        assert cls.__dict__["build"] is not build
    assert cls.__dict__["build"] is build


class _Encoder(torch.nn.Linear):
    def forward(self, x, edge_index):
        return super().forward(x)


def test_relu_dropout_wraps_the_encoder(link):
    enc = _Encoder(3, 4)
    model = link.ReluDropout(enc, 0.5).eval()
    x = torch.randn(5, 3)
    assert torch.equal(model(x, None), torch.relu(enc(x, None)))
    assert np.all(model.train()(x, None).detach().numpy() >= 0)
