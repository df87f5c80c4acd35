"""A tiny throwaway Flower app (no numpy, no torch) for end-to-end runtime tests."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import psutil

PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "fgltoyapp"
version = "0.1.0"
description = "Throwaway app for fgl_flower.runtime tests"
license = "Apache-2.0"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "fgltest"

[tool.flwr.app.components]
serverapp = "fgltoyapp.server_app:app"
clientapp = "fgltoyapp.client_app:app"

[tool.flwr.app.config]
num-rounds = 1
num-nodes = 1
out-file = ""
message = "default"
fail = false
linger = 0.0
"""

SERVER_APP = """
import json
import time
from logging import INFO

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp
from flwr.supercore import log

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    if cfg["fail"]:
        raise RuntimeError("toy ServerApp failure")
    deadline = time.monotonic() + 60
    while len(list(grid.get_node_ids())) < int(cfg["num-nodes"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    rounds, started = [], time.monotonic()
    for _ in range(int(cfg["num-rounds"])):
        msgs = [
            Message(RecordDict({"q": ConfigRecord({"x": 1})}), dst_node_id=n, message_type="query.pid")
            for n in grid.get_node_ids()
        ]
        replies = grid.send_and_receive(msgs, timeout=120)
        partitions = (int(r.content["r"]["partition-id"]) for r in replies if r.has_content())
        rounds.append(sorted(partitions))
    result = {"rounds": rounds, "message": cfg["message"], "seconds": time.monotonic() - started}
    with open(str(cfg["out-file"]), "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    log(INFO, "toy results written")
    time.sleep(float(cfg["linger"]))  # a ServerApp that takes its time to end after that
"""

CLIENT_APP = """
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

app = ClientApp()


@app.query("pid")
def pid(msg: Message, context: Context) -> Message:
    partition = int(context.node_config["partition-id"])
    return Message(RecordDict({"r": ConfigRecord({"partition-id": partition})}), reply_to=msg)
"""


def write_toy_app(app: Path) -> Path:
    """Write the toy Flower app into ``app`` and return it."""
    pkg = app / "fgltoyapp"
    pkg.mkdir(parents=True)
    (app / "pyproject.toml").write_text(PYPROJECT)
    (pkg / "__init__.py").write_text("")
    (pkg / "server_app.py").write_text(textwrap.dedent(SERVER_APP))
    (pkg / "client_app.py").write_text(textwrap.dedent(CLIENT_APP))
    return app


def flower_processes_under(path: Path) -> list[str]:
    """Command lines of live Flower/Ray processes that mention ``path`` or run from it."""
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd", "environ"]):
        if proc.pid == os.getpid():
            continue
        info = proc.info
        text = " ".join(info.get("cmdline") or [])
        env_home = (info.get("environ") or {}).get("FLWR_HOME", "")
        mentions = any(str(path) in field for field in (text, info.get("cwd") or "", env_home))
        try:
            alive = proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            alive = False
        if mentions and alive:
            found.append(f"{proc.pid}: {text[:160]}")
    return found


def assert_no_flower_processes_under(path: Path, grace: float = 5.0) -> None:
    """No Flower/Ray process of a run under ``path`` is left (they exit asynchronously after
    SIGTERM/SIGKILL: ``grace`` seconds for that)."""
    deadline = time.monotonic() + grace
    while (left := flower_processes_under(path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == []
