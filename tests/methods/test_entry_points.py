"""A method in another installed package registers itself through the entry point group
``fgl_flower.methods``: found by ``importlib.metadata`` (a distribution's ``entry_points.txt``
on ``sys.path``, as pip installs it), listed, configurable and runnable like a built-in one."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

PLUGIN = """
from fgl_flower.methods.spec import MethodSpec

SPEC = MethodSpec(
    name="fedavg-plugin",
    strategy="fgl_flower.strategies.fedavg:FedAvgStrategy",
    client="fgl_flower.clients.fedavg:FedAvgClient",
    tasks=("node",),
    summary="FedAvg, registered by another package.",
    options={"strength": 0.5},
    option_help={"strength": "an option of the plugin's own"},
)
"""


def install_plugin(site: Path, value: str = "fgl_plugin_demo:SPEC") -> None:
    """What ``pip install`` leaves for a package with the entry point: its module and a
    ``.dist-info`` folder with ``METADATA`` and ``entry_points.txt``."""
    (site / "fgl_plugin_demo.py").write_text(PLUGIN)
    info = site / "fgl_plugin_demo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fgl-plugin-demo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[fgl_flower.methods]\nfedavg-plugin = {value}\n")


def run(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600
    )


def test_an_installed_method_is_listed_configured_and_run(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    install_plugin(site)
    listed = run(site, "-m", "fgl_flower.cli", "methods", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "fedavg-plugin" in listed.stdout and "registered by another package" in listed.stdout
    config = run(site, "-m", "fgl_flower.app_defaults", cwd=tmp_path)  # what flwr run is given
    assert "[tool.flwr.app.config.fedavg-plugin]" in config.stdout
    assert "strength = 0.5" in config.stdout and "an option of the plugin's own" in config.stdout
    out = tmp_path / "run"
    ran = run(
        site,
        "-m",
        "fgl_flower.cli",
        "run",
        "--inprocess",
        "--method",
        "fedavg-plugin",
        "--rounds",
        "1",
        "--clients",
        "2",
        "--set",
        "fedavg-plugin.strength=0.7",
        "--set",
        "data.synthetic.num-nodes=200",
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (out / "summary.json").is_file()


def test_a_broken_entry_point_is_named(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    install_plugin(site, "fgl_plugin_demo:NOT_THERE")
    listed = run(site, "-m", "fgl_flower.cli", "methods", cwd=tmp_path)
    assert listed.returncode != 0
    message = textwrap.dedent(listed.stdout + listed.stderr)
    assert "fedavg-plugin = 'fgl_plugin_demo:NOT_THERE'" in message and "failed to load" in message
