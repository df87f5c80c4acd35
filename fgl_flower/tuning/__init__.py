"""Hyperparameter studies: ``fgl tune`` and :func:`fgl_flower.tuning` (Optuna).

A study tunes one method on one dataset and partition: TPE draws the space's values
(:mod:`~fgl_flower.tuning.space`: the shared keys and the method's declared ones), every
trial is a normal run, weak trials stop early from their per-round validation values
(:mod:`~fgl_flower.tuning.study`), and the study maximises a validation metric only
(:mod:`~fgl_flower.tuning.objective`). After the search the best configuration is rerun over
seeds beside the untuned run (:mod:`~fgl_flower.tuning.report`).

The modules: :mod:`~fgl_flower.tuning.space` (spaces as text, their checks),
:mod:`~fgl_flower.tuning.objective` (the metric and its per-round values),
:mod:`~fgl_flower.tuning.trials` (trials as runs, in this process or as processes),
:mod:`~fgl_flower.tuning.study` (the Optuna study, its storage and loop) and
:mod:`~fgl_flower.tuning.report` (tables, plots, reruns). This module holds :func:`run_tune`,
which chains them, and its result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fgl_flower.tuning.space import SHARED_SPACE, run_space, study_space
from fgl_flower.tuning.study import ENGINES, PRUNERS, StudySpec

__all__ = [
    "ENGINES",
    "PRUNERS",
    "SHARED_SPACE",
    "StudyResult",
    "StudySpec",
    "default_study_dir",
    "run_space",
    "run_tune",
    "study_space",
]


@dataclass(frozen=True)
class StudyResult:
    """A finished study, read from its folder.

    Attributes:
        folder: The study folder (``study.db``, ``trials/``, ``report.md``, plots).
        report: ``report.json``: the best trial and its parameters, the untuned values, the
            trial counts, the search time, the best configuration's command and, with final
            reruns, each seed's test metric of the tuned and untuned runs and their paired
            difference.
    """

    folder: Path
    report: dict[str, Any]

    @property
    def best_params(self) -> dict[str, Any]:
        return dict(self.report["best"]["params"])

    @property
    def best_value(self) -> float:
        return float(self.report["best"]["value"])

    @property
    def command(self) -> str:
        """The ``fgl run`` of the best configuration."""
        return str(self.report["command"])

    def trials(self):
        """The trials as a ``pandas.DataFrame`` (``trials.csv``; needs pandas)."""
        import pandas as pd

        return pd.read_csv(self.folder / "trials.csv").set_index("trial")

    def __str__(self) -> str:
        return (self.folder / "report.md").read_text()


def default_study_dir(overrides: dict[str, Any]) -> Path:
    """``./studies/<method>-<dataset>-<partition>-c<clients>`` of a run's overrides: the
    same command finds the same folder, and resumes its study."""
    from fgl_flower.app_defaults import load_app_defaults
    from fgl_flower.datasets.files import dataset_label

    d = {**load_app_defaults(), **overrides}
    name = f"{d['method']}-{dataset_label(str(d['dataset']))}-{d['partition']}-c{d['num-clients']}"
    return (Path.cwd() / "studies" / name).resolve()


def run_tune(
    spec: StudySpec,
    folder: str | Path | None = None,
    *,
    jobs: int = 1,
    engine: str = "inprocess",
    final_seeds: Sequence[int] = (0, 1, 2),
    overwrite: bool = False,
    storage: str | None = None,
    echo=print,
) -> StudyResult:
    """Check ``spec`` (every error before the first trial), run its trials into ``folder``
    (default :func:`default_study_dir`; resuming what is there), write its table and plots, rerun the best configuration and
    the untuned one over ``final_seeds`` (none: skip), and write its report. ``storage``:
    an Optuna storage URL for the study instead of the folder's ``study.db``."""
    from fgl_flower.tuning.report import (
        best_trial,
        run_finals,
        write_plots,
        write_report,
        write_trials,
    )
    from fgl_flower.tuning.study import check_study, run_study
    from fgl_flower.tuning.trials import quiet_runs

    checked = check_study(spec)
    folder = Path(folder or default_study_dir(dict(spec.overrides))).expanduser().resolve()
    echo(
        f"Study of {checked.base['method']} on {checked.base['dataset']}: {spec.trials} trials "
        f"x {checked.rounds} rounds, maximising {checked.metric}; space "
        + ", ".join(f"{k}={v}" for k, v in spec.space.items())
        + f"; in {folder}"
    )
    study = run_study(
        checked, folder, jobs=jobs, engine=engine, overwrite=overwrite, storage=storage, echo=echo
    )
    write_trials(study, list(checked.params), folder)
    notes = write_plots(study, folder, checked.metric)
    finals = None
    if final_seeds:
        with quiet_runs():
            finals = run_finals(
                checked,
                best_trial(study).params,
                folder,
                list(final_seeds),
                jobs=jobs,
                engine=engine,
                echo=echo,
            )
    report = write_report(study, checked, folder, finals, notes, engine)
    echo(f"wrote {folder / 'report.md'}")
    return StudyResult(folder, report)
