"""The metric columns of a benchmark table (``columns = [...]`` of an experiment file):
what each reads from a run's summary and how it formats the values over seeds."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Column:
    """A metric column: header, how to read one run's value from its summary, and how to
    show the values of a row's runs (default: percent, mean ± population std)."""

    header: str
    value: Callable[[Mapping[str, Any]], float | None]
    cell: Callable[[list[float], list[Mapping[str, Any]]], str] | None = None
    #: Bulky parts of a run's record it reads besides the summary points (``history``,
    #: ``final_clients``): records keep them only for the experiments whose columns read them.
    reads: tuple[str, ...] = ()
    #: ``(point, key)``: the summary value it reads (``summary[point][key]``), for the
    #: columns of :func:`metric`; run records keep the values some column reads.
    point: tuple[str, str] | None = None
    #: The value is a fraction shown in percent (points); otherwise a count shown as is.
    percent: bool = True

    @property
    def scale(self) -> int:
        """What a value is multiplied by to be shown: 100 (points) or 1 (a count)."""
        return 100 if self.percent else 1

    def render(self, runs: list[Mapping[str, Any]]) -> str:
        """The row's cell; a mean over fewer runs than the row has (runs without the value)
        says over how many."""
        values = [v for r in runs if (v := self.value(r)) is not None]
        if self.cell is not None:
            return self.cell(values, runs)
        text = _mean_std(values)
        return (
            f"{text} ({len(values)} of {len(runs)} runs)"
            if values and len(values) < len(runs)
            else text
        )


def _at(point: str, key: str) -> Callable[[Mapping[str, Any]], float | None]:
    return lambda summary: summary.get(point, {}).get(key)


def metric(
    header: str,
    point: str,
    key: str,
    cell: Callable[[list[float], list[Mapping[str, Any]]], str] | None = None,
    **kw: Any,
) -> Column:
    """A column of ``summary[point][key]`` (e.g. ``best_val``/``test_acc``)."""
    return Column(header, _at(point, key), cell, point=(point, key), **kw)


def _probe(name: str) -> Callable[[Mapping[str, Any]], float | None]:
    """A probe's client mean in the run's last round (``summary["probes"]``,
    :mod:`fgl_flower.probes`)."""
    return lambda summary: summary.get("probes", {}).get(name, {}).get("mean")


def _plain(fmt: str) -> Callable[[list[float], list[Mapping[str, Any]]], str]:
    """Cell: the mean over runs, not in percent (resource counts)."""
    return lambda values, runs: format(statistics.fmean(values), fmt) if values else "—"


def fedstar_std(runs: list[Mapping[str, Any]], key: str = "test_acc") -> float | None:
    """The "std" of FedStar's ``aggregateResults.py``: per client the sample std (ddof 1)
    of its final ``key`` over runs, then the mean over clients (FedDense spec §7)."""
    per_client: dict[str, list[float]] = {}
    for r in runs:
        for pid, m in r.get("final_clients", {}).items():
            if key in m:
                per_client.setdefault(pid, []).append(float(m[key]))
    stds = [statistics.stdev(v) for v in per_client.values() if len(v) > 1]
    return statistics.fmean(stds) if stds else None


def _with_fedstar_std(values: list[float], runs: list[Mapping[str, Any]]) -> str:
    if not values:
        return "—"
    std = fedstar_std(runs)
    return f"{100 * statistics.fmean(values):.2f}" + ("" if std is None else f" ± {100 * std:.2f}")


def _run_std(values: list[float], runs: list[Mapping[str, Any]]) -> str:
    return f"{100 * statistics.pstdev(values):.2f}" if len(values) > 1 else "—"


#: Per-round evaluation metrics a run record keeps (:func:`eval_history`), for columns
#: such as ``first65``.
HISTORY_KEYS = ("test_acc_mean",)


def eval_history(summary: Mapping[str, Any], key: str) -> list[tuple[int, float]]:
    """``(round, eval[key])`` of every evaluated round of a run: from its record's
    ``history`` or its folder's ``rounds.jsonl`` (empty if neither has them)."""
    if key in summary.get("history", {}):
        return [(int(r), float(v)) for r, v in summary["history"][key]]
    path = summary.get("_dir") and Path(summary["_dir"]) / "rounds.jsonl"
    if not path or not path.exists():
        return []
    rounds = (json.loads(line) for line in path.read_text().splitlines())
    return [(int(r["round"]), float(r["eval"][key])) for r in rounds if key in r.get("eval", {})]


def first_round_reaching(
    threshold: float, key: str = "test_acc_mean"
) -> Callable[[Mapping[str, Any]], float | None]:
    """A run's first round whose ``eval[key]`` reaches ``threshold`` (``None`` if it never
    does)."""

    def value(summary: Mapping[str, Any]) -> float | None:
        return next((float(r) for r, v in eval_history(summary, key) if v >= threshold), None)

    return value


def _first_rounds(values: list[float], runs: list[Mapping[str, Any]]) -> str:
    """Cell: the mean over runs of each run's first round, and how many runs never got there."""
    never = len(runs) - len(values)
    text = f"{statistics.fmean(values):.0f}" if values else "—"
    return text + (f" ({never} never)" if never else "")


def first_round_of_mean_curve(
    threshold: float,
    key: str = "test_acc_mean",
) -> Callable[[list[float], list[Mapping[str, Any]]], str]:
    """Cell: the first round at which the curve averaged over a row's runs,
    ``mean_runs eval[key](t)``, reaches ``threshold`` (FedDense's Figure 3), over the rounds
    that every run evaluated; "—" unless every run has its history, "never" if it stays below."""

    def cell(values: list[float], runs: list[Mapping[str, Any]]) -> str:
        curves = [dict(eval_history(r, key)) for r in runs]
        if not curves or not all(curves):
            return "—"
        rounds = sorted(set.intersection(*(set(c) for c in curves)))
        first = next(
            (t for t in rounds if statistics.fmean(c[t] for c in curves) >= threshold), None
        )
        return "never" if first is None else str(first)

    return cell


#: Metric columns an experiment may list in ``columns``.
COLUMNS: dict[str, Column] = {
    "acc": metric("test acc, weighted (best-val)", "best_val", "test_acc"),
    "acc-final": metric("test acc, weighted (final)", "final", "test_acc"),
    "acc-mean": metric("test acc, client mean (best-val)", "best_val", "test_acc_mean"),
    "f1": metric("test macro-F1 (best-val)", "best_val", "test_f1"),
    "f1-all": metric("test macro-F1, all classes (best-val)", "best_val", "test_f1_all"),
    "f1-all-final": metric("test macro-F1, all classes (final)", "final", "test_f1_all"),
    "val": metric("val acc (best-val)", "best_val", "val_acc"),
    "global-acc": metric("Stage-1 M_G test acc", "best_val", "global_test_acc"),
    "global-f1-all": metric("Stage-1 M_G macro-F1, all classes", "best_val", "global_test_f1_all"),
    "acc-last5": metric("test acc, weighted (mean of last 5 rounds)", "last", "test_acc"),
    "val-last5": metric("val acc, weighted (mean of last 5 rounds)", "last", "val_acc"),
    "worst": metric("worst client (best-val)", "best_val", "test_acc_worst"),
    "minority": metric("minority acc, pooled (best-val)", "best_val", "test_minority_acc"),
    "minority-final": metric("minority acc, pooled (final)", "final", "test_minority_acc"),
    "acc-paper": metric(
        "test acc, client mean (final) ± FedStar std",
        "final",
        "test_acc_mean",
        _with_fedstar_std,
        reads=("final_clients",),
    ),
    "acc-paper-runstd": metric("± run std", "final", "test_acc_mean", _run_std),
    "acc-gcfl": metric("client mean, GCFL's rule (final)", "final", "test_acc_gcfl_mean"),
    "first65": Column(
        "first round ≥ 65% (client mean)",
        first_round_reaching(0.65),
        _first_rounds,
        reads=("history",),
        percent=False,
    ),
    "first65-curve": Column(
        "first round ≥ 65%, seed-mean curve",
        first_round_reaching(0.65),
        first_round_of_mean_curve(0.65),
        reads=("history",),
        percent=False,
    ),
    "latent-nonempty": Column(
        "latent rows non-empty (final)", _probe("latent.nonempty"), _plain(".2f"), percent=False
    ),
    "latent-contrast": Column(
        "latent contrast (final)", _probe("latent.contrast"), _plain(".2f"), percent=False
    ),
    "latent-homophily": Column(
        "latent homophily (final)", _probe("latent.homophily"), _plain(".2f"), percent=False
    ),
    "latent-hubs": Column(
        "latent hub share (final)", _probe("latent.hubs"), _plain(".2f"), percent=False
    ),
    "clusters": Column("clusters (final)", _probe("clusters"), _plain(".1f"), percent=False),
    "hre-share": Column(
        "HRE nodes per labelled node", _probe("hre.share"), _plain(".2f"), percent=False
    ),
    "epsilon": metric(
        "ε spent (δ = 1e-5 unless noted)", "dp", "epsilon", _plain(".2f"), percent=False
    ),
    "noise": metric("noise multiplier z", "dp", "noise_multiplier", _plain(".2f"), percent=False),
    "gflops": metric("GFLOPs /client/round", "resources", "gflops", _plain(".2f"), percent=False),
    "mp-gflops": metric(
        "message-passing GFLOPs /client/round",
        "resources",
        "mp_gflops",
        _plain(".2f"),
        percent=False,
    ),
    "payload-kib": metric(
        "payload KiB (4 B × shared params)",
        "resources",
        "payload_kib",
        _plain(".2f"),
        percent=False,
    ),
    "upload-bytes": metric(
        "upload B /client/round (metered)",
        "resources",
        "upload_bytes",
        _plain(".0f"),
        percent=False,
    ),
    "model-kib": metric(
        "model KiB (client mean)", "resources", "model_kib", _plain(".2f"), percent=False
    ),
    "shared-params": metric(
        "shared params", "resources", "shared_params", _plain(".0f"), percent=False
    ),
}


def read_points() -> dict[str, frozenset[str]]:
    """``point -> keys``: the summary values some column of :data:`COLUMNS` reads."""
    points: dict[str, set[str]] = {}
    for column in COLUMNS.values():
        if column.point is not None:
            points.setdefault(column.point[0], set()).add(column.point[1])
    return {point: frozenset(keys) for point, keys in points.items()}


DEFAULT_COLUMNS = ("acc", "acc-final", "acc-mean", "f1", "worst")


def _mean_std(values: list[float]) -> str:
    if not values:
        return "—"
    return f"{100 * statistics.fmean(values):.2f} ± {100 * statistics.pstdev(values):.2f}"
