"""Environment, executables and files shared by simulation and deployment runs."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import tomli_w

from fgl_flower.errors import ConfigError
from fgl_flower.runtime.errors import ExecutableNotFoundError

FlatRunConfig = Mapping[str, "int | float | bool | str"]


#: How often a SuperExec looks for a task to start a process for: a SuperNode's for its
#: ClientApp processes (once per message in a deployment), a SuperLink's for the ServerApp
#: or the simulation (once per run). Flower's default of 1 s adds up to that much to each.
TASK_POLL_INTERVAL_S = "0.1"


def flower_env(flwr_home: Path, **extra: str) -> dict[str, str]:
    """Return an environment isolated to ``flwr_home`` for Flower child processes.

    The current interpreter's ``bin`` directory comes first on PATH so the ``flwr`` and
    ``flower-*`` executables of this environment are used. Runtime dependency
    installation, update checks and telemetry are disabled (they need the network); the
    SuperExecs poll for tasks every :data:`TASK_POLL_INTERVAL_S` unless the environment
    says otherwise. ``RAY_ADDRESS=local`` makes the simulation start its own Ray instance
    instead of joining one recorded in ``/tmp/ray`` by a ``ray start``.
    """
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    rest = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != bin_dir]
    env["PATH"] = os.pathsep.join([bin_dir, *rest])
    env.update(
        FLWR_HOME=str(flwr_home),
        FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1",
        FLWR_DISABLE_UPDATE_CHECK="1",
        FLWR_TELEMETRY_ENABLED="0",
        PYTHONUNBUFFERED="1",
        RAY_ADDRESS="local",
    )
    env.setdefault("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", TASK_POLL_INTERVAL_S)
    # torch.jit's and Ray's deprecation notices, printed by every Flower process
    env.setdefault("PYTHONWARNINGS", "ignore::DeprecationWarning,ignore::FutureWarning")
    env.update(extra)
    return env


def require_executable(name: str, env: Mapping[str, str]) -> str:
    """Return the absolute path of ``name`` on ``env``'s PATH or raise a helpful error."""
    found = shutil.which(name, path=env.get("PATH"))
    if found is None:
        raise ExecutableNotFoundError(
            f"`{name}` not found on PATH (looked first in {Path(sys.executable).parent}); "
            "install Flower into this environment: pip install 'flwr[simulation]'"
        )
    return found


def check_app_dir(app_dir: Path) -> Path:
    """Return ``app_dir`` resolved, after checking it holds a Flower app."""
    app_dir = Path(app_dir).expanduser().resolve()
    pyproject = app_dir / "pyproject.toml"
    if not pyproject.is_file() or "[tool.flwr.app" not in pyproject.read_text():
        raise ConfigError(f"{app_dir} is not a Flower app (no pyproject.toml with [tool.flwr.app])")
    return app_dir


def write_run_config(path: Path, run_config: FlatRunConfig) -> Path:
    """Write ``run_config`` as a TOML file for ``flwr run --run-config`` and return it."""
    for key, value in run_config.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"run-config keys must be non-empty strings, got {key!r}")
        if not isinstance(value, (bool, int, float, str)):
            raise ConfigError(f"run-config value {key}={value!r} must be int, float, bool or str")
    path.write_text(tomli_w.dumps(dict(run_config)), encoding="utf-8")
    return path


def run_config_args(path: Path, run_config: FlatRunConfig) -> list[str]:
    """Return the ``--run-config`` arguments (none for an empty config)."""
    return ["--run-config", str(write_run_config(path, run_config))] if run_config else []


def write_connections(flwr_home: Path, name: str, fields: Mapping[str, str | bool]) -> None:
    """Write ``$FLWR_HOME/config.toml`` holding one default SuperLink connection."""
    flwr_home.mkdir(parents=True, exist_ok=True)
    doc = {"superlink": {"default": name, name: dict(fields)}}
    (flwr_home / "config.toml").write_text(tomli_w.dumps(doc), encoding="utf-8")


@contextmanager
def work_directory(workdir: Path | None) -> Iterator[Path]:
    """Yield ``workdir`` (created) or a fresh temp dir that is removed afterwards."""
    if workdir is not None:
        path = Path(workdir).expanduser().resolve()
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    path = Path(tempfile.mkdtemp(prefix="fgl-flower-run-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
