"""FedGL's client on real data (Cora, Louvain, 10 clients)."""

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
        }
    )
    return flat


def test_fedgl_on_cora_is_fedavg_plus_live_pseudo_labels(cora, tmp_path):
    """Round 1 is FedAvg's (no pseudo-labels yet); from round 2 most unlabelled nodes carry
    one and their loss enters training; ssl-weight 0 is FedAvg to the digit."""
    run_inprocess({**cora, "method": "fedavg", "out-dir": str(tmp_path / "fedavg")})
    run_inprocess(
        {**cora, "method": "fedgl", "fedgl.ssl-weight": 0.0, "out-dir": str(tmp_path / "w0")}
    )
    run_inprocess({**cora, "method": "fedgl"})
    fedavg, w0, fedgl = (rounds(tmp_path / d) for d in ("fedavg", "w0", "run"))
    loss = lambda recs: [r["train"]["train_loss"] for r in recs]  # noqa: E731
    assert loss(w0) == loss(fedavg)
    assert loss(fedgl)[0] == loss(fedavg)[0] and loss(fedgl)[1:] != loss(fedavg)[1:]
    for r in fedgl[1:]:
        assert probe(r, "fedgl.pseudo-share") > 0.3
        assert probe(r, "fedgl.ssl-share") > 0.01
