"""Running an experiment: every (row, seed) as its own ``fgl run`` process, ``--jobs``
at a time, resumable, stopped at ``--time-limit``."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from fgl_flower.bench.experiment import Experiment, record_key, select_rows
from fgl_flower.bench.records import folder_codes, folder_command, load_records, records_path
from fgl_flower.provenance import code_version
from fgl_flower.results import atomic_write_text


def run_experiment(
    exp: Experiment,
    dry_run: bool = False,
    seeds: list[int] | None = None,
    rows: list[str] | None = None,
    jobs: int = 1,
    time_limit: float | None = None,
    neutral: Mapping[str, Any] | None = None,
) -> Experiment:
    """Run every (seed, row) with neither a run folder nor a record (only ``seeds`` and the
    rows matching ``rows`` (see :func:`select_rows`) if given) with ``fgl run``, ``jobs`` at
    a time; print one line per run as it starts and one as it ends.

    A run folder left by an interrupted run that has a server checkpoint is continued with
    ``fgl run --resume``, not started again. ``time_limit`` (seconds): no run starts after
    it, and the runs still going are stopped then (as by Ctrl-C), so that the same command
    later resumes them (one that has written its summary is let exit). ``neutral``:
    :data:`OUTCOME_NEUTRAL_KEYS` set for these runs (e.g. ``checkpoint-every``).

    Tuned rows waiting for their study (:mod:`~fgl_flower.bench.tuned`) first run it
    (:func:`run_studies`); returns the experiment with their best values (reloaded)."""
    from fgl_flower.checkpoint import resumable

    waiting = select_rows(exp, rows, exp.pending)
    if waiting:
        deadline = None if time_limit is None else time.monotonic() + time_limit
        run_studies(exp, waiting, dry_run, jobs, deadline)
        if dry_run:
            print(
                f"(then the seeds of {len(waiting)} tuned row(s) with their studies' best values)",
                flush=True,
            )
        else:
            exp = reload(exp)
        time_limit = None if deadline is None else max(deadline - time.monotonic(), 0.0)
    seeds = exp.seeds if seeds is None else seeds
    selected = select_rows(exp, rows)
    records = load_records(records_path(exp.doc))
    recorded = {
        (row.slug, seed)
        for seed in seeds
        for row in selected
        if (record_key(exp, row), seed) in records
    }
    if recorded:
        print(
            f"{len(recorded)} run(s) recorded in {records_path(exp.doc)} are not run again "
            "(delete their lines to rerun them)",
            flush=True,
        )
    missing = []
    for seed in seeds:  # seed-major: a partial benchmark has every row for early seeds
        for row in selected:
            out, key = exp.out / row.slug / f"seed{seed}", record_key(exp, row)
            if (row.slug, seed) in recorded:
                continue
            other = folder_command(out)
            if other is not None and other != key:  # the folder holds another command's run
                print(
                    f"{out} holds a run of another command (`{other}`); it is run again", flush=True
                )
            elif (out / "summary.json").exists():
                continue
            if other in (None, key) and resumable(out):
                cmd = ["fgl", "run", "--resume", str(out)] + (
                    ["--inprocess"] if row.inprocess else []
                )
            else:
                cmd = replace(row, overrides={**row.overrides, **(neutral or {})}).command(
                    seed, str(out)
                )
            missing.append((out, cmd, key))
    pending = [(f"[{i}/{len(missing)}]", *run) for i, run in enumerate(missing, 1)]
    if dry_run:
        for tag, _, cmd, _ in pending:
            print(f"{tag} {shlex.join(cmd)}", flush=True)
        return exp
    deadline = None if time_limit is None else time.monotonic() + time_limit
    version = code_version()
    _let_runs_take_ctrl_c()
    pool = ThreadPoolExecutor(max_workers=jobs)  # each thread waits on its own process
    try:
        futures = [pool.submit(_run_one, *run, version, deadline) for run in pending]
        outcomes = [future.result() for future in futures]
    finally:
        pool.shutdown(cancel_futures=True)  # after Ctrl-C or an error, start no further runs
    stopped, unstarted = outcomes.count("stopped"), outcomes.count("not started")
    if stopped or unstarted:
        print(
            f"time limit reached: {stopped} run(s) stopped, {unstarted} not started; the same "
            "command resumes the stopped ones from their last checkpoint (`checkpoint-every`) "
            "and starts the others",
            flush=True,
        )
    return exp


def _let_runs_take_ctrl_c() -> None:
    """A shell starts a background job (``fgl bench ... &`` in a batch script) with SIGINT
    ignored, and its ``fgl run`` processes would inherit that: the Ctrl-C that stops them
    at the time limit (and lets them stop their runtimes) would go unheard until they are
    killed :data:`STOP_GRACE_S` later. A handler set here is reset to the default in each
    child when it starts, so the runs take Ctrl-C again."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


#: Seconds a run stopped at the time limit gets to end after its Ctrl-C (SIGINT): Flower's
#: runtimes stop their processes then; what is left after it is killed.
STOP_GRACE_S = 60.0


def _run_one(
    tag: str, out: Path, cmd: list[str], key: str, version: str, deadline: float | None = None
) -> str:
    """One ``fgl run`` into ``out`` (its output in ``out/fgl.log``, appended to when it
    resumes). ``bench.json`` holds from the start the row's record ``key`` and the code
    versions that ran it (a resumed run's earlier ones, then ``version``), and its wall time
    when it succeeds. Returns ``"ok"``, ``"failed"``, ``"stopped"`` at ``deadline`` (a
    :func:`time.monotonic` time) or ``"not started"``."""
    if deadline is not None and time.monotonic() >= deadline:
        return "not started"
    print(f"{tag} {shlex.join(cmd)}", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    resumed = "--resume" in cmd
    codes = folder_codes(out) if resumed else []
    codes += [] if version in codes else [version]
    atomic_write_text(out / "bench.json", json.dumps({"command": key, "code": codes}) + "\n")
    t0 = time.perf_counter()
    code = _logged(cmd, out / "fgl.log", "a" if resumed else "w", deadline, out)
    if code is None:
        print(
            f"    {tag} stopped at the time limit after {time.perf_counter() - t0:.0f}s",
            flush=True,
        )
        return "stopped"
    wall = time.perf_counter() - t0
    if code == 0:  # a resumed run's wall time covers only its last part
        bench = {
            "command": key,
            "code": codes,
            "wall_s": wall,
            **({"resumed": True} if resumed else {}),
        }
        atomic_write_text(out / "bench.json", json.dumps(bench) + "\n")
    status = "ok" if code == 0 else f"FAILED (exit {code}, see {out / 'fgl.log'})"
    print(f"    {tag} {status} in {wall:.0f}s", flush=True)
    return "ok" if code == 0 else "failed"


def _logged(
    cmd: list[str], log_path: Path, mode: str, deadline: float | None, out: Path | None = None
) -> int | None:
    """Run ``cmd`` with its output in ``log_path`` (opened with ``mode``) until it ends or
    ``deadline`` (a :func:`time.monotonic` time); its exit code, or ``None`` if it was
    stopped at the deadline. A run folder ``out`` whose run has written its summary by then
    is let exit (:func:`_wait_if_done`). Ctrl-C here stops it too and is raised again."""
    with open(log_path, mode) as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            return proc.wait(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            code = _wait_if_done(proc, out) if out is not None else None
            if code is None:
                stop_process(proc)
            return code
        except BaseException:  # Ctrl-C in this process reached the run too; let it end
            stop_process(proc)
            raise


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


def stop_process(proc: subprocess.Popen) -> None:
    """Stop ``proc`` as Ctrl-C would, then kill what is left of its process tree after
    :data:`STOP_GRACE_S` (:func:`~fgl_flower.runtime.processes.interrupt_process`)."""
    from fgl_flower.runtime.processes import interrupt_process

    interrupt_process(proc, STOP_GRACE_S)


def reload(exp: Experiment) -> Experiment:
    """``exp`` read again from its file (tuned rows whose study has since been recorded
    get their values)."""
    from fgl_flower.bench.experiment import load_experiment

    return load_experiment(exp.source, exp.root) if exp.source is not None else exp


def run_studies(
    exp: Experiment, rows: list, dry_run: bool, jobs: int, deadline: float | None
) -> None:
    """The study of each tuned row in ``rows`` (``fgl tune`` in ``<out>/<row>/study``, its
    output in ``tune.log`` there), ``jobs`` at a time; each finished study is recorded
    beside the document. A study stopped at the deadline resumes when run again."""
    from fgl_flower.bench.records import record_study
    from fgl_flower.bench.tuned import study_record, tune_command

    studies = [(row, exp.out / row.slug / "study") for row in rows]
    if dry_run:
        for i, (row, folder) in enumerate(studies, 1):
            print(f"[study {i}/{len(studies)}] {shlex.join(tune_command(row, folder))}")
        return

    def one(tag: str, row, folder: Path) -> str:
        if deadline is not None and time.monotonic() >= deadline:
            return "not started"
        cmd = tune_command(row, folder)
        print(f"{tag} {shlex.join(cmd)}", flush=True)
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        code = _logged(cmd, folder / "tune.log", "a", deadline)
        if code is None:
            print(f"    {tag} stopped at the time limit (resumes when run again)", flush=True)
            return "stopped"
        if code != 0:
            print(f"    {tag} FAILED (exit {code}, see {folder / 'tune.log'})", flush=True)
            return "failed"
        record_study(exp.doc, study_record(row, folder))
        print(f"    {tag} done in {time.perf_counter() - t0:.0f}s", flush=True)
        return "ok"

    _let_runs_take_ctrl_c()
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = [
            pool.submit(one, f"[study {i}/{len(studies)}]", row, folder)
            for i, (row, folder) in enumerate(studies, 1)
        ]
        for future in futures:
            future.result()
    finally:
        pool.shutdown(cancel_futures=True)
