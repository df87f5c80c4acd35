"""The same federated job in this project and in its peers, whole processes side by side.

FedAvg, 2-layer GCN (64 hidden, dropout 0.5), Cora, Louvain into 10 clients, 100 rounds, 3 local
epochs, Adam 0.01 / weight decay 5e-4. Each tool runs as its own process; one untimed warm-up
cycle, then ``--cycles`` cycles in alternation (medians). Memory is the peak of the summed PSS
(proportional set size) of the process and all its descendants (Ray's workers included).
Writes the "Beside the peers" section of ``docs/performance.md``.

This script installs nothing. The peers, where you want them:

* OpenFGL (``openfgl-lib``, MIT) in its own virtual environment, and its data root holding
  Cora in PyG's layout (see ``../shared/notes/peers.md``)::

      python3.11 -m venv ~/venvs/openfgl
      ~/venvs/openfgl/bin/pip install torch==2.13.0 torch_geometric==2.8.1
      ~/venvs/openfgl/bin/pip install openfgl-lib scikit-network pymetis scikit-learn tqdm \\
          networkx scipy psutil munkres
      mkdir -p ~/openfgl-data/global/subgraph_fl && \\
          cp -r ../shared/data/Planetoid/Cora ~/openfgl-data/global/subgraph_fl/

  then ``--openfgl-python ~/venvs/openfgl/bin/python --openfgl-root ~/openfgl-data``.
* FedGraph (``fedgraph``) needs torch-scatter and torch-sparse, which the package index has as
  source only (about 25 minutes to compile on 2 cores); this script does not run it.

Run from the repository root with the venv active::

    FGL_DATA_ROOT=../shared/data python experiments/platform/peers.py --openfgl-python ~/venvs/openfgl/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
JOB = ["--method", "fedavg", "--dataset", "Cora", "--partition", "louvain", "--clients", "10",
       "--rounds", "100", "--seed", "0", "--set", "progress=false", "--set", "checkpoint-every=0"]

#: OpenFGL's side of the job: its own Louvain split and per-class split (its defaults), the
#: global model scored on the clients' data, accuracy weighted by client size.
OPENFGL_JOB = """
import sys
import openfgl.config as config
from openfgl.flcore.trainer import FGLTrainer
args = config.args
args.root = sys.argv[1]
args.dataset = ["Cora"]
args.simulation_mode = "subgraph_fl_louvain"
args.num_clients = 10
args.num_rounds = 100
args.num_epochs = 3
args.fl_algorithm = "fedavg"
args.model = ["gcn"]
args.hid_dim = 64
args.num_layers = 2
args.dropout = 0.5
args.lr = 0.01
args.weight_decay = 5e-4
args.seed = 0
args.metrics = ["accuracy"]
args.evaluation_mode = "global_model_on_local_data"
args.use_cuda = False
FGLTrainer(args).train()
"""


class TreeMemory:
    """Peak of the summed PSS of a process and its descendants, sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                procs = []
            for p in procs:
                try:
                    total += p.memory_full_info().pss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            time.sleep(0.2)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak / 2**20


def timed(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    """Run ``cmd`` to the end; wall seconds, peak tree memory (MB) and its output."""
    t0 = time.perf_counter()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env) as proc:
        mem = TreeMemory(proc.pid)
        out = proc.communicate()[0]
    peak = mem.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{out[-2000:]}")
    return {"wall_s": time.perf_counter() - t0, "mem_mb": peak, "out": out}


def tools(tmp: Path, openfgl_python: str | None, openfgl_root: str) -> dict[str, tuple]:
    """``{row: (command, env, final test accuracy from the output)}``."""
    def summary_acc(out: Path):
        return lambda _: 100 * json.loads((out / "summary.json").read_text())["final"]["test_acc"]

    rows: dict[str, tuple] = {
        "plain PyTorch loop (this project's learners, no Flower)": (
            [sys.executable, __file__, "--plain-loop"], None,
            lambda text: float(re.findall(r"final test acc ([\d.]+)", text)[-1])),
        "`fgl run --inprocess`": (
            ["fgl", "run", *JOB, "--inprocess", "--out", str(tmp / "inprocess"), "--overwrite"], None,
            summary_acc(tmp / "inprocess")),
        "`fgl run` (Flower simulation, Ray)": (
            ["fgl", "run", *JOB, "--out", str(tmp / "ray"), "--overwrite"], None, summary_acc(tmp / "ray")),
    }
    if openfgl_python:
        script = tmp / "openfgl_job.py"
        script.write_text(OPENFGL_JOB)
        env = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}  # its partition files
        rows["OpenFGL (`openfgl-lib`), its own Louvain and split"] = (
            [openfgl_python, str(script), openfgl_root], env,
            lambda text: 100 * float(re.findall(r"curr_test_accuracy: ([\d.]+)", text)[-1]))
    return rows


def plain_loop_main() -> None:
    """The plain loop of ``performance.py`` on the job, as a process of its own."""
    sys.path.insert(0, str(Path(__file__).parent))
    from performance import plain_loop

    res = plain_loop(**{"checkpoint-every": 0})
    print(f"final test acc {100 * res['final']['test_acc']:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=3, help="timed cycles after the warm-up (default 3)")
    ap.add_argument("--openfgl-python", help="python of a virtual environment with openfgl-lib")
    ap.add_argument("--openfgl-root", default=str(Path.home() / "openfgl-data"),
                    help="OpenFGL's data root (holds global/subgraph_fl/Cora)")
    ap.add_argument("--plain-loop", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plain_loop:
        return plain_loop_main()
    if args.openfgl_python and not (Path(args.openfgl_root) / "global" / "subgraph_fl" / "Cora").is_dir():
        sys.exit(f"{args.openfgl_root}/global/subgraph_fl/Cora is missing: copy ../shared/data/Planetoid/Cora "
                 "there (see this script's docstring).")
    with tempfile.TemporaryDirectory() as tmp:
        rows = tools(Path(tmp), args.openfgl_python, args.openfgl_root)
        runs: dict[str, list[dict]] = {name: [] for name in rows}
        for cycle in range(args.cycles + 1):  # cycle 0: the warm-up, not timed
            for name, (cmd, env, acc) in rows.items():
                print(f"cycle {cycle}: {name} ...", flush=True)
                res = timed(cmd, env)
                res["acc"] = acc(res["out"])
                if cycle:
                    runs[name].append(res)
    median = {name: statistics.median(r["wall_s"] for r in rs) for name, rs in runs.items()}
    base = median["plain PyTorch loop (this project's learners, no Flower)"]
    lines = "\n".join(
        f"| {name} | {median[name]:.1f} s | {median[name] / base:.2f}x | "
        f"{statistics.median(r['mem_mb'] for r in rs):.0f} MB | {rs[-1]['acc']:.2f} |"
        for name, rs in sorted(runs.items(), key=lambda kv: median[kv[0]]))
    section = f"""## Beside the peers

The same job in every tool, whole processes: FedAvg, 2-layer GCN (64 hidden, dropout 0.5),
Cora, Louvain into 10 clients, 100 rounds, 3 local epochs, Adam 0.01 / 5e-4, seed 0, on this
machine ({psutil.cpu_count()} cores, Python {platform.python_version()}). One warm-up cycle,
then {args.cycles} cycles in alternation; medians. Memory: peak of the summed PSS of the
process and its descendants. Accuracy is each tool's own final test accuracy; the protocols
differ (OpenFGL cuts Louvain communities into equal chunks and splits per class), so it shows
that each run learned, not which is better. Ours run without checkpoints
(`checkpoint-every=0`), as the peers keep none.

| tool | wall | vs plain loop | memory | final test acc |
|---|---|---|---|---|
{lines}

FedGraph is not measured here (it needs torch-scatter and torch-sparse compiled from source).
Command: `python experiments/platform/peers.py{' --openfgl-python PY' if args.openfgl_python else ''}`
(see its docstring for installing the peers).
"""
    sys.path.insert(0, str(Path(__file__).parent))
    from performance import kept_sections, write_doc

    path = REPO / "docs" / "performance.md"
    sections = kept_sections(path)
    sections["peers"] = section
    write_doc(path, sections)
    print(section)


if __name__ == "__main__":
    main()
