"""A study's trials as runs: each trial is a normal run folder, run in this process or as
its own ``fgl run`` process, watched through its ``rounds.jsonl`` and stopped early (when
pruned) by a ``STOP`` file (:data:`fgl_flower.results.STOP_FILE`), which every runtime's
server reads after each round."""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fgl_flower.results import STOP_FILE, atomic_write_text

Scalar = int | float | bool | str

#: Seconds a trial's process gets to end after its Ctrl-C before what is left is stopped.
STOP_GRACE_S = 60.0

#: The file in a trial's (or final run's) folder that names the overrides it ran.
RUN_FILE = "run.json"


def ran_with(out: Path, overrides: Mapping[str, Scalar]) -> bool:
    """Whether ``out`` holds a finished run of exactly ``overrides``."""
    path = out / RUN_FILE
    if not (out / "summary.json").exists() or not path.exists():
        return False
    return json.loads(path.read_text()).get("overrides") == json.loads(json.dumps(dict(overrides)))


def read_rounds(out: Path) -> list[dict[str, Any]]:
    """The complete lines of ``out/rounds.jsonl`` (a line being written is left out)."""
    path = out / "rounds.jsonl"
    records = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            records.append(json.loads(line))
        except ValueError:
            break
    return records


@contextmanager
def quiet_runs() -> Iterator[None]:
    """Flower's INFO lines off (a run's per-round and start lines): a study prints one line
    per trial instead; warnings and errors stay."""
    logger = logging.getLogger("flwr")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def run_command(overrides: Mapping[str, Scalar], out: Path, engine: str) -> list[str]:
    """The ``fgl run`` of a trial: every override as ``--set``, into ``out``."""
    from fgl_flower.launch import set_flags

    cmd = [sys.executable, "-m", "fgl_flower.cli", "run", *set_flags(overrides)]
    cmd += ["--out", str(out), "--overwrite"]
    return cmd + (["--inprocess"] if engine == "inprocess" else [])


class TrialRun:
    """One trial's run into ``out`` with the flat-config ``overrides``; :meth:`start` it,
    poll :meth:`done`, then read :meth:`error` (``None``: it wrote its summary)."""

    def __init__(self, overrides: Mapping[str, Scalar], out: Path) -> None:
        self.overrides = dict(overrides)
        self.out = out
        self.started = 0.0
        self.seconds = 0.0

    def start(self) -> None:
        """Start the run; its folder first gets ``run.json``, the overrides it runs."""
        self.out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(
            self.out / RUN_FILE, json.dumps({"overrides": self.overrides}, sort_keys=True) + "\n"
        )
        self.started = time.monotonic()
        self._launch()

    def _launch(self) -> None:
        raise NotImplementedError

    def done(self) -> bool:
        raise NotImplementedError

    def error(self) -> str | None:
        raise NotImplementedError

    def join(self, kill: bool = False) -> None:
        """Wait for the run to end (``kill``: a process is stopped first, as by Ctrl-C);
        nothing to wait for if it never started."""
        raise NotImplementedError

    def stop(self) -> None:
        """Ask the run to end after its current round (it writes its summary)."""
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / STOP_FILE).touch()

    def rounds(self) -> list[dict[str, Any]]:
        return read_rounds(self.out)


class InProcessTrial(TrialRun):
    """The run in a thread of this process, on the in-process grid (what ``fgl run
    --inprocess`` runs); Flower's INFO lines are off while it runs."""

    def _launch(self) -> None:
        self._error: str | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from fgl_flower.errors import FGLError
        from fgl_flower.launch import execute, flat_config, validate

        try:
            flat = flat_config(self.overrides, out=self.out)
            execute(validate(flat, "inprocess", overwrite=True), "inprocess")
        except FGLError as e:
            self._error = str(e)
        except Exception as e:  # a trial's crash ends the trial, not the study
            self._error = f"{type(e).__name__}: {e}"
        finally:
            self.seconds = time.monotonic() - self.started

    def done(self) -> bool:
        return not self._thread.is_alive()

    def error(self) -> str | None:
        return self._error

    def join(self, kill: bool = False) -> None:
        if hasattr(self, "_thread"):
            self._thread.join()


class ProcessTrial(TrialRun):
    """The run as its own ``fgl run`` process (its output in ``out/fgl.log``): ``engine``
    ``inprocess`` (``--inprocess``) or ``simulation`` (Flower's Ray simulation)."""

    def __init__(self, overrides: Mapping[str, Scalar], out: Path, engine: str) -> None:
        super().__init__(overrides, out)
        self.engine = engine

    def _launch(self) -> None:
        self.command = run_command(self.overrides, self.out, self.engine)
        self._log = open(self.out / "fgl.log", "w")  # noqa: SIM115 (closed in done())
        self._log.write(shlex.join(self.command) + "\n")
        self._log.flush()
        self._proc = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT)

    def done(self) -> bool:
        if self._proc.poll() is None:
            return False
        if not self._log.closed:
            self.seconds = time.monotonic() - self.started
            self._log.close()
        return True

    def error(self) -> str | None:
        if self._proc.returncode == 0 and (self.out / "summary.json").exists():
            return None
        from fgl_flower.runtime.processes import log_tail

        return f"fgl run exited with {self._proc.returncode}: {log_tail(self.out / 'fgl.log', 3)}"

    def join(self, kill: bool = False) -> None:
        if not hasattr(self, "_proc"):
            return
        if kill:
            from fgl_flower.runtime.processes import interrupt_process

            interrupt_process(self._proc, STOP_GRACE_S)
        self._proc.wait()
        self.done()


def make_run(overrides: Mapping[str, Scalar], out: Path, jobs: int, engine: str) -> TrialRun:
    """The run of a trial (or a rerun): in this process when one runs at a time on the
    in-process grid, else its own ``fgl run`` process on ``engine``."""
    if jobs == 1 and engine == "inprocess":
        return InProcessTrial(overrides, out)
    return ProcessTrial(overrides, out, engine)
