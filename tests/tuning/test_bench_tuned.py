"""Tuned rows of experiment files: the study first, recorded; then the seeds with its values."""

from __future__ import annotations

import json

import pytest

from fgl_flower.bench import load_experiment
from fgl_flower.bench.records import record_study
from fgl_flower.bench.tuned import load_studies, studies_path, study_spec
from fgl_flower.cli import main
from fgl_flower.errors import ConfigError

FILE = """
title = "Tuned"
doc = "docs/tuned.md"
out = "runs/tuned"
seeds = [0]
[defaults]
dataset = "synthetic"
partition = "metis"
clients = 3
rounds = 3
inprocess = true
tune = { trials = 2, seed = 3, space = { dropout = "none", local-epochs = "none", weight-decay = "none" } }

[[row]]
method = "fedavg"

[[row]]
method = "fedprox"
tune = { space = { "fedprox.mu" = "0.001..0.1:log" } }
"""


def _write(tmp_path, text=FILE):
    (tmp_path / "exp.toml").write_text(text)
    return tmp_path / "exp.toml"


def test_a_tuned_row_waits_for_its_study_then_runs_its_values(tmp_path):
    exp = load_experiment(_write(tmp_path), tmp_path)
    assert exp.rows == [] and [r.slug for r in exp.pending] == [
        "synthetic-metis-3-fedavg-tuned",
        "synthetic-metis-3-fedprox-tuned",
    ]
    fedprox = exp.pending[1]
    spec = study_spec(fedprox)
    assert spec.trials == 2 and spec.overrides["seed"] == 3  # the trials' seed
    assert spec.space["fedprox.mu"] == "0.001..0.1:log" and "dropout" not in spec.space
    record_study(
        exp.doc,
        {
            "study": spec.to_json(),
            "best": {"params": {"lr": 0.02, "fedprox.mu": 0.05}, "trial": 1, "value": 0.9},
            "metric": "val_acc",
            "trials": {"complete": 2, "pruned": 0, "fail": 0},
            "search_seconds": 3.0,
            "default": {"lr": 0.01, "fedprox.mu": 0.01},
        },
    )
    assert len(load_studies(studies_path(exp.doc))) == 1
    exp = load_experiment(tmp_path / "exp.toml", tmp_path)
    (row,) = exp.rows
    assert row.tuned == {"lr": 0.02, "fedprox.mu": 0.05} and row.method == "fedprox, tuned"
    cmd = row.command(0, "out")
    assert "fedprox.mu=0.05" in cmd[cmd.index("--set") :] and "--seed" in cmd
    assert [r.args["method"] for r in exp.pending] == ["fedavg"]


def test_a_bad_tune_table_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="unknown tune keys \\['budget'\\]"):
        load_experiment(_write(tmp_path, FILE.replace("trials = 2", "budget = 2")), tmp_path)


@pytest.mark.slow
def test_fgl_bench_runs_the_study_records_it_and_renders_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, FILE.split('\n[[row]]\nmethod = "fedprox"')[0])  # the FedAvg row alone
    assert main(["bench", "exp.toml", "--dry-run"]) == 0
    assert "fgl tune --method fedavg" in capsys.readouterr().out
    assert main(["bench", "exp.toml"]) == 0
    (record,) = load_studies(tmp_path / "docs" / "tuned.studies.jsonl").values()
    assert record["trials"]["complete"] == 2 and set(record["best"]["params"]) == {"lr"}
    page = (tmp_path / "docs" / "tuned.md").read_text()
    assert "| synthetic (fedavg, tuned) | 2 / 0 / 0 | 3 | val_acc |" in page
    assert f"--set lr={record['best']['params']['lr']}" in page
    runs = [json.loads(line) for line in (tmp_path / "docs" / "tuned.runs.jsonl").open()]
    assert len(runs) == 1 and runs[0]["seed"] == 0
    capsys.readouterr()
    assert main(["bench", "exp.toml"]) == 0  # recorded: neither the study nor the run again
    assert "[study" not in capsys.readouterr().out
