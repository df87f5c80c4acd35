"""Plots for notebooks: learning curves, per-client bars, a partition's label mix.

Each function draws on ``ax`` (a new figure if None) and returns the axes, so plots
compose with the rest of matplotlib. ``results`` is one :class:`~fgl_flower.api.RunResult`,
a list of them (labelled by method), or a mapping ``label -> RunResult``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fgl_flower.api import Partition, RunResult


def _labelled(results: Any) -> dict[str, RunResult]:
    from fgl_flower.api import RunResult

    if isinstance(results, RunResult):
        return {results.summary.get("method", "run"): results}
    if isinstance(results, Mapping):
        return dict(results)
    out: dict[str, RunResult] = {}
    for r in results:
        label = str(r.summary.get("method", "run"))
        out[label if label not in out else f"{label} ({len(out)})"] = r
    return out


def _axes(ax, figsize=(6.4, 3.6)):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _percent(key: str) -> bool:
    """Whether ``key`` is a share shown in percent (accuracy, F1, AUC, AP, Hits@K)."""
    shares = ("acc", "f1", "f1_all", "auc", "ap")
    return (
        key.endswith(shares + tuple(f"{s}_mean" for s in shares)) or "_acc" in key or "hits@" in key
    )


def plot_curves(results, key: str = "test_acc", where: str = "eval", ax=None):
    """``key`` per round (``eval``: averaged over clients, as the run reports it), one line
    per run."""
    from matplotlib.ticker import MaxNLocator

    ax = _axes(ax)
    scale = 100.0 if _percent(key) else 1.0
    for label, res in _labelled(results).items():
        pts = res.history(key, where)
        if pts:
            xs, ys = zip(*pts)
            ax.plot(
                xs,
                [scale * y for y in ys],
                label=label,
                marker="o" if len(xs) < 30 else None,
                markersize=3,
            )
    ax.set_xlabel("round")
    ax.set_ylabel(key.replace("_", " ") + (" (%)" if scale == 100 else ""))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend()
    return ax


def plot_clients(results, key: str = "test_acc", ax=None):
    """Each client's final ``key``, grouped bars (one colour per run)."""
    import numpy as np

    runs = _labelled(results)
    ax = _axes(
        ax, figsize=(max(6.4, 0.5 * max(len(r.clients) for r in runs.values()) * len(runs)), 3.6)
    )
    scale = 100.0 if _percent(key) else 1.0
    width = 0.8 / max(len(runs), 1)
    for i, (label, res) in enumerate(runs.items()):
        ids = sorted(res.clients)
        values = [scale * res.clients[c].get(key, float("nan")) for c in ids]
        ax.bar(np.array(ids) + (i - (len(runs) - 1) / 2) * width, values, width, label=label)
    ax.set_xlabel("client (partition id)")
    ax.set_ylabel(key.replace("_", " ") + (" (%)" if scale == 100 else ""))
    ax.set_xticks(sorted({c for r in runs.values() for c in r.clients}))
    ax.legend()
    return ax


def plot_label_mix(part: Partition, ax=None):
    """Stacked bars: the share of each class among each client's nodes (or graphs)."""
    import numpy as np

    mix = np.array(part.label_mix())
    ax = _axes(ax, figsize=(max(6.4, 0.45 * len(mix)), 3.6))
    bottom = np.zeros(len(mix))
    for c in range(mix.shape[1]):
        ax.bar(range(len(mix)), mix[:, c], bottom=bottom, label=f"class {c}")
        bottom += mix[:, c]
    ax.set_xlabel("client (partition id)")
    ax.set_ylabel("share of the client's labels")
    ax.set_xticks(range(len(mix)))
    ax.legend(fontsize=7, ncol=min(mix.shape[1], 8), loc="upper center", bbox_to_anchor=(0.5, -0.2))
    return ax


def plot_partition(part: Partition, key: str = "node_homophily", ax=None):
    """One bar per client of a statistic of :attr:`~fgl_flower.api.Partition.stats`
    (``nodes``, ``edges``, ``edge_homophily``, ``node_homophily``, ``graphs``)."""
    ax = _axes(ax, figsize=(max(6.4, 0.45 * part.num_clients), 3.2))
    ax.bar(range(part.num_clients), [s[key] for s in part.stats])
    ax.set_xlabel("client (partition id)")
    ax.set_ylabel(key.replace("_", " "))
    ax.set_xticks(range(part.num_clients))
    return ax
