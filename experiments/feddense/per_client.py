"""Per-client test accuracy after the last round of Table 2's rows in one setting, averaged
over the seeds recorded in ``docs/results/feddense.runs.jsonl`` (the page's own records, so
no run folder is needed), then each row's client mean per seed. Client ``k`` of a setting owns
dataset ``k`` of its group. Single's and Cross-Sim's lines predate those records (kept as
measured, †), so they have none.

    python experiments/feddense/per_client.py --group tu-multi --seeds 1,2,3

With ``--client K`` it also reads each row's run folders (``runs/feddense/``) and prints,
per seed, client ``K``'s trace: the first round whose test loss is below ``--loss-below``
(``--client 3 --loss-below 0.63``: when DHFR leaves its majority-class plateau in
``tu-multi``), its best and final test accuracy, and in how many rounds from ``--from`` its
test accuracy is below ``--acc-below`` (with its lowest there).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs/results/feddense.runs.jsonl"
RUNS = ROOT / "runs/feddense"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--group", default="tu-multi", help="a FedDense setting (dataset group)")
    p.add_argument("--seeds", default=None, help="comma-separated seeds (default: all recorded)")
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--client", type=int, default=None, help="print this client's trace per seed")
    p.add_argument("--loss-below", type=float, default=0.63)
    p.add_argument("--acc-below", type=float, default=0.60)
    p.add_argument("--from", dest="start", type=int, default=51, help="first round of --acc-below")
    args = p.parse_args()

    from fgl_flower.datasets import DATASET_GROUPS

    members = DATASET_GROUPS.get(args.group).members
    if args.client is not None and not 0 <= args.client < len(members):
        raise SystemExit(f"--client {args.client}: {args.group} has clients 0-{len(members) - 1}")
    seeds = None if args.seeds is None else {int(s) for s in args.seeds.split(",")}
    rows = final_accuracies(args.results, args.group, seeds)
    if not rows:
        raise SystemExit(
            f"no {args.group} records in {args.results} for seeds {args.seeds or 'any'} "
            "(the page records Cross-Diff's and Multi's runs: tu-cross-diff, tu-multi)"
        )
    names = {row: short(row) for row in rows}
    print("client        " + "".join(f"{names[r]:>{width(names[r])}}" for r in rows))
    print("seeds         " + "".join(f"{len(s):>{width(names[r])}}" for r, s in rows.items()))
    for k, dataset in enumerate(members):
        cells = "".join(f"{mean(s, k):>{width(names[r])}.1f}" for r, s in rows.items())
        print(f"{dataset:<14}{cells}")
    print(
        f"{'mean':<14}"
        + "".join(
            f"{sum(mean(s, k) for k in range(len(members))) / len(members):>{width(names[r])}.2f}"
            for r, s in rows.items()
        )
    )
    print("\nclient mean per seed")
    for row, per_seed in rows.items():
        print(
            f"  {names[row]:<14}"
            + "  ".join(f"{s}: {m:.2f}" for s, m in seed_means(per_seed).items())
        )

    if args.client is not None:
        print(
            f"\nclient {args.client} ({members[args.client]}): first round with test loss < "
            f"{args.loss_below}; best and final test acc; rounds from {args.start} with test acc "
            f"< {args.acc_below:.0%} (lowest)"
        )
        for row, per_seed in rows.items():
            for s in sorted(per_seed):
                t = client_trace(
                    RUNS / row / f"seed{s}",
                    args.client,
                    args.loss_below,
                    args.acc_below,
                    args.start,
                )
                print(
                    f"  {names[row]:<14} seed {s}: "
                    + (
                        "no run folder"
                        if t is None
                        else f"{t['first_below'] or 'never':>5}  best {100 * t['best']:.1f}  final "
                        f"{100 * t['final']:.1f}  {t['low_rounds']} rounds (lowest {100 * t['lowest']:.1f})"
                    )
                )


def final_accuracies(
    results: Path, group: str, seeds: set[int] | None
) -> dict[str, dict[int, dict]]:
    """``{row folder: {seed: final_clients}}`` of the Table 2 records of ``group``."""
    from fgl_flower.bench import load_records

    rows: dict[str, dict[int, dict]] = defaultdict(dict)
    for (command, seed), run in load_records(results).items():
        cmd = command.split()
        if cmd[cmd.index("--dataset") + 1] != group or "runs/feddense/" not in command:
            continue
        if seeds is not None and seed not in seeds:
            continue
        rows[Path(cmd[cmd.index("--out") + 1]).parent.name][seed] = run["final_clients"]
    return dict(sorted(rows.items()))


def client_trace(
    run: Path, client: int, loss_below: float, acc_below: float, start: int
) -> dict[str, float] | None:
    """Client ``client``'s test metrics over the rounds of ``run/rounds.jsonl`` (None if absent):
    ``first_below`` (first round with test loss < ``loss_below``, None if never), ``best`` and
    ``final`` test accuracy, ``low_rounds`` (rounds >= ``start`` with accuracy < ``acc_below``)
    and ``lowest`` (the lowest accuracy in rounds >= ``start``)."""
    path = run / "rounds.jsonl"
    if not path.exists():
        return None
    trace = [
        (rec["round"], rec["clients"][str(client)])
        for rec in map(json.loads, path.read_text().splitlines())
    ]
    late = [c["test_acc"] for r, c in trace if r >= start]
    return {
        "first_below": next((r for r, c in trace if c["test_loss"] < loss_below), None),
        "best": max(c["test_acc"] for _, c in trace),
        "final": trace[-1][1]["test_acc"],
        "low_rounds": sum(a < acc_below for a in late),
        "lowest": min(late, default=float("nan")),
    }


def mean(per_seed: dict[int, dict], k: int) -> float:
    return 100 * sum(c[str(k)]["test_acc"] for c in per_seed.values()) / len(per_seed)


def seed_means(per_seed: dict[int, dict]) -> dict[int, float]:
    """``{seed: unweighted mean over clients of the final test accuracy, in %}``."""
    return {
        s: 100 * sum(c["test_acc"] for c in clients.values()) / len(clients)
        for s, clients in sorted(per_seed.items())
    }


def short(row: str) -> str:
    """A column name: the method, FedDense's width if not 16 and its placement if not the
    default (``feddense-r32-pre``)."""
    return (
        row.split("-gin", 1)[0].rsplit("-", 1)[-1]
        + ("-r32" if "width=32" in row else "")
        + ("-pre" if "activation=pre" in row else "")
    )


def width(name: str) -> int:
    return max(9, len(name) + 2)


if __name__ == "__main__":
    main()
