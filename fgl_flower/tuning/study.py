"""A study: Optuna's TPE search over a method's space, every trial a run, weak trials pruned
from their per-round validation values, resumable from its SQLite file.

The study folder::

    study.json      what the study is (its run, space, budget, metric): a resumed study
                    must be the same one
    study.db        Optuna's storage (SQLite; ``optuna-dashboard sqlite:///study.db``)
    trials/0007/    trial 7's run folder (config.json, rounds.jsonl, summary.json)

Determinism: with ``jobs=1`` the same study gives the same trials on the CPU, also after an
interruption. Each trial's sampler is seeded with ``sampler_seed`` plus the number of
trials asked before it (:func:`drawn`), so a resumed study draws as an uninterrupted one
would; a trial cut short by the interruption is run again with its parameters. A study
whose trials all fail stops after as many failures as its budget of trials. With ``jobs > 1`` trials
are asked before earlier ones are told, so the draws depend on timing.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fgl_flower.errors import ConfigError, FGLError
from fgl_flower.results import atomic_write_text
from fgl_flower.tuning.objective import check_metric, direction, running_best, trial_value
from fgl_flower.tuning.space import Param, check_space
from fgl_flower.tuning.trials import TrialRun, make_run, quiet_runs

Scalar = int | float | bool | str

#: Pruners by name: ``median`` (a trial below the median of earlier trials at the same
#: round), ``halving`` (successive halving: rungs at rounds r0, 3 r0, 9 r0, ...), ``none``.
PRUNERS = ("median", "halving", "none")
#: Engines of the trials' runs (``fgl run --inprocess`` or Flower's simulation).
ENGINES = ("inprocess", "simulation")
#: Seconds between two looks at the running trials.
POLL_S = 0.2


@dataclass(frozen=True)
class StudySpec:
    """What a study is; two studies with equal specs are the same study.

    Attributes:
        overrides: The run-config keys of the untuned run (method, dataset, partition,
            clients, rounds and every ``--set``): each trial is this run with the
            space's values.
        space: Run-config key to range or choice as text (:mod:`fgl_flower.tuning.space`).
        trials: Trials to finish (completed or pruned); failed ones do not count.
        trial_rounds: Rounds of each trial (``None``: the run's ``num-rounds``).
        metric: The validation metric maximised (minimised for a loss); ``""``: the
            run's ``select-by``.
        pruner: One of :data:`PRUNERS`.
        sampler_seed: Seed of the TPE sampler.
    """

    overrides: Mapping[str, Scalar]
    space: Mapping[str, str]
    trials: int = 20
    trial_rounds: int | None = None
    metric: str = ""
    pruner: str = "median"
    sampler_seed: int = 0

    @classmethod
    def of(
        cls, overrides: Mapping[str, Scalar], space: Mapping[str, str] | None = None, **budget
    ) -> StudySpec:
        """The study of the run ``overrides`` give: its method's space for its data level
        with ``space`` applied (:func:`~fgl_flower.tuning.space.run_space`), and ``budget``
        (the other fields)."""
        from fgl_flower.tuning.space import run_space

        return cls(overrides=dict(overrides), space=run_space(overrides, space), **budget)

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "overrides": dict(sorted(self.overrides.items())),
            "space": dict(sorted(self.space.items())),
        }


@dataclass
class Checked:
    """A study spec checked against the run it tunes (:func:`check_study`)."""

    spec: StudySpec
    overrides: dict[str, Scalar]  # a trial's run before its values: the spec's, trial rounds
    base: dict[str, Scalar]  # the untuned run's flat config (trial rounds)
    params: dict[str, Param]
    metric: str
    rounds: int
    default: dict[str, Scalar] = field(default_factory=dict)  # the space's keys, untuned


def check_study(spec: StudySpec) -> Checked:
    """Everything that can be wrong with ``spec`` before the first trial: the run's own
    checks (its data and partition too), the metric, the budget and the space."""
    from fgl_flower.launch import flat_config, prepare, task_of_run

    if spec.trials < 1:
        raise ConfigError(f"--trials {spec.trials}: a study runs 1 trial or more.")
    if spec.pruner not in PRUNERS:
        raise ConfigError(f"--pruner {spec.pruner}: use one of {', '.join(PRUNERS)}.")
    overrides = dict(spec.overrides)
    if spec.trial_rounds is not None:
        if spec.trial_rounds < 1:
            raise ConfigError(f"--trial-rounds {spec.trial_rounds}: give 1 or more.")
        overrides["num-rounds"] = spec.trial_rounds
    base = {**flat_config(overrides), "out-dir": ""}
    cfg = prepare(base)  # the data, partition and method checks
    metric = check_metric(task_of_run(base), spec.metric or cfg.select_by)
    params = check_space(spec.space, base)
    return Checked(
        spec,
        overrides,
        base,
        params,
        metric,
        cfg.num_rounds,
        {k: base[k] for k in params},
    )


def _pruner(name: str, rounds: int):
    import optuna

    if name == "median":  # judged from a quarter of the rounds on, after 3 finished trials
        return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=rounds // 4)
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=max(1, rounds // 9), reduction_factor=3
        )
    return optuna.pruners.NopPruner()


def _sampler(seed: int, trials: int):
    """TPE (multivariate): the first third of the trials (3 at least) drawn at random."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=max(3, trials // 3), multivariate=True
        )


@contextmanager
def _quiet_optuna():
    import optuna

    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(level)


def storage_of(folder: Path, storage: str | None) -> tuple[str, str]:
    """``(storage URL, study name)``: the folder's own ``study.db`` (study ``fgl``), or
    ``storage`` (an Optuna storage URL, e.g. a database several machines share) with the
    study named after the folder."""
    if storage is None:
        return f"sqlite:///{folder / 'study.db'}", "fgl"
    return storage, f"fgl-{folder.name}"


def open_study(folder: Path, checked: Checked, overwrite: bool = False, storage: str | None = None):
    """The Optuna study in ``folder`` (created, or loaded when ``folder`` holds the same
    study, whose budget may grow: more ``trials``); another study there, or a smaller
    budget, is refused unless ``overwrite``."""
    import optuna

    folder.mkdir(parents=True, exist_ok=True)
    definition = checked.spec.to_json()
    path = folder / "study.json"
    if path.exists() and not overwrite:
        earlier = json.loads(path.read_text())
        changed = sorted(k for k in definition if k != "trials" and earlier.get(k) != definition[k])
        if changed:
            raise ConfigError(
                f"{folder} holds another study (its {', '.join(changed)} differ); choose "
                "another --study folder, or pass --overwrite to start this one there."
            )
        if definition["trials"] < earlier["trials"]:
            raise ConfigError(
                f"{folder} holds this study with {earlier['trials']} trials; ask for "
                f"{earlier['trials']} or more (more trials extend it), or pass --overwrite."
            )
    url, name = storage_of(folder, storage)
    if overwrite:
        (folder / "study.db").unlink(missing_ok=True)
        if storage is not None and name in optuna.get_all_study_names(storage=url):
            optuna.delete_study(study_name=name, storage=url)
    atomic_write_text(path, json.dumps(definition, indent=2) + "\n")
    with _quiet_optuna():
        return optuna.create_study(
            storage=url,
            study_name=name,
            direction=direction(checked.metric),
            pruner=_pruner(checked.spec.pruner, checked.rounds),
            load_if_exists=True,
        )


def finished_trials(study) -> list:
    """The completed and pruned trials, in order."""
    from optuna.trial import TrialState

    return [t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]


#: The study's list of the trials cut short by an interruption (failed, queued again).
INTERRUPTED = "interrupted"


def drawn(study) -> int:
    """Trials asked so far, those cut short by an interruption aside: the index that seeds
    the next trial's sampler, so a resumed study draws as an uninterrupted one would (a
    trial that failed on its own counts: the next draw differs from its values)."""
    cut = set(study.user_attrs.get(INTERRUPTED, []))
    return sum(1 for t in study.trials if t.number not in cut)


def requeue_interrupted(study) -> int:
    """Trials left running by an interrupted study: marked failed and queued again with
    their parameters (their runs start over). Returns how many."""
    from optuna.trial import TrialState

    stale = [t for t in study.trials if t.state == TrialState.RUNNING]
    if stale:
        cut = study.user_attrs.get(INTERRUPTED, []) + [t.number for t in stale]
        study.set_user_attr(INTERRUPTED, cut)
    for t in stale:
        study.tell(t.number, state=TrialState.FAIL)
        study.enqueue_trial(t.params, user_attrs={"requeued_from": t.number})
    return len(stale)


@dataclass
class _Running:
    trial: Any
    run: TrialRun
    shown: str = ""  # its values, as the study's line shows them
    reported: int = 0  # rounds reported so far
    error: str = ""  # why it failed, if it did
    pruned_at: int | None = None


def run_study(
    checked: Checked,
    folder: Path,
    *,
    jobs: int = 1,
    engine: str = "inprocess",
    overwrite: bool = False,
    storage: str | None = None,
    echo=print,
):
    """Run ``checked``'s trials into ``folder`` until it has ``trials`` finished ones (a
    resumed study only the missing ones); returns the Optuna study.

    ``jobs=1`` with ``engine="inprocess"`` runs each trial in this process; otherwise
    each trial is an ``fgl run`` process on ``engine``, ``jobs`` at a time. ``storage``:
    an Optuna storage URL instead of the folder's ``study.db`` (:func:`storage_of`). ``echo``
    receives one line per trial as it starts and one as it ends."""
    from optuna.trial import TrialState

    if jobs < 1:
        raise ConfigError(f"--jobs {jobs}: give the number of trials at a time, 1 or more.")
    if engine not in ENGINES:
        raise ConfigError(f"engine {engine!r}: use one of {', '.join(ENGINES)}.")
    spec = checked.spec
    study = open_study(folder, checked, overwrite=overwrite, storage=storage)
    if n := requeue_interrupted(study):
        echo(f"{n} trial(s) cut short by an interruption run again with their parameters")
    done = len(finished_trials(study))
    if done:
        echo(f"resuming: {done} of {spec.trials} trials finished")
    running: list[_Running] = []
    failed: list[str] = []  # this call's trials that failed on their own
    try:
        with _quiet_optuna(), quiet_runs():
            while done + len(running) < spec.trials or running:
                if len(failed) >= spec.trials and not running:
                    raise FGLError(
                        f"{len(failed)} trials failed (the last: {failed[-1]}); see their run "
                        f"folders in {folder / 'trials'}. Narrow the space, or fix the run."
                    )
                while (
                    len(running) < jobs
                    and done + len(running) < spec.trials
                    and len(failed) < spec.trials
                ):
                    entry = _ask(study, checked, folder, drawn(study), jobs, engine)
                    running.append(entry)  # before it starts: Ctrl-C from here on stops it
                    echo(f"[trial {entry.trial.number}] {entry.shown}")
                    entry.run.start()
                finished = [e for e in running if e.run.done()]  # before their last read
                for entry in running:
                    _report(entry, checked.metric)
                for entry in finished:
                    running.remove(entry)
                    state = _tell(study, entry, checked.metric, echo)
                    done += state in (TrialState.COMPLETE, TrialState.PRUNED)
                    if state == TrialState.FAIL:
                        failed.append(entry.error)
                if running:
                    time.sleep(POLL_S)
    except BaseException:  # Ctrl-C: the runs stop; the study resumes with their parameters
        for entry in running:
            entry.run.stop()
            entry.run.join(kill=True)
        raise
    return study


def _ask(study, checked: Checked, folder: Path, index: int, jobs: int, engine: str):
    """Ask the next trial (its sampler seeded by ``index``, the trials before it) and make
    its run."""
    study.sampler = _sampler(checked.spec.sampler_seed + index, checked.spec.trials)
    trial = study.ask()
    values = {key: param.suggest(trial, key) for key, param in checked.params.items()}
    out = folder / "trials" / f"{trial.number:04d}"
    overrides = {**checked.overrides, **values, "progress": False, "checkpoint-every": 0}
    run = make_run(overrides, out, jobs, engine)
    return _Running(trial, run, shown=", ".join(f"{k}={_fmt(v)}" for k, v in values.items()))


def _report(entry: _Running, metric: str) -> None:
    """Report the trial's new rounds (best value so far per round) and stop its run at the
    first round the pruner prunes it."""
    if entry.pruned_at is not None:
        return
    for rnd, value in running_best(entry.run.rounds(), metric):
        if rnd <= entry.reported:
            continue
        entry.trial.report(value, rnd)
        entry.reported = rnd
        if entry.trial.should_prune():
            entry.pruned_at = rnd
            entry.run.stop()
            return


def _tell(study, entry: _Running, metric: str, echo):
    """Tell the study how a finished trial ended; returns its state."""
    from optuna.trial import TrialState

    trial, run = entry.trial, entry.run
    rounds = run.rounds()
    trial.set_user_attr("seconds", round(run.seconds, 2))
    trial.set_user_attr("rounds", len(rounds))
    error = run.error()
    if entry.pruned_at is not None:
        study.tell(trial, state=TrialState.PRUNED)
        echo(
            f"    [trial {trial.number}] pruned after round {entry.pruned_at} ({run.seconds:.0f}s)"
        )
        return TrialState.PRUNED
    value = trial_value(rounds, metric) if error is None else None
    if value is None:
        entry.error = error or f"no finite {metric}"
        trial.set_user_attr("error", entry.error)
        study.tell(trial, state=TrialState.FAIL)
        echo(f"    [trial {trial.number}] FAILED: {error or f'no finite {metric}'}")
        return TrialState.FAIL
    study.tell(trial, value)
    echo(f"    [trial {trial.number}] {metric} {value:.4f} ({run.seconds:.0f}s)")
    return TrialState.COMPLETE


def _fmt(value: Scalar) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
