"""CLI: bad input stops before training with one clear line; listings work."""

import pytest

from fgl_flower.cli import main
from fgl_flower.errors import ConfigError

BAD = [
    (["--method", "fedavgg"], "Unknown method 'fedavgg'. Did you mean 'fedavg'"),
    (["--dataset", "Coraa"], "Unknown dataset 'Coraa'. Did you mean 'Cora'"),
    (["--dataset", "Cora", "--partition", "louvainn"], "Unknown partitioner 'louvainn'"),
    (["--dataset", "Cora", "--partition", "louvain-topk", "--clients", "500"], "found only"),
    (["--set", "split=0.5,0.2,0.2"], "sum to 0.9, not 1"),
    (["--set", "lr=abc"], "expected a float"),
    (["--set", "nonsense=1"], "unknown run-config key"),
    (["--rounds", "0"], "num-rounds must be at least 1"),
    (["--dataset", "MUTAG", "--partition", "louvain", "--model", "gin"], "cannot split 'MUTAG'"),
    (
        ["--dataset", "MUTAG", "--partition", "dirichlet", "--model", "gcn"],
        "Model 'gcn' is for node-level",
    ),
    (["--set", "fedprox.muu=1", "--method", "fedprox"], None),  # unknown key: flwr would reject too
    (["--method", "fedspray", "--set", "fedspray.variant=papr"], "fedspray.variant='papr'"),
    (
        [
            "--method",
            "fedspray",
            "--dataset",
            "MUTAG",
            "--partition",
            "dirichlet",
            "--model",
            "gin",
        ],
        "runs node tasks, not graph",
    ),
    (["--set", "select-by=val_auc"], "select-by=val_auc: task node reports val_loss, val_acc"),
    (["--set", "select-by=val_f2"], "select-by='val_f2'"),
    (["--set", "model-init=xavier"], "Unknown model-init 'xavier'"),
    (
        ["--dataset", "Physics", "--partition", "files", "--set", "data.files.dir=/nonexistent"],
        "/nonexistent",
    ),
    (["--cpus-per-client", "4096"], "Ray would never start a client"),
    (["--fraction-train", "0"], "fraction-train must be in (0, 1]"),
    (["--device", "tpu"], "device='tpu'"),
    (["--gpus-per-client", "1.5"], "gpus-per-client"),
    (
        [
            "--set",
            "split=0.01,0.2,0.79",
            "--set",
            "data.synthetic.num-nodes=300",
        ],  # 60 nodes a client
        "client(s) [0, 1, 2, 3, 4] have no training node",
    ),
    (
        ["--clients", "2", "--set", "split=0.02,0.2,0.78", "--set", "data.synthetic.num-nodes=100"],
        "no training node on any client",
    ),  # one training node each, four classes
    (
        ["--set", "fedprox.mu=0.5"],
        "is an option of method 'fedprox', but the run's method is 'fedavg'",
    ),
    (["--data-root", "/nonexistent-root"], "data-root /nonexistent-root is not a folder"),
    (["--out", "/proc/fgl-run"], "cannot write there"),
    (["--set", "split-fold=5"], "split-fold must be -1 (the run seed mod 5) or a fold 0-4"),
    (["--set", "edge-flip=1.5"], "edge-flip must be in [0, 1)"),
    (["--clients", "-2"], "num-clients must be at least 1, 0 for the partition's natural"),
    (["--clients", "-1"], "this run starts its own federation: give the number of clients"),
    (["--clients", "0"], "partition 'metis' splits into as many clients as asked"),
    (
        ["--set", "split-mode=five-group", "--set", "split=0.8,0.1,0.1"],
        "split=0.8,0.1,0.1 with split-mode=five-group",
    ),
    (
        [
            "--partition",
            "louvain-merge",
            "--clients",
            "3",
            "--set",
            "data.synthetic.homophily=0.95",
        ],
        "set num-clients=4 or 0",
    ),
    (
        ["--dataset", "syn-cora", "--partition", "per-dataset", "--clients", "5"],
        "set num-clients=10 or 0",
    ),
]


@pytest.mark.parametrize("argv,message", BAD)
def test_bad_input_is_one_line_exit_2(argv, message, capsys, data_root, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--data-root", str(data_root), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    if message:
        assert message in err
    written = [p for p in (tmp_path / "runs").rglob("*") if p.is_file()]
    assert all(
        p.name == "error.txt" and p.read_text().strip() == err[len("error: ") :] for p in written
    )  # nothing started; at most the error in the run folder


def test_missing_data_offline_names_dataset_and_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("FGL_OFFLINE", "1")
    monkeypatch.setenv("FGL_CACHE_DIR", str(tmp_path / "cache"))  # no cached partition either
    monkeypatch.chdir(tmp_path)
    empty = tmp_path / "data"
    empty.mkdir()
    code = main(["run", "--dataset", "Cora", "--partition", "louvain", "--data-root", str(empty)])
    err = capsys.readouterr().err
    assert code == 2 and "'Cora'" in err and str(empty) in err and "FGL_DATA_ROOT" in err
    [written] = (tmp_path / "runs").rglob("*.txt")  # the run folder holds the error alone
    assert written.name == "error.txt" and "'Cora'" in written.read_text()


def test_datasets_and_methods_listings(capsys, data_root):
    assert main(["datasets", "--data-root", str(data_root)]) == 0
    out = capsys.readouterr().out
    assert "Cora" in out and "PubMed" in out
    line = next(l for l in out.splitlines() if l.startswith("Cora "))
    assert " yes " in line
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    assert "fedprox" in out
    for line in out.splitlines():  # the name, then at least two spaces before the tasks
        name = line.split()[0]
        assert line[len(name) : len(name) + 2] == "  ", line


def test_partition_stats_table(capsys, data_root):
    assert (
        main(
            [
                "partition-stats",
                "--dataset",
                "Cora",
                "--partition",
                "louvain",
                "--clients",
                "10",
                "--data-root",
                str(data_root),
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 12  # header + 10 clients + mean ± std
    assert "edge_homophily" in lines[0] and "node_homophily" in lines[0]
    assert lines[-1].split()[:3] == ["mean", "±", "std"] and lines[-1].count("±") == 5


def test_zero_clients_is_the_partitions_natural_count(capsys, flat):
    import json

    from fgl_flower.cli import prepare
    from fgl_flower.datasets import DataConfig, natural_num_clients

    count = natural_num_clients(DataConfig("synthetic", "louvain-merge", 0))
    assert (
        main(["partition-stats", "--partition", "louvain-merge", "--clients", "0", "--json"]) == 0
    )
    assert len(json.loads(capsys.readouterr().out)) == count
    cfg = prepare({**flat, "partition": "louvain-merge", "num-clients": 0})
    assert cfg.num_clients == count and cfg.flat()["num-clients"] == count


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without a GPU")
@pytest.mark.parametrize(
    "argv,message",
    [
        (["--gpus-per-client", "0.25"], "no GPU visible"),
        (["--device", "cuda"], "GPU share per client"),
        (["--inprocess", "--device", "cuda"], "sees no CUDA GPU"),
    ],
)
def test_gpu_requests_without_a_gpu_stop_before_anything_starts(
    argv, message, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    code = main(["run", *argv])
    assert code == 2 and message in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "runs").rglob("*") if p.is_file()] == ["error.txt"]


def test_a_folder_holding_a_run_is_not_reused_silently(tmp_path, capsys):
    (tmp_path / "summary.json").write_text("{}")
    assert main(["run", "--inprocess", "--out", str(tmp_path)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # untouched


def test_a_one_shot_method_runs_its_one_round_without_being_told():
    from fgl_flower.cli import build_run_config, parser

    args = parser().parse_args(["run", "--method", "opfgl", "--out", "/tmp/x"])
    assert build_run_config(args)["num-rounds"] == 1
    args = parser().parse_args(["run", "--method", "opfgl", "--rounds", "3", "--out", "/tmp/x"])
    assert build_run_config(args)["num-rounds"] == 3  # and parse_run_config then says why not


def test_secagg_sets_the_methods_option_or_says_which_methods_have_it():
    from fgl_flower.cli import build_run_config, parser

    args = parser().parse_args(["run", "--method", "opfgl", "--secagg", "--out", "/tmp/x"])
    assert build_run_config(args)["opfgl.secure-aggregation"] in (True, "true")
    args = parser().parse_args(["run", "--secagg", "--out", "/tmp/x"])  # the default method, fedavg
    assert build_run_config(args)["fedavg.secure-aggregation"] in (True, "true")
    args = parser().parse_args(["run", "--method", "fedhero", "--secagg", "--out", "/tmp/x"])
    with pytest.raises(
        ConfigError,
        match="'fedhero' has no secure aggregation yet; it is available for: "
        "fedavg, feddense, fedprox, fedstar, opfgl",
    ):
        build_run_config(args)


def test_dp_flags_set_the_methods_options_and_equal_weights_or_say_what_is_missing():
    from fgl_flower.cli import build_run_config, parser

    args = parser().parse_args(
        ["run", "--method", "fedspray", "--dp-epsilon", "4", "--dp-clip", "0.5", "--out", "/tmp/x"]
    )
    flat = build_run_config(args)
    assert float(flat["fedspray.dp-epsilon"]) == 4.0 and float(flat["fedspray.dp-clip"]) == 0.5
    assert flat["agg-weight"] == "uniform"
    args = parser().parse_args(["run", "--dp-epsilon", "4", "--out", "/tmp/x"])
    with pytest.raises(ConfigError, match="needs both --dp-epsilon .* and --dp-clip"):
        build_run_config(args)
    args = parser().parse_args(["run", "--dp-epsilon", "0", "--dp-clip", "1", "--out", "/tmp/x"])
    with pytest.raises(ConfigError, match="the budget must be > 0"):
        build_run_config(args)
    args = parser().parse_args(
        ["run", "--method", "opfgl", "--dp-epsilon", "4", "--dp-clip", "1", "--out", "/tmp/x"]
    )
    with pytest.raises(
        ConfigError,
        match="'opfgl' has no differential privacy yet; it is available for: "
        "fedavg, feddense, fedprox, fedspray, fedstar",
    ):
        build_run_config(args)


def test_help_shows_defaults_and_every_model_and_partition(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps at hyphens
    assert "default fedavg" in text and "(default 20;" in text
    assert "acmgcn" in text and "per-dataset" in text and "fgl config" in text


def test_streamed_flower_output_to_a_file_has_no_colour_codes_or_federation_warning(tmp_path):
    import io

    from fgl_flower.results import _fmt_bytes
    from fgl_flower.runtime.flwr_cli import _OutputPump

    lines = (
        b"\x1b[92mINFO \x1b[0m:      Starting\n"
        b"\x1b[93mWARNING \x1b[0m:   Since flwr 1.32, default simulated SuperNodes changed from 10 to 2.\n"
        b"INFO :      Federation `@none/default` (3 simulated SuperNodes)\n"
        b"INFO :      To change federation size, use the following command:\n"
        b"INFO :      \tflwr federation simulation-config @none/default <superlink> --num-supernodes <N>\n"
        b"Successfully installed fgl-flower to /tmp/x/flwr-home/apps/fgl-flower.fgl-flower.0.1.0.ab12.\n"
    )
    out = io.StringIO()
    pump = _OutputPump(io.BytesIO(lines), out, tmp_path / "log")
    pump.run()
    # fgl run sizes the federation (--clients) and installs the bundle itself: the hints
    # that do not apply stay in the log file only
    assert out.getvalue() == (
        "INFO :      Starting\nINFO :      Federation `@none/default` (3 simulated SuperNodes)\n"
    )
    assert "Successfully installed" in (tmp_path / "log").read_text()
    assert _fmt_bytes(3.5 * 2**20) == "3.5 MiB" and _fmt_bytes(512) == "512 B"


def test_an_inprocess_run_piped_to_a_file_is_plain_text(tmp_path):
    """No colour codes where no terminal reads the log, and no library notice a user cannot
    act on (ACM-GCN's CSR adjacency used to print PyG's sparse-invariant warning, and then
    torch's "Sparse CSR tensor support is in beta")."""
    import os
    import subprocess
    import sys

    argv = [
        "run",
        "--method",
        "fedavg",
        "--model",
        "acmgcn",
        "--clients",
        "2",
        "--rounds",
        "1",
        "--inprocess",
        "--set",
        "data.synthetic.num-nodes=200",
        "--out",
        str(tmp_path / "run"),
    ]
    res = subprocess.run(
        [sys.executable, "-m", "fgl_flower.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "default"},
    )
    assert res.returncode == 0, res.stderr
    assert "[round 1/1]" in res.stderr
    assert "\x1b[" not in res.stdout + res.stderr
    assert (
        "invariant" not in res.stderr and "UserWarning" not in res.stderr
    )  # nor torch's "CSR in beta"


@pytest.mark.parametrize(
    "argv",
    [
        ["--method", "fedavgg"],
        ["--dataset", "Coraa"],
        ["--partition", "louvainn"],
        ["--set", "lr=abc"],
        ["--set", "fedprox.mu=0.5"],
        ["--rounds", "0"],
        ["--set", "split-fold=7"],
        ["--set", "edge-flip=2"],
        ["--clients", "0"],
        ["--set", "split-mode=five-group", "--set", "split=0.8,0.1,0.1"],
    ],
)
def test_config_errors_come_before_torch_is_imported(argv, tmp_path):
    import subprocess
    import sys

    code = (
        "import sys; from fgl_flower.cli import main; c = main(['run', *sys.argv[1:]]); "
        "print('torch' in sys.modules); sys.exit(c)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and res.stderr.startswith("error: ")
    assert res.stdout.strip() == "False"


def test_an_out_that_is_a_file_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("mine\n")
    assert main(["run", "--inprocess", "--out", "README.md"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --out ") and "is a file" in err and "\n" not in err
    assert (tmp_path / "README.md").read_text() == "mine\n"


def test_a_failed_run_says_no_round_finished_unless_one_did(tmp_path):
    from fgl_flower.launch import failure_message

    assert "No round finished" in failure_message(1, tmp_path)
    (tmp_path / "rounds.jsonl").write_text('{"round": 1}\n')
    assert f"Finished rounds are in {tmp_path / 'rounds.jsonl'}" in failure_message(1, tmp_path)


def test_the_console_summary_names_dead_probes(tmp_path, capsys):
    from fgl_flower.cli import print_summary

    print_summary(
        {
            "method": "s2fgl",
            "final": {"round": 2, "test_acc": 0.5},
            "probes_dead": {"nlir.share": ["0", "2"]},
        },
        tmp_path,
    )
    out = capsys.readouterr().out
    assert "probe nlir.share dead at the end on 0, 2" in out
