"""Writing a run's results: config, per-round metrics, summary and curves.

Everything lands in the run's output folder:

* ``config.json`` -- the resolved run config;
* ``rounds.jsonl`` -- one JSON line per finished round (appended and fsync'ed, so a
  crashed or stopped run keeps every round it finished);
* ``summary.json`` -- final round, best-validation round and the mean of the last 5
  rounds (written atomically);
* ``curves.png`` -- accuracy and loss curves.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Iterable, Mapping
from logging import INFO
from pathlib import Path
from typing import Any

from flwr.supercore import log

from fgl_flower.config import RunConfig
from fgl_flower.tasks import lower_is_better

#: The default metric that selects the reported round (``select-by`` in the run config).
SELECT_KEY = "val_acc"

#: ``summary["last"]`` averages every evaluation metric over this many final rounds
#: (S2FGL's protocol: the mean of the last 5 rounds).
LAST_ROUNDS = 5


def finite_or_none(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by ``None``, so that it is strict
    JSON (``json.dumps`` would write the non-standard ``NaN``/``Infinity`` tokens)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    return obj


def strict_json(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`finite_or_none` (``obj``): valid for strict parsers."""
    return json.dumps(finite_or_none(obj), allow_nan=False, **kwargs)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def atomic_write_bytes(
    path: Path, chunks: Iterable[bytes], durable: bool = True, private: bool = False
) -> None:
    """Write ``chunks`` to ``path`` via a temporary file and ``os.replace`` (``durable``:
    fsync before the rename, so the file also survives a crash of the machine). The file
    gets the permissions of any file the user creates (``0o666`` less the umask), or
    ``0o600`` if ``private`` (a client's checkpoint)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically and durably (:func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, [text.encode()])


def append_line(path: Path, line: str) -> None:
    """Append ``line`` and a newline to ``path``, flushed and fsync'ed before returning: a
    record appended is kept even if the process or the machine dies right after."""
    with open(path, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def summarize_rounds(
    rounds: list[Mapping[str, Any]], select_key: str = SELECT_KEY
) -> dict[str, Any]:
    """Final round, best round by ``eval[select_key]`` (earliest on ties) and the mean of
    the last :data:`LAST_ROUNDS` evaluated rounds.

    The best round has the highest value, or the lowest for a loss or an error (``*_loss``,
    ``*_mse``, ``*_mae``: :func:`~fgl_flower.tasks.lower_is_better`); rounds
    whose value is missing or not finite are never selected.
    """
    evaluated = [r for r in rounds if r.get("eval")]
    if not evaluated:
        return {"rounds_completed": len(rounds)}
    sign = -1.0 if lower_is_better(select_key) else 1.0
    candidates = [r for r in evaluated if _finite(r["eval"].get(select_key))] or evaluated
    best = max(
        candidates,
        key=lambda r: (
            sign * r["eval"][select_key] if _finite(r["eval"].get(select_key)) else float("-inf"),
            -r["round"],
        ),
    )
    final = evaluated[-1]
    tail = evaluated[-LAST_ROUNDS:]
    common = set.intersection(*(set(r["eval"]) for r in tail))
    last = {
        k: sum(float(r["eval"][k]) for r in tail) / len(tail)
        for k in sorted(common)
        if all(_finite(r["eval"][k]) for r in tail)
    }
    out = {
        "rounds_completed": len(rounds),
        "final": {"round": final["round"], **final["eval"]},
        "final_clients": final.get("clients", {}),
        "best_val": {"round": best["round"], "selected_by": select_key, **best["eval"]},
        "last": {"rounds": [r["round"] for r in tail], **last},
        "total_time_s": sum(r.get("time_s", 0.0) for r in rounds),
        "total_server_time_s": sum(r.get("server_time_s", 0.0) for r in rounds),
        "bytes_up_total": sum(r.get("bytes_up", 0) for r in rounds),
        "bytes_down_total": sum(r.get("bytes_down", 0) for r in rounds),
    }
    if resources := summarize_resources(rounds):
        out["resources"] = resources
    if dp := rounds[-1].get("dp"):  # differential privacy: the budget the whole run spent
        out["dp"] = dp
    if failed := summarize_failures(rounds):
        out["failures"] = failed
    if probes := final.get("probes"):  # the mechanism's state at the end (fgl_flower.probes)
        out["probes"] = {k: {s: v[s] for s in ("mean", "min", "max")} for k, v in probes.items()}
        out["probes_dead"] = final.get("probes_dead", {})
    return out


def summarize_failures(rounds: list[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{partition: {"rounds": n, "refused": n, "last": why}}``: the clients that failed in
    some round (``failures`` of the round records), how often, how often because the server
    refused their reply, and the last reason."""
    out: dict[str, dict[str, Any]] = {}
    for r in rounds:
        for pid, why in r.get("failures", {}).items():
            entry = out.setdefault(str(pid), {"rounds": 0, "refused": 0, "last": ""})
            entry["rounds"] += 1
            entry["refused"] += str(why).startswith("refused: ")
            entry["last"] = f"round {r['round']}: {why}"
    return dict(sorted(out.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 1 << 30))


def summarize_resources(rounds: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The run's resource accounting from the clients' ``resources`` reports (FedDense spec
    §7), means over the clients that reported:

    * ``params``, ``model_kib``: parameters of a client's whole model, and 4 bytes each in KiB;
    * ``shared_params``, ``payload_kib``: parameters uploaded per round, and in KiB (the
      paper's count: one float32 copy, one direction);
    * ``upload_bytes``: serialized bytes uploaded per training client and round, as
      metered (median over rounds; arrays with their keys and headers, plus metrics);
    * ``gflops``: FLOPs of one round's local training, forward and backward, in 1e9: the
      layers' dense matrix products;
    * ``mp_gflops``: the same round's message passing (sparse products with an adjacency),
      counted apart (0 where a client reports none);
    * ``clients``: each client's own report.
    """
    clients: dict[str, dict[str, float]] = {}
    for r in rounds:
        for pid, values in r.get("resources", {}).items():
            clients.setdefault(pid, values)
    if not clients:
        return {}
    mean = lambda key: sum(c[key] for c in clients.values()) / len(clients)  # noqa: E731
    per_client_up = sorted(
        r["bytes_up"] / len(r["train_clients"])
        for r in rounds
        if r.get("train_clients") and "bytes_up" in r
    )
    return {
        "params": mean("params"),
        "model_kib": 4 * mean("params") / 1024,
        "shared_params": mean("shared-params"),
        "payload_kib": 4 * mean("shared-params") / 1024,
        "upload_bytes": per_client_up[len(per_client_up) // 2] if per_client_up else None,
        "gflops": mean("flops") / 1e9,
        "mp_gflops": sum(c.get("mp-flops", 0.0) for c in clients.values()) / len(clients) / 1e9,
        "clients": dict(sorted(clients.items(), key=lambda kv: int(kv[0]))),
    }


def results_written(out_dir: str | Path) -> str:
    """The end of the ServerApp's last log line, logged once all results of the run in
    ``out_dir`` are written: a launcher that streams the log need not wait for more."""
    return f"summary {Path(out_dir) / 'summary.json'}"


#: A file of this name in a run folder asks the run to stop after its current round, with
#: its summary written (``touch <run>/STOP``; ``fgl tune`` stops a pruned trial so).
STOP_FILE = "STOP"


class RunRecorder:
    """Records one run into ``out_dir`` and prints a progress line per round."""

    def __init__(
        self, out_dir: str | Path, cfg: RunConfig, extra: Mapping[str, Any] | None = None
    ) -> None:
        self.out_dir = Path(out_dir)
        self.cfg = cfg
        self.extra = dict(extra or {})
        self.rounds: list[dict[str, Any]] = []
        self.stopped_after: int | None = None  # the last recorded round when STOP was seen
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / STOP_FILE).unlink(missing_ok=True)  # an earlier run's request
        atomic_write_text(self.out_dir / "config.json", cfg.to_json() + "\n")
        if not cfg.resume:  # a resumed run keeps its rounds (see resume())
            (self.out_dir / "rounds.jsonl").write_text("")
        (self.out_dir / "summary.json").unlink(missing_ok=True)

    def resume(self, first_round: int) -> None:
        """Continue a run in this folder: keep the rounds before ``first_round`` (the
        checkpoint's) and drop later ones, which the resumed run records again."""
        path = self.out_dir / "rounds.jsonl"
        self.rounds = []
        for line in path.read_text().splitlines() if path.exists() else []:
            try:
                record = json.loads(line)
            except ValueError:  # a line cut short by the crash: its round is run again
                break
            if record["round"] < first_round:
                self.rounds.append(record)
        atomic_write_text(path, "".join(strict_json(r, sort_keys=True) + "\n" for r in self.rounds))

    def record_round(self, record: dict[str, Any]) -> None:
        """Append one finished round (durably) and print its progress line."""
        self.rounds.append(record)
        append_line(self.out_dir / "rounds.jsonl", strict_json(record, sort_keys=True))
        if self.cfg.progress:
            log(INFO, "%s", self.progress_line(record))

    def stop_requested(self) -> bool:
        """Whether the run folder holds a :data:`STOP_FILE`; the summary then says after
        which recorded round the run stopped (a round whose evaluation was still pending,
        with fused evaluation, is not recorded)."""
        if (self.out_dir / STOP_FILE).exists():
            self.stopped_after = self.rounds[-1]["round"] if self.rounds else 0
        return self.stopped_after is not None

    def progress_line(self, record: Mapping[str, Any]) -> str:
        ev = record.get("eval", {})
        parts = [f"[round {record['round']}/{self.cfg.num_rounds}]"]
        for key in ("val_acc", "test_acc", "test_f1", "test_minority_acc"):
            if key in ev:
                parts.append(f"{key} {100 * ev[key]:.2f}")
        if "val_loss" in ev:
            parts.append(f"val_loss {ev['val_loss']:.4f}")
        if "train_loss" in record.get("train", {}):
            parts.append(f"train_loss {record['train']['train_loss']:.4f}")
        parts.append(
            f"| {record.get('time_s', 0):.2f}s up {_fmt_bytes(record.get('bytes_up', 0))} "
            f"down {_fmt_bytes(record.get('bytes_down', 0))}"
        )
        return " ".join(parts)

    def finish(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Write ``summary.json`` and ``curves.png``; returns the summary."""
        summary = {
            "method": self.cfg.method,
            "dataset": self.cfg.dataset,
            "partition": self.cfg.partition,
            "num_clients": self.cfg.num_clients,
            "num_rounds": self.cfg.num_rounds,
            "seed": self.cfg.seed,
            "model": self.cfg.model,
            **self.extra,
            **summarize_rounds(self.rounds, self.cfg.select_by),
            **(
                {"stopped": f"stopped on request ({STOP_FILE}) after round {self.stopped_after}"}
                if self.stopped_after is not None
                else {}
            ),
            **dict(extra or {}),
        }
        atomic_write_text(
            self.out_dir / "summary.json", strict_json(summary, indent=2, sort_keys=True) + "\n"
        )
        if self.rounds:
            plot_curves(self.rounds, self.out_dir / "curves.png", title=_title(self.cfg))
        return summary


def _title(cfg: RunConfig) -> str:
    return f"{cfg.method} on {cfg.dataset} ({cfg.partition}, {cfg.num_clients} clients, seed {cfg.seed})"


def _fmt_bytes(n: float) -> str:
    """Binary units, as the summary prints them (``3.5 MiB``)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


#: Each task's headline metric (the first a record reports: accuracy, link prediction's AUC,
#: regression's MSE), its label, the metric shown beside it and the factor it is printed at.
HEADLINES = {
    "acc": ("accuracy", "f1", 100.0),
    "auc": ("AUC", "ap", 100.0),
    "mse": ("mean squared error", "mae", 1.0),
}


def headline(record: Mapping[str, Any]) -> str:
    """The headline metric a record of metrics reports (``acc`` if none)."""
    return next((m for m in HEADLINES if f"val_{m}" in record or f"test_{m}" in record), "acc")


def plot_curves(rounds: list[Mapping[str, Any]], path: Path, title: str = "") -> None:
    """The task's headline metric (val/test, weighted mean over clients: accuracy, link
    prediction's AUC or regression's MSE, whichever the rounds report) and the loss per
    round, as a PNG."""
    # A Figure without pyplot: no backend is chosen or switched (a notebook keeps its own).
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    style = {"marker": "o", "markersize": 3}  # a one-round run still shows its points

    fig = Figure(figsize=(10, 3.8))
    ax_acc, ax_loss = fig.subplots(1, 2)
    xs = [r["round"] for r in rounds if r.get("eval")]
    metric = headline({k: None for r in rounds for k in r.get("eval", {})})
    for split in ("val", "test"):
        ys = [r["eval"].get(f"{split}_{metric}") for r in rounds if r.get("eval")]
        if any(y is not None for y in ys):
            ax_acc.plot(xs, ys, label=f"{split} {metric}", **style)
    ax_acc.set_xlabel("round")
    ax_acc.set_ylabel(f"{HEADLINES[metric][0]} (weighted mean)")
    ax_acc.legend()
    for key, src, label in (
        ("train_loss", "train", "train loss"),
        ("val_loss", "eval", "val loss"),
    ):
        pts = [(r["round"], r[src][key]) for r in rounds if key in r.get(src, {})]
        if pts:
            ax_loss.plot(*zip(*pts), label=label, **style)
    ax_loss.set_xlabel("round")
    ax_loss.set_ylabel("loss")
    ax_loss.legend()
    for ax in (ax_acc, ax_loss):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # rounds are whole numbers
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, path)
