"""Ours beside OpenFGL's implementation of a baseline, on the same client subgraphs and splits.

OpenFGL (``openfgl-lib``, MIT) is an outside yardstick, not a dependency: this script exports
this project's partition and per-client splits into OpenFGL's processed layout
(``<root>/distrib/<simulation>_<dataset>_client_<K>/data_<k>.pt`` with ``global_map``, and
``node_cls/default_split/{train,val,test}_<k>.pt`` plus the ``glb_*`` lists), runs OpenFGL's
algorithm through its own trainer in its own virtual environment, runs ours in-process with
the same hyperparameters, for each seed, and prints both. Both report the test accuracy at the
round of best validation accuracy, averaged over the clients weighted by their node counts
(OpenFGL's ``local_model_on_local_data`` for personalised methods, ``global_model_on_local_data``
for FedAvg; ours ``eval-weight=client-size``).

Install OpenFGL apart (see ``experiments/platform/peers.py`` for the offline recipe)::

    python -m venv ~/venvs/openfgl && ~/venvs/openfgl/bin/pip install openfgl-lib torch==2.13.0
    ~/venvs/openfgl/bin/pip install dtaidistance  # imported by its GCFL+, not declared by openfgl-lib

and give it the raw Cora under ``<openfgl-root>/global/subgraph_fl/Cora`` (``--openfgl-root``,
default ``~/openfgl-data``; CiteSeer likewise for ``--dataset CiteSeer``). Then::

    FGL_DATA_ROOT=../shared/data python experiments/baselines/openfgl_yardstick.py \\
        --openfgl-python ~/venvs/openfgl/bin/python --methods fedavg,fedpub,fedgta --seeds 0,1,2

Every finished run (one side, one seed) is appended to ``docs/results/baselines.runs.jsonl``
at once, keyed by method, rounds, seed, side, the job and our options for the method; a run
already recorded is not run again (delete its line to rerun it), so a long comparison can be
made over several sessions (``--seeds 1``, then ``--seeds 2``, then ``--seeds 0,1,2 --doc``
renders the three from the records). ``--doc`` writes the table into ``docs/results/baselines.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "results" / "baselines.md"
RECORDS = REPO / "docs" / "results" / "baselines.runs.jsonl"

#: The job: OpenFGL's defaults for node classification (GCN width 64, dropout 0.5, Adam 0.01 /
#: 5e-4, 3 local epochs), Cora cut into 10 clients by this project's Louvain partitioner.
JOB = {
    "dataset": "Cora",
    "partition": "louvain",
    "num-clients": 10,
    "num-rounds": 100,
    "local-epochs": 3,
    "hidden": 64,
    "num-layers": 2,
    "dropout": 0.5,
    "lr": 0.01,
    "weight-decay": 5e-4,
    "eval-weight": "client-size",
    "checkpoint-every": 0,
    "progress": False,
}

#: Per method: OpenFGL's algorithm name, its evaluation mode, and our options that match
#: OpenFGL's configuration of it (``openfgl/flcore/<m>/<m>_config.py``).
METHODS = {
    "fedavg": ("fedavg", "global_model_on_local_data", {}),
    # OpenFGL's FedPub: norm_scale 10, and the regularisers on state_dict()'s detached copies
    "fedpub": (
        "fedpub",
        "local_model_on_local_data",
        {"fedpub.norm-scale": 10.0, "fedpub.regularizers": "code"},
    ),
    # OpenFGL's FedGTA: 10 moment orders (the authors' code: 6 for Cora)
    "fedgta": ("fedgta", "local_model_on_local_data", {"fedgta.num-moments": 10}),
    # FedTAD: the distilled global model on each client's data (OpenFGL's default mode for it
    # is the local models); FedAvg weights by node counts, as OpenFGL's num_samples
    "fedtad": ("fedtad", "global_model_on_local_data", {"agg-weight": "local"}),
    # FGSSL: what OpenFGL trains (cross-entropy plus its edge-difference distillation), the
    # global model evaluated as for FedAvg, FedAvg weights by node counts (its num_samples)
    "fgssl": (
        "fgssl",
        "global_model_on_local_data",
        {"fgssl.variant": "openfgl", "agg-weight": "local"},
    ),
    # SCAFFOLD: OpenFGL applies option II's control update under the job's Adam (ours is
    # SGD by default, the paper's), averages the models by node counts (its num_samples) and
    # sets c to the mean of the sampled clients' c_i (ours: c + (1/N) sum Delta c_i, equal
    # when every client trains every round, as here)
    "scaffold": (
        "scaffold",
        "global_model_on_local_data",
        {"optimizer": "adam", "agg-weight": "local"},
    ),
    # MOON: OpenFGL contrasts every node's hidden representation (ours by default the
    # training nodes), mu 1, tau 0.5, models averaged by node counts
    "moon": ("moon", "global_model_on_local_data", {"moon.nodes": "all", "agg-weight": "local"}),
    # FedProto: local models evaluated after training; OpenFGL's aggregation (node-count
    # weights over every client, zeros for a missing class) and its per-class loss sum
    "fedproto": (
        "fedproto",
        "local_model_on_local_data",
        {"fedproto.aggregate": "openfgl", "fedproto.loss": "class", "agg-weight": "local"},
    ),
    # FedTGP: OpenFGL's client loss (per-class errors summed), its server's 10 full-batch
    # epochs, and no margin (its mean prototypes are divided by M once per class, M^C in all,
    # so its margin is ~1e-7 of the gap); left: its server's Adam (ours SGD, the official
    # code's) and its zero prototypes of absent classes among the server's training data
    "fedtgp": (
        "fedtgp",
        "local_model_on_local_data",
        {
            "fedtgp.loss": "class",
            "fedtgp.server-epochs": 10,
            "fedtgp.server-batch": 0,
            "fedtgp.margin-threshold": 0.0,
            "agg-weight": "local",
        },
    ),
    # FedDC: OpenFGL's alpha 0.1, its Adam, node-count weights. Not expressible: OpenFGL's
    # correction is (1/(lr K)) <theta, last update> with no control variates (ours and the
    # official code's: SCAFFOLD's c - c_i), its drift adds the previous round's update (one
    # round late), and its model is the weighted mean of theta_i + h_i over the sampled clients
    "feddc": (
        "feddc",
        "global_model_on_local_data",
        {"feddc.alpha": 0.1, "optimizer": "adam", "agg-weight": "local"},
    ),
    # FedGL: OpenFGL's defaults (ssl weight 0.1, threshold 0.5, no pseudo graph), node-count
    # weights; left: OpenFGL's FedGL model sums the neighbours over the raw adjacency (no self
    # loops, no normalisation), ours is the run's GCN
    "fedgl": ("fedgl", "global_model_on_local_data", {"agg-weight": "local"}),
    # AdaFGL: OpenFGL's schedule (50 FedAvg rounds, then one step of both modules a round),
    # its alpha 0.5 and beta 0 (the official code's 0.05 and 0.2), the HCS mix, node-count
    # weights. Left: in step 1 OpenFGL evaluates each client's locally trained model (ours the
    # global model, as FedAvg); both pick the best round by node-weighted validation accuracy
    "adafgl": (
        "adafgl",
        "local_model_on_local_data",
        {
            "adafgl.fed-rounds": 50,
            "adafgl.epochs": 1,
            "adafgl.fusion": "mix",
            "adafgl.alpha": 0.5,
            "adafgl.beta": 0.0,
            "agg-weight": "local",
        },
    ),
    # FGGP: OpenFGL averages the classifier layer and evaluates it (its server's prototypes
    # reach no client), rebuilds the k-NN graph every round, weights by node counts
    "fggp": (
        "fggp",
        "global_model_on_local_data",
        {
            "fggp.head": "aggregate",
            "fggp.evaluate": "head",
            "fggp.knn-every": 1,
            "agg-weight": "local",
        },
    ),
    # GCFL+ (our gcfl, variant gcfl+): OpenFGL's eps1 0.05 / eps2 0.1 (on a node task ours read
    # eps1-node / eps2-node), seq_length 5, no standardising, the sequence of the last local
    # gradient's norm (its convGradsNorm), a split only after its 0-based round 20 (ours count
    # from 1: split-after 21), clusters of at least 3, FedAvg weights by node counts (its
    # num_samples). Its personalised local models, as OpenFGL allows no global mode for it; ours
    # evaluates each cluster's model. OpenFGL's GCFL+ is graph-level (NODE_LEVEL_GIN below) and
    # shares only its GIN's convolutions; ours shares the whole GCN (not expressible here)
    "gcfl+": (
        "gcfl_plus",
        "local_model_on_local_data",
        {
            "method": "gcfl",
            "gcfl.variant": "gcfl+",
            "gcfl.eps1-node": 0.05,
            "gcfl.eps2-node": 0.1,
            "gcfl.seq-length": 5,
            "gcfl.standardize": False,
            "gcfl.sequence": "grad",
            "gcfl.split-after": 21,
            "gcfl.min-split-size": 3,
            "agg-weight": "local",
        },
    ),
    # FedSage+: OpenFGL's generator (hidden_portion 0.5, max_pred 5, latent 128, the run's width
    # 64 and dropout 0.5), its matching loop (greedy_loss), its one-way generated edges, all of the
    # generator trained by the run's Adam (0.01 / 5e-4), 10 generator rounds of the 100 (its 10
    # rounds x 3 epochs = 30 steps: our 20 local epochs, then 10 one-step rounds), a GraphSAGE
    # classifier averaged with equal weights (its 1/M), evaluated as the global model on each
    # client's data as ours is (OpenFGL's default mode for it is the local models)
    "fedsageplus": (
        "fedsage_plus",
        "global_model_on_local_data",
        {
            "model": "graphsage",
            "fedsageplus.gen-rounds": 10,
            "fedsageplus.pretrain-epochs": 20,
            "fedsageplus.num-pred": 5,
            "fedsageplus.hidden-portion": 0.5,
            "fedsageplus.latent": 128,
            "fedsageplus.gen-hidden": 64,
            "fedsageplus.gen-dropout": 0.5,
            "fedsageplus.gen-lr": 0.01,
            "fedsageplus.gen-weight-decay": 5e-4,
            "fedsageplus.matching": "code",
            "fedsageplus.trainable": "all",
            "fedsageplus.undirected": False,
            "agg-weight": "uniform",
        },
    ),
    # FedDEP: OpenFGL's feddep_config (2 local + 3 FedDEP epochs, 5 prototypes and slots, half
    # the validation nodes hidden), its run lr/weight decay for the generator, its signed-sum
    # empty-slot test (both codes'), all of LocalDGen trained in the federated steps (its
    # requires_grad_(False) lines are commented out), uniform 1/|sampled| FedAvg weights; its default local_model_on_local_data is the only mode in which its models see
    # the mended embeddings (its server evaluates with them zero); ours evaluates the global
    # model on them (docs/methods/feddep.md)
    "feddep": (
        "feddep",
        "local_model_on_local_data",
        {
            "model": "graphsage",
            "feddep.gen-rounds": 3,
            "feddep.pretrain-epochs": 2,
            "feddep.encoder-epochs": 50,
            "feddep.num-pred": 5,
            "feddep.num-protos": 5,
            "feddep.hide-portion": 0.5,
            "feddep.latent": 128,
            "feddep.gen-dropout": 0.5,
            "feddep.gen-lr": 0.01,
            "feddep.gen-weight-decay": 5e-4,
            "feddep.beta-d": 1.0,
            "feddep.beta-n": 1.0,
            "feddep.beta-c": 1.0,
            "feddep.empty-slot": "sum",
            "feddep.trainable": "all",
            "agg-weight": "uniform",
        },
    ),
}

SIMULATION = "subgraph_fl_louvain"  # the folder name OpenFGL looks in (resolution 1)
ROUNDS = JOB["num-rounds"]  # a row run with other rounds (--rounds) says so in its method cell
DATASET = JOB["dataset"]  # a row on another dataset (--dataset) says so too

OPENFGL_RUN = """
import sys
import openfgl.config as config
from openfgl.flcore.trainer import FGLTrainer
args = config.args
args.root, args.fl_algorithm, args.evaluation_mode = sys.argv[1], sys.argv[2], sys.argv[3]
args.seed, args.num_rounds, args.num_clients = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
args.dataset = [sys.argv[7]]
args.simulation_mode = "{simulation}"
args.num_epochs, args.hid_dim, args.num_layers = int(sys.argv[8]), int(sys.argv[9]), 2
args.dropout, args.lr, args.weight_decay = float(sys.argv[10]), float(sys.argv[11]), float(sys.argv[12])
args.model = ["gcn"]
args.metrics = ["accuracy"]
args.use_cuda = False
if args.fl_algorithm == "gcfl_plus":  # NODE_LEVEL_GIN: its GIN sums each graph's nodes (graph
    import openfgl.flcore.gcfl_plus.models as gin  # tasks only); node tasks have no batch
    pool = gin.global_add_pool
    gin.global_add_pool = lambda x, batch: x if batch is None else pool(x, batch)
if args.fl_algorithm == "adafgl":  # its C product loads a library from an absolute path of the
    import openfgl.flcore.adafgl.op as op  # authors' machine (_utils.py:39) and stops on Linux;
    op.csr_sparse_dense_matmul = lambda adj, feat: adj.dot(feat)  # its other platforms' product
# OpenFGL's trainer never seeds (its seed_everything is not called): without this line its
# "seeds" are unrepeatable draws (rows recorded before 2026-12-07 were run so)
from openfgl.utils.basic_utils import seed_everything
seed_everything(args.seed)
FGLTrainer(args).train()
""".replace("{simulation}", SIMULATION)

#: OpenFGL's FedPub (and FGSSL) import torch-scatter and torch-sparse, which install only from source (and
#: its FGGP pynndescent, not installed). Its
#: path for an ``edge_index`` tensor needs ``scatter_add`` alone; these stand-ins give it (with
#: torch's own ``scatter_add``) and refuse the SparseTensor path. Put on OpenFGL's ``PYTHONPATH``
#: only, never this project's.
SHIMS = {
    "torch_scatter": """
import torch
def scatter_add(src, index, dim=0, dim_size=None):
    assert dim == 0 and src.dim() == 1, "stand-in: 1-d scatter along dim 0 only"
    size = int(index.max()) + 1 if dim_size is None else dim_size
    return torch.zeros(size, dtype=src.dtype, device=src.device).scatter_add_(0, index, src)
def scatter(*args, **kwargs):  # imported by OpenFGL's FGSSL for a sampler it never calls
    raise NotImplementedError("stand-in torch_scatter: scatter is not provided")
""",
    "torch_sparse": """
class SparseTensor:  # never instantiated: OpenFGL's FedPub is fed edge_index tensors here
    pass
def _refuse(*args, **kwargs):
    raise NotImplementedError("stand-in torch_sparse: no SparseTensor support")
fill_diag = matmul = mul = sum = _refuse
""",
    # OpenFGL's FGGP imports it at module level; FINCH calls it only above 70,000 prototypes
    "pynndescent": """
class NNDescent:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("stand-in pynndescent: more than 70,000 prototypes")
""",
}

BEST = re.compile(
    r"best_round: (\d+)\s+best_val_accuracy: ([0-9.]+)\s+best_test_accuracy: ([0-9.]+)"
)


def export_partition(root: Path, openfgl_root: Path) -> Path:
    """Write this project's clients of :data:`JOB` in OpenFGL's layout under ``root``, and the
    :data:`SHIMS` beside them."""
    import torch
    from torch_geometric.data import Data

    from fgl_flower.datasets import load_client_data
    from fgl_flower.parse import parse_run_config

    (root / "global").symlink_to(openfgl_root / "global", target_is_directory=True)
    for name, code in SHIMS.items():  # on OpenFGL's path only (run_openfgl)
        (root / "shims" / name).mkdir(parents=True)
        (root / "shims" / name / "__init__.py").write_text(code)
    k = JOB["num-clients"]
    folder = root / "distrib" / f"{SIMULATION}_1_{JOB['dataset']}_client_{k}"
    split = folder / "node_cls" / "default_split"
    split.mkdir(parents=True)
    data_cfg = parse_run_config(_ours("fedavg", 0)).data_config()
    for pid in range(k):
        client = load_client_data(data_cfg, pid)
        g = client.data
        ids = g.global_id.tolist()
        torch.save(
            Data(
                x=g.x.to_dense() if g.x.is_sparse else g.x,
                edge_index=g.edge_index,
                y=g.y,
                global_map=dict(enumerate(ids)),
                num_global_classes=client.num_classes,
            ),
            folder / f"data_{pid}.pt",
        )
        for name in ("train", "val", "test"):
            mask = getattr(g, f"{name}_mask")
            torch.save(mask.clone(), split / f"{name}_{pid}.pt")
            with open(split / f"glb_{name}_{pid}.pkl", "wb") as fh:
                pickle.dump([ids[i] for i in mask.nonzero().view(-1).tolist()], fh)
    return folder


def _ours(method: str, seed: int) -> dict:
    from fgl_flower.app_defaults import load_app_defaults

    cfg = load_app_defaults()
    cfg.update({**JOB, "method": method, "seed": seed, **METHODS[method][2]})
    return cfg


def run_ours(method: str, seed: int, out: Path) -> float:
    from fgl_flower.inprocess import run_inprocess

    summary = run_inprocess({**_ours(method, seed), "out-dir": str(out)})
    return 100 * float(summary["best_val"]["test_acc"])


def openfgl_argv(
    python: str,
    script: str,
    root: Path,
    algo: str,
    mode: str,
    seed: int,
    dataset: str,
    job: dict = JOB,
) -> list[str]:
    """The command running ``script`` (an OpenFGL driver such as :data:`OPENFGL_RUN`) with
    ``job``'s settings (default :data:`JOB`) in the order its ``sys.argv`` reads them."""
    return [
        python,
        "-c",
        script,
        str(root),
        algo,
        mode,
        str(seed),
        str(job["num-rounds"]),
        str(job["num-clients"]),
        dataset,
        str(job["local-epochs"]),
        str(job["hidden"]),
        str(job["dropout"]),
        str(job["lr"]),
        str(job["weight-decay"]),
    ]


def run_openfgl(
    python: str, root: Path, method: str, seed: int, timeout: float = 3 * 3600
) -> float:
    algo, mode, _ = METHODS[method]
    argv = openfgl_argv(python, OPENFGL_RUN, root, algo, mode, seed, JOB["dataset"])
    env = {
        **os.environ,
        "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1",  # OpenFGL pickles PyG Data objects
        "PYTHONPATH": str(root / "shims"),
    }
    res = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, check=False, env=env
    )
    found = BEST.findall(res.stdout)
    if res.returncode != 0 or not found:
        raise RuntimeError(
            f"OpenFGL {algo} seed {seed} failed (rc {res.returncode}): {res.stderr[-2000:]}"
        )
    return 100 * float(found[-1][2])


class Records:
    """The finished runs of :data:`RECORDS`: test accuracy (points) per (method, rounds, seed,
    side) of the current :data:`JOB` and our options for the method; appended one line at a
    time (flushed and synced) as each run ends, from any thread."""

    def __init__(self, path: Path) -> None:
        self.path, self.lock = path, threading.Lock()
        self.values: dict[str, float] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    rec = json.loads(line)
                    self.values[self._key(rec)] = float(rec["test_acc"])

    @staticmethod
    def _key(rec: dict) -> str:
        return json.dumps(
            {k: rec[k] for k in ("method", "rounds", "seed", "side", "job", "options")},
            sort_keys=True,
        )

    @staticmethod
    def record(method: str, seed: int, side: str) -> dict:
        """The identity of one run under the current :data:`JOB`."""
        return {
            "method": method,
            "rounds": JOB["num-rounds"],
            "seed": seed,
            "side": side,
            "job": {k: v for k, v in JOB.items() if k != "num-rounds"},
            "options": METHODS[method][2],
        }

    def get(self, method: str, seed: int, side: str) -> float | None:
        return self.values.get(self._key(self.record(method, seed, side)))

    def add(self, method: str, seed: int, side: str, test_acc: float) -> None:
        from fgl_flower.results import append_line

        rec = {
            **self.record(method, seed, side),
            "test_acc": test_acc,
            "date": time.strftime("%Y-%m-%d"),
        }
        with self.lock:
            append_line(self.path, json.dumps(rec))
            self.values[self._key(rec)] = test_acc


def run_method(
    records: Records, method: str, seeds: list[int], run_theirs, run_ours_seed, parallel: int = 1
) -> tuple[list[float], list[float]]:
    """Both sides of ``method`` for every seed that :class:`Records` lacks, OpenFGL's in up to
    ``parallel`` threads beside ours (one after another), each recorded as it ends; returns
    (ours, OpenFGL's) per seed from the records."""

    def keep(seed: int, side: str):
        return lambda done: (
            None if done.exception() else records.add(method, seed, side, done.result())
        )

    with ThreadPoolExecutor(max(parallel, 1)) as pool:
        futures: list[Future] = []
        for seed in seeds:
            if records.get(method, seed, "openfgl") is None:
                futures.append(pool.submit(run_theirs, method, seed))
                futures[-1].add_done_callback(keep(seed, "openfgl"))
        for seed in seeds:
            if records.get(method, seed, "ours") is None:
                t0 = time.perf_counter()
                records.add(method, seed, "ours", run_ours_seed(method, seed))
                print(
                    f"{method} seed {seed}: ours {records.get(method, seed, 'ours'):.2f} "
                    f"({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
        for future in futures:
            future.result()  # an OpenFGL failure stops here, after the others were recorded
    return (
        [records.get(method, s, "ours") for s in seeds],
        [records.get(method, s, "openfgl") for s in seeds],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--openfgl-python", required=True, help="python of a venv with openfgl-lib")
    ap.add_argument(
        "--openfgl-root",
        default=str(Path.home() / "openfgl-data"),
        help="folder holding global/subgraph_fl/<dataset> for OpenFGL",
    )
    ap.add_argument(
        "--methods", default="fedavg,fedpub", help=f"comma-separated: {', '.join(METHODS)}"
    )
    ap.add_argument(
        "--dataset",
        default=JOB["dataset"],
        choices=("Cora", "CiteSeer"),
        help="the job's dataset (its raw files under <openfgl-root>/global/subgraph_fl/<dataset>)",
    )
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument(
        "--rounds",
        type=int,
        default=JOB["num-rounds"],
        help="rounds of every run (a row with other than 100 says so)",
    )
    ap.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="OpenFGL runs at a time (its seeds; ours run one after another)",
    )
    ap.add_argument(
        "--doc", action="store_true", help=f"write the table into {DOC.relative_to(REPO)}"
    )
    ap.add_argument(
        "--records",
        default=str(RECORDS),
        help="finished runs, appended as they end; recorded runs are not run again",
    )
    args = ap.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    if unknown := [m for m in methods if m not in METHODS]:
        sys.exit(f"unknown method(s) {unknown}: choose from {', '.join(METHODS)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    JOB["num-rounds"] = args.rounds
    JOB["dataset"] = args.dataset
    records = Records(Path(args.records))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "openfgl"
        root.mkdir()
        if any(records.get(m, s, "openfgl") is None for m in methods for s in seeds):
            raw = Path(args.openfgl_root).expanduser() / "global" / "subgraph_fl" / args.dataset
            if not raw.is_dir():
                sys.exit(
                    f"{raw} is missing: copy the dataset's Planetoid folder there (e.g. cp -r "
                    f"../shared/data/Planetoid/{args.dataset} {raw.parent}/)."
                )
            export_partition(root, Path(args.openfgl_root).expanduser())
        for method in methods:
            ours, theirs = run_method(
                records,
                method,
                seeds,
                lambda m, seed: run_openfgl(args.openfgl_python, root, m, seed),
                lambda m, seed: run_ours(m, seed, Path(tmp) / f"ours-{m}-{seed}"),
                args.parallel,
            )
            print(f"{method}: OpenFGL {', '.join(f'{v:.2f}' for v in theirs)}", flush=True)
            label = method if args.rounds == ROUNDS else f"{method}, {args.rounds} rounds"
            if args.dataset != DATASET:
                label = f"{label}, {args.dataset}"
            rows.append((label, ours, theirs))
    table = render(rows, seeds)
    print(table)
    if args.doc:
        write_doc(table)


def _mean_std(values: list[float]) -> str:
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values) if len(values) > 1 else 0.0:.2f}"


def render(rows: list[tuple[str, list[float], list[float]]], seeds: list[int]) -> str:
    lines = [
        "| method | ours | OpenFGL | ours − OpenFGL | per seed (ours / OpenFGL) |",
        "|---|---|---|---|---|",
    ]
    for method, ours, theirs in rows:
        diff = statistics.mean(ours) - statistics.mean(theirs)
        per_seed = ", ".join(f"{a:.2f} / {b:.2f}" for a, b in zip(ours, theirs))
        lines.append(
            f"| {method} | {_mean_std(ours)} | {_mean_std(theirs)} | {diff:+.2f} | {per_seed} |"
        )
    job = {k: v for k, v in JOB.items() if k not in ("num-rounds", "dataset")}
    return "\n".join(lines) + (
        f"\n\nSeeds {', '.join(map(str, seeds))}; {ROUNDS} rounds and {DATASET} unless the row "
        f"says otherwise; job: {json.dumps(job)}.\n"
    )


def write_doc(table: str) -> None:
    """Put ``table``'s rows into the generated section of :data:`DOC` (between its markers):
    a method run again replaces its row, the others' rows stay."""
    start, end = "<!-- openfgl-yardstick:start -->", "<!-- openfgl-yardstick:end -->"
    text = DOC.read_text()
    head, rest = text.split(start, 1)
    old, tail = rest.split(end, 1)

    def rows(block: str) -> dict[str, str]:
        return {
            line.split("|")[1].strip(): line
            for line in block.splitlines()
            if line.startswith("| ") and not line.startswith(("| method", "|---"))
        }

    merged = {**rows(old), **rows(table)}
    header, rule = table.splitlines()[:2]
    footer = table.split("\n\n", 1)[1].rstrip("\n") + "\n"
    body = "\n".join([header, rule, *merged.values()])
    from fgl_flower.results import atomic_write_text

    atomic_write_text(DOC, f"{head}{start}\n{body}\n\n{footer}{end}{tail}")


if __name__ == "__main__":
    main()
