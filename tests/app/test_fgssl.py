"""FGSSL in-process: FedAvg's traffic, options refused before training, each variant trains
what it says, and the regularisers alive on Cora."""

import pytest
from run_records import probe, rounds

from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess


@pytest.fixture
def fgssl_flat(flat):
    flat.update({"method": "fgssl", "num-rounds": 2})
    return flat


def test_only_fedavgs_payload_travels(fgssl_flat, tmp_path):
    run_inprocess(fgssl_flat)
    run_inprocess(
        dict(
            {k: v for k, v in fgssl_flat.items() if not k.startswith("fgssl.")},
            method="fedavg",
            **{"out-dir": str(tmp_path / "fedavg")},
        )
    )
    ours, avg = rounds(tmp_path / "run"), rounds(tmp_path / "fedavg")
    for a, b in zip(ours, avg):
        # the same arrays; the metrics record carries the loss parts and probes besides
        assert abs(a["bytes_down"] - b["bytes_down"]) < 2000 * 3
        assert 0 <= a["bytes_up"] - b["bytes_up"] < 1000 * 3
    assert ours[-1]["eval"] != avg[-1]["eval"]


@pytest.mark.parametrize(
    "update,match",
    [
        ({"fgssl.variant": "both"}, "variant"),
        ({"model": "sgc"}, "hidden layer"),
        ({"num-layers": 1}, "num-layers"),
        ({"fgssl.tau": 0.0}, "tau"),
        ({"fgssl.strong-edges": 1.0}, "strong-edges"),
    ],
)
def test_bad_options_stop_before_training(fgssl_flat, update, match):
    with pytest.raises(ConfigError, match=match):
        run_inprocess(dict(fgssl_flat, **update))


def test_each_variant_trains_its_own_terms(fgssl_flat, tmp_path, caplog):
    """paper: contrast and structure gradients, the global model changing the update; code: a
    contrast gradient without the global model (its probes idle, not reported dead); openfgl:
    the structure gradient alone, from the global model."""
    grads = {}
    for variant in ("paper", "code", "openfgl"):
        out = tmp_path / variant
        run_inprocess(dict(fgssl_flat, **{"fgssl.variant": variant, "out-dir": str(out)}))
        last = rounds(out)[-1]
        assert "probes_dead" not in last
        grads[variant] = {
            k: probe(last, f"fgssl.{k}")
            for k in ("contrast-grad", "structure-grad", "teacher-effect")
        }
    assert grads["paper"]["contrast-grad"] > 0.05 and grads["paper"]["structure-grad"] > 0.01
    assert grads["paper"]["teacher-effect"] > 0.01
    assert grads["code"]["contrast-grad"] > 0.05
    assert grads["code"]["structure-grad"] == grads["code"]["teacher-effect"] == 0.0
    assert grads["openfgl"]["contrast-grad"] == 0.0
    assert grads["openfgl"]["structure-grad"] > 0.01 and grads["openfgl"]["teacher-effect"] > 0.01
    assert "dead" not in caplog.text


def test_a_zero_weight_is_reported_dead(fgssl_flat, tmp_path, caplog):
    run_inprocess(dict(fgssl_flat, **{"fgssl.structure-weight": 0.0}))
    last = rounds(tmp_path / "run")[-1]
    assert list(last["probes_dead"]) == ["fgssl.structure-grad"]
    assert "fgssl.structure-grad" in caplog.text


def test_terms_whose_gradient_is_cut_are_reported_dead(fgssl_flat, tmp_path, monkeypatch):
    """With the local representations detached inside both terms, their values are still there
    but training is that of both weights at 0 (FedAvg), and every watched probe says dead."""
    import fgl_flower.clients.fgssl as client

    zero = dict(
        fgssl_flat,
        **{
            "fgssl.contrast-weight": 0.0,
            "fgssl.structure-weight": 0.0,
            "out-dir": str(tmp_path / "zero"),
        },
    )
    run_inprocess(zero)
    contrast, structure = client.semantic_contrast, client.structure_distillation
    monkeypatch.setattr(client, "semantic_contrast", lambda h, t, *a: contrast(h.detach(), t, *a))
    monkeypatch.setattr(
        client, "structure_distillation", lambda h, t, *a: structure(h.detach(), t, *a)
    )
    run_inprocess(fgssl_flat)
    cut, off = rounds(tmp_path / "run"), rounds(tmp_path / "zero")
    assert [r["eval"] for r in cut] == [r["eval"] for r in off]
    assert cut[-1]["train"]["contrast_loss"] > 0  # the value is there ...
    assert set(cut[-1]["probes_dead"]) == {
        "fgssl.contrast-grad",
        "fgssl.structure-grad",
        "fgssl.teacher-effect",
    }


def test_the_regularisers_are_alive_on_cora(data_root, tmp_path):
    """On Cora's Louvain clients both terms move the local model in every round (gradients of
    the cross-entropy's order), the global model changes each update, and the result differs
    from FedAvg's (both weights 0)."""
    from fgl_flower.app_defaults import load_app_defaults

    cfg = load_app_defaults()
    cfg.update(
        {
            "method": "fgssl",
            "dataset": "Cora",
            "partition": "louvain",
            "num-clients": 5,
            "num-rounds": 4,
            "data-root": str(data_root),
            "out-dir": str(tmp_path / "cora"),
            "progress": False,
        }
    )
    run_inprocess(cfg)
    run_inprocess(
        dict(
            cfg,
            **{
                "fgssl.contrast-weight": 0.0,
                "fgssl.structure-weight": 0.0,
                "out-dir": str(tmp_path / "off"),
            },
        )
    )
    recs, off = rounds(tmp_path / "cora"), rounds(tmp_path / "off")
    assert all(probe(r, "fgssl.contrast-grad") > 0.3 for r in recs)
    assert all(probe(r, "fgssl.structure-grad") > 0.3 for r in recs)
    assert all(probe(r, "fgssl.teacher-effect") > 0.1 for r in recs)
    assert all("probes_dead" not in r for r in recs)
    assert recs[-1]["eval"]["test_acc"] != off[-1]["eval"]["test_acc"]
