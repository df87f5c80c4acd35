"""After a study's search: its table of trials, its plots, the best configuration as a command
and an experiment-file row, and that configuration rerun over seeds beside the untuned run.

Written to the study folder::

    trials.csv, trials.md   every trial: state, value, parameters, rounds run, seconds
    history.png             the optimisation history (Optuna's plot)
    importance.png          the parameters' importance (PED-ANOVA, from the finished trials)
    best.json               the best trial, its parameters, its ``fgl run`` command and row
    final/tuned/seedS/      the best configuration over the final seeds (full rounds)
    final/default/seedS/    the untuned run over the same seeds
    report.md, report.json  test metric at the best-validation round of both, mean with its
                            95 % t-interval, and their paired difference

The reruns use the run's own rounds (``num-rounds`` of the study's run, not the trials'),
and report the test counterpart of the study's metric (``val_acc`` -> ``test_acc``) at the
round the validation metric selects; nothing of a test set enters the search.
"""

from __future__ import annotations

import csv
import io
import json
import shlex
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fgl_flower.errors import ConfigError, FGLError
from fgl_flower.results import atomic_write_text
from fgl_flower.stats import Estimate
from fgl_flower.tuning.study import INTERRUPTED, POLL_S, Checked, finished_trials
from fgl_flower.tuning.trials import TrialRun, make_run, ran_with

Scalar = int | float | bool | str

#: Seeds the best configuration is rerun over unless told.
FINAL_SEEDS = (0, 1, 2)


def test_metric(metric: str) -> str:
    """The test counterpart of a validation metric (``val_acc`` -> ``test_acc``)."""
    return "test_" + metric.removeprefix("val_")


def best_trial(study):
    """The study's best completed trial (:class:`ConfigError` if none completed)."""
    try:
        return study.best_trial
    except ValueError:
        raise ConfigError(
            "No trial of the study completed (see trials.md and the trials' run folders): "
            "widen or move the space, or give more trials."
        ) from None


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def trial_rows(study, keys: Sequence[str]) -> list[dict[str, Any]]:
    """One row per trial: number, state, value, each parameter, rounds run, seconds and
    why it failed (if it did)."""
    cut = set(study.user_attrs.get(INTERRUPTED, []))
    rows = []
    for t in study.trials:
        rows.append(
            {
                "trial": t.number,
                "state": t.state.name.lower(),
                "value": t.value,
                **{k: t.params.get(k) for k in keys},
                "rounds": t.user_attrs.get("rounds"),
                "seconds": t.user_attrs.get("seconds"),
                "error": "interrupted (run again)"
                if t.number in cut
                else t.user_attrs.get("error", ""),
            }
        )
    return rows


def trial_counts(study) -> dict[str, int]:
    """Trials by outcome: ``complete``, ``pruned``, ``fail`` (failed on their own) and
    ``interrupted`` (cut short by an interruption, run again)."""
    cut = set(study.user_attrs.get(INTERRUPTED, []))
    counts = {"complete": 0, "pruned": 0, "fail": 0, "interrupted": len(cut)}
    for t in study.trials:
        state = t.state.name.lower()
        if state in counts and t.number not in cut:
            counts[state] += 1
    return counts


def write_trials(study, keys: Sequence[str], folder: Path) -> None:
    """``trials.csv`` and ``trials.md`` of the study."""
    rows = trial_rows(study, keys)
    header = list(rows[0]) if rows else ["trial", "state", "value", *keys]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(folder / "trials.csv", buffer.getvalue())
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(r[h]) for h in header) + " |" for r in rows]
    atomic_write_text(folder / "trials.md", "\n".join(lines) + "\n")


def write_plots(study, folder: Path, metric: str) -> list[str]:
    """``history.png`` and ``importance.png``; returns why a plot could not be drawn (the
    importance needs two finished trials and a parameter that varied)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna.visualization.matplotlib as plots
    from optuna.importance import PedAnovaImportanceEvaluator

    notes = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna's matplotlib plots are marked experimental
        for name, draw in (
            ("history", lambda: plots.plot_optimization_history(study)),
            (
                "importance",
                lambda: plots.plot_param_importances(
                    study, evaluator=PedAnovaImportanceEvaluator()
                ),
            ),
        ):
            try:
                ax = draw()
            except (ValueError, RuntimeError, ZeroDivisionError) as e:
                notes.append(f"{name}.png not drawn: {e}")
                (folder / f"{name}.png").unlink(missing_ok=True)
                continue
            if name == "history":
                ax.set_ylabel(f"{metric} (best over the trial's rounds)")
            ax.figure.savefig(folder / f"{name}.png", dpi=110, bbox_inches="tight")
            plt.close(ax.figure)
    return notes


def command_of(overrides: Mapping[str, Scalar], engine: str = "inprocess") -> str:
    """The ``fgl run`` of a configuration (its keys as ``--set``)."""
    from fgl_flower.launch import set_flags

    cmd = ["fgl", "run"] + (["--inprocess"] if engine == "inprocess" else [])
    return shlex.join(cmd + set_flags(overrides))


def experiment_row(overrides: Mapping[str, Scalar], params: Mapping[str, Scalar]) -> str:
    """The best configuration as a ``[[row]]`` of an experiment file (``fgl bench``)."""
    from fgl_flower.launch import ROW_FLAGS

    flags = {key: flag for flag, key in ROW_FLAGS.items()}
    lines = ["[[row]]"]
    for key, flag in flags.items():
        if key in overrides:
            lines.append(f"{flag} = {json.dumps(overrides[key])}")
    rest = {k: v for k, v in {**overrides, **params}.items() if k not in flags and k != "seed"}
    cells = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in sorted(rest.items()))
    lines.append(f"set = {{ {cells} }}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Final:
    """One configuration over the final seeds."""

    name: str
    values: dict[int, float]  # seed -> test metric at the best-validation round
    seconds: float

    def estimate(self) -> Estimate | None:
        return Estimate.of(list(self.values.values())) if self.values else None


def run_finals(
    checked: Checked,
    params: Mapping[str, Scalar],
    folder: Path,
    seeds: Sequence[int],
    *,
    jobs: int = 1,
    engine: str = "inprocess",
    echo=print,
) -> dict[str, Final]:
    """The tuned (``params``) and untuned runs of every seed at the run's own rounds,
    ``jobs`` at a time; a seed whose folder holds a summary of the same config is kept."""
    overrides = {k: v for k, v in checked.spec.overrides.items()}
    configs = {"tuned": {**overrides, **params}, "default": overrides}
    pending: list[tuple[str, int, TrialRun]] = []
    for name, config in configs.items():
        for seed in seeds:
            out = folder / "final" / name / f"seed{seed}"
            run_overrides = {**config, "seed": seed, "progress": False, "checkpoint-every": 0}
            if ran_with(out, run_overrides):
                continue
            pending.append((name, seed, make_run(run_overrides, out, jobs, engine)))
    running: list[tuple[str, int, TrialRun]] = []
    try:
        while pending or running:
            while pending and len(running) < jobs:
                name, seed, run = pending.pop(0)
                running.append((name, seed, run))
                echo(f"[final {name} seed {seed}] {command_of({**configs[name], 'seed': seed})}")
                run.start()
            for item in [r for r in running if r[2].done()]:
                running.remove(item)
                name, seed, run = item
                error = run.error()
                if error is not None:
                    raise FGLError(f"The {name} run of seed {seed} failed: {error}")
                echo(f"    [final {name} seed {seed}] done in {run.seconds:.0f}s")
            if running:
                time.sleep(POLL_S)
    except BaseException:  # Ctrl-C or a failed run: the others stop; the same call resumes
        for _, _, run in running:
            run.stop()
            run.join(kill=True)
        raise
    metric = test_metric(checked.metric)
    finals = {}
    for name in configs:
        values, seconds = {}, 0.0
        for seed in seeds:
            summary = json.loads(
                (folder / "final" / name / f"seed{seed}" / "summary.json").read_text()
            )
            values[seed] = float(summary["best_val"][metric])
            seconds += float(summary.get("total_time_s", 0.0))
        finals[name] = Final(name, values, seconds)
    return finals


def paired(tuned: Final, default: Final) -> Estimate | None:
    """Tuned minus untuned, seed by seed, with its 95 % t-interval."""
    seeds = sorted(set(tuned.values) & set(default.values))
    if not seeds:
        return None
    return Estimate.of([tuned.values[s] - default.values[s] for s in seeds])


def _fmt(e: Estimate | None, scale: float = 100.0, sign: str = "") -> str:
    """``mean [low, high]`` in points (``sign="+"``: a difference, signed)."""
    if e is None:
        return "n/a"
    if e.low is None:
        return f"{scale * e.mean:{sign}.2f}"
    return f"{scale * e.mean:{sign}.2f} [{scale * e.low:{sign}.2f}, {scale * e.high:{sign}.2f}]"


def write_report(
    study,
    checked: Checked,
    folder: Path,
    finals: dict[str, Final] | None,
    notes: Sequence[str] = (),
    engine: str = "inprocess",
) -> dict[str, Any]:
    """``best.json``, ``report.json`` and ``report.md`` (the best command on the trials'
    ``engine``); returns the report."""
    best = best_trial(study)
    finished = finished_trials(study)
    overrides = dict(checked.spec.overrides)
    tuned_overrides = {**overrides, **best.params}
    report: dict[str, Any] = {
        "metric": checked.metric,
        "test_metric": test_metric(checked.metric),
        "study": checked.spec.to_json(),
        "best": {"trial": best.number, "value": best.value, "params": best.params},
        "default": checked.default,
        "trials": trial_counts(study),
        "search_seconds": round(sum(t.user_attrs.get("seconds", 0.0) for t in finished), 1),
        "command": command_of(tuned_overrides, engine),
        "notes": list(notes),
    }
    atomic_write_text(
        folder / "best.json",
        json.dumps(
            {
                **report["best"],
                "metric": checked.metric,
                "command": report["command"],
                "row": experiment_row(overrides, best.params),
            },
            indent=2,
        )
        + "\n",
    )
    if finals:
        diff = paired(finals["tuned"], finals["default"])
        report["final"] = {
            name: {"values": {str(s): v for s, v in f.values.items()}, "seconds": f.seconds}
            for name, f in finals.items()
        }
        report["final"]["difference"] = (
            None if diff is None else {"mean": diff.mean, "low": diff.low, "high": diff.high}
        )
    atomic_write_text(folder / "report.json", json.dumps(report, indent=2, default=str) + "\n")
    lines = [
        f"# Study: {overrides.get('method')} on {overrides.get('dataset')}",
        "",
        f"{len(finished)} trials ({report['trials']['complete']} complete, "
        f"{report['trials']['pruned']} pruned, {report['trials']['fail']} failed), "
        f"{checked.rounds} rounds each, maximising {checked.metric} "
        f"({report['search_seconds']:.0f} s of runs).",
        "",
        "| key | untuned | best |",
        "|---|---|---|",
        *[
            f"| {k} | {_cell(checked.default.get(k))} | {_cell(v)} |"
            for k, v in best.params.items()
        ],
        "",
        f"Best trial {best.number}: {checked.metric} {best.value:.4f}.",
        "",
        f"    {report['command']}",
    ]
    if finals:
        seeds = ", ".join(str(s) for s in finals["tuned"].values)
        metric = test_metric(checked.metric)
        lines += [
            "",
            f"Over seeds {seeds} ({overrides.get('num-rounds', 'default')} rounds), {metric} "
            "at the best-validation round, mean [95 % interval]:",
            "",
            "| | " + metric + " | seconds |",
            "|---|---|---|",
            f"| untuned | {_fmt(finals['default'].estimate())} | {finals['default'].seconds:.0f} |",
            f"| tuned | {_fmt(finals['tuned'].estimate())} | {finals['tuned'].seconds:.0f} |",
            "| tuned - untuned (paired) | "
            f"{_fmt(paired(finals['tuned'], finals['default']), sign='+')} | |",
        ]
    lines += ["", *[f"Note: {n}" for n in notes]] if notes else []
    atomic_write_text(folder / "report.md", "\n".join(lines) + "\n")
    return report
