"""Benchmark tables: run every (row, seed) of an experiment file and write a Markdown table.

An experiment file (TOML, under ``experiments/``) declares the rows of one results table::

    title = "Reference methods"
    doc = "docs/results.md"          # the table is written here (relative to the repo)
    out = "runs/platform"            # one run folder per row and seed
    seeds = [0, 1, 2]
    notes = "free text placed above the table"
    doc_title = "..."                # optional: heading when several files share `doc`

    [defaults]                       # fgl run flags or run-config keys shared by all rows
    rounds = 100

    [[row]]
    group = "Cora (Louvain, 10 clients, GCN)"
    method = "fedavg"
    dataset = "Cora"
    partition = "louvain"
    clients = 10
    paper = 81.9                     # optional: the paper's number(s) for this row
    set = { "local-epochs" = 3 }     # optional: extra run-config overrides
    inprocess = true                 # optional: `fgl run --inprocess` (no Ray; small graphs)

``columns = ["acc", "minority", ...]`` (top level, optional) picks the metric columns
from :data:`COLUMNS`; the default is the accuracy/F1 set.

Paired comparisons: a row may carry an ``id``, and another row ``versus = "<id>"``; the
metrics named in ``paired = ["acc-last5", ...]`` (top level) then get a second table with
the per-seed differences (row minus its ``versus`` row, same seed) and their mean with a 95 %
t-interval.

``fgl bench FILE`` runs each row and seed with ``fgl run`` (``--jobs N``: N at a time;
skipping runs whose ``summary.json`` already exists, so an interrupted benchmark resumes), then
writes the table: mean ± population std over seeds of each metric column, time per round and
per run, with the exact command of each row.

Run records: run folders stay on the machine that ran them, so each finished run's numbers
(what the tables read, about 10 KB) are also written to ``<doc stem>.runs.jsonl`` beside the
document, one line per command and seed. A table is rendered from the run folders and, for
seeds without one here, from the records; a recorded run is not run again. So a benchmark
split over machines or sessions completes its rows, and a page can be rewritten anywhere.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import shlex
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fgl_flower.config import read_toml
from fgl_flower.datasets.root import file_lock
from fgl_flower.errors import ConfigError
from fgl_flower.results import atomic_write_text

FLAGS = ("method", "dataset", "partition", "clients", "rounds", "model")


@dataclass(frozen=True)
class Column:
    """A metric column: header, how to read one run's value from its summary, and how to
    show the values of a row's runs (default: percent, mean ± population std)."""

    header: str
    value: Callable[[Mapping[str, Any]], float | None]
    cell: Callable[[list[float], list[Mapping[str, Any]]], str] | None = None

    def render(self, runs: list[Mapping[str, Any]]) -> str:
        values = [v for r in runs if (v := self.value(r)) is not None]
        return self.cell(values, runs) if self.cell is not None else _mean_std(values)


def _at(point: str, key: str) -> Callable[[Mapping[str, Any]], float | None]:
    return lambda summary: summary.get(point, {}).get(key)


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


def first_round_reaching(threshold: float, key: str = "test_acc_mean") -> Callable[[Mapping[str, Any]], float | None]:
    """A run's first round whose ``eval[key]`` reaches ``threshold`` (``None`` if it never
    does)."""
    def value(summary: Mapping[str, Any]) -> float | None:
        return next((float(r) for r, v in eval_history(summary, key) if v >= threshold), None)
    return value


def _first_rounds(values: list[float], runs: list[Mapping[str, Any]]) -> str:
    never = len(runs) - len(values)
    text = f"{statistics.fmean(values):.0f}" if values else "—"
    return text + (f" ({never} never)" if never else "")


#: Metric columns an experiment may list in ``columns``.
COLUMNS: dict[str, Column] = {
    "acc": Column("test acc, weighted (best-val)", _at("best_val", "test_acc")),
    "acc-final": Column("test acc, weighted (final)", _at("final", "test_acc")),
    "acc-mean": Column("test acc, client mean (best-val)", _at("best_val", "test_acc_mean")),
    "f1": Column("test macro-F1 (best-val)", _at("best_val", "test_f1")),
    "f1-all": Column("test macro-F1, all classes (best-val)", _at("best_val", "test_f1_all")),
    "val": Column("val acc (best-val)", _at("best_val", "val_acc")),
    "global-acc": Column("Stage-1 M_G test acc", _at("best_val", "global_test_acc")),
    "global-f1-all": Column("Stage-1 M_G macro-F1, all classes", _at("best_val", "global_test_f1_all")),
    "acc-last5": Column("test acc, weighted (mean of last 5 rounds)", _at("last", "test_acc")),
    "val-last5": Column("val acc, weighted (mean of last 5 rounds)", _at("last", "val_acc")),
    "worst": Column("worst client (best-val)", _at("best_val", "test_acc_worst")),
    "minority": Column("minority acc, pooled (best-val)", _at("best_val", "test_minority_acc")),
    "minority-final": Column("minority acc, pooled (final)", _at("final", "test_minority_acc")),
    "acc-paper": Column("test acc, client mean (final) ± FedStar std", _at("final", "test_acc_mean"),
                        _with_fedstar_std),
    "acc-paper-runstd": Column("± run std", _at("final", "test_acc_mean"), _run_std),
    "acc-gcfl": Column("client mean, GCFL's rule (final)", _at("final", "test_acc_gcfl_mean")),
    "first65": Column("first round ≥ 65% (client mean)", first_round_reaching(0.65), _first_rounds),
    "latent-nonempty": Column("latent rows non-empty (final)", _probe("latent.nonempty"), _plain(".2f")),
    "latent-contrast": Column("latent contrast (final)", _probe("latent.contrast"), _plain(".2f")),
    "latent-homophily": Column("latent homophily (final)", _probe("latent.homophily"), _plain(".2f")),
    "latent-hubs": Column("latent hub share (final)", _probe("latent.hubs"), _plain(".2f")),
    "clusters": Column("clusters (final)", _probe("clusters"), _plain(".1f")),
    "gflops": Column("GFLOPs /client/round", _at("resources", "gflops"), _plain(".2f")),
    "mp-gflops": Column("message-passing GFLOPs /client/round", _at("resources", "mp_gflops"), _plain(".2f")),
    "payload-kib": Column("payload KiB (4 B × shared params)", _at("resources", "payload_kib"), _plain(".2f")),
    "upload-bytes": Column("upload B /client/round (metered)", _at("resources", "upload_bytes"), _plain(".0f")),
    "model-kib": Column("model KiB (client mean)", _at("resources", "model_kib"), _plain(".2f")),
    "shared-params": Column("shared params", _at("resources", "shared_params"), _plain(".0f")),
}
DEFAULT_COLUMNS = ("acc", "acc-final", "acc-mean", "f1", "worst")
GENERATED = ("Generated by `fgl bench` from the runs' `summary.json` files and their records "
             "(`.runs.jsonl` beside this page); do not edit by hand.")


@dataclass
class Row:
    """One table row: a run configuration repeated over seeds."""

    group: str
    args: dict[str, Any]
    overrides: dict[str, Any] = field(default_factory=dict)
    paper: float | str | None = None
    own: dict[str, Any] = field(default_factory=dict)  # the row's own `set` (not defaults')
    inprocess: bool = False  # `fgl run --inprocess`
    id: str = ""  # a name other rows compare against (``versus``)
    versus: str = ""  # the ``id`` of the row this one is compared with, seed by seed

    @property
    def label(self) -> str:
        """``group (method)``: how the paired table names a row."""
        return f"{self.group} ({self.args.get('method')})"

    @property
    def slug(self) -> str:
        """Run-folder name: dataset, partition, clients, method, model and the row's own
        overrides (what tells rows of one file apart)."""
        parts = [str(self.args.get(k, "")) for k in ("dataset", "partition", "clients", "method", "model")]
        extra = "-".join(f"{k}={v}" for k, v in sorted(self.own.items()))
        slug = "-".join(p for p in parts if p) + (f"-{extra}" if extra else "")
        return re.sub(r"[^\w.,=+-]", "_", slug)

    def command(self, seed: int | str, out: str, overwrite: bool = True) -> list[str]:
        """The ``fgl run`` of this row; ``overwrite`` reruns a folder left without a summary
        (what the benchmark needs; the documents show the command without it)."""
        cmd = ["fgl", "run"]
        for k in FLAGS:
            if k in self.args:
                cmd += [f"--{k}", str(self.args[k])]
        cmd += ["--seed", str(seed)]
        if self.inprocess:
            cmd.append("--inprocess")
        for k, v in sorted(self.overrides.items()):
            cmd += ["--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}"]
        return cmd + ["--out", out] + (["--overwrite"] if overwrite else [])


@dataclass
class Experiment:
    title: str
    doc: Path
    out: Path
    seeds: list[int]
    rows: list[Row]
    root: Path
    notes: str = ""
    columns: tuple[str, ...] = DEFAULT_COLUMNS
    doc_title: str = ""
    source: Path | None = None  # the experiment file
    order: int = 0  # position among the sections of a shared ``doc``
    paired: tuple[str, ...] = ()  # metric columns compared seed by seed (rows with ``versus``)


def _doc_path(spec: Mapping[str, Any], path: Path, root: Path) -> Path:
    """The results document of experiment file ``path`` (``doc``, or one named after it)."""
    return root / spec.get("doc", f"docs/results/{path.stem}.md")


def load_experiment(path: str | Path, root: Path | None = None) -> Experiment:
    """Parse an experiment file; relative paths are resolved against ``root`` (cwd)."""
    path = Path(path)
    root = root or Path.cwd()
    spec = read_toml(path)
    defaults = spec.get("defaults", {})
    rows = []
    for i, raw in enumerate(spec.get("row", [])):
        merged = {**defaults, **raw}
        unknown = set(merged) - set(FLAGS) - {"group", "set", "paper", "inprocess", "id", "versus"}
        if unknown:
            raise ConfigError(f"{path}: row {i} has unknown fields {sorted(unknown)}.")
        rows.append(Row(
            group=str(merged.get("group", merged.get("dataset", ""))),
            args={k: merged[k] for k in FLAGS if k in merged},
            overrides={**defaults.get("set", {}), **raw.get("set", {})},
            paper=merged.get("paper"),
            own=dict(raw.get("set", {})),
            inprocess=bool(merged.get("inprocess", False)),
            id=str(raw.get("id", "")),
            versus=str(raw.get("versus", "")),
        ))
    if not rows:
        raise ConfigError(f"{path}: no [[row]] entries.")
    columns = tuple(spec.get("columns", DEFAULT_COLUMNS))
    paired = tuple(spec.get("paired", ()))
    ids = {row.id for row in rows if row.id}
    missing = sorted({row.versus for row in rows if row.versus} - ids)
    if missing:
        raise ConfigError(f"{path}: versus names no row id: {missing}; ids: {sorted(ids)}.")
    unknown = [c for c in columns + paired if c not in COLUMNS]
    if unknown:
        raise ConfigError(f"{path}: unknown columns {unknown}; known: {', '.join(COLUMNS)}.")
    return Experiment(
        title=spec.get("title", path.stem),
        doc=_doc_path(spec, path, root),
        out=root / spec.get("out", f"runs/{path.stem}"),
        seeds=list(spec.get("seeds", [0, 1, 2])),
        rows=rows,
        root=root,
        notes=spec.get("notes", ""),
        columns=columns,
        doc_title=spec.get("doc_title", ""),
        source=path,
        order=int(spec.get("order", 0)),
        paired=paired,
    )


def select_rows(exp: Experiment, patterns: list[str] | None) -> list[Row]:
    """The rows whose run-folder name (:attr:`Row.slug`) matches one of the shell-style
    ``patterns`` (e.g. ``*fedavg*``; all rows if ``patterns`` is None)."""
    if patterns is None:
        return list(exp.rows)
    return [row for row in exp.rows if any(fnmatch.fnmatchcase(row.slug, p) for p in patterns)]


def run_experiment(exp: Experiment, dry_run: bool = False, seeds: list[int] | None = None,
                   rows: list[str] | None = None, jobs: int = 1, time_limit: float | None = None,
                   neutral: Mapping[str, Any] | None = None) -> None:
    """Run every (seed, row) with neither a run folder nor a record (only ``seeds`` and the
    rows matching ``rows`` (see :func:`select_rows`) if given) with ``fgl run``, ``jobs`` at
    a time; print one line per run as it starts and one as it ends.

    A run folder left by an interrupted run that has a server checkpoint is continued with
    ``fgl run --resume``, not started again. ``time_limit`` (seconds): no run starts after
    it, and the runs still going are stopped then (as by Ctrl-C), so that the same command
    later resumes them (one that has written its summary is let exit). ``neutral``:
    :data:`OUTCOME_NEUTRAL_KEYS` set for these runs (e.g. ``checkpoint-every``)."""
    from fgl_flower.checkpoint import resumable

    seeds = exp.seeds if seeds is None else seeds
    selected = select_rows(exp, rows)
    records = load_records(records_path(exp.doc))
    recorded = {(row.slug, seed) for seed in seeds for row in selected
                if (record_key(exp, row), seed) in records}
    if recorded:
        print(f"{len(recorded)} run(s) recorded in {records_path(exp.doc)} are not run again "
              "(delete their lines to rerun them)", flush=True)
    missing = []
    for seed in seeds:  # seed-major: a partial benchmark has every row for early seeds
        for row in selected:
            out = exp.out / row.slug / f"seed{seed}"
            if (row.slug, seed) in recorded or (out / "summary.json").exists():
                continue
            if resumable(out):
                cmd = ["fgl", "run", "--resume", str(out)] + (["--inprocess"] if row.inprocess else [])
            else:
                cmd = replace(row, overrides={**row.overrides, **(neutral or {})}).command(seed, str(out))
            missing.append((out, cmd))
    pending = [(f"[{i}/{len(missing)}]", out, cmd) for i, (out, cmd) in enumerate(missing, 1)]
    if dry_run:
        for tag, _, cmd in pending:
            print(f"{tag} {shlex.join(cmd)}", flush=True)
        return
    deadline = None if time_limit is None else time.monotonic() + time_limit
    pool = ThreadPoolExecutor(max_workers=jobs)  # each thread waits on its own process
    try:
        outcomes = [future.result() for future in [pool.submit(_run_one, *run, deadline) for run in pending]]
    finally:
        pool.shutdown(cancel_futures=True)  # after Ctrl-C or an error, start no further runs
    stopped, unstarted = outcomes.count("stopped"), outcomes.count("not started")
    if stopped or unstarted:
        print(f"time limit reached: {stopped} run(s) stopped, {unstarted} not started; the same "
              "command resumes the stopped ones from their last checkpoint (`checkpoint-every`) "
              "and starts the others", flush=True)


#: Seconds a run stopped at the time limit gets to end after its Ctrl-C (SIGINT): Flower's
#: runtimes stop their processes then; what is left after it is killed.
STOP_GRACE_S = 60.0


def _run_one(tag: str, out: Path, cmd: list[str], deadline: float | None = None) -> str:
    """One ``fgl run`` into ``out`` (its output in ``out/fgl.log``, appended to when it
    resumes; ``bench.json`` holds its wall time when it succeeds): ``"ok"``, ``"failed"``,
    ``"stopped"`` at ``deadline`` (a :func:`time.monotonic` time) or ``"not started"``."""
    if deadline is not None and time.monotonic() >= deadline:
        return "not started"
    print(f"{tag} {shlex.join(cmd)}", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    resumed = "--resume" in cmd
    t0 = time.perf_counter()
    with open(out / "fgl.log", "a" if resumed else "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            code = proc.wait(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            code = _wait_if_done(proc, out)
            if code is None:
                _stop(proc)
                print(f"    {tag} stopped at the time limit after {time.perf_counter() - t0:.0f}s", flush=True)
                return "stopped"
        except BaseException:  # Ctrl-C in this process reached the run too; let it end
            _stop(proc)
            raise
    wall = time.perf_counter() - t0
    if code == 0:  # a resumed run's wall time covers only its last part
        bench = {"wall_s": wall, **({"resumed": True} if resumed else {})}
        atomic_write_text(out / "bench.json", json.dumps(bench) + "\n")
    status = "ok" if code == 0 else f"FAILED (exit {code}, see {out / 'fgl.log'})"
    print(f"    {tag} {status} in {wall:.0f}s", flush=True)
    return "ok" if code == 0 else "failed"


def _wait_if_done(proc: subprocess.Popen, out: Path) -> int | None:
    """At the time limit: a run that has written its ``summary.json`` has finished and is
    only exiting, so wait for it (up to :data:`STOP_GRACE_S`) instead of stopping it; its
    exit code, or ``None`` for a run still going."""
    if not (out / "summary.json").exists():
        return None
    try:
        return proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        return None


def _stop(proc: subprocess.Popen) -> None:
    """Stop ``proc`` as Ctrl-C would (its runtimes tear down their processes), then kill
    what is left of its process tree after :data:`STOP_GRACE_S`."""
    if proc.poll() is not None:
        return
    import psutil

    from fgl_flower.runtime.processes import stop_processes

    try:
        tree = [psutil.Process(proc.pid)]
        tree += tree[0].children(recursive=True)
    except psutil.Error:
        tree = []
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    stop_processes([p for p in tree if p.is_running()], grace=5.0)
    proc.wait()


def _mean_std(values: list[float]) -> str:
    if not values:
        return "—"
    return f"{100 * statistics.fmean(values):.2f} ± {100 * statistics.pstdev(values):.2f}"


def doc_command(exp: Experiment, row: Row) -> str:
    """The command of ``row`` as its table shows it (``SEED`` for the seed)."""
    out = exp.out.relative_to(exp.root) if exp.out.is_relative_to(exp.root) else exp.out
    return shlex.join(row.command("SEED", f"{out}/{row.slug}/seedSEED", overwrite=False))


def record_key(exp: Experiment, row: Row) -> str:
    """What identifies ``row``'s runs in the records: its command without
    :data:`OUTCOME_NEUTRAL_KEYS` (as kept lines are matched)."""
    return _command_key(f"`{doc_command(exp, row)}`")[1:-1]


def _folder_summary(exp: Experiment, row: Row, seed: int) -> dict[str, Any] | None:
    """The summary of ``row``'s run of ``seed`` in its run folder (with ``wall_s`` from
    ``bench.json`` unless the run was resumed), or ``None``."""
    path = exp.out / row.slug / f"seed{seed}" / "summary.json"
    if not path.exists():
        return None
    summary = json.loads(path.read_text())
    summary["_dir"] = str(path.parent)
    bench_file = path.with_name("bench.json")
    bench = json.loads(bench_file.read_text()) if bench_file.exists() else {}
    if "wall_s" in bench and not bench.get("resumed"):
        summary["wall_s"] = bench["wall_s"]
    return summary


def collect(exp: Experiment, row: Row, records: Records | None = None) -> list[Mapping[str, Any]]:
    """The summaries of ``row``'s finished seeds: from the run folder, else from
    ``records``."""
    key = record_key(exp, row)
    summaries = []
    for seed in exp.seeds:
        summary = _folder_summary(exp, row, seed)
        if summary is None and records is not None:
            summary = records.get((key, seed))
        if summary is not None:
            summaries.append(summary)
    return summaries


#: ``(record key, seed) -> run record`` (:func:`run_record`).
Records = dict[tuple[str, int], dict[str, Any]]

#: Summary keys a run record keeps: what the tables read.
RECORD_KEYS = ("seed", "final", "best_val", "last", "final_clients", "resources",
               "total_time_s", "rounds_completed", "num_rounds", "wall_s", "probes", "probes_dead")


def run_record(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The record of a run: :data:`RECORD_KEYS` of its summary and the per-round
    :data:`HISTORY_KEYS` (:func:`eval_history`)."""
    record = {k: summary[k] for k in RECORD_KEYS if k in summary}
    history = {k: h for k in HISTORY_KEYS if (h := eval_history(summary, k))}
    return {**record, "history": history} if history else record


def records_path(doc: Path) -> Path:
    """The run records of results page ``doc``: ``<stem>.runs.jsonl`` beside it."""
    return doc.with_name(f"{doc.stem}.runs.jsonl")


def load_records(path: Path) -> Records:
    """The records in ``path`` (none if it does not exist)."""
    if not path.exists():
        return {}
    records: Records = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        try:
            entry = json.loads(line)
            records[(entry["command"], int(entry["seed"]))] = entry["run"]
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"{path}:{n}: not a run record ({e}); restore the file from git.") from e
    return records


def _records_lock(path: Path):
    """An inter-process lock for ``path``'s records (its lock file is outside the repo)."""
    tag = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    return file_lock(Path(tempfile.gettempdir()) / f"fgl-bench-records-{tag}.lock")


def sync_records(path: Path, exps: list[Experiment]) -> Records:
    """Record the runs in ``exps``' run folders in ``path`` (a folder's run replaces its
    record), drop records no row of ``exps`` would show, and return the records."""
    with _records_lock(path):
        old = load_records(path)
        shown: dict[str, set[int]] = {}
        for exp in exps:
            for row in exp.rows:
                shown.setdefault(record_key(exp, row), set()).update(exp.seeds)
        records = {k: v for k, v in old.items() if k[1] in shown.get(k[0], ())}
        for exp in exps:
            for row in exp.rows:
                for seed in exp.seeds:
                    summary = _folder_summary(exp, row, seed)
                    if summary is not None:
                        records[(record_key(exp, row), seed)] = run_record(summary)
        if records != old:
            lines = [json.dumps({"command": k, "seed": s, "run": records[(k, s)]}, sort_keys=True)
                     for k, s in sorted(records)]
            atomic_write_text(path, "".join(line + "\n" for line in lines))
    return records


#: Marks a row whose table line was kept from the document because its runs are absent.
KEPT = "†"


#: Run-config keys that never change a run's numbers: a kept line still stands for a command
#: that differs from it only in these (checkpoints are bit-exact, a test checks resume;
#: ``untrained-classes`` only decides whether a run starts).
OUTCOME_NEUTRAL_KEYS = ("checkpoint-every", "progress", "untrained-classes")


def _command_key(cell: str) -> str:
    """A command cell as a key for kept lines: without ``--overwrite`` (pages written before
    it was left out show it) and without :data:`OUTCOME_NEUTRAL_KEYS`."""
    cell = cell.replace(" --overwrite`", "`")
    for key in OUTCOME_NEUTRAL_KEYS:
        cell = re.sub(rf" --set {re.escape(key)}=\S+", "", cell)
    return cell


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split(" | ")]


def _marked(seeds_cell: str) -> str:
    """A kept line's seeds cell, marked :data:`KEPT` once."""
    return seeds_cell if seeds_cell.endswith(KEPT) else f"{seeds_cell} {KEPT}"


#: Header of the paired-comparison table (:func:`paired_table`).
PAIRED_HEADER = ("row", "minus", "metric", "per seed", "mean", "95 % CI", "seeds")


@dataclass
class Kept:
    """The measured lines of a document as it was (:func:`kept_lines`).

    ``rows``: ``(command cell, seed count)`` -> cells of a result row, by column header where
    its table has a header line (the union over tables showing the same runs with other
    columns), else in order (two tables may show the same runs over different seeds).
    ``paired``: ``(row, minus, metric)`` -> cells of a paired comparison."""

    rows: dict[tuple[str, str], dict[str, str] | list[str]] = field(default_factory=dict)
    paired: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)

    def cells(self, cmd: str, seeds: int, headers: list[str]) -> list[str] | None:
        """The kept cells of the row running ``cmd`` over ``seeds`` seeds under today's
        ``headers``: a column the old table lacked is "—" (a header-less line must have
        today's columns)."""
        old = self.rows.get((_command_key(f"`{cmd}`"), str(seeds)))
        if isinstance(old, dict):
            return [old.get(h, "—") for h in headers]
        return list(old) if old is not None and len(old) == len(headers) else None


def kept_lines(text: str) -> Kept:
    """The measured lines (seeds not ``0``/``0/N``) of a document's ``text``."""
    kept = Kept()
    headers: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("|---"):
            continue
        if not line.startswith("| "):
            headers = None
            continue
        cells = _cells(line)
        if cells[-1] == "command" or tuple(cells) == PAIRED_HEADER:
            headers = cells
        elif cells[-1].startswith("`fgl run ") and not cells[-2].startswith("0/"):
            key = (_command_key(cells[-1]), cells[-2].removesuffix(f" {KEPT}").partition("/")[2])
            if headers and len(headers) == len(cells):
                old = kept.rows.get(key)  # the same runs in another table: the union of columns
                merged = dict(old) if isinstance(old, dict) else {}
                merged.update((h, c) for h, c in zip(headers, cells) if c != "—" or h not in merged)
                kept.rows[key] = merged
            else:
                kept.rows[key] = cells
        elif headers == list(PAIRED_HEADER) and len(cells) == len(headers) and cells[-1] != "0":
            kept.paired[(cells[0], cells[1], cells[2])] = cells
    return kept


def render(exp: Experiment, level: int = 1, kept: Kept | None = None,
           records: Records | None = None) -> str:
    """The Markdown results table of ``exp`` from the run folders that exist and the
    ``records`` of runs whose folders are elsewhere (its title a heading of ``level``).

    A row none of whose runs is here or recorded keeps its line from ``kept``
    (:func:`kept_lines` of the document as it was; same command; a column added since shows
    "—"), marked :data:`KEPT`: pages written before run records existed keep the rows measured
    then. A paired comparison of two kept rows keeps its line too."""
    kept = kept or Kept()
    lines = [f"{'#' * level} {exp.title}", ""]
    if level == 1:
        lines += [GENERATED, ""]
    if exp.notes:
        lines += [exp.notes.strip(), ""]
    rows = [(row, collect(exp, row, records)) for row in exp.rows]
    headers = ["setting", "method", "paper", *(COLUMNS[c].header for c in exp.columns),
               "s/round", "min/run", "seeds", "command"]
    selected = sorted({r["best_val"].get("selected_by", "val_acc") for _, runs in rows
                       for r in runs if "best_val" in r}) or ["val_acc"]
    lines += [
        f"Mean ± std (population) over seeds {', '.join(map(str, exp.seeds))} (`SEED` in the "
        f"commands). *Best-val*: at the round selected by {' / '.join(selected)} (highest "
        "accuracy or lowest loss, weighted over clients); *final*: at the last round. "
        "*Weighted* and *pooled*: over all clients' test nodes (or graphs), i.e. weighted by "
        "their counts; *client mean*: unweighted mean over clients; *worst*: the lowest "
        "client. s/round: wall time per round inside the ServerApp; min/run: wall time of "
        "the whole `fgl run` (start-up included).",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
    ]
    reused: set[int] = set()
    for row, runs in rows:
        cmd = doc_command(exp, row)
        cells = kept.cells(cmd, len(exp.seeds), headers)
        if not runs and cells is not None:
            cells[:3] = [row.group, str(row.args.get("method")), "—" if row.paper is None else str(row.paper)]
            cells[-2] = _marked(cells[-2])
            cells[-1] = f"`{cmd}`"
            lines.append("| " + " | ".join(cells) + " |")
            reused.add(id(row))
            continue
        per_round = [r["total_time_s"] / max(r["rounds_completed"], 1) for r in runs if "total_time_s" in r]
        wall = [r["wall_s"] / 60 for r in runs if "wall_s" in r]
        metrics = [COLUMNS[c].render(runs) for c in exp.columns]
        cells = [
            row.group, str(row.args.get("method")), "—" if row.paper is None else str(row.paper),
            *metrics,
            f"{statistics.fmean(per_round):.2f}" if per_round else "—",
            f"{statistics.fmean(wall):.1f}" if wall else "—",
            f"{len(runs)}/{len(exp.seeds)}", f"`{cmd}`",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if reused:
        lines += ["", f"{KEPT} Kept from an earlier version of this page: the row's runs are neither on "
                  "the machine that wrote this one nor in its run records; its command reproduces them."]
    if exp.paired and any(row.versus for row in exp.rows):
        lines += ["", *paired_table(exp, {id(row): runs for row, runs in rows}, kept, reused)]
    return "\n".join(lines) + "\n"


def paired_differences(runs: list[Mapping[str, Any]], base: list[Mapping[str, Any]],
                       column: Column) -> dict[int, float]:
    """``seed -> value(run) - value(base run)`` over the seeds both have (in points)."""
    mine = {int(r["seed"]): v for r in runs if (v := column.value(r)) is not None}
    theirs = {int(r["seed"]): v for r in base if (v := column.value(r)) is not None}
    return {s: 100 * (mine[s] - theirs[s]) for s in sorted(mine.keys() & theirs.keys())}


def t_interval(values: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """The ``level`` Student-t confidence interval of the mean (``None`` below 2 values)."""
    if len(values) < 2:
        return None
    from scipy.stats import t

    half = t.ppf(0.5 + level / 2, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    mean = statistics.fmean(values)
    return mean - half, mean + half


def _signed(x: float) -> str:
    """``x`` in points with its sign, two decimals; a value that rounds to zero is "0.00"."""
    text = f"{x:+.2f}"
    return "0.00" if text[1:] == "0.00" else text


def paired_table(exp: Experiment, runs_of: Mapping[int, list[Mapping[str, Any]]],
                 kept: Kept | None = None, kept_rows: set[int] | frozenset[int] = frozenset()) -> list[str]:
    """Lines of the paired-comparison table: per row with ``versus`` and paired metric, the
    per-seed differences, their mean and 95 % t-interval (points); ``runs_of`` maps
    ``id(row)`` to its runs. A comparison of two rows whose lines were kept (``kept_rows``)
    keeps its line from ``kept``, marked :data:`KEPT`."""
    kept = kept or Kept()
    by_id = {row.id: row for row in exp.rows if row.id}
    lines = ["Paired differences, this row minus the row it is compared with, same seed (same "
             "partition and split), in points; mean and 95 % t-interval over the seeds.", "",
             "| " + " | ".join(PAIRED_HEADER) + " |", "|" + "---|" * len(PAIRED_HEADER)]
    for row in exp.rows:
        if not row.versus:
            continue
        base = by_id[row.versus]
        for key in exp.paired:
            old = kept.paired.get((row.label, base.label, COLUMNS[key].header))
            if old is not None and id(row) in kept_rows and id(base) in kept_rows:
                lines.append("| " + " | ".join([*old[:-1], _marked(old[-1])]) + " |")
                continue
            diffs = paired_differences(runs_of[id(row)], runs_of[id(base)], COLUMNS[key])
            values = list(diffs.values())
            ci = t_interval(values)
            lines.append("| " + " | ".join([
                row.label, base.label, COLUMNS[key].header,
                ", ".join(f"{s}: {_signed(d)}" for s, d in diffs.items()) or "—",
                _signed(statistics.fmean(values)) if values else "—",
                f"[{_signed(ci[0])}, {_signed(ci[1])}]" if ci else "—", str(len(values))]) + " |")
    return lines


def doc_sections(exps: list[Experiment]) -> dict[Path, list[Experiment]]:
    """Every document written by ``exps`` with all of its sections: the given experiments
    plus the other experiment files in their folders that name the same ``doc`` (so that
    running one file of a shared document keeps the others' tables), ordered by their
    ``order`` key, then file name."""
    by_doc: dict[Path, dict[Path | None, Experiment]] = {}
    for exp in exps:
        by_doc.setdefault(exp.doc, {})[exp.source] = exp
    root = exps[0].root
    folders = {exp.source.parent for exp in exps if exp.source is not None}
    for folder in sorted(folders):
        for path in sorted(folder.glob("*.toml")):
            if any(path in group for group in by_doc.values()):
                continue
            try:
                spec = read_toml(path)
            except ValueError as e:  # tomllib.TOMLDecodeError
                raise ConfigError(f"{path}: not valid TOML ({e}); it sits beside an experiment "
                                  "file, so it may hold a section of the same document.") from e
            doc = _doc_path(spec, path, root)
            if doc not in by_doc:
                continue  # another document's experiment, or not an experiment file
            by_doc[doc][path] = load_experiment(path, root)  # a broken section is an error
    return {doc: sorted(group.values(), key=lambda e: (e.order, e.source.name if e.source else ""))
            for doc, group in by_doc.items()}


def check_run_folders(exps: list[Experiment]) -> None:
    """Raise if two rows of one document (``exps`` and their sibling sections) would share a
    run folder with different commands: a row's folder name holds only its *own* overrides,
    so files whose ``[defaults]`` differ must tell their rows apart in the rows' ``set``
    (:data:`OUTCOME_NEUTRAL_KEYS` may differ)."""
    seen: dict[Path, tuple[str, Path | None]] = {}
    for group in doc_sections(exps).values():
        for exp in group:
            for row in exp.rows:
                folder = exp.out / row.slug
                cmd = _command_key(f"`{shlex.join(row.command('SEED', 'OUT', overwrite=False))}`")
                other = seen.setdefault(folder, (cmd, exp.source))
                if other[0] != cmd:
                    raise ConfigError(
                        f"{exp.source} and {other[1]}: two different runs would share the run "
                        f"folder {folder} ({cmd} vs {other[0]}); put the setting that tells "
                        "them apart in the rows' own `set`."
                    )


def write_docs(exps: list[Experiment]) -> list[Path]:
    """Write each experiment's table to its ``doc``; experiments sharing a ``doc`` (see
    :func:`doc_sections`) become its sections, under the first one's ``doc_title``."""
    by_doc = doc_sections(exps)
    for doc, group in by_doc.items():
        kept = kept_lines(doc.read_text()) if doc.exists() else Kept()
        records = sync_records(records_path(doc), group)
        if len(group) == 1 and not group[0].doc_title:
            text = render(group[0], kept=kept, records=records)
        else:
            title = next((e.doc_title for e in group if e.doc_title), group[0].title)
            text = "\n".join([f"# {title}\n\n{GENERATED}\n"]
                             + [render(e, level=2, kept=kept, records=records) for e in group])
        atomic_write_text(doc, text)
    return list(by_doc)
