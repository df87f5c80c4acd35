"""CPU against GPU on a machine with a GPU; writes the "On a GPU" section of ``docs/performance.md``.

1. the test suite (``pytest -m "not slow"``), which includes the CUDA tests;
2. FedSpray on Coauthor-Physics (the Table 2 protocol, 300 rounds) with ``device=cpu``
   and ``device=cuda``, in-process;
3. O-pFGL on Coauthor-CS (Louvain+, the Table 15 row) with ``device=cpu`` and ``cuda``;
4. ``fgl run --clients 100 --gpus-per-client 0.1`` (Ray simulation, 10 clients per GPU).

Run from the repository root with the venv active and the datasets in ``FGL_DATA_ROOT``::

    python experiments/platform/gpu_benchmark.py [--parts tests,fedspray,opfgl,simulation]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from fgl_flower.results import atomic_write_text

sys.path.insert(0, str(Path(__file__).resolve().parent))
import performance  # noqa: E402  (this folder's script, whose run helper this one reuses)

REPO = Path(__file__).resolve().parents[2]
HEADING = "## On a GPU"
FEDSPRAY = ["--method", "fedspray", "--dataset", "Physics", "--partition", "files", "--clients", "12",
            "--rounds", "300", "--model", "gcn", "--set", "split=0.4,0.3,0.3",
            "--set", f"data.files.dir={REPO.parent / 'shared' / 'fedspray_partition'}",
            "--set", "hidden=64", "--set", "dropout=0.0", "--set", "lr=0.003",
            "--set", "weight-decay=0.0", "--set", "local-epochs=5", "--set", "model-init=uniform01",
            "--set", "select-by=val_loss", "--set", "progress=false"]
OPFGL = ["--method", "opfgl", "--dataset", "CS", "--partition", "louvain-plus", "--clients", "10",
         "--rounds", "1", "--model", "gcn", "--set", "opfgl.rate=0.01", "--set", "opfgl.topk=1",
         "--set", "opfgl.gamma-max=0.2", "--set", "opfgl.lr-ft=0.001", "--set", "split=0.2,0.4,0.4",
         "--set", "split-mode=stratified", "--set", "split-seed=42", "--set", "partition-seed=42",
         "--set", "dropout=0.0", "--set", "hidden=64", "--set", "eval-weight=client-size",
         "--set", "progress=false"]
SIMULATION = ["--method", "fedavg", "--dataset", "Cora", "--partition", "louvain", "--clients", "100",
              "--rounds", "20", "--gpus-per-client", "0.1", "--set", "progress=false"]


def fgl(argv: list[str], out: Path) -> tuple[float, dict]:
    """``fgl run`` as performance.py runs it: wall seconds and the summary."""
    run = performance.fgl("run", argv, out)
    return run["wall_s"], run["summary"]


def cpu_vs_gpu(name: str, argv: list[str], tmp: Path) -> str:
    rows = []
    for device in ("cpu", "cuda"):
        wall, s = fgl([*argv, "--inprocess", "--device", device], tmp / f"{name}-{device}")
        rows.append(f"| {name} | {device} | {wall:.0f} s | {s['total_time_s']:.0f} s | "
                    f"{100 * s['best_val']['test_acc']:.2f} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="tests,fedspray,opfgl,simulation")
    parts = ap.parse_args().parts.split(",")
    if not torch.cuda.is_available():
        sys.exit("No GPU visible to torch: run this on a machine with one.")
    gpu = torch.cuda.get_device_name(0)
    lines = [f"{HEADING}\n\nMeasured by `experiments/platform/gpu_benchmark.py` on "
             f"{gpu} (torch {torch.__version__}, CUDA {torch.version.cuda}).\n"]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if "tests" in parts:
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "not slow"], cwd=REPO,
                                 capture_output=True, text=True)
            last = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else "no output"
            lines.append(f"Test suite (`pytest -m 'not slow'`): {last} ({time.perf_counter() - t0:.0f} s).\n")
        table = []
        if "fedspray" in parts:
            table.append(cpu_vs_gpu("FedSpray, Physics, 300 rounds", FEDSPRAY, tmp))
        if "opfgl" in parts:
            table.append(cpu_vs_gpu("O-pFGL, CS, Louvain+", OPFGL, tmp))
        if table:
            lines.append("| run | device | wall time | of which rounds | test acc (best val) |\n"
                         "|---|---|---|---|---|\n" + "\n".join(table) + "\n")
        if "simulation" in parts:
            wall, s = fgl(SIMULATION, tmp / "sim")
            lines.append(f"`fgl run {' '.join(SIMULATION)}`: {wall:.0f} s wall, "
                         f"{s['total_time_s'] / s['rounds_completed']:.2f} s per round, final test acc "
                         f"{100 * s['final']['test_acc']:.2f}.\n")
    section = "\n".join(lines)
    path = REPO / "docs" / "performance.md"
    text = path.read_text()
    if HEADING in text:  # replace the previous measurement, up to the next section
        start = text.index(HEADING)
        end = text.find("\n## ", start + len(HEADING))
        text = text[:start] + section + (text[end:] if end >= 0 else "")
    else:
        text = text.rstrip() + "\n\n" + section
    atomic_write_text(path, text)
    print(section)


if __name__ == "__main__":
    main()
