"""`fgl deploy-local --secure`: TLS with a private CA and SuperNode authentication (its numbers
equal the in-process run's: tests/runtime/test_app_runtime.py)."""

import time
from pathlib import Path

import pytest

from fgl_flower.runtime.config import flower_env, require_executable, write_connections
from fgl_flower.runtime.deployment import (
    CONNECTION,
    SUPERNODE_READY,
    _start_superlink,
    register_supernode,
    supernode_security,
)
from fgl_flower.runtime.processes import ProcessGroup, free_ports
from fgl_flower.runtime.security import local_pki, node_key_pair


@pytest.mark.slow
def test_a_supernode_whose_key_is_not_registered_is_refused(tmp_path):
    env = flower_env(tmp_path / "home")
    host = "127.0.0.1"
    link, registered_port, stranger_port = free_ports(3, host)
    pki = local_pki(tmp_path / "pki", host, 1)
    stranger_key, _ = node_key_pair(tmp_path / "pki", "stranger")
    write_connections(
        tmp_path / "home",
        CONNECTION,
        {"address": f"{host}:{link}", "root-certificates": str(pki.ca_cert)},
    )
    exe = require_executable("flower-supernode", env)

    def supernode(group, key: Path, port: int, name: str):
        cmd = [
            exe,
            *supernode_security(pki, key),
            "--superlink",
            f"{host}:{link}",
            "--host",
            host,
            "--port",
            str(port),
            "--max-retries",
            "0",
            "--node-config",
            "partition-id=0 num-partitions=1",
        ]
        return group.spawn(cmd, env, cwd=tmp_path, log=tmp_path / f"{name}.log")

    with ProcessGroup() as group:
        _start_superlink(
            group, require_executable("flower-superlink", env), env, tmp_path, host, link, pki
        )
        register_supernode(require_executable("flwr", env), pki.node_keys[0][1], env, tmp_path)
        member = supernode(group, pki.node_keys[0][0], registered_port, "member")
        stranger = supernode(group, stranger_key, stranger_port, "stranger")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            stranger.poll() is None or SUPERNODE_READY not in (tmp_path / "member.log").read_text()
        ):
            time.sleep(0.5)
        assert SUPERNODE_READY in (tmp_path / "member.log").read_text()
        assert stranger.poll() not in (None, 0)  # exited with an error
        assert member.poll() is None
    log = (tmp_path / "stranger.log").read_text()
    assert SUPERNODE_READY not in log and "Failed to activate SuperNode" in log
