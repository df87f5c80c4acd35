"""Co-Boost: the hard-sample weighting and the ensemble boosting on hand-worked cases, one round
end to end, and the one-shot rule."""

import pytest
import torch
from run_records import rounds

from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess
from fgl_flower.parse import parse_run_config
from fgl_flower.strategies.coboost import CoBoostStrategy

SMALL = {
    "method": "coboost",
    "num-rounds": 1,
    "coboost.epochs": 4,
    "coboost.g-steps": 3,
    "coboost.num-gen": 16,
    "coboost.topk": 3,
}


def strategy(flat, **more):
    return CoBoostStrategy(parse_run_config({**flat, **SMALL, **more}))


def test_a_node_the_ensemble_already_gets_right_adds_no_cross_entropy(flat):
    s = strategy(flat, **{"coboost.adv": 0.0})
    t = torch.tensor([[20.0, -20.0], [0.0, 0.0]])  # node 0: p(target 0) ~ 1; node 1: p = 0.5
    targets = torch.tensor([0, 0])
    expected = (0.5 * torch.log(torch.tensor(2.0))) / 2  # (1 - 0.5) * CE(node 1), mean over 2
    assert float(s.generator_loss(t, t, targets)) == pytest.approx(float(expected), rel=1e-4)


def test_only_the_weights_proportions_count(flat):
    """The code's WEnsemble divides by the weights' sum: scaling them changes no logit."""
    s = strategy(flat)
    clients = torch.tensor([[[4.0, 0.0]], [[0.0, 2.0]]])  # [K=2, n=1, C=2]
    s.weights = torch.tensor([0.2, 0.6])
    assert s.combine(clients)[0].tolist() == pytest.approx([1.0, 1.5])
    s.weights = torch.tensor([0.1, 0.3])
    assert s.combine(clients)[0].tolist() == pytest.approx([1.0, 1.5])


def test_the_ensemble_weights_move_towards_the_client_that_is_right(flat):
    """With w = (1/2, 1/2) the teacher is (2.5, 2.5); CE's gradient (-1/2, 1/2) on it gives
    dCE/dw = (f_k - teacher) . (-1/2, 1/2) / sum w = -2.5 for the right client, +2.5 for the
    wrong one: one signed step of mu each way."""
    s = strategy(flat, **{"coboost.mu": 0.1, "coboost.wdc": 1.0})
    s._order = torch.Generator().manual_seed(0)
    s.weights = torch.full((2,), 0.5)  # as distill starts: 1/K each
    pool = [{"clients": torch.tensor([[[5.0, 0.0]], [[0.0, 5.0]]]), "targets": torch.tensor([0])}]
    s.after_synthesis(0, [], pool)
    assert s.weights.tolist() == [0.5, 0.5]  # not in the first epoch
    s.after_synthesis(1, [], pool)
    assert s.weights.tolist() == pytest.approx([0.6, 0.4])
    for epoch in range(2, 40):
        s.after_synthesis(epoch, [], pool)
    assert s.weights.tolist() == [1.0, 0.0]  # kept in [0, 1]


def test_one_step_per_batch_of_pooled_nodes(flat):
    """Two pooled graphs of num-gen nodes: two signed steps an epoch (the code's loader over
    the pool, batches of the synthesis size)."""
    s = strategy(
        flat, **{"coboost.mu": 0.1, "coboost.wdc": 1.0, "coboost.num-gen": 2, "coboost.topk": 1}
    )
    s._order = torch.Generator().manual_seed(0)
    s.weights = torch.full((2,), 0.5)
    graph = {
        "clients": torch.tensor([[[5.0, 0.0]] * 2, [[0.0, 5.0]] * 2]),
        "targets": torch.tensor([0, 0]),
    }
    s.after_synthesis(1, [], [graph, graph])
    assert s.weights.tolist() == pytest.approx([0.7, 0.3])


class Linear(torch.nn.Module):
    def __init__(self, f, c):
        super().__init__()
        self.lin = torch.nn.Linear(f, c)

    def forward(self, x, edges):
        return self.lin(x)


def test_the_weights_move_before_the_epochs_graph_joins_the_pool(flat):
    """The code adjusts the weights on the earlier epochs' data, then adds the new batch."""
    seen = []

    class Spy(CoBoostStrategy):
        def after_synthesis(self, epoch, teachers, pool):
            seen.append(len(pool))
            super().after_synthesis(epoch, teachers, pool)

    s = Spy(parse_run_config({**flat, **SMALL}))
    torch.manual_seed(0)
    s.distill(1, [Linear(5, 3).requires_grad_(False) for _ in range(2)], Linear(5, 3), (5, 3))
    assert seen == [0, 1, 2, 3]


def test_one_round_boosts_the_ensemble_and_records_the_probes(flat, tmp_path):
    flat.update(SMALL)
    summary = run_inprocess(flat)
    rec = rounds(tmp_path / "run")[0]
    assert set(rec["probes"]) == {
        "dense.teacher-fit",
        "dense.pool-fit",
        "dense.agreement",
        "dense.live-units",
        "coboost.weight-spread",
        "coboost.effective-clients",
        "coboost.target-sharpness",
    }
    assert rec["probes"]["coboost.weight-spread"]["mean"] > 0
    assert 1 <= rec["probes"]["coboost.effective-clients"]["mean"] <= 3  # SMALL's 3 clients
    assert 0 < summary["final"]["test_acc"] <= 1


def test_coboost_is_one_shot(flat):
    with pytest.raises(ConfigError, match="one-shot"):
        parse_run_config({**flat, **SMALL, "num-rounds": 2})
