"""FedTAD in-process: what travels, options refused before training, a distillation that
changes nothing reported dead, and the distillation alive on Cora."""

import pytest
from run_records import rounds

from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess


@pytest.fixture
def tad_flat(flat):
    flat.update({"method": "fedtad", "num-rounds": 2, "fedtad.glb-epochs": 1, "fedtad.num-gen": 20})
    return flat


def test_the_reliability_travels_beside_fedavgs_payload(tad_flat, tmp_path):
    """Up: FedAvg's payload plus C reliabilities and the model's shape; down: the distilled
    global model, FedAvg's bytes."""
    run_inprocess(tad_flat)
    fedavg = {k: v for k, v in tad_flat.items() if not k.startswith("fedtad.")}
    run_inprocess(
        dict(
            fedavg, method="fedavg", **{"agg-weight": "local", "out-dir": str(tmp_path / "fedavg")}
        )
    )
    tad, avg = rounds(tmp_path / "run"), rounds(tmp_path / "fedavg")
    payload = 4 * 4 + 8 * 2  # the synthetic graph's 4 classes (float32), the shape (2 int64)
    framing = 1500  # one more record and its two array headers
    for t, a in zip(tad, avg):
        extra = (t["bytes_up"] - a["bytes_up"]) / 3
        assert payload < extra < payload + framing
        assert t["bytes_down"] == a["bytes_down"]
    assert t["eval"] != a["eval"]  # the distillation changed the global model


@pytest.mark.parametrize(
    "update,match",
    [
        ({"fedtad.topk": 50}, "topk"),
        ({"fedtad.lr-g": -1.0}, "lr-g"),
        ({"fedtad.it-d": 0}, "it-d"),
    ],
)
def test_bad_options_stop_before_training(tad_flat, update, match):
    with pytest.raises(ConfigError, match=match):
        run_inprocess(dict(tad_flat, **update))


def test_a_distillation_that_changes_nothing_is_reported_dead(tad_flat, tmp_path, caplog):
    run_inprocess(dict(tad_flat, **{"fedtad.lr-d": 0.0}))
    recs = rounds(tmp_path / "run")
    assert recs[-1]["probes"]["fedtad.distill-shift"]["clients"]["server"] == 0.0
    assert "fedtad.distill-shift" in recs[-1]["probes_dead"]
    assert "fedtad.distill-shift" in caplog.text


def test_the_distillation_is_alive_on_cora(data_root, tmp_path):
    """On Cora's Louvain clients the clients' reliabilities differ by class, the generator
    learns nodes the clients' models assign to the classes asked for (above chance), and the
    distillation moves the averaged model."""
    from fgl_flower.app_defaults import load_app_defaults

    cfg = load_app_defaults()
    cfg.update(
        {
            "method": "fedtad",
            "dataset": "Cora",
            "partition": "louvain",
            "num-clients": 10,
            "num-rounds": 4,
            "agg-weight": "local",
            "data-root": str(data_root),
            "out-dir": str(tmp_path / "cora"),
            "progress": False,
        }
    )
    run_inprocess(cfg)
    recs = rounds(tmp_path / "cora")
    probes = [{k: v["clients"]["server"] for k, v in r["probes"].items()} for r in recs]
    assert all(p["fedtad.distill-shift"] > 0.01 for p in probes)
    assert all(p["fedtad.ckr-spread"] > 0.2 for p in probes)
    assert probes[-1]["fedtad.pseudo-acc"] > 2 / 7  # twice chance on Cora's 7 classes
    assert all("probes_dead" not in r for r in recs)


def test_finetuned_evaluation_changes_the_evaluation_only(tad_flat, tmp_path):
    """O-pFGL's one-round protocol evaluates FedTAD's global model fine-tuned locally."""
    plain = run_inprocess(dict(tad_flat, **{"out-dir": str(tmp_path / "plain")}))
    tuned = run_inprocess(
        dict(tad_flat, **{"fedtad.finetune-epochs": 3, "out-dir": str(tmp_path / "tuned")})
    )
    a, b = rounds(tmp_path / "plain"), rounds(tmp_path / "tuned")
    assert [r["train"] for r in a] == [r["train"] for r in b]
    assert plain["final"] != tuned["final"]


def test_the_servers_distillation_time_is_recorded(tad_flat, tmp_path):
    summary = run_inprocess(tad_flat)
    recs = rounds(tmp_path / "run")
    assert all(r["server_time_s"] > 0 for r in recs)
    assert summary["total_server_time_s"] == sum(r["server_time_s"] for r in recs)
