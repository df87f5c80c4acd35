"""End-to-end tests of fgl_flower.runtime with real `flwr run` invocations (~10-25 s each)."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
from toy_flower_app import assert_no_flower_processes_under

from fgl_flower.errors import ConfigError, FGLError
from fgl_flower.runtime import (
    ExecutableNotFoundError,
    LaunchError,
    deployment,
    run_deployment,
    run_simulation,
)
from fgl_flower.runtime.config import write_run_config
from fgl_flower.runtime.simulation import local_superlinks

TRICKY = "a \"quoted\" \\ value with spaces, 'single' and unicode é"


@pytest.mark.slow
def test_simulation_runs_ends_when_the_results_are_written_and_cleans_up(
    toy_app: Path, tmp_path: Path
) -> None:
    """A `flwr run` simulation passes the run config through (a tricky string), runs its
    rounds on every node, and counts as completed once the ServerApp's results-written line
    is streamed: its wind-down (here a ServerApp that lingers 600 s) is stopped, not waited
    for; no SuperLink or process is left behind."""
    out, log = tmp_path / "sim.json", io.StringIO()
    config = {"out-file": str(out), "message": TRICKY, "num-nodes": 3, "linger": 600.0}
    t0 = time.monotonic()
    rc = run_simulation(
        toy_app,
        config,
        3,
        workdir=tmp_path / "work",
        stream=log,
        timeout=300,
        done="toy results written",
    )
    print(f"simulation: {time.monotonic() - t0:.1f}s")
    assert rc == 0, log.getvalue()[-3000:]
    assert time.monotonic() - t0 < 200
    result = json.loads(out.read_text())
    assert result["rounds"] == [[0, 1, 2]]
    assert result["message"] == TRICKY
    assert "Successfully started run" in log.getvalue()
    assert local_superlinks(tmp_path / "work" / "flwr-home") == []
    assert_no_flower_processes_under(tmp_path)


@pytest.mark.slow
def test_simulation_failing_serverapp_is_nonzero(toy_app: Path, tmp_path: Path) -> None:
    log = io.StringIO()
    work = tmp_path / "work"
    rc = run_simulation(toy_app, {"fail": True}, 2, workdir=work, stream=log, timeout=600)
    assert rc != 0
    assert "toy ServerApp failure" in log.getvalue()
    assert_no_flower_processes_under(tmp_path)


@pytest.mark.slow
def test_deployment_runs_and_cleans_up(toy_app: Path, tmp_path: Path) -> None:
    """Also: the run ends at the ServerApp's results-written line (the ServerApp then lingers
    600 s, which a run that waited for it could not survive within the timeout)."""
    out, log = tmp_path / "dep.json", io.StringIO()
    config = {
        "out-file": str(out),
        "num-nodes": 2,
        "num-rounds": 2,
        "message": TRICKY,
        "linger": 600.0,
    }
    t0 = time.monotonic()
    rc = run_deployment(
        toy_app,
        config,
        2,
        workdir=tmp_path / "work",
        stream=log,
        timeout=300,
        done="toy results written",
    )
    result = json.loads(out.read_text()) if out.exists() else {}
    rounds_s = result.get("seconds", 0.0)
    print(f"deployment: {time.monotonic() - t0:.1f}s total, {rounds_s:.1f}s for 2 rounds")
    assert rc == 0, log.getvalue()[-3000:]
    assert result["rounds"] == [[0, 1], [0, 1]]
    assert result["message"] == TRICKY
    assert (tmp_path / "work" / "superlink.log").is_file()
    assert_no_flower_processes_under(tmp_path)


def test_run_config_toml_quoting(tmp_path: Path) -> None:
    import tomllib

    config = {"s": TRICKY, "i": 3, "f": 0.5, "b": True, "dotted.key": "x"}
    path = write_run_config(tmp_path / "rc.toml", config)
    assert tomllib.loads(path.read_text()) == config
    with pytest.raises(ConfigError):
        write_run_config(tmp_path / "bad.toml", {"l": [1, 2]})  # type: ignore[dict-item]


def test_missing_executable_is_a_one_line_error(
    toy_app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_python = tmp_path / "nobin" / "python"
    monkeypatch.setattr("fgl_flower.runtime.config.sys.executable", str(fake_python))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ExecutableNotFoundError, match="`flwr` not found") as info:
        run_simulation(toy_app, {}, 2, workdir=tmp_path / "work")
    assert "\n" not in str(info.value)
    assert isinstance(info.value, FGLError)


def test_not_an_app_dir(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a Flower app"):
        run_deployment(tmp_path, {}, 2)


def test_deployment_rejects_non_loopback_host(toy_app: Path) -> None:
    with pytest.raises(ConfigError, match="loopback"):
        run_deployment(toy_app, {}, 2, host="0.0.0.0")


def test_superlink_start_failure_is_reported(
    toy_app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "broken-superlink"
    script.write_text("#!/bin/sh\necho 'cannot bind: boom' >&2\nexit 3\n")
    script.chmod(0o755)
    real = deployment.require_executable

    def fake(name: str, env: dict[str, str]) -> str:
        return str(script) if name == "flower-superlink" else real(name, env)

    monkeypatch.setattr(deployment, "require_executable", fake)
    expected = r"broken-superlink exited with code 3 .*cannot bind: boom"
    with pytest.raises(LaunchError, match=expected) as info:
        run_deployment(toy_app, {}, 2, workdir=tmp_path / "work")
    assert "\n" not in str(info.value)
    assert_no_flower_processes_under(tmp_path)


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("Failed to start local SuperLink within 15s. See logs at /x.", "SuperLinkStartError"),
        (
            "Successfully started run 7\nERROR :     An exception occured!! The current node "
            "timed out during startup. "
            "This could happen because some of the raylet failed to startup",
            "RayStartError",
        ),
    ],
    ids=["superlink", "ray-node"],
)
def test_a_runtime_that_starts_too_slowly_is_started_again(
    toy_app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, error: str
) -> None:
    """Flower's `flwr run` gives its local SuperLink a fixed 15 s, Ray its node a fixed 30 s;
    on a busy machine (CI's did, for Ray) the run is started again, as no client had trained,
    up to START_ATTEMPTS times; then the error says which part did not start."""
    from fgl_flower.runtime import errors, simulation

    calls = tmp_path / "calls"
    fake = tmp_path / "flwr"
    fake.write_text(f"#!/bin/sh\necho x >> {calls}\necho '{line}'\nexit 1\n")
    fake.chmod(0o755)
    real = simulation.require_executable
    monkeypatch.setattr(
        simulation,
        "require_executable",
        lambda name, env: str(fake) if name == "flwr" else real(name, env),
    )
    log = io.StringIO()
    with pytest.raises(getattr(errors, error)):
        run_simulation(toy_app, {}, 2, workdir=tmp_path / "work", stream=log, timeout=60)
    assert len(calls.read_text().split()) == simulation.START_ATTEMPTS
    assert f"Starting the run again (attempt 2 of {simulation.START_ATTEMPTS})" in log.getvalue()


def test_stop_processes_with_no_grace_kills_at_once(tmp_path: Path) -> None:
    """What ends the managed SuperLink after a finished run: no 1 s gRPC grace per server."""
    import subprocess
    import sys

    import psutil

    from fgl_flower.runtime.processes import stop_processes

    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)",
        ]
    )
    time.sleep(0.5)  # the handler is in place
    t0 = time.monotonic()
    proc = psutil.Process(stubborn.pid)
    stop_processes([proc], grace=0)  # it ignores SIGTERM: only a kill ends it
    assert not proc.is_running()
    assert time.monotonic() - t0 < 1.0


def test_a_zombie_counts_as_stopped(tmp_path: Path) -> None:
    """A killed process whose parent does not reap it (the SuperLink's, once `flwr run` is
    gone, belong to an init that may reap slowly or never) is stopped: no wait for the reaping."""
    import subprocess
    import sys

    import psutil

    from fgl_flower.runtime.processes import stop_processes

    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print(child.pid, flush=True)\ntime.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        t0 = time.monotonic()
        stop_processes([child], grace=0)
        assert time.monotonic() - t0 < 1.0 and child.status() == psutil.STATUS_ZOMBIE
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
