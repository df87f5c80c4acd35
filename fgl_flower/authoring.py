"""``fgl new-method NAME``: a runnable method written from a template, in a source checkout.

The template is a FedAvg variant with one option and one probe, so that every piece a method
has is there to be edited: its spec (``methods/<name>.py``: options, check, probe), its server
(``strategies/<name>.py``), its client (``clients/<name>.py``), its test
(``tests/methods/test_<name>.py``, passing as written) and its page (``docs/methods/<name>.md``).
The generated parts of ``pyproject.toml`` and of the methods tables are then rewritten from the
registry (:mod:`fgl_flower.app_defaults`, :mod:`fgl_flower.tables`); nothing is edited by hand.

The method it writes: FedAvg with a server learning rate :math:`\\eta` (FedOpt's server step
with plain SGD),

.. math::
    w^{t+1} = w^{t} + \\eta\\,\\Big(\\sum_k \\tfrac{n_k}{n}\\, w_k^{t} - w^{t}\\Big),

which is FedAvg at :math:`\\eta = 1`; its probe is the size of the server's step.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from fgl_flower.errors import ConfigError

#: A method name the kit accepts: a Python module name that is also a run-config scope.
NAME = re.compile(r"^[a-z][a-z0-9]{1,30}$")

SPEC = '''"""{title}'s spec (torch-free): options, checks, probes (written by ``fgl new-method``).

FedAvg with a server learning rate eta: the global model steps eta of the way from where it
was to the clients' weighted mean (eta = 1: FedAvg).
"""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe


@dataclass(frozen=True)
class {cls}Options(MethodOptions):
    """``{name}.*`` options: field ``server_lr`` is the run-config key ``{name}.server-lr``."""

    server_lr: float = 1.0


#: Measured every round; a run warns when one crosses its dead bound.
PROBES = (
    Probe("server.step", "L2 norm of the server's step eta * (mean - w) (server)", dead_below=1e-12,
          why="the global model no longer moves"),
)


def check_config(cfg: RunConfig) -> None:
    """Stop a bad ``{name}.*`` option before anything starts."""
    {cls}Options.from_config(cfg).require_positive("{name}", "server_lr")


SPEC = MethodSpec(
    name="{name}",
    strategy="fgl_flower.strategies.{name}:{cls}Strategy",
    client="fgl_flower.clients.{name}:{cls}Client",
    tasks=("node", "graph"),
    summary="FedAvg with a server learning rate: the global model steps eta of the way to the "
    "clients' weighted mean.",
    reference="",
    options={cls}Options.defaults(),
    option_help={{"server-lr": "eta: the server's step towards the clients' weighted mean (1: FedAvg)"}},
    check=check_config,
    probes=PROBES,
)
'''

STRATEGY = '''r"""{title}'s server: FedAvg's round, then a step of size eta towards the mean.

.. math::
    w^{{t+1}} = w^{{t}} + \\eta\\,(\\bar w^{{t}} - w^{{t}}),\\qquad
    \\bar w^{{t}} = \\textstyle\\sum_k \\frac{{n_k}}{{n}} w_k^{{t}}
"""

from __future__ import annotations

import numpy as np
from flwr.app import ArrayRecord, Message

from fgl_flower.methods.{name} import {cls}Options
from fgl_flower.records import array_of, record_numpy
from fgl_flower.strategies.fedavg import FedAvgStrategy


class {cls}Strategy(FedAvgStrategy):
    """FedAvg whose global model moves ``{name}.server-lr`` of the way to the clients' mean."""

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.options = {cls}Options.from_config(cfg)
        self.step_norm = 0.0

    def needs_start(self) -> bool:
        """The step starts from the round's w (round 1: the clients send the w they built)."""
        return True

    def average(self, server_round: int, records: list[ArrayRecord], weights: list[float],
                replies: list[Message]) -> ArrayRecord:
        mean = super().average(server_round, records, weights, replies)
        eta = self.options.server_lr
        start = record_numpy(self.start_of_round(server_round, replies))
        moved = {{k: (start[k] + eta * (m - start[k])).astype(m.dtype) for k, m in record_numpy(mean).items()}}
        self.step_norm = float(np.sqrt(sum(np.sum((moved[k] - start[k]).astype(np.float64) ** 2)
                                           for k in moved)))
        if eta == 1.0:
            return mean  # FedAvg's numbers, bit for bit
        return ArrayRecord({{k: array_of(v) for k, v in moved.items()}})

    def server_probes(self, server_round: int) -> dict[str, float]:
        return {{"server.step": self.step_norm}}
'''

CLIENT = '''"""{title}'s client: FedAvg's (local training of the shared model), sending round 1's start."""

from __future__ import annotations

from fgl_flower.clients.fedavg import FedAvgClient


class {cls}Client(FedAvgClient):
    """Trains as FedAvg's client; in round 1 (no global model received) it also sends the model
    it built from the run seed, from which the server takes its first step."""

    sends_start = True
'''

TEST = '''"""{title} (written by ``fgl new-method``): it runs, eta = 1 is FedAvg, and its probe lives."""

import json

import pytest

from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess
from fgl_flower.parse import parse_run_config


def small_run(tmp_path, method, **options):
    flat = {{**load_app_defaults(), "method": method, "num-rounds": 3, "num-clients": 3,
             "progress": False, "data.synthetic.num-nodes": 300, "out-dir": str(tmp_path / method),
             **options}}
    run_inprocess(flat)
    return [json.loads(line) for line in (tmp_path / method / "rounds.jsonl").read_text().splitlines()]


def test_server_lr_1_is_fedavg(tmp_path):
    ours = small_run(tmp_path, "{name}")
    fedavg = small_run(tmp_path, "fedavg")
    assert [r["eval"]["test_acc"] for r in ours] == [r["eval"]["test_acc"] for r in fedavg]


def test_a_smaller_step_changes_the_run_and_the_probe_sees_it(tmp_path):
    full = small_run(tmp_path / "a", "{name}")
    half = small_run(tmp_path / "b", "{name}", **{{"{name}.server-lr": 0.5}})
    assert [r["eval"]["val_loss"] for r in half] != [r["eval"]["val_loss"] for r in full]
    steps = [r["probes"]["server.step"]["clients"]["server"] for r in half]
    assert all(s > 0 for s in steps)


def test_a_bad_option_stops_before_training():
    with pytest.raises(ConfigError, match="{name}.server-lr"):
        parse_run_config({{**load_app_defaults(), "method": "{name}", "{name}.server-lr": -1.0}})
'''

PAGE = '''# {title}

FedAvg with a server learning rate (a method written by `fgl new-method {name}`; edit this page
as the method becomes your own).

## What it does

Each round the clients train the shared model from the global one, as in FedAvg, and the
server moves the global model a step of size $\\eta$ (`{name}.server-lr`) towards their mean
weighted by training examples:

$$w^{{t+1}} = w^{{t}} + \\eta\\,\\Big(\\sum_k \\tfrac{{n_k}}{{n}}\\, w_k^{{t}} - w^{{t}}\\Big)$$

At $\\eta = 1$ it is FedAvg, number for number (its test checks it).

## Options

| option | default | meaning |
|---|---|---|
| `{name}.server-lr` | 1.0 | $\\eta$, the server's step towards the clients' weighted mean |

## Probes

| probe | dead when | meaning |
|---|---|---|
| `server.step` | < 1e-12 | L2 norm of the server's step: the global model no longer moves |

## Files

`fgl_flower/methods/{name}.py` (spec), `fgl_flower/strategies/{name}.py` (server),
`fgl_flower/clients/{name}.py` (client), `tests/methods/test_{name}.py` (its tests).
'''


def checkout_root() -> Path:
    """The source checkout this package is imported from (where a new method's files go)."""
    from fgl_flower.app_defaults import GENERATED_MARK

    root = Path(__file__).resolve().parents[1]
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or GENERATED_MARK not in pyproject.read_text():
        raise ConfigError(
            "fgl new-method writes into a source checkout of fgl-flower (git clone, pip install -e .); "
            "this one is installed. A method in your own package registers through the entry point "
            "group fgl_flower.methods (docs/methods/authoring.md).")
    return root


def new_method(name: str, root: Path | None = None) -> list[Path]:
    """Write the method ``name`` from the template into the checkout ``root``, then rewrite the
    generated config and tables; returns the files written."""
    from fgl_flower.methods import METHODS

    if not NAME.match(name):
        raise ConfigError(f"method name {name!r}: use 2-31 lowercase letters and digits, starting "
                          "with a letter (it names modules and the run-config scope).")
    if name in METHODS:
        raise ConfigError(f"a method named {name!r} exists already; choose another name.")
    root = checkout_root() if root is None else root
    title = name[0].upper() + name[1:]
    fields = {"name": name, "cls": title, "title": title}
    files = {
        root / "fgl_flower" / "methods" / f"{name}.py": SPEC,
        root / "fgl_flower" / "strategies" / f"{name}.py": STRATEGY,
        root / "fgl_flower" / "clients" / f"{name}.py": CLIENT,
        root / "tests" / "methods" / f"test_{name}.py": TEST,
        root / "docs" / "methods" / f"{name}.md": PAGE,
    }
    taken = [p for p in files if p.exists()]
    if taken:
        raise ConfigError(f"{taken[0]} exists already; choose another name or remove it.")
    for path, template in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**fields), encoding="utf-8")
    # the registry is built at import: regenerate in a fresh interpreter that sees the new spec
    for argv in (["fgl_flower.app_defaults", "--write", str(root / "pyproject.toml")],
                 ["fgl_flower.tables", "--write", str(root / "README.md"),
                  str(root / "docs" / "methods" / "index.md")]):
        subprocess.run([sys.executable, "-m", *argv], cwd=root, check=True, capture_output=True)
    return list(files)
