"""Time every method's no-option demo, ``fgl run --method M`` (a simulation on the app's
synthetic graph), one after another; prints a table and writes it as JSON.

    python scripts/demo_times.py [--inprocess] [--methods a,b] [--out demo_times.json]

A benchmark, not a test (a slow machine makes it slow): the target is 60 s a demo on a 2-core
machine. Each run's own output goes to <out folder>/<method>.log.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inprocess", action="store_true", help="time fgl run --inprocess instead")
    p.add_argument("--methods", help="comma-separated methods (default: every registered one)")
    p.add_argument("--out", default="demo_times.json")
    args = p.parse_args()
    from fgl_flower.methods import METHODS

    methods = args.methods.split(",") if args.methods else list(METHODS)
    rows = []
    work = Path(tempfile.mkdtemp(prefix="fgl-demos-"))
    for method in methods:
        cmd = [
            sys.executable,
            "-m",
            "fgl_flower.cli",
            "run",
            "--method",
            method,
            "--out",
            str(work / method),
        ]
        if args.inprocess:
            cmd.insert(4, "--inprocess")
        start = time.monotonic()
        with open(work / f"{method}.log", "w") as log:
            code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
        seconds = time.monotonic() - start
        rows.append({"method": method, "seconds": round(seconds, 1), "exit": code})
        print(
            f"{method:14}{seconds:8.1f} s{'' if code == 0 else f'  exit {code} (see {work / method}.log)'}",
            flush=True,
        )
    Path(args.out).write_text(
        json.dumps(
            {"engine": "inprocess" if args.inprocess else "simulation", "rows": rows}, indent=1
        )
        + "\n"
    )
    slow = [r["method"] for r in rows if r["seconds"] > 60 or r["exit"]]
    print(f"over 60 s or failed: {', '.join(slow) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
