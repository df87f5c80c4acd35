"""What a study maximises: a validation metric of the run, never a test metric.

A trial's value is the best value its run reached of the validation metric ``metric``
(the run's ``select-by`` by default): the value at the round the run would select, the
same rule that picks a run's reported round (:func:`fgl_flower.results.summarize_rounds`).
Its intermediate values, which the pruner compares across trials round by round, are the
best value reached so far, :math:`v_r = \\max_{s \\le r} \\mathrm{val}_s` (the minimum for
a loss or an error), so a trial is judged by what it would report if it stopped at ``r``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from fgl_flower.errors import ConfigError
from fgl_flower.tasks import Task, lower_is_better


def check_metric(task: Task, metric: str) -> str:
    """``metric`` if it is a validation metric ``task`` reports; the test metrics and the
    training loss never select (:class:`ConfigError` naming the ones that may)."""
    if metric not in task.selectable:
        raise ConfigError(
            f"--metric {metric}: a study selects on a validation metric of its runs, never "
            f"on a test metric; task {task.name} reports {', '.join(task.selectable)}."
        )
    return metric


def direction(metric: str) -> str:
    """Optuna's direction for ``metric``."""
    return "minimize" if lower_is_better(metric) else "maximize"


def running_best(rounds: Iterable[Mapping[str, Any]], metric: str) -> list[tuple[int, float]]:
    """``(round, best so far)`` of ``eval[metric]`` over the rounds that evaluated it (a
    value that is not finite is skipped, as a run's selection skips it)."""
    better = min if lower_is_better(metric) else max
    best: float | None = None
    out = []
    for record in rounds:
        value = record.get("eval", {}).get(metric)
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        best = float(value) if best is None else better(best, float(value))
        out.append((int(record["round"]), best))
    return out


def trial_value(rounds: Iterable[Mapping[str, Any]], metric: str) -> float | None:
    """A finished trial's value: the best ``metric`` of its rounds (``None``: none)."""
    points = running_best(rounds, metric)
    return points[-1][1] if points else None
