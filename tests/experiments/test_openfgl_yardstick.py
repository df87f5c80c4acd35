"""experiments/baselines/openfgl_yardstick.py's records: each side of each seed is kept as it
ends, a recorded run is not run again, a failed OpenFGL run leaves the others' records, and a
change of the job or of our options for a method makes its runs new ones."""

import json

import pytest


@pytest.fixture(scope="module")
def yardstick(experiment_script):
    return experiment_script("baselines/openfgl_yardstick.py")


class Calls:
    """Stand-ins for both sides: a fixed accuracy per (side, seed), every call counted."""

    def __init__(self, fail_seed: int | None = None) -> None:
        self.made: list[tuple[str, int]] = []
        self.fail_seed = fail_seed

    def theirs(self, method, seed):
        self.made.append(("openfgl", seed))
        if seed == self.fail_seed:
            raise RuntimeError("OpenFGL failed")
        return 80.0 + seed

    def ours(self, method, seed):
        self.made.append(("ours", seed))
        return 85.0 + seed


def test_runs_are_recorded_and_not_run_again(yardstick, tmp_path):
    path = tmp_path / "runs.jsonl"
    calls = Calls()
    ours, theirs = yardstick.run_method(
        yardstick.Records(path), "fedavg", [0, 1], calls.theirs, calls.ours, 2
    )
    assert (ours, theirs) == ([85.0, 86.0], [80.0, 81.0])
    assert sorted(calls.made) == [("openfgl", 0), ("openfgl", 1), ("ours", 0), ("ours", 1)]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert {(r["side"], r["seed"], r["test_acc"]) for r in lines} == {
        ("ours", 0, 85.0),
        ("ours", 1, 86.0),
        ("openfgl", 0, 80.0),
        ("openfgl", 1, 81.0),
    }
    assert all(
        r["rounds"] == yardstick.JOB["num-rounds"] and r["method"] == "fedavg" for r in lines
    )

    again = Calls()  # a new process: the records come from the file
    assert yardstick.run_method(
        yardstick.Records(path), "fedavg", [0, 1, 2], again.theirs, again.ours
    ) == ([85.0, 86.0, 87.0], [80.0, 81.0, 82.0])
    assert sorted(again.made) == [("openfgl", 2), ("ours", 2)]


def test_a_failed_openfgl_run_keeps_the_other_records(yardstick, tmp_path):
    path = tmp_path / "runs.jsonl"
    calls = Calls(fail_seed=1)
    with pytest.raises(RuntimeError, match="OpenFGL failed"):
        yardstick.run_method(yardstick.Records(path), "fedavg", [0, 1], calls.theirs, calls.ours)
    records = yardstick.Records(path)
    assert [records.get("fedavg", s, "ours") for s in (0, 1)] == [85.0, 86.0]
    assert [records.get("fedavg", s, "openfgl") for s in (0, 1)] == [80.0, None]


def test_other_rounds_job_or_options_are_other_runs(yardstick, tmp_path, monkeypatch):
    path = tmp_path / "runs.jsonl"
    yardstick.run_method(yardstick.Records(path), "fedtad", [0], Calls().theirs, Calls().ours)
    assert yardstick.Records(path).get("fedtad", 0, "ours") == 85.0
    monkeypatch.setitem(yardstick.JOB, "num-rounds", 30)
    assert yardstick.Records(path).get("fedtad", 0, "ours") is None
    monkeypatch.setitem(yardstick.JOB, "num-rounds", 100)
    monkeypatch.setitem(yardstick.JOB, "lr", 0.05)
    assert yardstick.Records(path).get("fedtad", 0, "ours") is None
    monkeypatch.setitem(yardstick.JOB, "lr", 0.01)
    monkeypatch.setitem(
        yardstick.METHODS, "fedtad", (*yardstick.METHODS["fedtad"][:2], {"agg-weight": "uniform"})
    )
    assert yardstick.Records(path).get("fedtad", 0, "ours") is None


def test_a_fully_recorded_comparison_runs_nothing(yardstick, tmp_path, monkeypatch, capsys):
    """With every requested run recorded, the table comes from the records alone: no partition
    is exported for OpenFGL and neither side runs."""
    path = tmp_path / "runs.jsonl"
    yardstick.run_method(yardstick.Records(path), "fedavg", [0, 1], Calls().theirs, Calls().ours)

    def must_not_run(*args, **kwargs):
        raise AssertionError("ran although every run is recorded")

    for name in ("export_partition", "run_openfgl", "run_ours"):
        monkeypatch.setattr(yardstick, name, must_not_run)
    monkeypatch.setattr(
        "sys.argv",
        [
            "openfgl_yardstick.py",
            "--openfgl-python",
            "unused",
            "--methods",
            "fedavg",
            "--seeds",
            "0,1",
            "--records",
            str(path),
        ],
    )
    yardstick.main()
    assert (
        "| fedavg | 85.50 ± 0.71 | 80.50 ± 0.71 | +5.00 | 85.00 / 80.00, 86.00 / 81.00 |"
        in capsys.readouterr().out
    )
