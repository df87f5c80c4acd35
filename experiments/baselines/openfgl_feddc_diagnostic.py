"""OpenFGL's FedDC changed step by step to the official FedDC (gaoliang13/FedDC), on the
yardstick's exported partition (experiments/baselines/openfgl_yardstick.py), OpenFGL's own trainer.

Variants (cumulative; FEDDC_VARIANT in OpenFGL's process):
  openfgl  OpenFGL 1.1.0's FedDC unchanged (through this driver: checks the plumbing)
  a        correction -> SCAFFOLD control variates as the official code: each step's gradient
           + (c - c_i) (Adam sees it, as the official loss term <theta, c - c_i> would),
           c_i <- c_i - c + (w - theta_i)/(K lr) (K = num_epochs full-batch steps, lr the Adam lr),
           c <- c + (1/N) sum_S (c_i' - c_i); OpenFGL's (1/(lr K))<theta, last update> removed.
           Drift still one round late, penalty still off in round 0, model still sum_i w_i(theta_i+h_i)
  ab       + h_i <- h_i + (theta_i - w) in the same round; the penalty also in round 0 (as official)
  abc      + w <- sum_S w_i theta_i (node-count weights, the job's/ours) + (1/N) sum_{all i} h_i
  abcu     + w <- (1/|S|) sum_S theta_i + (1/N) sum_{all i} h_i (official: uniform mean of theta_i)

OpenFGL is patched at run time in its own process only (nothing installed is edited). Usage
(this project's venv; OpenFGL's as for the yardstick)::

    FGL_DATA_ROOT=../shared/data OMP_NUM_THREADS=1 python \
        experiments/baselines/openfgl_feddc_diagnostic.py --variants openfgl,a,ab,abc --seeds 0,1,2

Each run is appended to ``<work>/results.jsonl`` and its log kept under ``<work>/logs``.
Measured 2026-12-07 (docs/results/baselines.md, FedDC).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "experiments" / "baselines"))
sys.path.insert(0, str(REPO))
import openfgl_yardstick as Y  # noqa: E402

HERE = Path.home() / "openfgl-feddc-diagnostic"  # --work
ROOT = HERE / "root"
RESULTS = HERE / "results.jsonl"

PATCH = r"""
import os, torch
V = os.environ["FEDDC_VARIANT"]
if V != "openfgl":
    import openfgl.flcore.feddc.client as fc
    import openfgl.flcore.feddc.server as fs
    from openfgl.flcore.feddc.feddc_config import config as fcfg
    SAME_ROUND = V in ("ab", "abc", "abcu")
    MODEL = {"abc": "weighted", "abcu": "uniform"}.get(V, "openfgl")

    _cinit = fc.FedDCClient.__init__
    def cinit(self, *a, **k):
        _cinit(self, *a, **k)
        ps = list(self.task.model.parameters())
        self.local_control = [torch.zeros_like(p.data) for p in ps]
        self.delta_control = [torch.zeros_like(p.data) for p in ps]
    fc.FedDCClient.__init__ = cinit

    def custom_loss(self):
        def loss_fn(embedding, logits, label, mask):
            task_loss = self.task.default_loss_fn(logits[mask], label[mask])
            if not SAME_ROUND and self.message_pool["round"] == 0:
                return task_loss  # OpenFGL: no penalty in round 0
            drift = 0
            for p, w, h in zip(self.task.model.parameters(), self.message_pool["server"]["weight"], self.local_drift):
                drift = drift + torch.sum(torch.pow(h + p - w, 2))
            return task_loss + (fcfg["feddc_alpha"] / 2) * drift
        return loss_fn

    def step_preprocess(self):
        for p, ci, c in zip(self.task.model.parameters(), self.local_control, self.message_pool["server"]["global_control"]):
            if p.grad is not None:
                p.grad.data += c - ci

    def cexecute(self):
        with torch.no_grad():
            for p, w in zip(self.task.model.parameters(), self.message_pool["server"]["weight"]):
                p.data.copy_(w)
        self.task.loss_fn = custom_loss(self)
        self.task.step_preprocess = lambda: step_preprocess(self)
        self.task.train()
        K, lr = self.args.num_epochs, self.args.lr
        with torch.no_grad():
            for it, (p, w, c) in enumerate(zip(self.task.model.parameters(), self.message_pool["server"]["weight"], self.message_pool["server"]["global_control"])):
                upd = p.detach() - w.detach()
                if SAME_ROUND:
                    self.local_drift[it] = self.local_drift[it] + upd
                else:  # OpenFGL: the previous round's update
                    self.local_drift[it] = self.local_drift[it] + self.last_update[it]
                self.last_update[it] = upd
                new = self.local_control[it] - c + (w.detach() - p.detach()) / (K * lr)
                self.delta_control[it] = new - self.local_control[it]
                self.local_control[it] = new
    fc.FedDCClient.execute = cexecute

    _csend = fc.FedDCClient.send_message
    def csend(self):
        _csend(self)
        self.message_pool[f"client_{self.client_id}"]["delta_control"] = self.delta_control
    fc.FedDCClient.send_message = csend

    _sinit = fs.FedDCServer.__init__
    def sinit(self, *a, **k):
        _sinit(self, *a, **k)
        self.global_control = [torch.zeros_like(p.data) for p in self.task.model.parameters()]
    fs.FedDCServer.__init__ = sinit

    _sexec = fs.FedDCServer.execute
    def sexecute(self):
        _sexec(self)  # OpenFGL's model sum_S w_i (theta_i + h_i) (replaced below for abc/abcu)
        S = self.message_pool["sampled_clients"]
        N = self.args.num_clients
        msgs = [self.message_pool[f"client_{i}"] for i in S]
        with torch.no_grad():
            if MODEL != "openfgl":
                assert len(S) == N, "every client sampled: (1/N) sum over all h_i"
                tot = sum(m["num_samples"] for m in msgs)
                wts = [m["num_samples"] / tot if MODEL == "weighted" else 1.0 / len(S) for m in msgs]
                for it, gp in enumerate(self.task.model.parameters()):
                    theta = sum(wt * m["weight"][it].detach() for wt, m in zip(wts, msgs))
                    hbar = sum(m["local_drift"][it] for m in msgs) / N
                    gp.data.copy_(theta + hbar)
            for it in range(len(self.global_control)):
                self.global_control[it] = self.global_control[it] + sum(m["delta_control"][it] for m in msgs) / N
    fs.FedDCServer.execute = sexecute

    def ssend(self):
        self.message_pool["server"] = {
            "weight": list(self.task.model.parameters()),
            "avg_update": self.avg_update,
            "global_control": self.global_control,
        }
    fs.FedDCServer.send_message = ssend
"""

SCRIPT = Y.OPENFGL_RUN.replace("import sys\n", "import sys\n" + PATCH, 1)


def run(python: str, variant: str, seed: int) -> float:
    argv = Y.openfgl_argv(
        python, SCRIPT, ROOT, "feddc", "global_model_on_local_data", seed, Y.JOB["dataset"]
    )
    env = {
        **os.environ,
        "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1",
        "PYTHONPATH": str(ROOT / "shims"),
        "FEDDC_VARIANT": variant,
    }
    res = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    (HERE / "logs").mkdir(exist_ok=True)
    (HERE / "logs" / f"{variant}_seed{seed}.log").write_text(
        res.stdout + "\n--- stderr\n" + res.stderr
    )
    found = Y.BEST.findall(res.stdout)
    if res.returncode != 0 or not found:
        raise RuntimeError(
            f"{variant} seed {seed} failed (rc {res.returncode}): {res.stderr[-3000:]}"
        )
    return 100 * float(found[-1][2])


def main() -> None:
    global HERE, ROOT, RESULTS
    ap = argparse.ArgumentParser()
    ap.add_argument("--openfgl-python", default=str(Path.home() / "venvs/openfgl/bin/python"))
    ap.add_argument("--openfgl-root", default=str(Path.home() / "openfgl-data"))
    ap.add_argument("--variants", default="openfgl,a,ab,abc")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--work", default=str(HERE), help="the exported partition, logs and results")
    a = ap.parse_args()
    HERE = Path(a.work).expanduser()
    ROOT, RESULTS = HERE / "root", HERE / "results.jsonl"
    if not ROOT.exists():
        ROOT.mkdir(parents=True)
        Y.export_partition(ROOT, Path(a.openfgl_root))
    for v in a.variants.split(","):
        accs = []
        for s in map(int, a.seeds.split(",")):
            t0 = time.time()
            acc = run(a.openfgl_python, v, s)
            accs.append(acc)
            with open(RESULTS, "a") as fh:
                fh.write(
                    json.dumps(
                        {"variant": v, "seed": s, "test_acc": acc, "s": round(time.time() - t0)}
                    )
                    + "\n"
                )
            print(f"{v} seed {s}: {acc:.2f} ({time.time() - t0:.0f} s)", flush=True)
        if len(accs) > 1:
            print(f"{v}: {statistics.mean(accs):.2f} ± {statistics.stdev(accs):.2f}", flush=True)


if __name__ == "__main__":
    main()
