"""SCAFFOLD's client on real data (Cora, Louvain, 10 clients, plain SGD): round 1 is FedAvg's
(c = c_i = 0) to the digit, later rounds are not, the correction is of the gradient's order,
and every Delta c_i passes the server's recomputation (no client refused)."""

import pytest
from run_records import probe, rounds

from fgl_flower.inprocess import run_inprocess


@pytest.fixture
def cora(flat, data_root):
    flat.update(
        {
            "dataset": "Cora",
            "data-root": str(data_root),
            "partition": "louvain",
            "num-clients": 10,
            "num-rounds": 3,
            "optimizer": "sgd",
            "lr": 0.5,
            "local-epochs": 5,
        }
    )
    return flat


def test_the_control_variates_correct_the_local_steps(cora, tmp_path):
    run_inprocess({**cora, "method": "fedavg", "out-dir": str(tmp_path / "fedavg")})
    run_inprocess({**cora, "method": "scaffold"})
    fedavg, scaffold = rounds(tmp_path / "fedavg"), rounds(tmp_path / "run")
    assert all("failures" not in r for r in scaffold)
    loss = lambda recs: [r["train"]["train_loss"] for r in recs]  # noqa: E731
    assert loss(scaffold)[0] == loss(fedavg)[0]  # round 1: no correction yet
    assert fedavg[0]["eval"] == scaffold[0]["eval"]  # ... and the same mean
    assert loss(scaffold)[1] != loss(fedavg)[1]
    assert probe(scaffold[0], "scaffold.correction") == 0.0
    for r in scaffold[1:]:
        # c - c_i is of the local gradient's order under this heterogeneity, not a rounding
        assert 0.1 < probe(r, "scaffold.correction") < 10
    assert all(probe(r, "scaffold.control-norm") > 0.01 for r in scaffold)
