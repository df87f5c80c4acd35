"""Shared fixtures: an isolated cache per session and the offline data root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fgl_flower.app_defaults import load_app_defaults

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_gpu_tests_without_a_gpu(items)
    spread_slow_tests(config, items)


def skip_gpu_tests_without_a_gpu(items: list[pytest.Item]) -> None:
    """Tests marked ``gpu`` need a CUDA GPU; without one they are skipped, saying so."""
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu:
        import torch

        if not torch.cuda.is_available():
            for item in gpu:
                item.add_marker(pytest.mark.skip(reason="needs a GPU (marked gpu)"))


def spread_slow_tests(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Spread the slow tests over pytest-xdist's workers (``scripts/test.sh``).

    ``--dist worksteal`` first sends each of the ``W`` workers a contiguous share of this
    list (``len // W`` each, the first shares rounded down) and later gives an idle worker
    the tail of the longest queue. In collection order the slow tests (Flower runtimes,
    notebooks) sit together and end the run on one or two workers; dealt round-robin to the
    front of the shares, every worker starts with its part of them. Only the order changes."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 0))
    if workers < 2:
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    fast = iter([item for item in items if not item.get_closest_marker("slow")])
    ordered: list[pytest.Item] = []
    left = len(items)
    for k in range(workers):
        size = left // (workers - k)
        left -= size
        share = slow[k::workers][:size]
        ordered += share + [item for _, item in zip(range(size - len(share)), fast)]
    placed = set(map(id, ordered))
    items[:] = ordered + [item for item in slow + list(fast) if id(item) not in placed]


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep the user's cache clean: every test run gets its own FGL_CACHE_DIR, one for all
    its pytest-xdist workers (processed datasets and partitions are built once; their
    creators take file locks, as the clients of one simulation do)."""
    mp = pytest.MonkeyPatch()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        cache = tmp_path_factory.getbasetemp().parent / "fgl-cache"
        cache.mkdir(exist_ok=True)
    else:
        cache = tmp_path_factory.mktemp("fgl-cache")
    mp.setenv("FGL_CACHE_DIR", str(cache))
    yield
    mp.undo()


def benchmark_data_root() -> Path:
    """Where the tests read raw benchmark files: ``$FGL_DATA_ROOT`` (the runs' own setting),
    else ``$FGL_TEST_DATA_ROOT`` (its older name), else ``<repo>/../shared/data``."""
    for name in ("FGL_DATA_ROOT", "FGL_TEST_DATA_ROOT"):
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser()
    return REPO.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _no_curves_png(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Drawing ``curves.png`` is most of a small in-process run's time (0.40 of 0.65 s, with
    matplotlib): runs in this process skip it, unless the test is marked ``curves`` (those
    that look at it; runs in Flower's own processes and notebooks still draw it)."""
    if request.node.get_closest_marker("curves") is None:
        monkeypatch.setattr("fgl_flower.results.plot_curves", lambda *args, **kwargs: None)


@pytest.fixture(scope="session")
def data_root() -> Path:
    """Raw benchmark files (:func:`benchmark_data_root`)."""
    root = benchmark_data_root()
    if not (root / "Planetoid" / "Cora" / "raw").is_dir():
        pytest.skip(
            f"offline benchmark data not found at {root} (set FGL_DATA_ROOT to the folder "
            "holding Planetoid/, TUDataset/, ...)"
        )
    return root


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Say loudly when data tests were skipped: a green run without them proves little."""
    skipped = [
        r
        for r in terminalreporter.stats.get("skipped", [])
        if "offline benchmark data not found" in str(getattr(r, "longrepr", ""))
    ]
    if skipped:
        terminalreporter.write_sep(
            "!",
            f"{len(skipped)} tests skipped: no benchmark data at "
            f"{benchmark_data_root()}; set FGL_DATA_ROOT",
            red=True,
        )


@pytest.fixture
def flat(tmp_path):
    """App defaults (synthetic data), small and fast, writing into a tmp folder."""
    cfg = load_app_defaults()
    cfg.update(
        {
            "out-dir": str(tmp_path / "run"),
            "num-rounds": 2,
            "num-clients": 3,
            "progress": False,
            "data.synthetic.num-nodes": 300,
        }
    )
    return cfg
