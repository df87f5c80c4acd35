"""Ours beside OpenFGL on link prediction, on the same client subgraphs and the same edge split.

The link-prediction counterpart of ``openfgl_yardstick.py`` (whose install notes and
mean/std helper it reuses): FedAvg and Local (OpenFGL's ``isolate``), Louvain into 10 clients,
Cora or CiteSeer. For each seed it exports this project's partition into OpenFGL's processed
layout (``distrib/subgraph_fl_louvain_1_<dataset>_client_10/data_<k>.pt``) and runs OpenFGL's
``LinkPredTask`` through its own trainer in its own virtual environment (seeded by its
``seed_everything``, as its ``main.py`` does; one thread), on one of three splits (the
``side`` of a run):

* ``openfgl``: OUR edge split written into the files OpenFGL caches its split in
  (``link_pred/default_split/{forward_data,merged_edge_*}_<k>.pt``,
  ``glb_merged_edge_index_<k>.pkl``), so that its split code never runs: our training edges
  as its message graph (both directions), our val/test positives and negatives, and one
  fixed set of training negatives (as many as the training edges, drawn once per seed and
  client from ``[seed, client, 7]``, excluding every positive and the val/test negatives, as
  OpenFGL's own draw does: OpenFGL keeps its training negatives for the whole run, ours
  draws new ones every epoch);
* ``openfgl-shipped``: OpenFGL's own split of our partition (``local_subgraph_train_val_test_
  split``), as shipped, whose message graph indexes the raw edge list with positions in the
  deduplicated one, so that it holds part of the validation and test edges;
* ``openfgl-patched``: the same split with that one line corrected (the message graph from the
  training and leftover edges themselves), in a temporary copy of the installed package.

and ``ours``: this project's run in-process (``task = "link"``), same seed, same split; and,
to trace the gap, ours with OpenFGL's remaining differences put in: ``ours-fixed-neg``
(``link-negatives = fixed``), ``ours-relu-dropout`` (ReLU and dropout after the encoder,
patched in this process) and ``ours-as-openfgl`` (both).

Both sides evaluate the same models the same way: FedAvg the global model on each client's
data (OpenFGL's ``global_model_on_local_data``), Local each client's own model; the test AUC
at the round of best validation AUC, clients weighted by their edge counts (ours
``eval-weight = client-size``, all positives; OpenFGL's ``num_samples``, positives and as many
negatives, proportional to it on our split). FedAvg weights uploads the same way
(``agg-weight = local``). The encoder is one GCN layer F -> 64 on both sides (OpenFGL's
2-layer GCN embeds with its first layer; ours ``num-layers = 1``); OpenFGL follows it with
ReLU and dropout 0.5, ours with nothing.

Install OpenFGL as ``experiments/platform/peers.py`` says, with ``<openfgl-root>/global/
subgraph_fl/{Cora,CiteSeer}`` (Planetoid's raw files). Then::

    FGL_DATA_ROOT=../shared/data python experiments/baselines/openfgl_link_yardstick.py \\
        --openfgl-python ~/venvs/openfgl/bin/python --datasets Cora,CiteSeer \\
        --methods fedavg,local --seeds 0,1,2 --doc  # every side unless --sides

Every finished run is appended to ``docs/results/link.runs.jsonl`` at once and not run again
(delete its line to rerun it); ``--doc`` renders ``docs/results/link.md``'s tables from them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch.nn.functional as F
from torch import nn

REPO = Path(__file__).resolve().parents[2]
# this checkout's fgl_flower, whichever one the environment has installed
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]
import openfgl_yardstick as yardstick  # noqa: E402

DOC = REPO / "docs" / "results" / "link.md"
RECORDS = REPO / "docs" / "results" / "link.runs.jsonl"

#: OpenFGL's defaults for link prediction (its config.py and LinkPredTask), Louvain into 10.
JOB = {
    "task": "link",
    "partition": "louvain",
    "num-clients": 10,
    "num-rounds": 100,
    "local-epochs": 3,
    "hidden": 64,
    "num-layers": 1,
    "dropout": 0.5,
    "lr": 0.01,
    "weight-decay": 5e-4,
    "split": "0.8,0.1,0.1",
    "select-by": "val_auc",
    "eval-weight": "client-size",
    "agg-weight": "local",
    "link-decoder": "dot",
    "link-negatives": "resample",
    "checkpoint-every": 0,
    "progress": False,
}

#: Our method -> OpenFGL's algorithm and its evaluation mode.
METHODS = {
    "fedavg": ("fedavg", "global_model_on_local_data"),
    "local": ("isolate", "local_model_on_local_data"),
}
#: Where a run comes from (see the module docstring); the ``ours-*`` sides are ours with one or
#: both of OpenFGL's remaining differences put in: its fixed training negatives (our
#: ``link-negatives = fixed``) and ReLU and dropout after the encoder (:func:`relu_dropout`).
SIDES = (
    "ours",
    "openfgl",
    "openfgl-shipped",
    "openfgl-patched",
    "ours-fixed-neg",
    "ours-relu-dropout",
    "ours-as-openfgl",
)
VARIANTS = {  # side -> (ReLU and dropout after the encoder, our options)
    "ours": (False, {}),
    "ours-fixed-neg": (False, {"link-negatives": "fixed"}),
    "ours-relu-dropout": (True, {}),
    "ours-as-openfgl": (True, {"link-negatives": "fixed"}),
}
SIMULATION = yardstick.SIMULATION
TRAIN_NEG_STREAM = 7  # the training negatives' generator: [seed, client, 7]

#: OpenFGL's main.py seeds everything before the trainer; its link split draws from numpy's
#: global state, so the seed fixes its split too.
OPENFGL_RUN = """
import sys
import openfgl.config as config
from openfgl.flcore.trainer import FGLTrainer
from openfgl.utils.basic_utils import seed_everything
args = config.args
args.root, args.fl_algorithm, args.evaluation_mode = sys.argv[1], sys.argv[2], sys.argv[3]
args.seed, args.num_rounds, args.num_clients = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
args.dataset = [sys.argv[7]]
args.simulation_mode = "{simulation}"
args.task = "link_pred"
args.num_epochs, args.hid_dim, args.num_layers = int(sys.argv[8]), int(sys.argv[9]), 2
args.dropout, args.lr, args.weight_decay = float(sys.argv[10]), float(sys.argv[11]), float(sys.argv[12])
args.model = ["gcn"]
args.metrics = ["auc"]
args.use_cuda = False
seed_everything(args.seed)
FGLTrainer(args).train()
""".replace("{simulation}", SIMULATION)

BEST = re.compile(r"best_round: (\d+)\s+best_val_auc: ([0-9.]+)\s+best_test_auc: ([0-9.]+)")

#: The line of OpenFGL's LinkPredTask that builds the message graph from positions in the
#: deduplicated edge list but indexes the raw (both-direction) edge list with them, and its
#: correction (the deduplicated list, ``pos_set``'s order, which those positions index).
LEAK = "forward_edge_index = to_undirected(local_subgraph.edge_index[:, forward_edge_ids])"
FIXED = (
    "forward_edge_index = to_undirected(torch.tensor(list(pos_set)).T.long()[:, forward_edge_ids])"
)


def ours_config(method: str, dataset: str, seed: int) -> dict:
    from fgl_flower.app_defaults import load_app_defaults

    cfg = load_app_defaults()
    cfg.update({**JOB, "dataset": dataset, "method": method, "seed": seed})
    return cfg


def train_negatives(e, seed: int, pid: int):
    """Client ``pid``'s fixed training negatives for seed ``seed`` (``LinkSplit`` ``e``): as
    many as its training edges, none of its positives, val or test negatives, no pair twice,
    from ``numpy.random.default_rng([seed, pid, 7])``."""
    import numpy as np
    import torch

    from fgl_flower.datasets.link_splits import edge_keys, sample_negatives

    pos = torch.cat([e.train_pos, e.val_pos, e.test_pos], 1)
    taken = np.concatenate([edge_keys(t.cpu(), e.num_nodes) for t in (pos, e.val_neg, e.test_neg)])
    rng = np.random.default_rng([seed, pid, TRAIN_NEG_STREAM])
    return sample_negatives(e.num_nodes, taken, e.train_pos.size(1), rng)


def export(root: Path, openfgl_root: Path, dataset: str, seed: int, split: bool) -> None:
    """Our clients of ``dataset`` (seed ``seed``'s edge split) in OpenFGL's layout under
    ``root``: each client's whole subgraph (its train, val and test edges) as ``data_<k>.pt``,
    and with ``split`` our split as OpenFGL's cached link split (see the module docstring)."""
    import torch
    from torch_geometric.data import Data
    from torch_geometric.utils import to_undirected

    from fgl_flower.datasets import load_client_data
    from fgl_flower.parse import parse_run_config

    (root / "global").symlink_to(openfgl_root / "global", target_is_directory=True)
    k = JOB["num-clients"]
    folder = root / "distrib" / f"{SIMULATION}_1_{dataset}_client_{k}"
    cache = folder / "link_pred" / "default_split"
    cache.mkdir(parents=True)
    data_cfg = parse_run_config(ours_config("fedavg", dataset, seed)).data_config()
    for pid in range(k):
        client = load_client_data(data_cfg, pid)
        g, e = client.data, client.edges
        x = (g.x.to_dense() if g.x.is_sparse else g.x).float()
        ids = g.global_id.tolist()
        pos = torch.cat([e.train_pos, e.val_pos, e.test_pos], 1)
        torch.save(
            Data(
                x=x,
                edge_index=to_undirected(pos, num_nodes=e.num_nodes),
                y=g.y,
                global_map=dict(enumerate(ids)),
                num_global_classes=client.num_classes,
            ),
            folder / f"data_{pid}.pt",
        )
        if not split:
            continue
        train_neg = train_negatives(e, seed, pid)
        parts = [e.train_pos, e.val_pos, e.test_pos, train_neg, e.val_neg, e.test_neg]
        merged = torch.cat(parts, 1).long()
        sizes = [p.size(1) for p in parts]
        label = torch.cat([torch.full((s,), float(i < 3)) for i, s in enumerate(sizes)])
        which = torch.cat([torch.full((s,), i % 3) for i, s in enumerate(sizes)])
        torch.save(
            Data(x=x, edge_index=e.message_edges.clone(), y=g.y), cache / f"forward_data_{pid}.pt"
        )
        torch.save(merged, cache / f"merged_edge_index_{pid}.pt")
        torch.save(label, cache / f"merged_edge_label_{pid}.pt")
        for i, name in enumerate(("train", "val", "test")):
            torch.save(which == i, cache / f"merged_edge_{name}_{pid}.pt")
        glb = torch.tensor(ids, dtype=torch.long)[merged]
        with open(cache / f"glb_merged_edge_index_{pid}.pkl", "wb") as fh:
            torch.save(glb, fh)  # OpenFGL's server reads it with torch.load
    if not split:
        shutil.rmtree(folder / "link_pred")  # OpenFGL splits and caches on its first run


def patched_package(into: Path, python: str) -> Path:
    """A copy of the installed ``openfgl`` package under ``into`` with :data:`LEAK` replaced
    by :data:`FIXED`; returns the folder to put first on ``PYTHONPATH``."""
    src = subprocess.run(
        [python, "-c", "import openfgl, os; print(os.path.dirname(openfgl.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dest = into / "openfgl"
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
    task = dest / "task" / "link_pred.py"
    text = task.read_text()
    if text.count(LEAK) != 1:
        raise RuntimeError(f"{task}: the message-graph line to patch is not there once")
    task.write_text(text.replace(LEAK, FIXED))
    return into


def run_openfgl(
    python: str, root: Path, method: str, dataset: str, seed: int, path: Path | None = None
) -> dict:
    algo, mode = METHODS[method]
    argv = yardstick.openfgl_argv(python, OPENFGL_RUN, root, algo, mode, seed, dataset, JOB)
    # it pickles Data objects; one thread: beside other work on 2 cores its two threads ran
    # 7 times slower, with the same numbers
    env = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    if path is not None:
        env["PYTHONPATH"] = str(path)
    res = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    found = BEST.findall(res.stdout)
    if res.returncode != 0 or not found:
        raise RuntimeError(
            f"OpenFGL {algo} {dataset} seed {seed} failed (rc {res.returncode}): "
            f"{res.stderr[-2000:]}"
        )
    best_round, val, test = found[-1]
    # OpenFGL counts rounds from 0; ours from 1
    return {
        "test_auc": 100 * float(test),
        "val_auc": 100 * float(val),
        "best_round": int(best_round) + 1,
    }


class ReluDropout(nn.Module):
    """``encoder`` followed by ReLU and dropout: OpenFGL's GCN gives its first layer's output
    after these as the embedding."""

    def __init__(self, encoder: nn.Module, p: float) -> None:
        super().__init__()
        self.encoder, self.p = encoder, p

    def forward(self, x, edge_index):
        return F.dropout(F.relu(self.encoder(x, edge_index)), self.p, self.training)


@contextlib.contextmanager
def relu_dropout(on: bool):
    """Ours, in this process, with OpenFGL's ReLU and dropout after the encoder (``on``);
    undone on exit."""
    from fgl_flower.clients import learner

    cls = learner.LinkLearner
    build = cls.__dict__["build"]

    def relu_build(klass, cfg, num_features, num_classes):
        model = build.__func__(klass, cfg, num_features, num_classes)
        model.encoder = ReluDropout(model.encoder, cfg.dropout)
        return model

    if on:
        cls.build = classmethod(relu_build)
    learner._initial_model.cache_clear()
    try:
        yield
    finally:
        cls.build = build
        learner._initial_model.cache_clear()


def run_ours(method: str, dataset: str, seed: int, out: Path, side: str = "ours") -> dict:
    from fgl_flower.inprocess import run_inprocess

    relu, options = VARIANTS[side]
    with relu_dropout(relu):
        summary = run_inprocess(
            {**ours_config(method, dataset, seed), **options, "out-dir": str(out)}
        )
    best = summary["best_val"]
    return {
        "test_auc": 100 * float(best["test_auc"]),
        "val_auc": 100 * float(best["val_auc"]),
        "best_round": int(best["round"]),
    }


def code_version() -> str:
    """This checkout's commit, ``+`` when its ``fgl_flower`` has uncommitted changes."""
    git = ["git", "-C", str(REPO)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--", "fgl_flower"], capture_output=True, text=True
    )
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


class Records:
    """Finished runs of :data:`RECORDS`, keyed by (method, dataset, side, seed, rounds) and the
    rest of :data:`JOB`; appended one line at a time as each run ends."""

    KEY = ("method", "dataset", "side", "seed", "rounds", "job")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.values: dict[str, dict] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    rec = json.loads(line)
                    self.values[self._key(rec)] = rec

    @classmethod
    def _key(cls, rec: dict) -> str:
        return json.dumps({k: rec[k] for k in cls.KEY}, sort_keys=True)

    @staticmethod
    def identity(method: str, dataset: str, side: str, seed: int) -> dict:
        return {
            "method": method,
            "dataset": dataset,
            "side": side,
            "seed": seed,
            "rounds": JOB["num-rounds"],
            "job": {k: v for k, v in JOB.items() if k != "num-rounds"},
        }

    def get(self, method: str, dataset: str, side: str, seed: int) -> dict | None:
        return self.values.get(self._key(self.identity(method, dataset, side, seed)))

    def add(self, method: str, dataset: str, side: str, seed: int, result: dict) -> None:
        from fgl_flower.results import append_line

        rec = {
            **self.identity(method, dataset, side, seed),
            **result,
            "code": code_version(),
            "date": time.strftime("%Y-%m-%d"),
        }
        append_line(self.path, json.dumps(rec))
        self.values[self._key(rec)] = rec


#: Two-sided 95% quantiles of Student's t by degrees of freedom.
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def paired(ours: list[float], theirs: list[float]) -> str:
    """Mean paired difference and its 95% t interval over seeds."""
    d = [a - b for a, b in zip(ours, theirs)]
    mean = statistics.mean(d)
    if len(d) < 2:
        return f"{mean:+.2f}"
    half = T95.get(len(d) - 1, 1.96) * statistics.stdev(d) / len(d) ** 0.5
    return f"{mean:+.2f} [{mean - half:+.2f}, {mean + half:+.2f}]"


#: The page's tables: name -> (header cells, the sides of its value columns, the two sides of
#: its paired difference, that column's header).
TABLES = {
    "link-yardstick": (
        ["ours", "OpenFGL, our split"],
        ["ours", "openfgl"],
        ("ours", "openfgl"),
        "ours − OpenFGL [95% CI]",
        ["OpenFGL as shipped"],
        ["openfgl-shipped"],
    ),
    "link-leak": (
        ["OpenFGL as shipped", "its split, leak patched"],
        ["openfgl-shipped", "openfgl-patched"],
        ("openfgl-shipped", "openfgl-patched"),
        "shipped − patched [95% CI]",
        [],
        [],
    ),
    "link-gap": (
        ["ours", "+ fixed negatives", "+ ReLU, dropout", "+ both", "OpenFGL, our split"],
        ["ours", "ours-fixed-neg", "ours-relu-dropout", "ours-as-openfgl", "openfgl"],
        ("ours-as-openfgl", "openfgl"),
        "both − OpenFGL [95% CI]",
        [],
        [],
    ),
}


def render(
    records: Records, methods: list[str], datasets: list[str], seeds: list[int]
) -> dict[str, str]:
    """Each of :data:`TABLES` in markdown, from the records: a cell is the mean ± std over
    ``seeds`` of the test AUC, or — while a seed is missing."""

    def values(method, dataset, side):
        got = [records.get(method, dataset, side, s) for s in seeds]
        return [r["test_auc"] for r in got] if all(got) else None

    out = {}
    for name, (heads, sides, (a, b), diff_head, tail_heads, tail_sides) in TABLES.items():
        cols = ["method", "dataset", *heads, diff_head, *tail_heads]
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for dataset in datasets:
            for method in methods:
                cells = [
                    yardstick._mean_std(v) if (v := values(method, dataset, side)) else "—"
                    for side in [*sides, *tail_sides]
                ]
                va, vb = values(method, dataset, a), values(method, dataset, b)
                diff = paired(va, vb) if va and vb else "—"
                row = [method, dataset, *cells[: len(sides)], diff, *cells[len(sides) :]]
                lines.append("| " + " | ".join(row) + " |")
        out[name] = "\n".join(lines) + "\n"
    return out


def write_doc(tables: dict[str, str]) -> None:
    """Put each table between its markers in :data:`DOC`."""
    from fgl_flower.results import atomic_write_text

    text = DOC.read_text()
    for name, table in tables.items():
        start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
        head, rest = text.split(start, 1)
        text = f"{head}{start}\n{table}{end}{rest.split(end, 1)[1]}"
    atomic_write_text(DOC, text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--openfgl-python", required=True, help="python of a venv with openfgl-lib")
    ap.add_argument(
        "--openfgl-root",
        default=str(Path.home() / "openfgl-data"),
        help="folder holding global/subgraph_fl/<dataset> for OpenFGL",
    )
    ap.add_argument("--datasets", default="Cora,CiteSeer")
    ap.add_argument("--methods", default="fedavg,local", help=f"of {', '.join(METHODS)}")
    ap.add_argument("--sides", default=",".join(SIDES), help=f"of {', '.join(SIDES)}")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--rounds", type=int, default=JOB["num-rounds"])
    ap.add_argument("--records", default=str(RECORDS))
    ap.add_argument("--doc", action="store_true", help=f"write {DOC.relative_to(REPO)}'s table")
    args = ap.parse_args()
    datasets = [d for d in args.datasets.split(",") if d]
    methods = [m for m in args.methods.split(",") if m]
    sides = [s for s in args.sides.split(",") if s]
    seeds = [int(s) for s in args.seeds.split(",")]
    if bad := [m for m in methods if m not in METHODS] + [s for s in sides if s not in SIDES]:
        sys.exit(f"unknown method(s) or side(s): {bad}")
    JOB["num-rounds"] = args.rounds
    records = Records(Path(args.records))
    openfgl_root = Path(args.openfgl_root).expanduser()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        patched = None
        for dataset in datasets:
            for seed in seeds:
                roots: dict[str, Path] = {}
                for method in methods:
                    for side in sides:
                        if records.get(method, dataset, side, seed) is not None:
                            continue
                        t0 = time.perf_counter()
                        if side in VARIANTS:
                            result = run_ours(method, dataset, seed, tmp / side, side)
                        else:
                            if side not in roots:  # one export per (dataset, seed, side)
                                roots[side] = tmp / f"{dataset}-{seed}-{side}"
                                roots[side].mkdir()
                                export(roots[side], openfgl_root, dataset, seed, side == "openfgl")
                            if side == "openfgl-patched" and patched is None:
                                patched = patched_package(tmp / "patched", args.openfgl_python)
                            path = patched if side == "openfgl-patched" else None
                            result = run_openfgl(
                                args.openfgl_python, roots[side], method, dataset, seed, path
                            )
                        result["seconds"] = round(time.perf_counter() - t0, 1)
                        records.add(method, dataset, side, seed, result)
                        print(
                            f"{dataset} {method} seed {seed} {side}: test AUC "
                            f"{result['test_auc']:.2f} (round {result['best_round']}, "
                            f"{result['seconds']:.0f} s)",
                            flush=True,
                        )
                for root in roots.values():
                    shutil.rmtree(root)
    tables = render(records, methods, datasets, seeds)
    print("\n".join(tables.values()))
    if args.doc:
        write_doc(tables)


if __name__ == "__main__":
    main()
