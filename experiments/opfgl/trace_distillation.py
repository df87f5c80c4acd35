"""Trace the server-side distillation of DENSE or Co-Boost: the probes of the pool every few
epochs, on the models the clients of an O-pFGL Table 1/6 run upload.

Runs the method in-process with Table 1/6's settings (10 clients, GCN, 100 local epochs,
O-pFGL's splits), replaces the strategy for this process with one that records, after every
``--every``-th distillation epoch, :meth:`~fgl_flower.strategies.dense.DENSEStrategy.pool_probes`
of the whole pool (``dense.agreement``, ``dense.pool-fit``, ``dense.live-units``, Co-Boost's)
and of its newest quarter, and the student's weight norm; then stops (no fine-tuning or
evaluation). One JSON line per traced epoch. ``--set`` overrides run options
(``dense.adv=0``, ``dense.epochs=50``); ``--clip-student N`` clips the student's gradients
to norm N, a diagnostic that DENSE has no option for (Co-Boost clips at 10).

    python experiments/opfgl/trace_distillation.py --method dense --dataset CiteSeer \\
        --partition metis-plus --seed 0 --set dense.epochs=50 --set dense.adv=0

docs/methods/dense.md and docs/methods/coboost.md quote its output.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile

import torch

from fgl_flower import api
from fgl_flower.methods import METHODS, register_method
from fgl_flower.registry import import_object

#: O-pFGL Table 1/6's settings (experiments/opfgl/table1_6_oneshot_fl.toml).
TABLE = {
    "clients": 10,
    "rounds": 1,
    "model": "gcn",
    "split": "0.2,0.4,0.4",
    "split_mode": "stratified",
    "split_seed": 42,
    "partition_seed": 42,
    "dropout": 0.0,
    "hidden": 64,
    "eval_weight": "client-size",
    "local_epochs": 100,
}


class _Distilled(Exception):
    """Raised after the distillation: the trace is complete."""


def traced(base: type, every: int, clip: float | None) -> type:
    """``base`` (a DENSE-family strategy) printing the pool's probes every ``every`` epochs."""

    class Traced(base):
        def end_epoch(self, epoch, student, pool):
            super().end_epoch(epoch, student, pool)
            if (epoch + 1) % every and epoch + 1 != self.opts.epochs:
                return
            classes = pool[0]["clients"].size(-1)
            was_training = student.training
            student.eval()
            with torch.no_grad():
                probes = self.pool_probes(pool, student, float("nan"), classes)
                newest = self.pool_probes(
                    pool[-max(1, len(pool) // 4) :], student, float("nan"), classes
                )
                norm = float(torch.cat([p.flatten() for p in student.parameters()]).norm())
            student.train(was_training)
            probes.pop("dense.teacher-fit")  # the last synthesis's, not known here
            print(
                json.dumps(
                    {
                        "epoch": epoch + 1,
                        **{k: round(v, 4) for k, v in probes.items()},
                        "agreement-newest-quarter": round(newest["dense.agreement"], 4),
                        "student-weight-norm": round(norm, 2),
                    }
                ),
                flush=True,
            )

        def clip_student(self, student):
            if clip is None:
                return super().clip_student(student)
            torch.nn.utils.clip_grad_norm_(student.parameters(), max_norm=clip)

        def distill(self, server_round, teachers, student, shape):
            super().distill(server_round, teachers, student, shape)
            raise _Distilled

    return Traced


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--method", choices=("dense", "coboost"), default="dense")
    ap.add_argument("--dataset", default="CiteSeer")
    ap.add_argument("--partition", default="louvain-plus")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--every", type=int, default=5, help="trace every N distillation epochs")
    ap.add_argument(
        "--clip-student", type=float, default=None, help="clip the student's gradients to this norm"
    )
    ap.add_argument(
        "--set", action="append", default=[], help="run option key=value (e.g. dense.adv=0)"
    )
    args = ap.parse_args()
    spec = METHODS.get(args.method)
    register_method(
        dataclasses.replace(
            spec, strategy=traced(import_object(spec.strategy), args.every, args.clip_student)
        ),
        replace_existing=True,
    )
    options = {
        **TABLE,
        f"{args.method}.finetune-epochs": 0,
        **dict(kv.split("=", 1) for kv in args.set),
    }
    with tempfile.TemporaryDirectory() as out:
        try:
            api.run(
                args.method,
                dataset=args.dataset,
                partition=args.partition,
                seed=args.seed,
                out=out,
                overwrite=True,
                progress=False,
                **options,
            )
        except _Distilled:
            pass


if __name__ == "__main__":
    main()
