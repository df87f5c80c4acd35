"""Run ``flwr run --stream`` as a child process, stream its output, judge the outcome.

``flwr run --stream`` exits with 0 even when the ServerApp raises (measured with flwr
1.41: the log shows ``Exit Code: 700`` but the command returns 0). So after the stream
ends we ask the SuperLink for the run's final status with ``flwr ls --run-id ID
--format json`` and return :data:`RUN_FAILED` unless it is ``finished:completed``. If
that query fails, the streamed log is scanned for Flower's error exit-code line instead.

A caller whose ServerApp logs a line once all its results are written (``done``) need not
wait for Flower's wind-down after it: the Ray shutdown, the log stream's last poll and
the status query took about 5 s of a run here. Once that line is streamed the outcome is
known, and every process of the run is stopped at once.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TextIO

from fgl_flower.runtime.errors import RayStartError, RunTimeoutError, SuperLinkStartError
from fgl_flower.runtime.processes import ANSI_ESCAPE, ProcessGroup

RUN_FAILED = 1
"""Return code used when ``flwr run`` exits 0 but the run did not complete."""

COMPLETED = "finished:completed"
_RUN_ID = re.compile(r"Successfully started run (\d+)")
_FAILURE_LINE = re.compile(r"ERROR.*Exit Code: \d+|raised an exception")
_SUPERLINK_START_FAILED = re.compile(r"Failed to start local SuperLink within")
#: Ray's ``Node`` gives its raylet a fixed 30 s to register with the GCS; a loaded machine
#: (a CI runner with several test workers) can exceed it. Raised in the backend's start,
#: before the simulation engine hands any message to a client.
_RAY_START_FAILED = re.compile(r"The current node timed out during startup")
_CLI_TIMEOUT_S = 60.0
#: Lines of Flower's output that a user of ``fgl`` cannot act on (the run's log file keeps
#: them): the federation is sized to the run (``num-supernodes = num-clients``, set by
#: ``--clients``), so Flower's notes on its default federation size and how to change it do
#: not apply, and the app bundle installed into a temporary Flower home is an implementation
#: detail.
_NOISE = re.compile(
    r"default simulated SuperNodes changed|To change federation size"
    r"|flwr federation simulation-config|^Successfully installed "
)


class _OutputPump(threading.Thread):
    """Copy a child's output lines to ``stream`` and a log file as they arrive."""

    def __init__(self, pipe: IO[bytes], stream: TextIO, log: Path, done: str | None = None) -> None:
        super().__init__(daemon=True)
        self._pipe, self._stream, self._log, self.done_line = pipe, stream, log, done
        self.run_id: int | None = None
        self.done = threading.Event()  # the line ``done`` was streamed
        self.saw_failure = False
        self.superlink_start_failed = False
        self.ray_start_failed = False
        try:
            self._tty = stream.isatty()
        except (AttributeError, ValueError):
            self._tty = False

    def run(self) -> None:
        with self._log.open("w", encoding="utf-8") as log:
            for raw in iter(self._pipe.readline, b""):
                line = raw.decode("utf-8", errors="replace")
                plain = ANSI_ESCAPE.sub("", line)
                after_done = self.done.is_set()  # the run's wind-down, stopped: the log keeps it
                self._inspect(plain)
                log.write(plain)
                log.flush()
                if after_done or _NOISE.search(plain):
                    continue
                try:
                    self._stream.write(line if self._tty else plain)  # no colour codes in files
                    self._stream.flush()
                except (OSError, ValueError):
                    pass  # a closed stream must not kill the pump

    def _inspect(self, line: str) -> None:
        if self.run_id is None and (match := _RUN_ID.search(line)):
            self.run_id = int(match.group(1))
        if _FAILURE_LINE.search(line):
            self.saw_failure = True
        if _SUPERLINK_START_FAILED.search(line):
            self.superlink_start_failed = True
        if _RAY_START_FAILED.search(line):
            self.ray_start_failed = True
        if self.done_line and self.done_line in line and not self.saw_failure:
            self.done.set()


def run_flwr(
    flwr: str,
    args: Sequence[str],
    connection: str,
    env: Mapping[str, str],
    *,
    group: ProcessGroup,
    workdir: Path,
    stream: TextIO | None,
    timeout: float | None,
    done: str | None = None,
) -> int:
    """Run ``flwr run <args>`` to completion and return its outcome as a return code.

    On timeout, exception or KeyboardInterrupt the run is stopped with ``flwr stop``
    (best effort) and the ``flwr`` child terminated before the error propagates. If ``flwr``
    could not start its local SuperLink, :class:`SuperLinkStartError` (no run was started);
    if the run failed because Ray's node did not start, :class:`RayStartError` (no client
    had trained).
    A streamed line containing ``done`` (after no failure line) returns 0 at once, with
    ``flwr run`` and the run still winding down. Once the outcome is known, every process
    of ``group`` is killed: the run is over (its status read, or its results written), its
    SuperLink's state is in memory or SQLite (safe against a kill), and a graceful stop
    waits a 1 s grace per gRPC server and each process's wind-down.
    """
    env = group.env(env)  # helpers (flwr ls/stop) may start a SuperLink: mark it too
    proc = group.spawn([flwr, "run", *args], env, cwd=workdir)
    assert proc.stdout is not None  # spawned without a log file: output is piped
    pump = _OutputPump(proc.stdout, stream or sys.stdout, workdir / "flwr-run.log", done)
    pump.start()
    try:
        returncode = _wait(proc, pump, timeout)
    except subprocess.TimeoutExpired:
        _abort(flwr, proc, pump, connection, env, workdir)
        raise RunTimeoutError(
            f"flwr run did not finish within {timeout:.0f}s (run id {pump.run_id}); stopped it"
        ) from None
    except BaseException:
        _abort(flwr, proc, pump, connection, env, workdir)
        raise
    if returncode is not None:  # flwr run exited before a done line
        pump.join(timeout=10)
        if returncode != 0 and pump.run_id is None and pump.superlink_start_failed:
            raise SuperLinkStartError("flwr run could not start its local SuperLink in time")
        if returncode == 0:
            returncode = _outcome(flwr, pump, connection, env, workdir)
        if returncode != 0 and pump.ray_start_failed:
            group.stop(grace=0)
            raise RayStartError(f"Ray's local node did not start in time (run {pump.run_id})")
    group.stop(grace=0)
    return returncode or 0


def _wait(proc: subprocess.Popen, pump: _OutputPump, timeout: float | None) -> int | None:
    """``proc``'s return code, or None as soon as ``pump`` has streamed its done line;
    :class:`subprocess.TimeoutExpired` after ``timeout`` s."""
    if pump.done_line is None:
        return proc.wait(timeout=timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while not pump.done.wait(0.05):
        if (code := proc.poll()) is not None:
            return None if pump.done.is_set() else code
        if deadline is not None and time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(proc.args, timeout)
    return None


def _abort(
    flwr: str,
    proc: subprocess.Popen,
    pump: _OutputPump,
    connection: str,
    env: Mapping[str, str],
    workdir: Path,
) -> None:
    """Stop the Flower run (if it started) and the ``flwr run`` child."""
    proc.terminate()
    if pump.run_id is not None:
        _cli(flwr, ["stop", str(pump.run_id), connection], env, workdir, timeout=20)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()


def _outcome(
    flwr: str, pump: _OutputPump, connection: str, env: Mapping[str, str], workdir: Path
) -> int:
    """Return 0 if the streamed run completed, :data:`RUN_FAILED` otherwise."""
    if pump.run_id is None:
        return RUN_FAILED
    status = run_status(flwr, pump.run_id, connection, env, workdir)
    if status is None:  # SuperLink unreachable: fall back to the streamed log
        return RUN_FAILED if pump.saw_failure else 0
    return 0 if status == COMPLETED else RUN_FAILED


def run_status(
    flwr: str,
    run_id: int,
    connection: str,
    env: Mapping[str, str],
    workdir: Path,
    wait: float = 10.0,
) -> str | None:
    """Return the run's final status (e.g. ``finished:failed``), or None if unknown."""
    deadline = time.monotonic() + wait
    status = None
    while True:
        args = ["ls", connection, "--run-id", str(run_id), "--format", "json"]
        out = _cli(flwr, args, env, workdir)
        status = _parse_status(out, run_id)
        if status is None or status.startswith("finished") or time.monotonic() > deadline:
            return status
        time.sleep(0.5)


def _parse_status(out: str | None, run_id: int) -> str | None:
    try:
        runs = json.loads(out or "")["runs"]
    except (ValueError, KeyError, TypeError):
        return None
    return next((r.get("status") for r in runs if str(r.get("run-id")) == str(run_id)), None)


def _cli(
    flwr: str,
    args: Sequence[str],
    env: Mapping[str, str],
    workdir: Path,
    timeout: float = _CLI_TIMEOUT_S,
) -> str | None:
    """Run a short ``flwr`` command; return its stdout, or None if it failed."""
    try:
        res = subprocess.run(  # noqa: S603 - argv list, no shell
            [flwr, *args],
            env=dict(env),
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout if res.returncode == 0 else None
