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
    doc.write_text("# Performance\n\n## Before\n\nkept\n\n## On a GPU\n\nold text\n\n## After\n\nkept too\n")
    monkeypatch.setattr(bench, "DOC", doc)
    a, b = tmp_path / "gpu-setup.md", tmp_path / "gpu-methods.md"
    a.write_text("setup numbers\n")
    b.write_text("methods numbers\n")
    bench.write_doc([a, b])
    text = doc.read_text()
    assert "old text" not in text
    assert text.index("## Before") < text.index("setup numbers") < text.index("methods numbers") < text.index("## After")
    assert text.count("## On a GPU") == 1 and "kept too" in text


def test_a_cpu_run_past_its_limit_is_reported_stopped(bench, tmp_path, monkeypatch):
    summary = {"total_time_s": 12.0, "best_val": {"test_acc": 0.8123}}

    def fake_run(argv, out, timeout=None):
        if "cpu" in argv:
            assert timeout == 150
            return None
        return {"wall_s": 20.0, "summary": summary, "rounds": []}

    monkeypatch.setattr(bench, "fgl_run", fake_run)
    rows = bench.cpu_vs_cuda("X", ["--method", "fedavg"], tmp_path, 150).splitlines()
    assert rows == ["| X | cuda | 20 s | 12 s | 81.23 |", "| X | cpu | stopped after 150 s | — | — |"]


@pytest.mark.parametrize("argv,message", [
    (["--parts", "tests,nope", "--out", "x.md"], "unknown part"),
    (["--parts", "tests"], "--out is required"),
])
def test_bad_arguments_stop_before_anything_runs(bench, monkeypatch, argv, message):
    monkeypatch.setattr("sys.argv", ["gpu_benchmark.py", *argv])
    with pytest.raises(SystemExit, match=message):
        bench.main()


def test_the_kit_leaves_the_images_packages_and_uv_behind(kit, tmp_path):
    assert {"torch", "numpy", "uv"} <= kit.FROM_IMAGE
    names = [kit.wheel_name(tmp_path / w) for w in (
        "torch_geometric-2.8.1-py3-none-any.whl", "python_louvain-0.16-py3-none-any.whl",
        "ray-2.55.1-cp312-cp312-manylinux2014_x86_64.whl")]
    assert names == ["torch-geometric", "python-louvain", "ray"]
    assert not set(names) & kit.FROM_IMAGE
