"""The ``fgl`` command line.

``fgl run``            run a method with ``flwr run`` (Ray simulation), then print a summary
``fgl deploy-local``   the same on a local SuperLink + N SuperNodes (real deployment path)
``fgl datasets``       list datasets and whether their files are present offline
``fgl methods``        list registered methods
``fgl new-method NAME`` write a runnable method from a template (spec, server, client, test, page)
``fgl config``         every run-config key with its default and meaning
``fgl partition-stats`` per-client nodes, edges, class counts and homophily (mean ± std over clients)
``fgl bench``          run an experiment file (rows x seeds) and write its results table
``fgl tune``           tune a method's hyperparameters (Optuna) and rerun the best over seeds

Every config problem is reported as one line before anything starts (exit code 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fgl_flower.bench import OUTCOME_NEUTRAL_KEYS
from fgl_flower.errors import ConfigError, FGLError
from fgl_flower.launch import OWN_FEDERATION_CLIENTS, prepare, resolve_num_clients

Scalar = int | float | bool | str

#: CLI flags that map to run-config keys.
FLAG_KEYS = {
    "method": "method",
    "dataset": "dataset",
    "task": "task",
    "partition": "partition",
    "clients": "num-clients",
    "rounds": "num-rounds",
    "seed": "seed",
    "model": "model",
    "data_root": "data-root",
    "device": "device",
    "cpus_per_client": "cpus-per-client",
    "gpus_per_client": "gpus-per-client",
    "fraction_train": "fraction-train",
}


def build_run_config(args: argparse.Namespace) -> dict[str, Scalar]:
    """App defaults, then CLI flags, then ``--set key=value`` overrides
    (:func:`fgl_flower.launch.flat_config`)."""
    from fgl_flower.launch import flat_config

    return flat_config(run_overrides(args), out=args.out, where="--set ")


def run_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The run-config keys the flags and ``--set`` give (``--secagg`` and ``--dp-*`` as the
    method's options)."""
    overrides: dict[str, Any] = {}
    for attr, key in FLAG_KEYS.items():
        value = getattr(args, attr, None)
        if value is not None:
            overrides[key] = str(value)
    for item in args.set or []:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: use key=value.")
        key, text = item.split("=", 1)
        overrides[key.strip()] = text.strip()
    secagg = getattr(args, "secagg", False)
    dp = getattr(args, "dp_epsilon", None) is not None or getattr(args, "dp_clip", None) is not None
    if secagg or dp:
        from fgl_flower.app_defaults import load_app_defaults

        method = str(overrides.get("method") or load_app_defaults()["method"])
        if secagg:
            overrides.update(secagg_override(method))
        if dp:
            overrides.update(dp_override(method, args.dp_epsilon, args.dp_clip))
    return overrides


def method_option(method: str, option: str, flag: str, what: str) -> str:
    """``<method>.<option>``; a method without the option stops with those that have it."""
    from fgl_flower.methods import METHODS

    if method in METHODS and option in METHODS.get(method).options:
        return f"{method}.{option}"
    have = sorted(m for m, spec in METHODS.items() if option in spec.options)
    raise ConfigError(
        f"{flag}: method {method!r} has no {what} yet; it is available for: {', '.join(have)}."
    )


def secagg_override(method: str) -> dict[str, str]:
    """``--secagg``: the method's ``<method>.secure-aggregation = true``."""
    from fgl_flower.secagg.protocol import SECURE_AGGREGATION

    return {method_option(method, SECURE_AGGREGATION, "--secagg", "secure aggregation"): "true"}


def dp_override(method: str, epsilon: float | None, clip: float | None) -> dict[str, str]:
    """``--dp-epsilon E --dp-clip C``: the method's ``dp-epsilon`` and ``dp-clip``, and
    ``agg-weight = uniform`` (DP averages with equal weights); both flags are needed."""
    from fgl_flower.dp.options import DP_CLIP, DP_EPSILON

    if epsilon is None or clip is None:
        raise ConfigError(
            "Differential privacy needs both --dp-epsilon (the budget of the whole run) and "
            "--dp-clip (the L2 bound of a client's update; the train metric dp.update-norm "
            "of a run shows the updates' size)."
        )
    if not epsilon > 0:
        raise ConfigError(
            f"--dp-epsilon {epsilon:g}: the budget must be > 0 (for clipping without noise "
            f"set {method}.dp-clip alone)."
        )
    key = method_option(method, DP_CLIP, "--dp-epsilon", "differential privacy")
    return {key: str(clip), key.replace(DP_CLIP, DP_EPSILON): str(epsilon), "agg-weight": "uniform"}


def print_summary(summary: Mapping[str, Any], out: Path) -> None:
    from fgl_flower.datasets.files import dataset_label
    from fgl_flower.results import HEADLINES, headline

    rows = [("final", summary.get("final", {})), ("best-val", summary.get("best_val", {}))]
    print()
    print(
        f"{summary.get('method')} on {dataset_label(str(summary.get('dataset')))} "
        f"({summary.get('partition')}, "
        f"{summary.get('num_clients')} clients, seed {summary.get('seed')})"
    )
    metric = headline(rows[0][1] or rows[1][1])
    _, second, scale = HEADLINES[metric]
    minority = any("test_minority_acc" in r for _, r in rows)
    print(
        f"{'':10}{'round':>6}{'val ' + metric:>9}{'test ' + metric:>10}{'test ' + second:>9}"
        f"{'worst':>8}" + (f"{'minority':>10}" if minority else "")
    )
    for name, r in rows:
        if r:
            print(
                f"{name:10}{r['round']:>6}{scale * r.get(f'val_{metric}', 0):>9.2f}"
                f"{scale * r.get(f'test_{metric}', 0):>10.2f}"
                f"{scale * r.get(f'test_{second}', 0):>9.2f}"
                f"{scale * r.get(f'test_{metric}_worst', 0):>8.2f}"
                + (f"{100 * r.get('test_minority_acc', 0):>10.2f}" if minority else "")
            )
    if rows[1][1]:
        print(f"best-val round selected by {rows[1][1].get('selected_by', 'val_acc')}")
    print(
        f"time {summary.get('total_time_s', 0):.1f}s in rounds; "
        f"up {summary.get('bytes_up_total', 0) / 2**20:.2f} MiB, "
        f"down {summary.get('bytes_down_total', 0) / 2**20:.2f} MiB"
    )
    if dp := summary.get("dp"):
        spent = f"epsilon {dp['epsilon']:.2f}" if "epsilon" in dp else "no noise (epsilon infinite)"
        print(
            f"differential privacy: {spent} at delta {dp['delta']:g} (clip {dp['clip']:g}, "
            f"noise multiplier {dp['noise_multiplier']:.3f})"
        )
    for pid, failed in summary.get("failures", {}).items():
        refused = f", refused in {failed['refused']}" if failed["refused"] else ""
        print(
            f"client {pid} failed in {failed['rounds']} round(s){refused}; last: {failed['last']}"
        )
    for probe, clients in summary.get("probes_dead", {}).items():
        print(
            f"probe {probe} dead at the end on {', '.join(map(str, clients))}: the method's "
            "mechanism is not working there (the round log says why)"
        )
    print(f"results: {out}")


def resume_config(args: argparse.Namespace) -> dict[str, Scalar]:
    """The flat config of the run in ``--resume DIR`` (from its server checkpoint), set to
    resume; config flags are refused, the run keeps the config it was started with."""
    from fgl_flower.checkpoint import Checkpointer, run_checkpoint_dir
    from fgl_flower.protocol import CONFIG

    folder = Path(args.resume).expanduser().resolve()
    given = [f"--{a.replace('_', '-')}" for a in FLAG_KEYS if getattr(args, a, None) is not None]
    given += [f for f, v in (("--set", args.set), ("--out", args.out)) if v]
    if given:
        raise ConfigError(
            f"--resume continues {folder} with the config it was started with; "
            f"drop {', '.join(given)}."
        )
    if not (folder / "config.json").is_file():
        raise ConfigError(f"--resume {folder}: not a run folder (no config.json).")
    records = Checkpointer(run_checkpoint_dir(folder), 1).load()
    flat = dict(json.loads(str(records[CONFIG]["json"]))["config"])
    flat.update({"resume": True, "out-dir": str(folder)})
    return flat


def _launch(args: argparse.Namespace, deploy: bool) -> int:
    from fgl_flower.launch import execute, validate

    flat = resume_config(args) if args.resume else build_run_config(args)
    engine = (
        "deployment"
        if deploy
        else "inprocess"
        if getattr(args, "inprocess", False)
        else "simulation"
    )
    gpus = [g.strip() for g in (getattr(args, "gpus", None) or "").split(",") if g.strip()]
    cfg = validate(
        flat, engine, gpus, resume=bool(args.resume), overwrite=getattr(args, "overwrite", False)
    )
    names = {
        "deployment": "local deployment",
        "inprocess": "in-process grid",
        "simulation": "simulation",
    }
    out = Path(str(flat["out-dir"]))
    print(
        f"Running {cfg.method} on {cfg.dataset} with {cfg.num_clients} clients "
        f"({names[engine]}); results in {out}",
        flush=True,
    )
    if deploy and not getattr(args, "secure", False):
        print(
            "Note: this local deployment runs without TLS and without SuperNode authentication "
            "(plain gRPC on this machine, any process may join as a SuperNode); add --secure for "
            "both.",
            flush=True,
        )
    execute(
        cfg,
        engine,
        gpus=gpus,
        secure=getattr(args, "secure", False),
        ray_address=getattr(args, "ray_address", None),
    )
    print_summary(json.loads((out / "summary.json").read_text()), out)
    return 0


def prepare_command(argv: Sequence[str], out: str | Path, engine: str = "simulation"):
    """Check and cache what ``fgl run argv`` would before its first round, without running it
    (its ``--out`` replaced by ``out``), so that benchmarks time runs with warm caches.
    Returns the prepared config (:func:`fgl_flower.launch.prepare`)."""
    args = parser().parse_args(["run", *argv])
    args.out = str(out)
    return prepare(build_run_config(args), engine)


def cmd_run(args: argparse.Namespace) -> int:
    return _launch(args, deploy=False)


def cmd_deploy_local(args: argparse.Namespace) -> int:
    return _launch(args, deploy=True)


def cmd_tune(args: argparse.Namespace) -> int:
    """``fgl tune``: a study of the run the flags give (:func:`fgl_flower.tuning.run_tune`)."""
    from fgl_flower.tuning import StudySpec, run_tune

    overrides = run_overrides(args)
    space: dict[str, str] = {}
    for item in args.space or []:
        key, eq, text = item.partition("=")
        if not eq:
            raise ConfigError(f"--space {item!r}: use KEY=RANGE (e.g. lr=0.001..0.3:log).")
        space[key.strip()] = text.strip()
    seeds: tuple[int, ...] = ()
    if args.final_seeds != "none":
        try:
            seeds = tuple(int(s) for s in args.final_seeds.split(",") if s.strip())
        except ValueError:
            raise ConfigError(
                f"--final-seeds {args.final_seeds!r}: give seeds like 0,1,2, or none."
            ) from None
    spec = StudySpec.of(
        overrides,
        space,
        trials=args.trials,
        trial_rounds=args.trial_rounds,
        metric=args.metric or "",
        pruner=args.pruner,
        sampler_seed=args.sampler_seed,
    )
    result = run_tune(
        spec,
        args.study,
        jobs=args.jobs,
        engine="inprocess" if args.inprocess else "simulation",
        final_seeds=seeds,
        overwrite=args.overwrite,
        storage=args.storage,
    )
    print(result)
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    from fgl_flower.datasets import DATASET_GROUPS, DATASETS, dataset_status, resolve_data_root

    root = resolve_data_root(args.data_root)
    print(f"data root: {root}")
    print(f"{'dataset':18}{'task':7}{'offline':9}folder")
    for name, entry in DATASETS.items():
        present, folder = dataset_status(name, root)
        print(f"{name:18}{entry.task:7}{'yes' if present else 'no':9}{folder}")
    for name, group in DATASET_GROUPS.items():
        present = all(dataset_status(m, root)[0] for m in group.members)
        print(
            f"{name:18}{group.task:7}{'yes' if present else 'no':9}group of {', '.join(group.members)} "
            "(partition=per-dataset)"
        )
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    from fgl_flower.methods import METHODS
    from fgl_flower.tasks import TASKS

    for name, task in TASKS.items():
        runs = sorted(m for m, spec in METHODS.items() if name in spec.tasks)
        print(f"{name:18}{task.level:7}select-by {task.select_by:9} {task.summary}")
        print(f"{'':18}methods: {', '.join(runs)}")
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    from fgl_flower.methods import METHODS

    width = max(len(name) for name in METHODS) + 2
    if args.spaces:  # what `fgl tune` varies of each method
        from fgl_flower.tuning import SHARED_SPACE
        from fgl_flower.tuning.space import method_space

        print("every method: " + ", ".join(f"{k}={v}" for k, v in SHARED_SPACE.items()))
        for name, spec in METHODS.items():
            own = (
                "(no declared space)"
                if spec.space is None
                else ", ".join(f"{k}={v}" for k, v in method_space(spec).items()) or "(shared only)"
            )
            print(f"{name:{width}}{own}")
        return 0
    tasks = max(len("/".join(spec.tasks)) for _, spec in METHODS.items()) + 2
    for name, spec in METHODS.items():
        opts = ", ".join(f"{name}.{k}={v}" for k, v in spec.options.items())
        print(
            f"{name:{width}}{'/'.join(spec.tasks):{tasks}}{spec.summary}"
            + (f"  [{opts}]" if opts else "")
        )
    return 0


def cmd_new_method(args: argparse.Namespace) -> int:
    from fgl_flower.authoring import new_method

    written = new_method(args.name)
    root = written[0].parents[2]
    print(f"wrote {args.name}, a FedAvg variant with a server learning rate, to edit:")
    for path in written:
        print(f"  {path.relative_to(root)}")
    print(
        "and regenerated pyproject.toml's app config and the methods tables. Next:\n"
        f"  pytest tests/methods/test_{args.name}.py\n"
        f"  fgl run --inprocess --method {args.name} --rounds 3"
    )
    return 0


def cmd_partition_stats(args: argparse.Namespace) -> int:
    """Per-client statistics, then their mean ± (population) std over the clients."""
    from fgl_flower.datasets import partition_stats, validate_data_config
    from fgl_flower.parse import parse_run_config

    args.out = None
    cfg = parse_run_config(build_run_config(args))
    validate_data_config(cfg.data_config())
    stats = partition_stats(resolve_num_clients(cfg).data_config())
    if args.json:
        print(json.dumps(stats, indent=2))
        return 0
    print(stats_table(stats))
    return 0


def stats_table(stats: Sequence[Mapping[str, Any]]) -> str:
    """``partition_stats`` as text: one row per client, then ``mean ± std`` over the clients of
    every numeric column (population std, as Table 7 of FedHERO: spread over the clients)."""
    import statistics

    keys = [k for k in (stats[0] if stats else {}) if k not in ("client", "class_counts")]
    numeric = [k for k in keys if all(isinstance(s[k], (int, float)) for s in stats)]

    def cell(v: Any) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    def spread(k: str) -> str:
        values = [float(s[k]) for s in stats]
        fmt = ".3f" if any(isinstance(s[k], float) for s in stats) else ".1f"
        return f"{statistics.fmean(values):{fmt}} ± {statistics.pstdev(values):{fmt}}"

    rows = [
        [str(s["client"]), *(cell(s[k]) for k in keys), str(s.get("class_counts", ""))]
        for s in stats
    ]
    rows.append(["mean ± std", *(spread(k) if k in numeric else "" for k in keys), ""])
    header = ["client", *keys, "class counts"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    return "\n".join(
        ("  ".join(c.rjust(w) for c, w in zip(r, widths)) + "  " + r[-1]).rstrip()
        for r in [header, *rows]
    )


def cmd_bench(args: argparse.Namespace) -> int:
    from fgl_flower.bench import (
        check_run_folders,
        load_experiment,
        run_experiment,
        select_rows,
        write_docs,
    )

    if args.index and not args.files:
        return _write_index()
    if not args.files:
        raise ConfigError(
            "fgl bench: give experiment files (e.g. experiments/platform/results.toml), or "
            "--index to rewrite the results index."
        )
    exps = [load_experiment(f) for f in args.files]  # all validated before any run
    check_run_folders(exps)
    seeds = None
    if args.seeds:
        try:
            seeds = [int(s) for s in args.seeds.split(",")]
        except ValueError:
            raise ConfigError(f"--seeds {args.seeds!r}: give seeds like 0,1") from None
        for exp in exps:
            if not set(seeds) <= set(exp.seeds):
                raise ConfigError(
                    f"--seeds {args.seeds}: {exp.title!r} runs seeds {exp.seeds}; "
                    "pick a subset (its table averages those)."
                )
    if args.jobs < 1:
        raise ConfigError(f"--jobs {args.jobs}: give the number of runs at a time, 1 or more.")
    if args.time_limit is not None and args.time_limit <= 0:
        raise ConfigError(
            f"--time-limit {args.time_limit:g}: give the seconds the benchmark may "
            "run, more than 0."
        )
    neutral = {}
    for item in args.set:
        key, eq, value = item.partition("=")
        if not eq or key not in OUTCOME_NEUTRAL_KEYS:
            raise ConfigError(
                f"fgl bench --set {item!r}: only keys that change no number may be set "
                f"here ({', '.join(OUTCOME_NEUTRAL_KEYS)}), as KEY=VALUE; put others "
                "in the experiment file, so that its table shows them."
            )
        neutral[key] = value
    rows = [r for r in args.rows.split(",") if r] if args.rows else None
    if rows is not None and not any(select_rows(exp, rows, exp.rows + exp.pending) for exp in exps):
        slugs = ", ".join(row.slug for exp in exps for row in exp.rows + exp.pending)
        raise ConfigError(
            f"--rows {args.rows}: no row's run folder matches it. Run folders: {slugs}"
        )
    deadline = None if args.time_limit is None else time.monotonic() + args.time_limit
    for i, exp in enumerate(exps):
        if not args.doc_only:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            exps[i] = run_experiment(  # tuned rows: with their studies' values
                exp,
                dry_run=args.dry_run,
                seeds=seeds,
                rows=rows,
                jobs=args.jobs,
                time_limit=left,
                neutral=neutral,
            )
        if not args.dry_run:  # rewritten after each file, so finished tables appear early
            written = write_docs(exps)
    if not args.dry_run:
        print("wrote " + ", ".join(map(str, written)))
        if args.index:
            return _write_index()
    return 0


def _write_index() -> int:
    from fgl_flower.bench.claims import write_index

    written = write_index(Path.cwd())
    print("wrote " + ", ".join(str(p.relative_to(Path.cwd())) for p in written))
    return 0


#: ``--partition`` choices (kept equal to the partitioner registry by a test; listing the
#: registry here would import it, and torch, for every command).
PARTITIONS = (
    "louvain",
    "louvain-topk",
    "louvain-plus",
    "louvain-merge",
    "metis",
    "metis-plus",
    "random",
    "dirichlet",
    "files",
    "assign",
    "per-dataset",
)


def _add_run_args(p: argparse.ArgumentParser) -> None:
    from fgl_flower.app_defaults import load_app_defaults
    from fgl_flower.models.registry import MODELS

    d = load_app_defaults()
    p.add_argument("--method", help=f"method name (see `fgl methods`; default {d['method']})")
    p.add_argument(
        "--dataset",
        help=f"dataset name or group (see `fgl datasets`), or a .pt/.npz/.csv file "
        f"(docs/own-data.md; default {d['dataset']})",
    )
    p.add_argument(
        "--task",
        help="what to learn: auto (the dataset's own; default) | node | graph | link | "
        "graph-regression (see `fgl tasks`)",
    )
    p.add_argument(
        "--partition",
        help=f"partitioner: {', '.join(PARTITIONS)}, or a .npy/.csv file of one client id "
        f"per node (graph) (default {d['partition']})",
    )
    p.add_argument(
        "--clients",
        type=int,
        help=f"number of clients (= SuperNodes; default "
        f"{OWN_FEDERATION_CLIENTS}); 0: the partition's natural count (louvain-merge, dataset groups)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        help=f"communication rounds (default {d['num-rounds']}; one-shot methods: 1)",
    )
    p.add_argument(
        "--seed", type=int, help=f"run seed (model init, training, splits; default {d['seed']})"
    )
    p.add_argument("--model", help=f"backbone: {', '.join(MODELS)} (default {d['model']})")
    p.add_argument("--data-root", help="folder with the raw datasets (default $FGL_DATA_ROOT)")
    p.add_argument(
        "--device", help=f"auto (GPU if visible), cpu, cuda or cuda:N (default {d['device']})"
    )
    p.add_argument(
        "--cpus-per-client",
        type=int,
        help="torch threads per client (simulation: "
        f"also the CPUs Ray reserves per client; default {d['cpus-per-client']})",
    )
    p.add_argument(
        "--fraction-train",
        type=float,
        help="share of the clients sampled to train "
        f"each round (default {d['fraction-train']}: all)",
    )
    p.add_argument(
        "--secagg",
        action="store_true",
        help="sum what the clients send through "
        "SecAgg+, so the server learns only the sum (the method's secure-aggregation "
        "option; methods that have it: FedAvg, FedProx, FedStar, FedDense, O-pFGL)",
    )
    p.add_argument(
        "--dp-epsilon",
        type=float,
        help="client-level differential privacy: the "
        "(epsilon, delta) budget of the whole run, with --dp-clip; sets agg-weight=uniform "
        "(the method's dp-* options; methods that have them: FedAvg, FedProx, FedStar, "
        "FedDense, FedSpray)",
    )
    p.add_argument(
        "--dp-clip",
        type=float,
        help="with --dp-epsilon: the L2 norm each client's update is clipped to",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override any run-config key (all listed by `fgl config`), e.g. "
        "--set lr=0.05 --set fedprox.mu=0.1",
    )


def _add_tune_args(p: argparse.ArgumentParser) -> None:
    from fgl_flower.tuning import PRUNERS, SHARED_SPACE

    p.add_argument("--trials", type=int, default=20, help="trials to finish (default 20)")
    p.add_argument(
        "--trial-rounds",
        type=int,
        help="rounds of each trial (default: the run's --rounds; the reruns use --rounds)",
    )
    p.add_argument(
        "--space",
        action="append",
        metavar="KEY=RANGE",
        help="vary KEY over low..high (':log' for a log scale) or a,b,c; 'none' leaves a "
        "key out. Added to the shared keys ("
        + ", ".join(f"{k}={v}" for k, v in SHARED_SPACE.items())
        + ") and the method's own space (`fgl methods --spaces`)",
    )
    p.add_argument(
        "--metric",
        help="the validation metric to maximise (a loss or error: minimise; default the "
        "run's select-by); a test metric is refused",
    )
    p.add_argument(
        "--pruner",
        choices=PRUNERS,
        default="median",
        help="stop weak trials early from their per-round validation values: median (below "
        "the median of earlier trials at that round), halving (successive halving) or none "
        "(default median)",
    )
    p.add_argument("--sampler-seed", type=int, default=0, help="seed of the TPE sampler")
    p.add_argument(
        "--final-seeds",
        default="0,1,2",
        help="rerun the best and the untuned configuration over these seeds (default 0,1,2; "
        "none: skip)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="trials at a time (default 1); more than one: each trial is its own `fgl run` "
        "process (set OMP_NUM_THREADS to cores / jobs)",
    )
    p.add_argument(
        "--inprocess",
        action="store_true",
        help="the trials run on the in-process grid (with --jobs 1: in this process) instead "
        "of Flower's simulation engine",
    )
    p.add_argument(
        "--study",
        help="the study folder (default ./studies/<method>-<dataset>-<partition>-c<clients>); "
        "the same command resumes the study in it",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="start over in a --study folder that holds another study",
    )
    p.add_argument(
        "--storage",
        metavar="URL",
        help="an Optuna storage URL for the study (e.g. a database several machines "
        "share) instead of study.db in the study folder",
    )


def cmd_config(args: argparse.Namespace) -> int:
    """Every run-config key with its default and meaning (from pyproject.toml); the methods
    come from the registry (the config layer does not import it)."""
    from fgl_flower.app_defaults import describe_keys
    from fgl_flower.methods import METHODS

    rows = [
        (k, d, f"{m} [{' | '.join(METHODS)}]" if k == "method" else m)
        for k, d, m in describe_keys()
    ]
    if args.json:
        print(json.dumps([{"key": k, "default": d, "meaning": m} for k, d, m in rows], indent=2))
        return 0
    width = max(len(k) for k, _, _ in rows)
    for key, default, meaning in rows:
        print(f"{key:<{width}}  {json.dumps(default):<12}  {meaning}")
    print('\nSet any key with `fgl run --set key=value` or `flwr run . --run-config "key=value"`.')
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    def v(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return f"fgl-flower {v('fgl-flower')} (Flower {v('flwr')}, torch {v('torch')})"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="fgl", description="Federated graph learning on Flower.")
    ap.add_argument("--version", action="version", version=_version())
    sub = ap.add_subparsers(dest="command", required=True)
    for name, fn, helptext in (
        ("run", cmd_run, "run a method in Flower's simulation engine (flwr run)"),
        ("deploy-local", cmd_deploy_local, "run on a local SuperLink and N SuperNodes"),
    ):
        p = sub.add_parser(name, help=helptext)
        _add_run_args(p)
        p.add_argument("--out", help="output folder (default: ./runs/<name>)")
        p.add_argument(
            "--resume",
            metavar="DIR",
            help="continue the run in DIR (crashed or "
            "stopped) from its last checkpoint, with the config it was started with",
        )
        p.add_argument(
            "--overwrite",
            action="store_true",
            help="reuse an --out folder that holds an earlier run (its results are replaced)",
        )
        if name == "run":
            p.add_argument(
                "--inprocess",
                action="store_true",
                help="run the app's clients sequentially in this process instead of "
                "Flower's simulation engine (same numbers, far less overhead for "
                "small graphs)",
            )
            p.add_argument(
                "--gpus-per-client",
                type=float,
                help="GPUs Ray reserves per simulated client; fractions share a GPU "
                "(0.25: four clients per GPU; default 0)",
            )
            p.add_argument(
                "--ray-address",
                help="attach the simulation to a running Ray cluster "
                "(e.g. 'auto' or HEAD_IP:6379) instead of starting one",
            )
        else:
            p.add_argument(
                "--gpus",
                help="GPU ids for the SuperNodes, e.g. 0,1: SuperNode i sees "
                "only GPU ids[i mod n] (CUDA_VISIBLE_DEVICES)",
            )
            p.add_argument(
                "--secure",
                action="store_true",
                help="TLS between SuperLink and "
                "SuperNodes (certificates made for this run) and SuperNode "
                "authentication (only the run's registered keys are accepted)",
            )
        p.set_defaults(fn=fn)
    p = sub.add_parser(
        "tune",
        help="tune a method's hyperparameters on a validation metric (Optuna), then rerun "
        "the best over seeds beside the untuned run",
    )
    _add_run_args(p)
    _add_tune_args(p)
    p.set_defaults(fn=cmd_tune)
    p = sub.add_parser("datasets", help="list datasets and offline availability")
    p.add_argument("--data-root")
    p.set_defaults(fn=cmd_datasets)
    p = sub.add_parser(
        "new-method", help="write a runnable method from a template (a source checkout)"
    )
    p.add_argument("name", help="the new method's name: lowercase letters and digits")
    p.set_defaults(fn=cmd_new_method)
    p = sub.add_parser("methods", help="list methods")
    p.add_argument("--spaces", action="store_true", help="what `fgl tune` varies of each method")
    p.set_defaults(fn=cmd_methods)
    p = sub.add_parser("tasks", help="list tasks (what a run learns) and the methods that run each")
    p.set_defaults(fn=cmd_tasks)
    p = sub.add_parser("config", help="list every run-config key with its default and meaning")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(fn=cmd_config)
    p = sub.add_parser("bench", help="run an experiment file's rows and seeds, write its table")
    p.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="experiment TOML(s), e.g. experiments/platform/results.toml; files "
        "with the same `doc` are written as sections of one document",
    )
    p.add_argument(
        "--index",
        action="store_true",
        help="(also) rewrite the results index docs/results/README.md and its figures from "
        "experiments/*/claims.toml and the run records (run from the repository root)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the commands only")
    p.add_argument(
        "--doc-only", action="store_true", help="only rewrite the table from finished runs"
    )
    p.add_argument(
        "--seeds",
        help="run only these of the file's seeds, e.g. 1,2 (to split a "
        "benchmark over several processes)",
    )
    p.add_argument(
        "--rows",
        help="run only rows whose run folder (dataset-partition-clients-"
        "method-model-overrides) matches one of these comma-separated shell patterns, "
        "e.g. '*fedavg*' or 'Cora-*'",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs at a time (default 1); each is its own `fgl run` process, so "
        "set OMP_NUM_THREADS (e.g. cores / jobs) and mind GPU memory",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        metavar="SECONDS",
        help="start no run after SECONDS and stop the runs still going then (a "
        "batch job's limit); the same command later resumes them from their last "
        "checkpoint (see --set checkpoint-every=N)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a run-config key that changes no number for these runs: "
        + ", ".join(OUTCOME_NEUTRAL_KEYS)
        + " (repeatable)",
    )
    p.set_defaults(fn=cmd_bench)
    p = sub.add_parser("partition-stats", help="per-client statistics of a partition")
    _add_run_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(fn=cmd_partition_stats)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    _plain_logs_unless_terminal()
    try:
        with warnings.catch_warnings():
            # deprecation notices of torch.jit, Ray and PyG: nothing a user of fgl can act on
            for module in ("torch", "ray", "torch_geometric", "flwr"):
                warnings.filterwarnings("ignore", category=DeprecationWarning, module=module)
            return args.fn(args)
    except FGLError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `fgl config | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _plain_logs_unless_terminal() -> None:
    """Flower's console log colours its level names; only a terminal shows colours, a pipe
    or file would get the escape codes."""
    from flwr.common.logger import update_console_handler

    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    update_console_handler(colored=tty)


if __name__ == "__main__":
    sys.exit(main())
