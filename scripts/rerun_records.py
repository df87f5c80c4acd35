"""Rerun recorded result rows and compare them with their records, number for number.

A change that should change no number (a refactor, a check the honest clients pass) is shown
to change none by rerunning a sample of the rows the results pages were made from:

    FGL_DATA_ROOT=../shared/data python scripts/rerun_records.py docs/results/privacy.runs.jsonl \\
        --match 'dp-epsilon=1.0 ' --match 'fedavg --dataset Cora' --seed 0 --limit 1

Each selected record's ``command`` (``SEED`` replaced by its seed, ``--out`` by a fresh folder)
runs as it was recorded; the summary's ``best_val``, ``final`` and ``last`` must equal the
record's ``run`` to the last digit, in every number the record keeps. Exit status 1 if any
differs.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMPARED = ("best_val", "final", "last")


def selected(
    path: Path, patterns: list[str], seeds: list[int] | None, limit: int, fastest: bool = False
) -> list[dict]:
    """The records of ``path`` whose command matches every pattern (and whose seed is in
    ``seeds``), the first ``limit`` (``fastest``: of the shortest recorded runs)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    out = [
        r
        for r in rows
        if "command" in r
        and all(re.search(p, r["command"]) for p in patterns)
        and (seeds is None or r["seed"] in seeds)
    ]
    if fastest:
        out.sort(key=lambda r: r["run"].get("wall_s") or float("inf"))
    return out[:limit]


def command_of(record: dict, out: Path) -> list[str]:
    """The record's command with its seed and a fresh ``--out``."""
    argv = shlex.split(record["command"].replace("SEED", str(record["seed"])))
    if "--out" in argv:
        argv[argv.index("--out") + 1] = str(out)
    else:
        argv += ["--out", str(out)]
    return argv


def differences(recorded: dict, now: dict) -> list[str]:
    """``["final.test_acc: 0.81 recorded, 0.80 now", ...]`` for every number of
    :data:`COMPARED` the record keeps (a record keeps a subset of the summary)."""
    out = []
    for part in COMPARED:
        a, b = recorded.get(part, {}), now.get(part, {})
        for key in sorted(a):
            if a[key] != b.get(key):
                out.append(f"{part}.{key}: {a[key]!r} recorded, {b.get(key)!r} now")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("records", type=Path, help="a docs/results/*.runs.jsonl file")
    p.add_argument(
        "--match", action="append", default=[], help="a regex the command must match (repeatable)"
    )
    p.add_argument("--seed", type=int, action="append", help="only these seeds (repeatable)")
    p.add_argument("--limit", type=int, default=1, help="rerun at most this many rows")
    p.add_argument(
        "--fastest", action="store_true", help="take the rows whose recorded runs were shortest"
    )
    args = p.parse_args()
    rows = selected(args.records, args.match, args.seed, args.limit, args.fastest)
    if not rows:
        print("No record matches.", file=sys.stderr)
        return 2
    failed = 0
    for record in rows:
        with tempfile.TemporaryDirectory() as tmp:
            argv = command_of(record, Path(tmp) / "run")
            print("$", shlex.join(argv), flush=True)
            t0 = time.monotonic()
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode:
                print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
                failed += 1
                continue
            summary = json.loads((Path(tmp) / "run" / "summary.json").read_text())
        diff = differences(record["run"], summary)
        failed += bool(diff)
        verdict = "EQUAL" if not diff else "DIFFERENT:\n  " + "\n  ".join(diff[:20])
        print(
            f"seed {record['seed']}: {verdict} (best-val test_acc {summary['best_val'].get('test_acc')}, "
            f"{time.monotonic() - t0:.0f} s)",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
