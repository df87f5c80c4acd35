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
* FedGraph (``fedgraph`` 0.2.5) imports torch-sparse, which with torch-scatter the package index
  has as source only (compiled in its own environment: 40 minutes on 2 cores beside two
  benchmarks; the other two extensions it lists, torch-cluster and torch-spline-conv, are never
  imported on this job, hence ``--no-deps``)::

      python3.11 -m venv ~/venvs/fedgraph
      ~/venvs/fedgraph/bin/pip install torch==2.13.0 torch_geometric==2.8.1 setuptools wheel ninja
      MAX_JOBS=1 ~/venvs/fedgraph/bin/pip install --no-build-isolation torch-scatter torch-sparse
      ~/venvs/fedgraph/bin/pip install "ray[default]" attridict dtaidistance gdown huggingface_hub \\
          pandas scikit-learn tenseal torchmetrics omegaconf pyyaml ogb networkx requests
      ~/venvs/fedgraph/bin/pip install --no-deps fedgraph==0.2.5

  then ``--fedgraph-python ~/venvs/fedgraph/bin/python``; it reads Cora's Planetoid raw files
  from ``$FGL_DATA_ROOT/Planetoid/Cora/raw`` (FedGraph would download them).

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
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import psutil

from fgl_flower.datasets.source import dataset_status

REPO = Path(__file__).resolve().parents[2]
JOB = [
    "--method",
    "fedavg",
    "--dataset",
    "Cora",
    "--partition",
    "louvain",
    "--clients",
    "10",
    "--rounds",
    "100",
    "--seed",
    "0",
    "--set",
    "progress=false",
    "--set",
    "checkpoint-every=0",
]

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

#: FedGraph's side: its FedAvg for node classification (``num_hops`` 0), its label-Dirichlet
#: partition made near-uniform (``iid_beta`` 10000), its Planetoid split and GCN (hidden 16 for
#: Cora, dropout 0.5, SGD with weight decay 5e-4, all fixed in its code; learning rate 0.5 as in
#: its Cora example), 3 local steps. Its Ray actors ask for a tenth of the CPUs each, so that
#: the ten fit on any machine (Ray keeps an actor that asks for more than is free pending).
FEDGRAPH_JOB = """
import os, sys
import attridict  # the module replaces itself with its class
from fedgraph.federated_methods import run_fedgraph
os.makedirs("data/cora/raw", exist_ok=True)
for name in os.listdir(sys.argv[1]):
    if name.startswith("ind.cora.") and not os.path.exists(f"data/cora/raw/{name}"):
        os.symlink(os.path.join(sys.argv[1], name), f"data/cora/raw/{name}")
n_cpus = os.cpu_count() or 1
run_fedgraph(attridict({
    "fedgraph_task": "NC", "method": "FedAvg", "dataset": "cora", "n_trainer": 10,
    "num_hops": 0, "iid_beta": 10000, "distribution_type": "average", "global_rounds": 100,
    "local_step": 3, "learning_rate": 0.5, "num_layers": 2, "batch_size": -1, "gpu": False,
    "num_cpus_per_trainer": n_cpus / 10, "num_gpus_per_trainer": 0, "use_cluster": False,
    "use_encryption": False, "use_huggingface": False, "saveto_huggingface": False,
    "use_lowrank": False, "logdir": "./runs",
}))
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


def timed(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> dict:
    """Run ``cmd`` to the end; wall seconds, peak tree memory (MB) and its output."""
    t0 = time.perf_counter()
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd
    ) as proc:
        mem = TreeMemory(proc.pid)
        out = proc.communicate()[0]
    peak = mem.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{out[-2000:]}")
    return {"wall_s": time.perf_counter() - t0, "mem_mb": peak, "out": out}


class Tool(NamedTuple):
    """One row: its command, the final test accuracy read from its output, and where needed
    its environment and working folder."""

    cmd: list[str]
    acc: Callable[[str], float]
    env: dict[str, str] | None = None
    cwd: Path | None = None


def tools(
    tmp: Path,
    openfgl_python: str | None,
    openfgl_root: str,
    fedgraph_python: str | None,
    cora_raw: Path,
) -> dict[str, Tool]:
    """``{row: Tool}``, one row per tool to time."""

    def summary_acc(out: Path):
        return lambda _: 100 * json.loads((out / "summary.json").read_text())["final"]["test_acc"]

    rows = {
        "plain PyTorch loop (this project's learners, no Flower)": Tool(
            [sys.executable, __file__, "--plain-loop"],
            lambda text: float(re.findall(r"final test acc ([\d.]+)", text)[-1]),
        ),
        "`fgl run --inprocess`": Tool(
            ["fgl", "run", *JOB, "--inprocess", "--out", str(tmp / "inprocess"), "--overwrite"],
            summary_acc(tmp / "inprocess"),
        ),
        "`fgl run` (Flower simulation, Ray)": Tool(
            ["fgl", "run", *JOB, "--out", str(tmp / "ray"), "--overwrite"], summary_acc(tmp / "ray")
        ),
    }
    if openfgl_python:
        script = tmp / "openfgl_job.py"
        script.write_text(OPENFGL_JOB)
        env = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}  # its partition files
        rows["OpenFGL (`openfgl-lib`), its own Louvain and split"] = Tool(
            [openfgl_python, str(script), openfgl_root],
            lambda text: 100 * float(re.findall(r"curr_test_accuracy: ([\d.]+)", text)[-1]),
            env=env,
        )
    if fedgraph_python:
        script = tmp / "fedgraph_job.py"
        script.write_text(FEDGRAPH_JOB)
        (tmp / "fedgraph").mkdir()
        rows["FedGraph (`fedgraph` 0.2.5, Ray), its own partition and split"] = Tool(
            [fedgraph_python, str(script), str(cora_raw)],
            lambda text: 100 * float(re.findall(r"Global Test Accuracy = ([\d.]+)", text)[-1]),
            cwd=tmp / "fedgraph",
        )
    return rows


def plain_loop_main() -> None:
    """The plain loop of ``performance.py`` on the job, as a process of its own."""
    sys.path.insert(0, str(Path(__file__).parent))
    from performance import plain_loop

    res = plain_loop(**{"checkpoint-every": 0})
    print(f"final test acc {100 * res['final']['test_acc']:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cycles", type=int, default=3, help="timed cycles after the warm-up (default 3)"
    )
    ap.add_argument("--openfgl-python", help="python of a virtual environment with openfgl-lib")
    ap.add_argument(
        "--openfgl-root",
        default=str(Path.home() / "openfgl-data"),
        help="OpenFGL's data root (holds global/subgraph_fl/Cora)",
    )
    ap.add_argument("--fedgraph-python", help="python of a virtual environment with fedgraph")
    ap.add_argument("--plain-loop", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plain_loop:
        return plain_loop_main()
    if (
        args.openfgl_python
        and not (Path(args.openfgl_root) / "global" / "subgraph_fl" / "Cora").is_dir()
    ):
        sys.exit(
            f"{args.openfgl_root}/global/subgraph_fl/Cora is missing: copy ../shared/data/Planetoid/Cora "
            "there (see this script's docstring)."
        )
    cora_present, cora_raw = dataset_status("Cora")  # the data root fgl run reads
    if args.fedgraph_python and not cora_present:
        sys.exit(
            f"Cora's raw files are missing from {cora_raw}: set FGL_DATA_ROOT to a data root "
            "that holds Planetoid/Cora/raw (FedGraph reads those files)."
        )
    with tempfile.TemporaryDirectory() as tmp:
        rows = tools(
            Path(tmp), args.openfgl_python, args.openfgl_root, args.fedgraph_python, cora_raw
        )
        runs: dict[str, list[dict]] = {name: [] for name in rows}
        for cycle in range(args.cycles + 1):  # cycle 0: the warm-up, not timed
            for name, tool in rows.items():
                print(f"cycle {cycle}: {name} ...", flush=True)
                res = timed(tool.cmd, tool.env, tool.cwd)
                res["acc"] = tool.acc(res["out"])
                if cycle:
                    runs[name].append(res)
    median = {name: statistics.median(r["wall_s"] for r in rs) for name, rs in runs.items()}
    base = median["plain PyTorch loop (this project's learners, no Flower)"]
    lines = "\n".join(
        f"| {name} | {median[name]:.1f} s | {median[name] / base:.2f}x | "
        f"{statistics.median(r['mem_mb'] for r in rs):.0f} MB | {rs[-1]['acc']:.2f} |"
        for name, rs in sorted(runs.items(), key=lambda kv: median[kv[0]])
    )
    flags = "".join(
        f" --{tool}-python PY"
        for tool in ("openfgl", "fedgraph")
        if getattr(args, f"{tool}_python")
    )
    fedgraph_note = textwrap.fill(
        "FedGraph runs its own protocol where its code fixes one: a near-uniform label-Dirichlet "
        "partition (no Louvain for node tasks), Planetoid's public split, a GCN of 16 hidden units, "
        "SGD (learning rate 0.5, its Cora example), and each of its ten Ray actors asks for a tenth "
        "of the CPUs."
        if args.fedgraph_python
        else "FedGraph is not measured here (`--fedgraph-python`: it needs torch-scatter and torch-sparse "
        "compiled from source).",
        width=96,
    )
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

{fedgraph_note}
Command: `python experiments/platform/peers.py{flags}`
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
