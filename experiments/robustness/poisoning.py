"""The poisoning benchmark: FedAvg's mean against each robust rule, with 1 or 2 of 10
clients sending scaled or sign-flipped updates (``fgl_flower.attacks``), beside the clean
run; best-validation and final test accuracy over seeds, in-process.

    FGL_DATA_ROOT=../shared/data python experiments/robustness/poisoning.py \\
        --dataset Cora --partition louvain --clients 10 --rounds 100 --seeds 0,1,2 \\
        --out runs/robustness --jobs 2
    python experiments/robustness/poisoning.py --render runs/robustness   # the page

Every run's summary numbers go to ``<out>/runs.jsonl`` (one line per run, appended as runs
finish; a run already there is not run again, so an interrupted benchmark resumes);
``--render`` writes ``docs/results/robustness.md`` and its records
``docs/results/robustness.runs.jsonl`` from it. The attackers are drawn per seed
(:func:`attackers_for`: the first one, or the first two, of a permutation of the partitions
seeded with the run seed), so that no rule is judged on one pair of clients that happens to
be unusual; the server assumes ``malicious-clients = 2`` in every run, clean or not (it
does not know how many attack). An attacker trains honestly and uploads
``w0 + scale * dw`` (scaled) or ``w0 - flip * dw`` (sign-flipped) from round 2 on (round 1's
start is built by each client, so the attack has no ``w0`` to measure from).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

RULES = ("mean", "median", "trimmed-mean", "krum", "multi-krum")
DOC = Path(__file__).resolve().parents[2] / "docs" / "results"


def attacks_of(scale: float, flip: float) -> dict[str, tuple[str, float, int]]:
    """``{column: (attack, factor, attackers)}``, the clean run first; the "absent" columns
    (the attackers never reply: what the others reach without them) for the mean only."""
    return {
        "clean": ("none", 0.0, 0),
        "1 client absent": ("absent", 0.0, 1),
        "2 clients absent": ("absent", 0.0, 2),
        f"scaled x{scale:g}, 1 client": ("scaled", scale, 1),
        f"scaled x{scale:g}, 2 clients": ("scaled", scale, 2),
        f"sign-flipped x{flip:g}, 1 client": ("sign-flipped", flip, 1),
        f"sign-flipped x{flip:g}, 2 clients": ("sign-flipped", flip, 2),
    }


def attackers_for(seed: int, clients: int, count: int) -> list[int]:
    """The ``count`` attacking partitions of a seed's runs (the one attacker is the first of
    the two)."""
    import numpy as np

    return sorted(int(p) for p in np.random.default_rng([seed, 81]).permutation(clients)[:count])


def one_run(job: dict) -> dict:
    """Run one (rule, attack, seed) in this process; its numbers."""
    from fgl_flower import attacks
    from fgl_flower.app_defaults import load_app_defaults
    from fgl_flower.client_app import make_app, release_clients
    from fgl_flower.inprocess import InProcessGrid
    from fgl_flower.parse import parse_run_config
    from fgl_flower.server_app import run

    flat = load_app_defaults()
    flat.update(
        {
            "method": "fedavg",
            "dataset": job["dataset"],
            "partition": job["partition"],
            "num-clients": job["clients"],
            "num-rounds": job["rounds"],
            "seed": job["seed"],
            "aggregation": job["rule"],
            "malicious-clients": 2,
            "checkpoint-every": 0,
            "progress": False,
            "accept-failures": 2,
            "out-dir": job["out"],
        }
    )
    mods = []
    chosen = attackers_for(job["seed"], job["clients"], job["attackers"])
    if job["attack"] == "absent":
        mods = [absent(chosen)]
    elif job["attackers"]:
        rewrite = (attacks.scaled if job["attack"] == "scaled" else attacks.sign_flipped)(
            job["factor"]
        )
        mods = [attacks.malicious(chosen, rewrite)]
    try:
        summary = run(
            InProcessGrid(flat, job["clients"], client_app=make_app(mods)), parse_run_config(flat)
        )
    finally:
        release_clients()
    kept = None
    if job["rule"] in ("krum", "multi-krum"):  # how often the attackers were kept
        recs = [
            json.loads(line)
            for line in (Path(job["out"]) / "rounds.jsonl").read_text().splitlines()
        ]
        kept = sum(any(p in chosen for p in r["aggregation"]["kept"]) for r in recs[1:]) / max(
            1, len(recs) - 1
        )
    return {
        **{
            k: job[k]
            for k in (
                "rule",
                "column",
                "attack",
                "factor",
                "attackers",
                "seed",
                "dataset",
                "partition",
                "clients",
                "rounds",
            )
        },
        "attacker_ids": chosen,
        "best_val_test_acc": summary["best_val"]["test_acc"],
        "best_val_round": summary["best_val"]["round"],
        "final_test_acc": summary["final"]["test_acc"],
        "attackers_kept": kept,
    }


def absent(partitions):
    """A client mod: ``partitions`` fail every train message (the run goes on without them)."""
    chosen = set(partitions)

    def mod(msg, context, call_next):
        if (
            msg.metadata.message_type == "train"
            and int(context.node_config["partition-id"]) in chosen
        ):
            raise RuntimeError("absent")
        return call_next(msg, context)

    return mod


def run_all(args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = out / "runs.jsonl"
    done = {(r["rule"], r["column"], r["seed"]) for r in _read(records)}
    jobs = [
        {
            "rule": rule,
            "column": column,
            "attack": attack,
            "factor": factor,
            "attackers": n,
            "seed": seed,
            "dataset": args.dataset,
            "partition": args.partition,
            "clients": args.clients,
            "rounds": args.rounds,
            "out": str(out / f"{rule}-{column.replace(' ', '').replace(',', '-')}-s{seed}"),
        }
        for seed in args.seeds
        for column, (attack, factor, n) in attacks_of(args.scale, args.flip).items()
        for rule in RULES
        if (rule, column, seed) not in done and (attack != "absent" or rule == "mean")
    ]
    print(f"{len(jobs)} runs to go ({len(done)} done) -> {records}", flush=True)
    with ProcessPoolExecutor(args.jobs) as pool:
        for result in pool.map(one_run, jobs):
            with records.open("a") as f:
                f.write(json.dumps(result) + "\n")
            print(
                f"{result['rule']:>12} {result['column']:<28} seed {result['seed']}: "
                f"best-val {100 * result['best_val_test_acc']:.2f}, final {100 * result['final_test_acc']:.2f}",
                flush=True,
            )


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def cell(values: list[float]) -> str:
    if not values:
        return "—"
    m = statistics.mean(values)
    return (
        f"{100 * m:.2f} ± {100 * statistics.stdev(values):.2f}"
        if len(values) > 1
        else f"{100 * m:.2f}"
    )


def paired(values: list[float], clean: list[float]) -> str:
    if not values:
        return "—"
    d = [a - b for a, b in zip(values, clean)]
    m = statistics.mean(d)
    if len(d) < 2:
        return f"{100 * m:+.2f}"
    from scipy.stats import t

    half = t.ppf(0.975, len(d) - 1) * statistics.stdev(d) / math.sqrt(len(d))
    return f"{100 * m:+.2f} [{100 * (m - half):+.2f}, {100 * (m + half):+.2f}]"


def render(folder: Path) -> None:
    runs = _read(folder / "runs.jsonl")
    if not runs:
        raise SystemExit(f"No runs in {folder / 'runs.jsonl'}.")
    first = runs[0]
    columns = list(dict.fromkeys(r["column"] for r in runs))
    seeds = sorted({r["seed"] for r in runs})
    by = {(r["rule"], r["column"], r["seed"]): r for r in runs}
    complete = all(
        (rule, c, s) in by
        for rule in RULES
        for c in columns
        for s in seeds
        if "absent" not in c or rule == "mean"
    )

    def values(rule, column, key):
        return [by[(rule, column, s)][key] for s in seeds if (rule, column, s) in by]

    lines = [
        "# Poisoning: FedAvg's mean against robust aggregation",
        "",
        f"{first['dataset']} ({first['partition']}, {first['clients']} clients), GCN, {first['rounds']} rounds, "
        f"seeds {', '.join(map(str, seeds))}; best-validation test accuracy (%), mean ± std over the seeds. "
        "The attacking partitions are drawn per seed ("
        + "; ".join(
            f"seed {s}: {attackers_for(s, first['clients'], 1)[0]} alone, "
            f"{' and '.join(map(str, attackers_for(s, first['clients'], 2)))} together"
            for s in seeds
        )
        + "); they train honestly and upload a scaled update `w0 + λ·dw` "
        "or a sign-flipped one `w0 − λ·dw` from round 2 on; the server assumes `malicious-clients = 2` in "
        'every run. The "absent" columns are FedAvg without those clients (they never reply): the most a '
        "defence can give back is what the others reach alone. Produced by "
        "`experiments/robustness/poisoning.py` (command below); each run's numbers are in "
        "`robustness.runs.jsonl`."
        + ("" if complete else " **Incomplete: some runs are missing.**"),
        "",
        "| rule | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for rule in RULES:
        lines.append(
            f"| {rule} | "
            + " | ".join(cell(values(rule, c, "best_val_test_acc")) for c in columns)
            + " |"
        )
    lines += [
        "",
        "Against the same rule's clean run (points, paired by seed, 95 % interval):",
        "",
        "| rule | " + " | ".join(columns[1:]) + " |",
        "|---|" + "---|" * (len(columns) - 1),
    ]
    for rule in RULES:
        clean = values(rule, "clean", "best_val_test_acc")
        lines.append(
            f"| {rule} | "
            + " | ".join(paired(values(rule, c, "best_val_test_acc"), clean) for c in columns[1:])
            + " |"
        )
    lines += [
        "",
        "Final round's test accuracy (%), mean ± std (a poisoned run's best-validation round can "
        "be an early one, before the attack has done its work):",
        "",
        "| rule | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for rule in RULES:
        lines.append(
            f"| {rule} | "
            + " | ".join(cell(values(rule, c, "final_test_acc")) for c in columns)
            + " |"
        )
    kept = [
        (c, statistics.mean(k))
        for c in columns[1:]
        if (k := [v for v in values("multi-krum", c, "attackers_kept") if v is not None])
    ]
    if kept:
        lines += [
            "",
            "Rounds in which Multi-Krum kept an attacker's upload: "
            + "; ".join(f"{c}: {100 * k:.0f} %" for c, k in kept)
            + ".",
        ]
    figure(columns, seeds, values, DOC / "robustness.png")
    lines[4:4] = ["![best-validation test accuracy per rule and attack](robustness.png)", ""]
    lines += [
        "",
        "Command:",
        "",
        "```bash",
        f"FGL_DATA_ROOT=../shared/data python experiments/robustness/poisoning.py --dataset {first['dataset']} "
        f"--partition {first['partition']} --clients {first['clients']} --rounds {first['rounds']} "
        f"--seeds {','.join(map(str, seeds))} --scale {_factor(runs, 'scaled')} "
        f"--flip {_factor(runs, 'sign-flipped')} --out runs/robustness --jobs 2",
        "python experiments/robustness/poisoning.py --render runs/robustness",
        "```",
        "",
    ]
    (DOC / "robustness.md").write_text("\n".join(lines))
    (DOC / "robustness.runs.jsonl").write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in sorted(
                runs, key=lambda r: (RULES.index(r["rule"]), columns.index(r["column"]), r["seed"])
            )
        )
    )
    print(f"wrote {DOC / 'robustness.md'}")


def figure(columns: list[str], seeds: list[int], values, path: Path) -> None:
    """Grouped bars: per attack, each rule's mean best-validation accuracy with the seeds'
    std; the clean mean's level as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    attacked = [c for c in columns if c != "clean" and "absent" not in c]
    fig, ax = plt.subplots(figsize=(10, 4.2))
    width = 0.8 / len(RULES)
    for i, rule in enumerate(RULES):
        means = [
            100 * statistics.mean(v)
            if (v := values(rule, c, "best_val_test_acc"))
            else float("nan")
            for c in ["clean", *attacked]
        ]
        stds = [
            100 * statistics.stdev(v) if len(v := values(rule, c, "best_val_test_acc")) > 1 else 0.0
            for c in ["clean", *attacked]
        ]
        ax.bar(
            [j + (i - (len(RULES) - 1) / 2) * width for j in range(len(means))],
            means,
            width,
            yerr=stds,
            label=rule,
            capsize=2,
        )
    ax.set_xticks(range(len(attacked) + 1), ["clean", *attacked], fontsize=8)
    ax.set_ylabel("best-val test accuracy (%)")
    ax.set_ylim(0, 100)
    ax.legend(ncol=len(RULES), fontsize=8, loc="lower left")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _factor(runs: list[dict], attack: str) -> str:
    return f"{next((r['factor'] for r in runs if r['attack'] == attack), 0):g}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="Cora")
    p.add_argument("--partition", default="louvain")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2])
    p.add_argument("--scale", type=float, default=10.0, help="the scaled attack's factor")
    p.add_argument("--flip", type=float, default=4.0, help="the sign-flipping attack's factor")
    p.add_argument("--out", default="runs/robustness")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--render", type=Path, help="write the page from this benchmark folder and stop")
    args = p.parse_args()
    if args.render:
        render(args.render)
        return
    run_all(args)


if __name__ == "__main__":
    sys.exit(main())
