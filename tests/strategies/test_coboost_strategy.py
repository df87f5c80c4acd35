"""Co-Boost: the hard-sample weighting and the ensemble boosting on hand-worked cases, one round
end to end, and the one-shot rule."""

import json

import pytest
import torch

from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess
from fgl_flower.parse import parse_run_config
from fgl_flower.strategies.coboost import CoBoostStrategy

SMALL = {"method": "coboost", "num-rounds": 1, "coboost.epochs": 4, "coboost.g-steps": 3,
         "coboost.num-gen": 16, "coboost.topk": 3}


def strategy(flat, **more):
    return CoBoostStrategy(parse_run_config({**flat, **SMALL, **more}))


class Fixed(torch.nn.Module):
    """A 'model' that returns fixed logits whatever the graph."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits

    def forward(self, x, edges):
        return self.logits


def test_a_node_the_ensemble_already_gets_right_adds_no_cross_entropy(flat):
    s = strategy(flat, **{"coboost.adv": 0.0})
    t = torch.tensor([[20.0, -20.0], [0.0, 0.0]])  # node 0: p(target 0) ~ 1; node 1: p = 0.5
    targets = torch.tensor([0, 0])
    expected = (0.5 * torch.log(torch.tensor(2.0))) / 2  # (1 - 0.5) * CE(node 1), mean over 2
    assert float(s.generator_loss(t, t, targets)) == pytest.approx(float(expected), rel=1e-4)


def test_the_ensemble_weights_move_towards_the_client_that_is_right(flat):
    s = strategy(flat, **{"coboost.mu": 0.1, "coboost.wdc": 1.0})
    right, wrong = Fixed(torch.tensor([[5.0, 0.0]])), Fixed(torch.tensor([[0.0, 5.0]]))
    s.weights = torch.full((2,), 0.5)  # as distill starts: 1/K each
    pool = [{"x": None, "edges": None, "targets": torch.tensor([0])}]
    s.after_synthesis(0, [right, wrong], pool)
    assert s.weights.tolist() == [0.5, 0.5]  # not in the first epoch
    s.after_synthesis(1, [right, wrong], pool)
    assert s.weights.tolist() == pytest.approx([0.6, 0.4])  # one signed step of mu
    for epoch in range(2, 40):
        s.after_synthesis(epoch, [right, wrong], pool)
    assert s.weights.tolist() == [1.0, 0.0]  # kept in [0, 1]


def test_one_round_boosts_the_ensemble_and_records_the_probes(flat, tmp_path):
    flat.update(SMALL)
    summary = run_inprocess(flat)
    rec = json.loads((tmp_path / "run" / "rounds.jsonl").read_text().splitlines()[0])
    assert set(rec["probes"]) == {"dense.teacher-fit", "dense.agreement", "coboost.weight-spread"}
    assert rec["probes"]["coboost.weight-spread"]["mean"] > 0
    assert 0 < summary["final"]["test_acc"] <= 1


def test_coboost_is_one_shot(flat):
    with pytest.raises(ConfigError, match="one-shot"):
        parse_run_config({**flat, **SMALL, "num-rounds": 2})
