"""Studies: reproducible, prunable, resumable, selecting on validation only."""

from __future__ import annotations

import json

import pytest

from fgl_flower.errors import ConfigError
from fgl_flower.tasks import TASKS
from fgl_flower.tuning.objective import check_metric, running_best, trial_value
from fgl_flower.tuning.study import StudySpec, check_study, open_study, run_study

#: A tiny run: FedProx on the synthetic graph, 3 clients.
RUN = {
    "method": "fedprox",
    "dataset": "synthetic",
    "partition": "metis",
    "num-clients": 3,
    "num-rounds": 2,
}
SPACE = {"lr": "0.001..0.3:log", "fedprox.mu": "0.0001..1:log"}


def _study(tmp_path, name, echo=None, **spec):
    checked = check_study(StudySpec(RUN, SPACE, **{"trials": 3, **spec}))
    lines: list[str] = []
    study = run_study(checked, tmp_path / name, echo=echo or lines.append)
    return checked, study, lines


def _outcome(study):
    return [(t.state.name, t.params, t.value) for t in study.trials if t.state.name != "FAIL"]


def test_a_study_gives_the_same_trials_twice_and_resumes_after_an_interruption(tmp_path):
    _, first, _ = _study(tmp_path, "a")
    _, second, _ = _study(tmp_path, "b")
    assert _outcome(first) == _outcome(second)
    assert first.best_trial.params == second.best_trial.params
    assert len({json.dumps(t.params) for t in first.trials}) == 3  # the sampler drew three

    def interrupt(line: str) -> None:  # Ctrl-C as the second trial starts
        if line.startswith("[trial 1]"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _study(tmp_path, "c", echo=interrupt)
    _, resumed, lines = _study(tmp_path, "c")
    assert any("run again with their parameters" in line for line in lines)
    assert _outcome(resumed) == _outcome(first)
    assert [t.state.name for t in resumed.trials].count("FAIL") == 1  # the interrupted one
    from fgl_flower.tuning.report import trial_counts

    assert trial_counts(resumed) == {"complete": 3, "pruned": 0, "fail": 0, "interrupted": 1}


def test_the_same_folder_refuses_another_study_and_extends_its_budget(tmp_path):
    _study(tmp_path, "a", trials=1)
    with pytest.raises(ConfigError, match="holds another study .*pruner"):
        _study(tmp_path, "a", trials=1, pruner="none")
    _, study, lines = _study(tmp_path, "a", trials=2)  # one more trial
    assert "resuming: 1 of 2 trials finished" in lines and len(study.trials) == 2
    with pytest.raises(ConfigError, match="with 2 trials; ask for 2 or more"):
        _study(tmp_path, "a", trials=1)


@pytest.mark.slow
def test_a_pruned_trial_stops_early_and_is_recorded_as_pruned(tmp_path):
    """Three good trials, then one whose learning rate cannot learn: below the median of
    the others at round 10, it is pruned there and its run stops after a few more rounds."""
    run = {**RUN, "dataset": "Cora", "num-rounds": 40}
    checked = check_study(StudySpec(run, {"lr": "0.0000001..0.1:log"}, trials=4))
    study = open_study(tmp_path / "p", checked)
    for lr in (0.05, 0.04, 0.03, 1e-7):
        study.enqueue_trial({"lr": lr})
    study = run_study(checked, tmp_path / "p", echo=lambda line: None)
    last = study.trials[-1]
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3 + ["PRUNED"]
    assert max(last.intermediate_values) == 10  # pruned at the pruner's first round
    summary = json.loads((tmp_path / "p" / "trials" / "0003" / "summary.json").read_text())
    assert "stopped on request" in summary["stopped"]
    assert summary["rounds_completed"] < 40
    assert last.user_attrs["rounds"] == summary["rounds_completed"]


def test_the_test_metric_never_selects(tmp_path):
    """Rounds whose test accuracy falls while validation rises: the value follows
    validation; a study on a test metric is refused; a real study's values are its
    trials' best validation accuracy, not their test accuracy."""
    rounds = [
        {"round": 1, "eval": {"val_acc": 0.5, "test_acc": 0.9}},
        {"round": 2, "eval": {"val_acc": 0.7, "test_acc": 0.6}},
        {"round": 3, "eval": {"val_acc": 0.6, "test_acc": 0.95}},
    ]
    assert trial_value(rounds, "val_acc") == 0.7
    assert running_best(rounds, "val_acc") == [(1, 0.5), (2, 0.7), (3, 0.7)]
    assert running_best(rounds, "val_loss") == []
    for metric in ("test_acc", "train_loss", "test_f1"):
        with pytest.raises(ConfigError, match="never on a test metric"):
            check_metric(TASKS.get("node"), metric)
    with pytest.raises(ConfigError, match="never on a test metric"):
        check_study(StudySpec(RUN, SPACE, metric="test_acc"))
    _, study, _ = _study(tmp_path, "v")
    from fgl_flower.tuning.trials import read_rounds

    for t in study.trials:
        rounds = read_rounds(tmp_path / "v" / "trials" / f"{t.number:04d}")
        assert t.value == max(r["eval"]["val_acc"] for r in rounds)
        assert t.value != max(r["eval"]["test_acc"] for r in rounds)


def test_bad_budgets_stop_before_any_trial():
    for spec, says in (
        ({"trials": 0}, "--trials 0"),
        ({"trial_rounds": 0}, "--trial-rounds 0"),
        ({"pruner": "hyperband"}, "--pruner hyperband"),
    ):
        with pytest.raises(ConfigError, match=says):
            check_study(StudySpec(RUN, SPACE, **spec))


def test_a_study_whose_trials_all_fail_stops_and_draws_anew_after_each(tmp_path, monkeypatch):
    import fgl_flower.launch
    from fgl_flower.errors import FGLError

    def broken(cfg, engine, **kwargs):
        raise FGLError("a client crashed")

    monkeypatch.setattr(fgl_flower.launch, "execute", broken)
    with pytest.raises(FGLError, match="2 trials failed \\(the last: a client crashed\\)"):
        _study(tmp_path, "f", trials=2)
    from fgl_flower.tuning.study import open_study

    checked = check_study(StudySpec(RUN, SPACE, trials=2))
    study = open_study(tmp_path / "f", checked)
    assert [t.state.name for t in study.trials] == ["FAIL", "FAIL"]
    assert study.trials[0].params != study.trials[1].params  # not the same draw again
    assert study.trials[0].user_attrs["error"] == "a client crashed"


def test_a_study_may_live_in_another_storage(tmp_path):
    import optuna

    url = f"sqlite:///{tmp_path / 'shared.db'}"
    checked = check_study(StudySpec(RUN, SPACE, trials=1))
    run_study(checked, tmp_path / "s", storage=url, echo=lambda line: None)
    assert not (tmp_path / "s" / "study.db").exists()
    assert optuna.get_all_study_names(storage=url) == ["fgl-s"]
    again = run_study(checked, tmp_path / "s", storage=url, echo=lambda line: None)
    assert len(again.trials) == 1  # resumed from the shared storage: nothing left to run
