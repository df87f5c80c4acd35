"""Child-process bookkeeping: free ports, readiness waits and reliable teardown.

Flower detaches some of its helpers (the managed SuperLink, SuperExec) into their own
sessions, so stopping a process group is not enough. Every process this package starts
gets a marker environment variable; teardown stops the process trees it knows about and
then sweeps any remaining process that carries the marker.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import IO

import psutil

from fgl_flower.runtime.errors import LaunchError

MARKER_ENV = "FGL_FLOWER_RUNTIME_TOKEN"
TERMINATE_GRACE_S = 5.0
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Return ``count`` distinct ports that were free on ``host`` (bound to port 0)."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in socks]


def log_tail(path: Path, lines: int = 15) -> str:
    """Return the last ``lines`` lines of a log file, joined by `` | `` (one line)."""
    try:
        text = ANSI_ESCAPE.sub("", path.read_text(errors="replace")).splitlines()
    except OSError:
        return "<no log>"
    return " | ".join(line.strip() for line in text[-lines:] if line.strip()) or "<empty log>"


def stop_processes(procs: Iterable[psutil.Process], grace: float = TERMINATE_GRACE_S) -> None:
    """Terminate processes and all their descendants; kill what survives ``grace`` s
    (``grace=0``: kill them at once)."""
    targets: dict[int, psutil.Process] = {}
    for proc in procs:
        try:
            for child in [proc, *proc.children(recursive=True)]:
                targets[child.pid] = child
        except psutil.Error:
            continue
    alive = list(targets.values())
    if grace > 0:
        for proc in alive:
            _signal(proc, kill=False)
        alive = _wait_exited(alive, timeout=grace)
    for proc in alive:
        _signal(proc, kill=True)
    _wait_exited(alive, timeout=max(grace, TERMINATE_GRACE_S))


def _wait_exited(procs: Iterable[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every process has exited; return those still running after ``timeout`` s.

    A zombie has exited: only its parent's reaping is left. Processes that a child
    detached belong to init once their parent is gone, and an init that reaps slowly (1.4 s
    on this project's machine) or never (some containers) would add that wait to every
    stop; ``psutil.wait_procs`` waits for the reaping."""
    deadline = time.monotonic() + timeout
    alive = list(procs)
    while True:
        alive = [proc for proc in alive if _running(proc)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.01)


def _running(proc: psutil.Process) -> bool:
    try:
        if proc.status() != psutil.STATUS_ZOMBIE:
            return proc.is_running()
        with suppress(psutil.Error):
            proc.wait(timeout=0)  # reaps it if it is this process's child
        return False
    except psutil.Error:
        return False


def _signal(proc: psutil.Process, *, kill: bool) -> None:
    try:
        proc.kill() if kill else proc.terminate()
    except psutil.Error:
        pass


def marked_processes(token: str) -> list[psutil.Process]:
    """Return this user's live processes whose environment carries ``token``."""
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(MARKER_ENV) == token:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def wait_for_port(host: str, port: int, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    """Block until ``host:port`` accepts TCP connections; fail fast if ``proc`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LaunchError(
                f"{_name(proc)} exited with code {proc.returncode} before listening on "
                f"{host}:{port}; log {log}: {log_tail(log)}"
            )
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise LaunchError(
        f"{_name(proc)} did not listen on {host}:{port} within {timeout:.0f}s; log {log}: {log_tail(log)}"
    )


def wait_for_log_line(needle: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    """Block until ``log`` contains ``needle``; fail fast if ``proc`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if needle in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise LaunchError(
                f"{_name(proc)} exited with code {proc.returncode}; log {log}: {log_tail(log)}"
            )
        time.sleep(0.1)
    raise LaunchError(
        f"{_name(proc)} not ready ({needle!r} not logged) within {timeout:.0f}s; "
        f"log {log}: {log_tail(log)}"
    )


def _name(proc: subprocess.Popen) -> str:
    """Executable name of a child started with an argv list."""
    return Path(str(proc.args[0])).name  # type: ignore[index]


class ProcessGroup:
    """Context manager owning every process started for one run.

    On exit (normal, exception or KeyboardInterrupt) it stops the started processes with
    all their descendants, then any straggler carrying this group's marker token.
    """

    def __init__(self) -> None:
        self.token = uuid.uuid4().hex
        self._procs: list[subprocess.Popen] = []
        self._extra: list[psutil.Process] = []
        self._files: list[IO[bytes]] = []

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """Return ``base`` plus this group's marker variable."""
        return {**base, MARKER_ENV: self.token}

    def spawn(
        self, cmd: Sequence[str], env: Mapping[str, str], *, cwd: Path, log: Path | None = None
    ) -> subprocess.Popen:
        """Start ``cmd`` in its own session; output goes to ``log`` or a pipe (stdout+stderr)."""
        out: int | IO[bytes] = subprocess.PIPE
        if log is not None:
            out = log.open("wb")
            self._files.append(out)
        proc = subprocess.Popen(  # noqa: S603 - argv list, no shell
            list(cmd),
            env=self.env(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._procs.append(proc)
        return proc

    def adopt(self, procs: Iterable[psutil.Process]) -> None:
        """Also stop these processes (e.g. ones a child detached) on exit."""
        self._extra.extend(procs)

    def stop(self, grace: float = TERMINATE_GRACE_S) -> None:
        """Stop all owned processes, their descendants and marked stragglers (killed if
        they outlive ``grace`` s; ``grace=0``: at once)."""
        owned = [proc for p in self._procs if (proc := _as_psutil(p)) is not None]
        stop_processes([*owned, *self._extra], grace=grace)
        stop_processes(marked_processes(self.token), grace=grace)
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        for fh in self._files:
            fh.close()
        self._procs.clear()
        self._extra.clear()
        self._files.clear()


def _as_psutil(proc: subprocess.Popen) -> psutil.Process | None:
    """Return a psutil handle for a still-running child, else None."""
    if proc.poll() is not None:
        return None
    try:
        return psutil.Process(proc.pid)
    except psutil.Error:
        return None


def interrupt_process(proc: subprocess.Popen, grace: float) -> None:
    """Stop ``proc`` as Ctrl-C would (SIGINT: its runtimes tear down their processes), then
    stop what is left of its process tree after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    import signal

    try:
        tree = [psutil.Process(proc.pid)]
        tree += tree[0].children(recursive=True)
    except psutil.Error:
        tree = []
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    stop_processes([p for p in tree if p.is_running()], grace=TERMINATE_GRACE_S)
    proc.wait()
