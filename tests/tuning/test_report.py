"""After the search: the report, the plots, the best command, from the CLI and Python."""

from __future__ import annotations

import json
import shlex

import pytest

import fgl_flower as fgl
from fgl_flower.cli import main
from fgl_flower.errors import ConfigError

SMALL = {"dataset": "synthetic", "partition": "metis", "clients": 3, "rounds": 3}


def test_python_tune_reports_and_its_best_command_reproduces_the_best_trial(tmp_path, capsys):
    study = fgl.tune(
        "fedprox",
        **SMALL,
        trials=3,
        space={"dropout": "none", "local-epochs": "none", "weight-decay": "none"},
        final_seeds=(0, 1),
        study=tmp_path / "s",
    )
    folder = study.folder
    for name in ("trials.csv", "trials.md", "history.png", "importance.png", "best.json"):
        assert (folder / name).is_file(), name
    report = study.report
    assert set(study.best_params) == {"lr", "fedprox.mu"}
    assert report["trials"] == {"complete": 3, "pruned": 0, "fail": 0, "interrupted": 0}
    assert set(report["final"]["tuned"]["values"]) == {"0", "1"}
    assert "| tuned - untuned (paired) |" in str(study)
    assert len(study.trials()) == 3
    best = json.loads((folder / "best.json").read_text())
    assert best["params"] == study.best_params and best["row"].startswith("[[row]]")
    # the saved command, run again, is the best trial's run (same seed, same numbers)
    args = shlex.split(study.command)[1:] + ["--out", str(tmp_path / "again")]
    assert main(args) == 0
    again = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert again["best_val"]["val_acc"] == study.best_value
    capsys.readouterr()


def test_cli_tune_stops_on_a_bad_space_before_any_trial(tmp_path, capsys):
    code = main(
        ["tune", "--method", "fedprox", "--space", "fedprox.muu=0.1..1", "--study", str(tmp_path)]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "fedprox.muu: unknown run-config key" in err and "fedprox.mu" in err
    assert not (tmp_path / "study.db").exists()
    code = main(["tune", "--method", "fedprox", "--metric", "test_acc", "--study", str(tmp_path)])
    assert code == 2 and "never on a test metric" in capsys.readouterr().err


def test_fgl_methods_spaces_lists_every_method(capsys):
    from fgl_flower.methods import METHODS

    assert main(["methods", "--spaces"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("every method: lr=")
    assert all(any(line.startswith(name + " ") for line in out.splitlines()) for name in METHODS)
    assert "fedprox.mu=0.0001..1:log" in out


@pytest.mark.parametrize("bad", [{"jobs": 0}, {"backend": "deployment"}])
def test_python_tune_refuses_bad_arguments(tmp_path, bad):
    with pytest.raises(ConfigError, match="jobs 0|backend='deployment'"):
        fgl.tune("fedavg", **SMALL, trials=1, study=tmp_path / "s", **bad)
    assert not (tmp_path / "s" / "study.db").exists()
