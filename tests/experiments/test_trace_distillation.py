"""``experiments/opfgl/trace_distillation.py``: the pool's probes every few epochs, then stop."""

import json
import sys

from fgl_flower.methods import METHODS


def test_it_prints_the_pool_probes_every_few_epochs(experiment_script, monkeypatch, capsys):
    script = experiment_script("opfgl/trace_distillation.py")
    original = METHODS.get("dense")
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "trace",
            "--method",
            "dense",
            "--dataset",
            "synthetic",
            "--partition",
            "metis",
            "--every",
            "2",
            "--set",
            "dense.epochs=3",
            "--set",
            "dense.g-steps=2",
            "--set",
            "dense.num-gen=16",
            "--set",
            "dense.topk=3",
            "--set",
            "local-epochs=1",
            "--set",
            "clients=3",
        ],
    )
    try:
        script.main()
    finally:
        from fgl_flower.methods import register_method

        register_method(original, replace_existing=True)
    lines = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")
    ]
    assert [r["epoch"] for r in lines] == [2, 3]  # every 2nd epoch and the last
    assert {
        "dense.agreement",
        "dense.pool-fit",
        "dense.live-units",
        "agreement-newest-quarter",
        "student-weight-norm",
    } <= set(lines[0])
    assert 0 <= lines[-1]["dense.agreement"] <= 1
