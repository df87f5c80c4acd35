"""Run a Flower app on a real local deployment: one SuperLink plus N SuperNodes."""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from fgl_flower.errors import ConfigError, FGLError
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
from fgl_flower.runtime.flwr_cli import run_flwr
from fgl_flower.runtime.processes import ProcessGroup, free_ports, wait_for_log_line, wait_for_port
from fgl_flower.runtime.security import LocalPKI, local_pki

CONNECTION = "fgl-deployment"
STARTUP_TIMEOUT_S = 60.0
SUPERNODE_READY = "SuperNode ID:"  # logged once the SuperNode is registered and active


def run_deployment(
    app_dir: Path,
    run_config: FlatRunConfig,
    num_supernodes: int,
    *,
    host: str = "127.0.0.1",
    workdir: Path | None = None,
    stream: TextIO | None = None,
    timeout: float | None = None,
    gpus: Sequence[str] | None = None,
    secure: bool = False,
    done: str | None = None,
) -> int:
    """Run ``app_dir`` on a local SuperLink with ``num_supernodes`` SuperNodes.

    SuperNode ``i`` gets ``--node-config "partition-id=i num-partitions=N"`` and, with
    ``gpus`` (GPU ids such as ``["0", "1"]``), ``CUDA_VISIBLE_DEVICES=gpus[i % len(gpus)]``,
    so its ClientApp processes see that GPU alone (``device=auto`` then uses it). With
    ``secure``, the SuperLink serves TLS with a certificate from a private CA made for this
    run (:func:`~fgl_flower.runtime.security.local_pki`) and authenticates SuperNodes: each
    SuperNode's public key is registered (``flwr supernode register``) before it starts
    with its private key; any other node is refused. All
    processes use free ports on the loopback ``host``, an isolated ``FLWR_HOME`` and log
    files in ``workdir`` (default: a temp dir removed afterwards); they are stopped
    before returning, also on errors and KeyboardInterrupt. Returns like
    :func:`~fgl_flower.runtime.run_simulation`, whose ``done`` it shares: once the
    ServerApp's line saying its results are written is streamed, the SuperLink, the
    SuperNodes and their ClientApp processes are stopped rather than waited for.
    """
    app_dir = check_app_dir(app_dir)
    _check_loopback(host)
    if num_supernodes < 1:
        raise ConfigError(f"need num_supernodes >= 1, got {num_supernodes}")
    with work_directory(workdir) as work:
        flwr_home = work / "flwr-home"
        env = flower_env(flwr_home)
        flwr = require_executable("flwr", env)
        superlink_exe = require_executable("flower-superlink", env)
        supernode_exe = require_executable("flower-supernode", env)
        link_port, *node_ports = free_ports(1 + num_supernodes, host)
        address = f"{host}:{link_port}"
        pki = local_pki(work / "pki", host, num_supernodes) if secure else None
        write_connections(
            flwr_home,
            CONNECTION,
            {"address": address, "insecure": True}
            if pki is None
            else {"address": address, "root-certificates": str(pki.ca_cert)},
        )
        args = [str(staged_app(app_dir, work / "app")), CONNECTION, "--stream"]
        args += run_config_args(work / "run-config.toml", run_config)
        with ProcessGroup() as group:
            _start_superlink(group, superlink_exe, env, work, host, link_port, pki)
            if pki is not None:
                for _, public in pki.node_keys:
                    register_supernode(flwr, public, env, work)
            _start_supernodes(group, supernode_exe, env, work, address, host, node_ports, gpus, pki)
            return run_flwr(
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


def _check_loopback(host: str) -> None:
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise ConfigError(f"run_deployment only binds loopback addresses, got host={host!r}")


def superlink_security(pki: LocalPKI | None) -> list[str]:
    """``flower-superlink`` flags: TLS and SuperNode authentication, or ``--insecure``."""
    if pki is None:
        return ["--insecure"]
    return [
        "--ssl-ca-certfile",
        str(pki.ca_cert),
        "--ssl-certfile",
        str(pki.server_cert),
        "--ssl-keyfile",
        str(pki.server_key),
        "--enable-supernode-auth",
    ]


def supernode_security(pki: LocalPKI | None, private_key: Path | None) -> list[str]:
    """``flower-supernode`` flags: the CA to trust and the node's key, or ``--insecure``."""
    if pki is None:
        return ["--insecure"]
    return [
        "--root-certificates",
        str(pki.ca_cert),
        "--auth-supernode-private-key",
        str(private_key),
    ]


def register_supernode(flwr: str, public_key: Path, env: Mapping[str, str], work: Path) -> None:
    """Register a SuperNode's public key with the SuperLink (``flwr supernode register``)."""
    res = subprocess.run(
        [flwr, "supernode", "register", str(public_key), CONNECTION],  # noqa: S603
        env=dict(env),
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if res.returncode != 0:
        raise FGLError(
            f"flwr supernode register {public_key.name} failed: "
            f"{(res.stdout + res.stderr).strip()[-500:]}"
        )


def _start_superlink(
    group: ProcessGroup,
    exe: str,
    env: Mapping[str, str],
    work: Path,
    host: str,
    port: int,
    pki: LocalPKI | None = None,
) -> None:
    """Start the SuperLink and wait until its HTTP port accepts connections."""
    log = work / "superlink.log"
    cmd = [
        exe,
        *superlink_security(pki),
        "--disable-runtime-dependency-installation",
        "--host",
        host,
        "--port",
        str(port),
        "--database",
        str(work / "superlink.db"),
    ]
    proc = group.spawn(cmd, env, cwd=work, log=log)
    wait_for_port(host, port, proc, log, STARTUP_TIMEOUT_S)


def _start_supernodes(
    group: ProcessGroup,
    exe: str,
    env: Mapping[str, str],
    work: Path,
    superlink: str,
    host: str,
    ports: list[int],
    gpus: Sequence[str] | None = None,
    pki: LocalPKI | None = None,
) -> None:
    """Start one SuperNode per port and wait until each has registered."""
    started = []
    for partition, port in enumerate(ports):
        log = work / f"supernode-{partition}.log"
        key = pki.node_keys[partition][0] if pki is not None else None
        cmd = [
            exe,
            *supernode_security(pki, key),
            "--superlink",
            superlink,
            "--host",
            host,
            "--port",
            str(port),
            "--node-config",
            f"partition-id={partition} num-partitions={len(ports)}",
        ]
        node_env = (
            {**env, "CUDA_VISIBLE_DEVICES": str(gpus[partition % len(gpus)])} if gpus else env
        )
        started.append((group.spawn(cmd, node_env, cwd=work, log=log), log))
    for proc, log in started:
        wait_for_log_line(SUPERNODE_READY, proc, log, STARTUP_TIMEOUT_S)
