"""The real runtimes on this package's app: `flwr run` simulation and local deployment.

Both must produce the summary that the in-process grid produces for the same config and
seed: the Flower wiring (serialization, fresh processes per message in deployment,
context.state persistence, TLS with SuperNode authentication) changes no number.
"""

import json

import pytest
from run_records import rounds

from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.inprocess import run_inprocess
from fgl_flower.paths import app_dir
from fgl_flower.runtime import run_deployment, run_simulation

NUMBERS = ("final", "best_val", "bytes_up_total", "rounds_completed")


@pytest.fixture
def flat(tmp_path):
    """FedProx link prediction on a user's graph object (the synthetic graph, stored in the
    cache as `fgl_flower.run(dataset=data)` stores it; the catalog's datasets run in these
    runtimes in tests/runtime/test_faults_runtime.py)."""
    from fgl_flower.datasets import contextual_sbm, store_object

    cfg = load_app_defaults()
    cfg.update(
        {
            "dataset": str(store_object(contextual_sbm(num_nodes=300))),
            "task": "link",
            "select-by": "val_auc",
            "split": "0.8,0.1,0.1",
            "num-clients": 3,
            "num-rounds": 2,
            "method": "fedprox",
            "keep-optimizer-state": True,
            "fraction-train": 0.67,
        }
    )  # 2 of 3 clients a round, sampled by partition id
    return cfg


def _summary(out):
    s = json.loads((out / "summary.json").read_text())
    return {k: s[k] for k in NUMBERS}


@pytest.mark.slow
def test_simulation_and_secure_deployment_match_inprocess(flat, tmp_path):
    """The deployment is `fgl deploy-local --secure`'s: TLS with a private CA and SuperNode
    authentication (the plain one: tests/runtime/test_runtime_launch.py). A user's graph and
    link prediction give the same numbers in all three."""
    ref = run_inprocess({**flat, "out-dir": str(tmp_path / "ref"), "progress": False})
    expected = {k: ref[k] for k in NUMBERS}

    sim = tmp_path / "sim"  # num-clients left to follow the federation: its 3 SuperNodes
    assert (
        run_simulation(app_dir(), {**flat, "out-dir": str(sim), "num-clients": -1}, 3, timeout=600)
        == 0
    )
    assert _summary(sim) == expected
    assert json.loads((sim / "summary.json").read_text())["num_clients"] == 3

    dep, work = tmp_path / "dep", tmp_path / "work"
    assert (
        run_deployment(
            app_dir(), {**flat, "out-dir": str(dep)}, 3, secure=True, workdir=work, timeout=600
        )
        == 0
    )
    assert _summary(dep) == expected
    assert "--insecure" not in (work / "superlink.log").read_text()
    assert (work / "pki" / "server.key").stat().st_mode & 0o077 == 0  # private keys: owner only
    records = rounds(dep)
    assert [r["round"] for r in records] == [1, 2]
    sampled = [r["train_clients"] for r in rounds(sim)]
    assert [r["train_clients"] for r in records] == sampled and all(len(c) == 2 for c in sampled)


@pytest.fixture
def two_node_ray_cluster():
    """A real Ray cluster of two nodes on this machine, one CPU each (so the two client
    actors that fit cannot share a node)."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


def _actor_nodes(address: str) -> list[str]:
    """The Ray node of every Flower client actor the cluster has run (dead ones included)."""
    import ray
    from ray._private import state

    ray.init(address=address, logging_level="ERROR")
    try:
        return [
            a["Address"]["NodeID"]
            for a in state.actors().values()
            if a["ActorClassName"] == "ClientAppActor"
        ]
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_fgl_run_cli_end_to_end_on_a_two_node_ray_cluster(
    tmp_path, capsys, monkeypatch, two_node_ray_cluster
):
    """`fgl run --ray-address`: the client actors run on both nodes, the numbers are the
    in-process run's, and the CLI prints its summary and writes the curves. The method is
    FED-PUB: each client gets its own model from the server (per-node messages) through Ray."""
    from fgl_flower.cli import main

    monkeypatch.chdir(tmp_path)
    args = [
        "run",
        "--method",
        "fedpub",
        "--clients",
        "3",
        "--rounds",
        "2",
        "--set",
        "data.synthetic.num-nodes=300",
        "--set",
        "hidden=16",
    ]
    out, ref = tmp_path / "cli", tmp_path / "ref"
    assert main([*args, "--ray-address", two_node_ray_cluster.address, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "best-val" in printed and str(out) in printed
    assert (out / "curves.png").stat().st_size > 0
    nodes = _actor_nodes(two_node_ray_cluster.address)
    assert len(nodes) == 2 and len(set(nodes)) == 2
    assert main([*args, "--inprocess", "--out", str(ref)]) == 0
    assert _summary(out) == _summary(ref) and _summary(out)["rounds_completed"] == 2
