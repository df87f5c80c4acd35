"""Benchmark tables: run every (row, seed) of an experiment file and write a Markdown table.

An experiment file (TOML, under ``experiments/``) declares the rows of one results table::

    title = "Reference methods"
    doc = "docs/results.md"          # the table is written here (relative to the repo)
    out = "runs/platform"            # one run folder per row and seed
    seeds = [0, 1, 2]
    notes = "free text placed above the table"

    [defaults]                       # fgl run flags or run-config keys shared by all rows
    rounds = 100

    [[row]]
    group = "Cora (Louvain, 10 clients, GCN)"
    method = "fedavg"
    dataset = "Cora"
    partition = "louvain"
    clients = 10
    paper = 81.9                     # optional: the paper's number for this row
    set = { "local-epochs" = 3 }     # optional: extra run-config overrides

``fgl bench FILE`` runs each row and seed with ``fgl run`` (skipping runs whose
``summary.json`` already exists, so an interrupted benchmark resumes), then writes the
table: mean ± population std over seeds of the weighted test accuracy at the
best-validation round and at the final round, with the exact command of each row.
"""

from __future__ import annotations

import json
import shlex
import statistics
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fgl_flower.config import read_toml
from fgl_flower.errors import ConfigError
from fgl_flower.results import atomic_write_text

FLAGS = ("method", "dataset", "partition", "clients", "rounds", "model")


@dataclass
class Row:
    """One table row: a run configuration repeated over seeds."""

    group: str
    args: dict[str, Any]
    overrides: dict[str, Any] = field(default_factory=dict)
    paper: float | str | None = None

    @property
    def slug(self) -> str:
        parts = [str(self.args.get(k, "")) for k in ("dataset", "partition", "clients", "method")]
        extra = "-".join(f"{k}={v}" for k, v in sorted(self.overrides.items()))
        return "-".join(p for p in parts if p) + (f"-{extra}" if extra else "")

    def command(self, seed: int | str, out: str) -> list[str]:
        cmd = ["fgl", "run"]
        for k in FLAGS:
            if k in self.args:
                cmd += [f"--{k}", str(self.args[k])]
        cmd += ["--seed", str(seed)]
        for k, v in sorted(self.overrides.items()):
            cmd += ["--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}"]
        return cmd + ["--out", out]


@dataclass
class Experiment:
    title: str
    doc: Path
    out: Path
    seeds: list[int]
    rows: list[Row]
    root: Path
    notes: str = ""


def load_experiment(path: str | Path, root: Path | None = None) -> Experiment:
    """Parse an experiment file; relative paths are resolved against ``root`` (cwd)."""
    path = Path(path)
    root = root or Path.cwd()
    spec = read_toml(path)
    defaults = spec.get("defaults", {})
    rows = []
    for i, raw in enumerate(spec.get("row", [])):
        merged = {**defaults, **raw}
        unknown = set(merged) - set(FLAGS) - {"group", "set", "paper"}
        if unknown:
            raise ConfigError(f"{path}: row {i} has unknown fields {sorted(unknown)}.")
        rows.append(Row(
            group=str(merged.get("group", merged.get("dataset", ""))),
            args={k: merged[k] for k in FLAGS if k in merged},
            overrides={**defaults.get("set", {}), **raw.get("set", {})},
            paper=merged.get("paper"),
        ))
    if not rows:
        raise ConfigError(f"{path}: no [[row]] entries.")
    return Experiment(
        title=spec.get("title", path.stem),
        doc=root / spec.get("doc", f"docs/results/{path.stem}.md"),
        out=root / spec.get("out", f"runs/{path.stem}"),
        seeds=list(spec.get("seeds", [0, 1, 2])),
        rows=rows,
        root=root,
        notes=spec.get("notes", ""),
    )


def run_experiment(exp: Experiment, dry_run: bool = False) -> None:
    """Run every missing (row, seed) with ``fgl run``; print one line per run."""
    total = len(exp.rows) * len(exp.seeds)
    done = 0
    for row in exp.rows:
        for seed in exp.seeds:
            done += 1
            out = exp.out / row.slug / f"seed{seed}"
            if (out / "summary.json").exists():
                continue
            cmd = row.command(seed, str(out))
            print(f"[{done}/{total}] {shlex.join(cmd)}", flush=True)
            if dry_run:
                continue
            out.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            with open(out / "fgl.log", "w") as log:
                code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
            status = "ok" if code == 0 else f"FAILED (exit {code}, see {out / 'fgl.log'})"
            print(f"    {status} in {time.perf_counter() - t0:.0f}s", flush=True)


def _mean_std(values: list[float]) -> str:
    if not values:
        return "—"
    return f"{100 * statistics.fmean(values):.2f} ± {100 * statistics.pstdev(values):.2f}"


def collect(exp: Experiment, row: Row) -> list[Mapping[str, Any]]:
    summaries = []
    for seed in exp.seeds:
        path = exp.out / row.slug / f"seed{seed}" / "summary.json"
        if path.exists():
            summaries.append(json.loads(path.read_text()))
    return summaries


def render(exp: Experiment) -> str:
    """The Markdown results table of ``exp`` from the run folders that exist."""
    lines = [f"# {exp.title}", "", "Generated by `fgl bench` from the runs' `summary.json` files; "
             "do not edit by hand.", ""]
    if exp.notes:
        lines += [exp.notes.strip(), ""]
    lines += [
        f"Mean ± std (population) over seeds {', '.join(map(str, exp.seeds))} (`SEED` in the "
        "commands). *Best-val*: test accuracy at the round of highest weighted validation "
        "accuracy; *final*: at the last round. *Weighted*: mean over clients weighted by their "
        "test-node (or test-graph) counts; *client mean*: unweighted mean over clients; *worst*: "
        "the lowest client. s/round: wall time per round inside the ServerApp.",
        "",
        "| setting | method | paper | test acc, weighted (best-val) | test acc, weighted (final) "
        "| test acc, client mean (best-val) | test macro-F1 (best-val) | worst client (best-val) "
        "| s/round | seeds | command |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in exp.rows:
        runs = collect(exp, row)
        best = [r["best_val"]["test_acc"] for r in runs if "best_val" in r]
        final = [r["final"]["test_acc"] for r in runs if "final" in r]
        plain = [r["best_val"]["test_acc_mean"] for r in runs if "best_val" in r]
        f1 = [r["best_val"]["test_f1"] for r in runs if "best_val" in r]
        worst = [r["best_val"]["test_acc_worst"] for r in runs if "best_val" in r]
        per_round = [r["total_time_s"] / max(r["rounds_completed"], 1) for r in runs if "total_time_s" in r]
        out = exp.out.relative_to(exp.root) if exp.out.is_relative_to(exp.root) else exp.out
        cmd = shlex.join(row.command("SEED", f"{out}/{row.slug}/seedSEED"))
        cells = [
            row.group, str(row.args.get("method")), "—" if row.paper is None else str(row.paper),
            _mean_std(best), _mean_std(final), _mean_std(plain), _mean_std(f1), _mean_std(worst),
            f"{statistics.fmean(per_round):.2f}" if per_round else "—",
            f"{len(runs)}/{len(exp.seeds)}", f"`{cmd}`",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_doc(exp: Experiment) -> Path:
    atomic_write_text(exp.doc, render(exp))
    return exp.doc
