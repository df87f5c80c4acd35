"""experiments/platform/gpu_benchmark.py: what can be checked without a GPU (the section it
writes into the page, its table of a stopped CPU run, its refusals) and device_kit.py's
choice of what travels."""

import pytest


@pytest.fixture(scope="module")
def bench(experiment_script):
    return experiment_script("platform/gpu_benchmark.py")


@pytest.fixture(scope="module")
def kit(experiment_script):
    return experiment_script("platform/device_kit.py")


def test_write_doc_replaces_only_the_gpu_section(bench, tmp_path, monkeypatch):
    doc = tmp_path / "performance.md"
    doc.write_text(
        "# Performance\n\n## Three ways, side by side\n\nkept\n\n"
        "## Graph classification: batches\n\nkept too\n\n## On a GPU\n\nold text\n"
    )
    monkeypatch.setattr(bench, "DOC", doc)
    a, b = tmp_path / "gpu-setup.md", tmp_path / "gpu-methods.md"
    a.write_text("Measured on GPU X.\n\nsetup numbers\n")
    b.write_text("Measured on GPU X.\n\nmethods numbers\n")
    bench.write_doc([a, b])
    text = doc.read_text()
    assert text.count("Measured on GPU X.") == 1 and bench.HOW in text
    assert "old text" not in text
    assert (
        text.index("## Three ways")
        < text.index("kept")
        < text.index("## Graph classification")
        < text.index("kept too")
        < text.index("setup numbers")
        < text.index("methods numbers")
    )
    assert text.count("## On a GPU") == 1


class FakeSession:
    """What :func:`cpu_vs_cuda` asks of a session; the CPU run stops at its limit after 3 rounds."""

    def __init__(self, tmp_path, bench):
        self.args = bench.argparse.Namespace(cpu_limit=150.0, work=tmp_path)
        self.cpus, self.prepared, self.runs = 16, [], []

    def prepare(self, argv, engine):
        self.prepared.append((argv, engine))

    def run(self, argv, name, limit=None):
        self.runs.append((argv, limit))
        if "cpu" in argv:
            return {
                "wall_s": 150.4,
                "stopped": True,
                "summary": None,
                "rounds": [{"time_s": t} for t in (2.0, 3.0, 9.0)],
            }
        return {
            "wall_s": 20.0,
            "stopped": False,
            "rounds": [],
            "summary": {"total_time_s": 12.0, "best_val": {"test_acc": 0.8123}},
        }


def test_a_cpu_run_past_its_limit_is_reported_stopped(bench, tmp_path):
    s = FakeSession(tmp_path, bench)
    rows = "".join(
        bench.cpu_vs_cuda(s, "X", ["--method", "fedavg"], ["--method", "fedavg"])
    ).splitlines()
    assert rows[:2] == [
        "| X | cuda | 20 s | 12 s | 81.23 |",
        "| X | cpu | stopped after 150 s, 3 rounds at 3.00 s | — | — |",
    ]
    assert "--cpus-per-client 16" in rows[-1]
    # prepared once before either run is timed; both runs use every CPU thread; only the CPU run is limited
    assert len(s.prepared) == 1 and s.prepared[0][1] == "inprocess"
    assert [limit for _, limit in s.runs] == [None, 150.0]
    assert all(argv[argv.index("--cpus-per-client") + 1] == "16" for argv, _ in s.runs)


def test_the_shown_fedspray_command_names_the_shared_partition_not_this_machines(bench, tmp_path):
    s = FakeSession(tmp_path, bench)
    s.args.fedspray_rounds, s.args.fedspray_partition = 50, str(tmp_path / "part")
    text = "".join(bench.part_fedspray(s))
    assert (
        f"data.files.dir={bench.FEDSPRAY_PARTITION}" in text and str(tmp_path / "part") not in text
    )
    assert f"data.files.dir={tmp_path / 'part'}" in " ".join(s.runs[0][0])


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--parts", "tests,nope", "--out", "x.md"], "unknown part"),
        (["--parts", "tests"], "--out is required"),
    ],
)
def test_bad_arguments_stop_before_anything_runs(bench, monkeypatch, argv, message):
    monkeypatch.setattr("sys.argv", ["gpu_benchmark.py", *argv])
    with pytest.raises(SystemExit, match=message):
        bench.main()


def test_the_kit_leaves_the_images_packages_and_uv_behind(kit, tmp_path):
    assert {"torch", "numpy", "uv"} <= kit.FROM_IMAGE
    names = [
        kit.wheel_name(tmp_path / w)
        for w in (
            "torch_geometric-2.8.1-py3-none-any.whl",
            "python_louvain-0.16-py3-none-any.whl",
            "ray-2.55.1-cp312-cp312-manylinux2014_x86_64.whl",
        )
    ]
    assert names == ["torch-geometric", "python-louvain", "ray"]
    assert not set(names) & kit.FROM_IMAGE


def test_ray_goes_into_its_own_archive_and_nothing_else_does(kit):
    ray = ["ray/_raylet.so", "ray-2.55.1.dist-info/RECORD", "bin/ray", "bin/serve"]
    base = [
        "flwr/__init__.py",
        "flwr-1.42.0.dist-info/RECORD",
        "bin/flwr",
        "bin/flower-superlink",
        "raydar/x.py",
        "rayon-1.0.dist-info/RECORD",
    ]
    assert all(kit.RAY_PARTS.match(p) for p in ray)
    assert not any(kit.RAY_PARTS.match(p) for p in base)


def test_a_session_prepares_runs_and_reads_a_real_run(bench, tmp_path):
    """The one piece that runs ``fgl run`` for real (here on the CPU): prepare, run, parse,
    the log; and a run past its limit comes back stopped, with no summary."""
    args = bench.argparse.Namespace(work=tmp_path, log=tmp_path / "runs.log", deadline=600.0)
    s = bench.Session(args)
    argv = [
        "--method",
        "fedavg",
        "--clients",
        "3",
        "--rounds",
        "2",
        "--inprocess",
        "--set",
        "data.synthetic.num-nodes=300",
    ]
    s.prepare(argv, "inprocess")
    run = s.run(argv, "tiny")
    assert not run["stopped"] and len(run["rounds"]) == 2
    assert run["summary"]["rounds_completed"] == 2 and bench.per_round(run) > 0
    assert "fgl_flower.cli run --method fedavg" in args.log.read_text()
    stopped = s.run(argv, "cut", limit=0.01)
    assert stopped["stopped"] and stopped["summary"] is None
