"""``fgl run --method M`` with nothing else runs a small demo of every registered method:
the app's defaults (a node-level GCN on ``synthetic``) plus the method's own ``defaults``
(its backbone, a graph-level dataset). The list comes from the registry, so a new method is
covered without editing this test."""

from __future__ import annotations

import pytest

from fgl_flower import api
from fgl_flower.config import CORE_KEYS
from fgl_flower.launch import flat_config
from fgl_flower.methods import METHODS

#: Only what makes a test short, never what a method needs to run: two rounds (a one-shot
#: method keeps its one), and O-pFGL's optimisations cut below its demo's 100 + 100 steps.
#: DENSE's, Co-Boost's and FedLoG's long phases are already short in the demo itself
#: (``MethodSpec.demo``), which this test runs as ``fgl run --method M`` would.
SHORT = {
    "opfgl": {"opfgl": {"condense_steps": 20, "max_steps": 100}},
    "fedsageplus": {
        "fedsageplus": {"gen_rounds": 1}
    },  # its demo's 5 generator rounds need more than 2
    "feddep": {"feddep": {"gen_rounds": 1}},  # its demo's 2 generator rounds need more than 2
    "adafgl": {"adafgl": {"fed_rounds": 1}},  # its demo's 10 FedAvg rounds need more than 2
}


@pytest.mark.parametrize("method", sorted(name for name, _ in METHODS.items()))
def test_every_method_runs_with_no_other_option(method, tmp_path):
    rounds = None if METHODS.get(method).fixed_rounds else 2
    result = api.run(
        method, rounds=rounds, out=tmp_path / "run", progress=False, **SHORT.get(method, {})
    )
    final = result.summary["final"]
    assert result.summary["rounds_completed"] >= 1 and 0.0 <= final["test_acc"] <= 1.0


@pytest.mark.gpu
@pytest.mark.parametrize("method", sorted(name for name, _ in METHODS.items()))
def test_every_method_runs_on_cuda(method, tmp_path):
    """The same demo with ``device = cuda``: a tensor that a model, generator or server-side
    computation leaves on the CPU meets a CUDA one and stops the run, which no CPU test sees."""
    rounds = None if METHODS.get(method).fixed_rounds else 2
    result = api.run(
        method,
        rounds=rounds,
        out=tmp_path / "run",
        progress=False,
        device="cuda",
        **SHORT.get(method, {}),
    )
    assert result.config["device"] == "cuda"
    assert (
        result.summary["rounds_completed"] >= 1
        and 0.0 <= result.summary["final"]["test_acc"] <= 1.0
    )


def test_method_defaults_fill_only_what_the_user_left_unset():
    flat = flat_config({"method": "feddense"})
    assert (flat["dataset"], flat["partition"], flat["model"]) == (
        "synthetic-graphs",
        "random",
        "gin",
    )
    flat = flat_config({"method": "feddense", "dataset": "tu-single"})  # a group: its own partition
    assert (flat["dataset"], flat["partition"], flat["num-clients"], flat["model"]) == (
        "tu-single",
        "per-dataset",
        0,
        "gin",
    )
    flat = flat_config(
        {"method": "s2fgl", "model": "gcn"}
    )  # what the user set stands (and fails later)
    assert flat["model"] == "gcn"
    assert flat_config({"method": "s2fgl"})["model"] == "acmgcn"


def test_a_model_left_unset_follows_the_dataset_task():
    """The app's default backbone (``gcn``) is node-level: on a graph dataset a run that names
    no model gets ``gin``; one that names a model keeps it (and its check says what fits)."""
    assert flat_config({"method": "fedavg", "dataset": "MUTAG"})["model"] == "gin"
    assert flat_config({"method": "gcfl", "dataset": "tu-single"})["model"] == "gin"
    assert flat_config({"method": "fedavg", "dataset": "MUTAG", "model": "gcn"})["model"] == "gcn"
    assert flat_config({"method": "fedavg", "dataset": "Cora"})["model"] == "gcn"
    assert flat_config({"method": "s2fgl", "dataset": "Cora"})["model"] == "acmgcn"


def test_fedstar_carries_its_papers_optimisation():
    """FedStar's code and the FedDense paper's description of it: 3 layers, Adam at 1e-3, one
    local epoch (docs/methods/fedstar.md)."""
    flat = flat_config({"method": "fedstar", "dataset": "MUTAG"})
    assert (flat["model"], flat["num-layers"], flat["lr"], flat["local-epochs"]) == (
        "gin",
        3,
        0.001,
        1,
    )


def test_a_long_method_runs_a_short_demo_only_where_no_dataset_is_named():
    """``fgl run --method coboost`` alone took nine minutes: a spec's ``demo`` values shorten
    the no-option demo, and a run on real data keeps the faithful defaults."""
    assert flat_config({"method": "coboost"})["coboost.epochs"] == 2
    assert flat_config({"method": "coboost", "dataset": "Cora"})["coboost.epochs"] == 200
    assert flat_config({"method": "coboost", "coboost.epochs": 50})["coboost.epochs"] == 50
    demos = {name: spec.demo for name, spec in METHODS.items() if spec.demo}
    assert set(demos) >= {"dense", "coboost", "opfgl", "fedlog", "fedpub", "fedsageplus"}
    for name, demo in demos.items():  # a demo sets the method's own options and core keys
        assert all(key.startswith(f"{name}.") or key in CORE_KEYS for key in demo), name
