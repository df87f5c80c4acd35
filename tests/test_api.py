"""The Python API (fgl_flower.run and friends): the same config path, errors and numbers
as ``fgl run``; results, partitions, plots and methods registered at run time."""

import json
from pathlib import Path

import matplotlib
import pytest

import fgl_flower as fgl
from fgl_flower.cli import main
from fgl_flower.errors import ConfigError

matplotlib.use("Agg")

SMALL = {"dataset": "synthetic", "partition": "metis", "clients": 3, "rounds": 3, "seed": 2}
SMALL_ARGS = [
    "--dataset",
    "synthetic",
    "--partition",
    "metis",
    "--clients",
    "3",
    "--rounds",
    "3",
    "--seed",
    "2",
    "--set",
    "data.synthetic.num-nodes=300",
]


def comparable(summary: dict) -> dict:
    """A summary without wall times."""
    return {k: v for k, v in summary.items() if "time" not in k}


def test_run_equals_fgl_run_for_the_same_config(tmp_path):
    assert (
        main(
            [
                "run",
                "--inprocess",
                "--method",
                "fedprox",
                *SMALL_ARGS,
                "--set",
                "fedprox.mu=0.05",
                "--set",
                "local-epochs=2",
                "--out",
                str(tmp_path / "cli"),
            ]
        )
        == 0
    )
    result = fgl.run(
        "fedprox",
        **SMALL,
        local_epochs=2,
        fedprox={"mu": 0.05},
        data={"synthetic": {"num-nodes": 300}},
        out=tmp_path / "api",
        progress=False,
    )
    cli = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert comparable(result.summary) == comparable(cli)
    assert result.out_dir == tmp_path / "api" and len(result.rounds) == 3
    assert result.final == cli["final"] and set(result.clients) == {0, 1, 2}
    assert [r for r, _ in result.history("test_acc")] == [1, 2, 3]
    assert result.config["method_options"] == {
        "mu": 0.05,
        "finetune-epochs": 0,
        "secure-aggregation": False,
        "dp-clip": 0.0,
        "dp-noise": 0.0,
        "dp-epsilon": 0.0,
        "dp-delta": 1e-05,
        "dp-seeded-noise": False,
    }
    again = fgl.load_result(tmp_path / "api")
    assert again.summary == result.summary and again.rounds == result.rounds


@pytest.mark.parametrize(
    "kwargs,argv",
    [
        ({"method": "fedavgg"}, ["--method", "fedavgg"]),
        ({"dataset": "Coraa"}, ["--dataset", "Coraa"]),
        ({"lr": "abc"}, ["--set", "lr=abc"]),
        ({"learning_rate": 0.1}, ["--set", "learning-rate=0.1"]),
        ({"local_epoch": 2}, ["--set", "local-epoch=2"]),
        ({"rounds": 0}, ["--rounds", "0"]),
        (
            {"method": "fedspray", "fedspray": {"variant": "papr"}},
            ["--method", "fedspray", "--set", "fedspray.variant=papr"],
        ),
        ({"fedprox": {"mu": 0.5}}, ["--set", "fedprox.mu=0.5"]),
    ],
)
def test_bad_input_raises_the_cli_error(kwargs, argv, tmp_path, capsys):
    assert main(["run", "--inprocess", *argv, "--out", str(tmp_path / "cli")]) == 2
    cli_error = capsys.readouterr().err.removeprefix("error: ").strip()
    with pytest.raises(Exception) as raised:
        fgl.run(**kwargs, out=tmp_path / "api", progress=False)
    message = str(raised.value).strip("'\"")
    # the API names keys as keyword arguments would, the CLI with --set: same text otherwise
    assert message.replace("--set ", "") == cli_error.replace("--set ", "")
    api, cli = tmp_path / "api", tmp_path / "cli"  # both leave the same trace: none, or error.txt
    assert api.exists() == cli.exists()
    assert not api.exists() or sorted(p.name for p in api.iterdir()) == ["error.txt"]


def test_an_unknown_key_names_the_closest_ones():
    with pytest.raises(ConfigError, match="Did you mean 'local-epochs'"):
        fgl.run_config(local_epoch=2)


def test_keyword_arguments_become_run_config_keys():
    flat = fgl.run_config(
        "fedprox",
        clients=4,
        rounds=7,
        local_epochs=2,
        fedprox={"mu": 0.1},
        data={"louvain": {"resolution": 2.0}},
        out="/tmp/x",
    )
    assert (flat["num-clients"], flat["num-rounds"], flat["local-epochs"]) == (4, 7, 2)
    assert flat["fedprox.mu"] == 0.1 and flat["data.louvain.resolution"] == 2.0
    assert fgl.run_config("opfgl")["num-rounds"] == 1  # a one-shot method's round, as the CLI


def test_a_run_shows_a_progress_bar_and_no_log_lines(tmp_path, capsys):
    fgl.run("fedavg", **SMALL, data={"synthetic": {"num-nodes": 300}}, out=tmp_path / "run")
    err = capsys.readouterr().err
    assert "3/3" in err and "fedavg on synthetic" in err
    assert "[round 1/3]" not in err  # the run's own lines stay off unless verbose


def test_an_occupied_folder_is_refused_unless_overwritten(tmp_path):
    args = dict(SMALL, data={"synthetic": {"num-nodes": 300}}, out=tmp_path, progress=False)
    fgl.run("local", **args)
    with pytest.raises(ConfigError, match="already holds a run"):
        fgl.run("local", **args)
    assert fgl.run("local", **args, overwrite=True).summary["method"] == "local"


def test_the_backend_must_exist():
    with pytest.raises(ConfigError, match="backend='ray'"):
        fgl.run(backend="ray")


def test_partition_statistics_equal_fgl_partition_stats(capsys):
    part = fgl.partition("synthetic", "louvain", 4, data={"synthetic": {"num-nodes": 300}})
    assert (
        main(
            [
                "partition-stats",
                "--partition",
                "louvain",
                "--clients",
                "4",
                "--set",
                "data.synthetic.num-nodes=300",
                "--json",
            ]
        )
        == 0
    )
    assert part.stats == json.loads(capsys.readouterr().out)
    assert part.num_clients == 4
    assert all(abs(sum(row) - 1) < 1e-9 for row in part.label_mix())
    assert part.client(0).data.num_nodes == part.stats[0]["nodes"]


def test_plots_draw_runs_clients_and_partitions(tmp_path):
    res = fgl.run(
        "fedavg", **SMALL, data={"synthetic": {"num-nodes": 300}}, out=tmp_path, progress=False
    )
    ax = fgl.plot_curves({"FedAvg": res, "again": res})
    assert len(ax.get_lines()) == 2 and ax.get_ylabel() == "test acc (%)"
    assert len(fgl.plot_clients([res, res]).patches) == 2 * 3
    part = fgl.partition("synthetic", "metis", 3, data={"synthetic": {"num-nodes": 300}})
    assert len(fgl.plot_label_mix(part).patches) == 3 * len(part.stats[0]["class_counts"])
    assert len(fgl.plot_partition(part, "node_homophily").patches) == 3


def test_a_method_registered_at_run_time_runs_in_process_only(tmp_path, monkeypatch):
    from fgl_flower.clients.fedavg import FedAvgClient
    from fgl_flower.methods import METHODS
    from fgl_flower.strategies.fedavg import FedAvgStrategy

    for table in ("_items", "_names"):  # the registry as it was, after this test
        monkeypatch.setattr(METHODS, table, dict(getattr(METHODS, table)))

    class Halved(
        FedAvgStrategy
    ):  # defined here, as in a notebook: its module is not importable by Ray
        pass

    Halved.__module__ = "__main__"
    fgl.register_method(
        fgl.MethodSpec(
            name="test-halved",
            strategy=Halved,
            client=FedAvgClient,
            tasks=("node",),
            summary="test",
            options={"scale": 0.5},
        ),
        replace_existing=True,
    )
    fgl.register_method(
        fgl.MethodSpec(
            name="test-halved",
            strategy=Halved,
            client=FedAvgClient,
            tasks=("node",),
            summary="test",
            options={"scale": 0.5},
        ),
        replace_existing=True,
    )  # a notebook cell run twice
    with pytest.raises(ConfigError, match="backend='inprocess'"):
        fgl.run("test-halved", backend="simulation", **SMALL)
    res = fgl.run(
        "test-halved",
        **SMALL,
        data={"synthetic": {"num-nodes": 300}},
        **{"test-halved": {"scale": 0.25}},
        out=tmp_path,
        progress=False,
    )
    assert res.summary["method"] == "test-halved" and res.config["method_options"] == {
        "scale": 0.25
    }


@pytest.mark.curves
def test_a_run_leaves_matplotlibs_backend_alone(tmp_path, monkeypatch):
    """curves.png is drawn without pyplot: a notebook's inline backend stays in place."""
    import matplotlib

    backend = matplotlib.get_backend()
    monkeypatch.setattr(
        matplotlib, "use", lambda *a, **k: pytest.fail("a run switched the backend")
    )
    fgl.run("fedavg", **SMALL, data={"synthetic": {"num-nodes": 300}}, out=tmp_path, progress=False)
    assert (tmp_path / "curves.png").stat().st_size > 0 and matplotlib.get_backend() == backend


@pytest.mark.slow
def test_the_simulation_backend_runs_the_validated_config_with_flowers_output_in_flwr_log(
    tmp_path, monkeypatch
):
    """backend="simulation" hands the config that `fgl run` would validate to the simulation
    engine, Flower's output to flwr.log. (That engine gives the in-process numbers:
    tests/runtime/test_app_runtime.py; the API's own simulation runs in scripts/check_wheel.sh.)"""
    import fgl_flower.launch as launch

    seen, real = {}, launch.execute

    def fake_execute(cfg, engine, *, stream=None, **_):
        seen.update(engine=engine, log=Path(stream.name), cfg=cfg)
        stream.write("Successfully started run 1\n")
        return real(cfg, "inprocess")  # the results the run folder then holds

    monkeypatch.setattr(launch, "execute", fake_execute)
    fgl.run("fedavg", **SMALL, progress=False, backend="simulation", out=tmp_path / "simulation")
    assert seen["engine"] == "simulation" and seen["log"] == tmp_path / "simulation" / "flwr.log"
    assert seen["cfg"].num_clients == 3 and seen["cfg"].num_rounds == 3
    assert "Successfully started run" in (tmp_path / "simulation" / "flwr.log").read_text()
