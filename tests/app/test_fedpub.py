"""FED-PUB in-process: what travels, the regularisers as the paper and as the code compute
them, options refused before training, and the personalisation alive on Cora."""

import numpy as np
import pytest
from run_records import rounds

from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess


@pytest.fixture
def pub_flat(flat):
    flat.update({"method": "fedpub", "num-rounds": 3, "local-epochs": 2})
    return flat


def test_weights_and_one_embedding_travel_up_the_personalised_weights_down(pub_flat, tmp_path):
    """Per client and round: up the two GCN layers and the classifier (no mask) plus the
    functional embedding (hidden floats); down the same weights (none in round 1)."""
    from fgl_flower.models.fedpub import MaskedGCN

    run_inprocess(pub_flat)
    recs = rounds(tmp_path / "run")
    hidden, features, classes = 64, 32, 4  # the app defaults' synthetic graph and width
    model = MaskedGCN(features, hidden, classes)
    weights = sum(p.numel() for n, p in model.named_parameters() if not n.startswith("masks."))
    masks = sum(p.numel() for n, p in model.named_parameters() if n.startswith("masks."))
    slack = 5000  # record framing, array headers and the metrics: far below the masks' bytes
    assert masks * 4 > 4 * slack
    for r in recs:
        up = r["bytes_up"] / 3
        assert weights * 4 + hidden * 4 < up < weights * 4 + hidden * 4 + slack
    assert recs[0]["bytes_down"] / 3 < 1000  # round 1: the clients build the seeded model
    for r in recs[1:]:
        assert weights * 4 < r["bytes_down"] / 3 < weights * 4 + slack
    assert set(recs[1]["fedpub"]) == {"clients", "similarity", "weights"}
    assert np.allclose(np.array(recs[1]["fedpub"]["weights"]).sum(axis=1), 1.0, atol=1e-5)


def test_the_codes_detached_regularisers_change_nothing_the_papers_do(pub_flat, tmp_path):
    def run(name, **options):
        run_inprocess(dict(pub_flat, **{"out-dir": str(tmp_path / name)}, **options))
        return [r["train"]["train_loss"] for r in rounds(tmp_path / name)], rounds(tmp_path / name)[
            -1
        ]["eval"]

    code = run("code", **{"fedpub.regularizers": "code"})
    off = run("off", **{"fedpub.l1": 0.0, "fedpub.loc-l2": 0.0})
    paper = run("paper", **{"fedpub.l1": 0.05, "fedpub.loc-l2": 0.05})
    assert code == off
    assert paper[1] != off[1]


@pytest.mark.parametrize(
    "update,match",
    [
        ({"fedpub.agg-norm": "softmax"}, "agg-norm"),
        ({"fedpub.regularizers": "both"}, "regularizers"),
        ({"fedpub.l1": -1.0}, "l1"),
        ({"fedpub.proxy-p": 0.0}, "proxy-p"),
        ({"model": "sage"}, "masked GCN"),
        ({"num-layers": 3}, "num-layers=2"),
    ],
)
def test_bad_options_stop_before_training(pub_flat, update, match):
    with pytest.raises(ConfigError, match=match):
        run_inprocess(dict(pub_flat, **update))


def test_the_personalisation_is_alive_on_cora(data_root, tmp_path):
    """On Cora's Louvain clients the functional embeddings differ, so each client's average
    leans towards similar clients: the weights are not uniform, and the probes say so."""
    from fgl_flower.app_defaults import load_app_defaults

    cfg = load_app_defaults()
    cfg.update(
        {
            "method": "fedpub",
            "dataset": "Cora",
            "partition": "louvain",
            "num-clients": 5,
            "num-rounds": 5,
            "local-epochs": 1,
            "hidden": 128,
            "weight-decay": 1e-6,
            "data-root": str(data_root),
            "out-dir": str(tmp_path / "cora"),
            "progress": False,
        }
    )
    run_inprocess(cfg)
    recs = rounds(tmp_path / "cora")
    for r in recs:
        alpha = np.array(r["fedpub"]["weights"])
        assert alpha.max() - alpha.min() > 0.05
        assert r["probes"]["fedpub.weight-spread"]["clients"]["server"] > 0.05
        assert "probes_dead" not in r
    assert recs[-1]["eval"]["test_acc"] > 0.5


def test_evaluating_the_received_personalised_model(pub_flat, tmp_path):
    """fedpub.evaluate = received (O-pFGL's one round): the evaluation is of the personalised
    weights sent next, one evaluate message per client after the last round; training is the
    same as with the default."""
    trained = run_inprocess(dict(pub_flat, **{"out-dir": str(tmp_path / "trained")}))
    received = run_inprocess(
        dict(pub_flat, **{"fedpub.evaluate": "received", "out-dir": str(tmp_path / "received")})
    )
    a, b = rounds(tmp_path / "trained"), rounds(tmp_path / "received")
    assert [r["train"]["train_loss"] for r in a] == [r["train"]["train_loss"] for r in b]
    assert received["final"] != trained["final"]
    assert b[-1]["messages_down"] == 2 * a[-1]["messages_down"]  # the last round's evaluate batch


def test_masks_on_the_runs_backbone(pub_flat, tmp_path):
    """fedpub.backbone = model (S2FGL's table, every method on ACM-GCN): the backbone's
    weights travel (no mask, no bias is masked), the personalisation runs on its embedding."""
    from fgl_flower.models.acmgcn import ACMGCN

    run_inprocess(dict(pub_flat, **{"model": "acmgcn", "fedpub.backbone": "model"}))
    recs = rounds(tmp_path / "run")
    hidden, features, classes = 64, 32, 4
    net = ACMGCN(features, hidden, classes, 2)
    weights = sum(p.numel() for p in net.parameters())
    masks = sum(p.numel() for p in net.parameters() if p.dim() >= 2)
    slack = 12000  # framing of its 15 arrays and the metrics: far below the masks' bytes
    assert masks * 4 > 4 * slack
    for r in recs:
        up = r["bytes_up"] / 3
        assert weights * 4 + hidden * 4 < up < weights * 4 + hidden * 4 + slack
    assert np.allclose(np.array(recs[1]["fedpub"]["weights"]).sum(axis=1), 1.0, atol=1e-5)
    with pytest.raises(ConfigError, match="embed"):
        run_inprocess(dict(pub_flat, **{"model": "sgc", "fedpub.backbone": "model"}))
