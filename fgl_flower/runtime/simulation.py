"""Run a Flower app as a local Ray simulation through the managed local SuperLink."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

import psutil

from fgl_flower.errors import ConfigError
from fgl_flower.runtime.bundle import staged_app
from fgl_flower.runtime.config import (
    FlatRunConfig,
    check_app_dir,
    flower_env,
    require_executable,
    run_config_args,
    work_directory,
    write_connections,
)
from fgl_flower.runtime.errors import RuntimeStartError
from fgl_flower.runtime.flwr_cli import run_flwr
from fgl_flower.runtime.processes import ProcessGroup, free_ports, stop_processes

CONNECTION = "local"


#: Tries of ``flwr run`` when its local SuperLink (Flower's fixed 15 s) or Ray's node (Ray's
#: fixed 30 s) does not start in time: no client has trained then, so nothing is lost.
START_ATTEMPTS = 3


def run_simulation(
    app_dir: Path,
    run_config: FlatRunConfig,
    num_supernodes: int,
    *,
    cpus_per_client: int = 1,
    gpus_per_client: float = 0.0,
    workdir: Path | None = None,
    stream: TextIO | None = None,
    timeout: float | None = None,
    ray_address: str | None = None,
    done: str | None = None,
) -> int:
    """Run ``app_dir`` as a simulation with ``num_supernodes`` virtual SuperNodes.

    Each client reserves ``cpus_per_client`` CPUs and ``gpus_per_client`` GPUs of Ray
    (fractions share a GPU: 0.25 runs four clients on one), so ``min(CPUs / cpus, GPUs /
    gpus)`` clients run at once. ``ray_address`` (e.g. ``"auto"`` or ``"HEAD:6379"``)
    attaches the simulation to a running Ray cluster instead of starting a local one.

    Uses an isolated ``FLWR_HOME`` under ``workdir`` (default: a temp dir removed
    afterwards) whose managed SuperLink listens on a free loopback port, streams
    ``flwr run``'s output to ``stream`` (default stdout) and stops that SuperLink (and
    everything it spawned) before returning, also on errors and KeyboardInterrupt.

    Returns ``flwr run``'s return code, or 1 if it exited 0 but the run did not reach
    ``finished:completed``. ``timeout`` (seconds) bounds the ``flwr run`` command and
    raises :class:`~fgl_flower.runtime.errors.RunTimeoutError`. ``done``: a part of the
    ServerApp's log line that says all its results are written; once it is streamed the run
    counts as completed, and what is left of it is stopped rather than waited for.
    """
    app_dir = check_app_dir(app_dir)
    if num_supernodes < 1:
        raise ConfigError(f"need num_supernodes >= 1, got {num_supernodes}")
    check_client_resources(cpus_per_client, gpus_per_client)
    with work_directory(workdir) as work:
        flwr_home = work / "flwr-home"
        http_port, control_port = free_ports(2)
        env = flower_env(
            flwr_home,
            FLWR_LOCAL_SUPERLINK_HTTP_API_PORT=str(http_port),
            FLWR_LOCAL_CONTROL_API_PORT=str(control_port),
            **({"RAY_ADDRESS": ray_address} if ray_address else {}),
        )
        flwr = require_executable("flwr", env)
        require_executable("flower-superlink", env)
        stop_local_superlinks(flwr_home)  # a leftover from an earlier run in this workdir
        # A managed local SuperLink whose state (the run, its logs) stays in memory: it lives
        # for this run only, and creating its SQLite database took 1-1.4 s of every start.
        write_connections(flwr_home, CONNECTION, {"address": ":local-in-memory:"})
        federation = (
            f"num-supernodes={num_supernodes} client-resources-num-cpus={cpus_per_client} "
            f"client-resources-num-gpus={float(gpus_per_client)}"
        )
        args = [
            str(staged_app(app_dir, work / "app")),
            CONNECTION,
            "--stream",
            "--federation-config",
            federation,
        ]
        args += run_config_args(work / "run-config.toml", run_config)
        for attempt in range(1, START_ATTEMPTS + 1):
            with ProcessGroup() as group:
                try:
                    code = run_flwr(
                        flwr,
                        args,
                        CONNECTION,
                        env,
                        group=group,
                        workdir=work,
                        stream=stream,
                        timeout=timeout,
                        done=done,
                    )
                    # run_flwr killed its group; `flwr run` starts the local SuperLink detached
                    # (its state in memory ends with this run), so it is killed here.
                    stop_processes(local_superlinks(flwr_home), grace=0)
                    return code
                except RuntimeStartError as err:
                    if attempt == START_ATTEMPTS:
                        raise
                    print(
                        f"Starting the run again (attempt {attempt + 1} of {START_ATTEMPTS}): "
                        f"{err}; a busy machine can exceed the fixed wait",
                        file=stream or sys.stdout,
                    )
                finally:
                    group.adopt(local_superlinks(flwr_home))
        raise AssertionError("unreachable")


def check_client_resources(cpus_per_client: int, gpus_per_client: float) -> None:
    """What Ray accepts as one client's resources: whole CPUs >= 1, and GPUs >= 0 that are
    a fraction below 1 (a shared GPU) or a whole number."""
    if cpus_per_client < 1 or gpus_per_client < 0:
        raise ConfigError(
            f"need cpus-per-client >= 1 and gpus-per-client >= 0, got "
            f"{cpus_per_client} and {gpus_per_client}."
        )
    if gpus_per_client > 1 and not float(gpus_per_client).is_integer():
        raise ConfigError(
            f"gpus-per-client={gpus_per_client}: Ray takes a fraction below 1 (GPU "
            "sharing) or a whole number of GPUs."
        )


def local_superlinks(flwr_home: Path) -> list[psutil.Process]:
    """Return the running managed SuperLinks that ``flwr`` started for ``flwr_home``.

    ``flwr`` launches ``flower-superlink ... --log-file $FLWR_HOME/local-superlink/
    superlink.log`` detached and records no PID, so the process is found by that path
    on its command line.
    """
    marker = str(flwr_home / "local-superlink")
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        is_superlink = any("flower-superlink" in part for part in cmdline[:2])
        if is_superlink and any(marker in part for part in cmdline):
            found.append(proc)
    return found


def stop_local_superlinks(flwr_home: Path) -> None:
    """Stop every managed SuperLink of ``flwr_home`` together with its children."""
    stop_processes(local_superlinks(flwr_home))
