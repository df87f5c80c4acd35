"""What SecAgg+ costs per round: FedAvg/GCN on a synthetic graph, in clear and secured.

For each client count, two in-process runs with the same config (one with
``fedavg.secure-aggregation = true``) and, per run, the medians over its rounds of the bytes
the clients sent, the messages and the seconds a round took (whole rounds: training, the
protocol's exchanges and the server's unmasking). With ``--fraction`` below 1 each round's
protocol runs among its sampled clients.

    python experiments/platform/secagg_cost.py --clients 10,100 --rounds 3
    python experiments/platform/secagg_cost.py --clients 1000 --fraction 0.1 --rounds 3 --nodes 100000
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.inprocess import run_inprocess


def run(clients: int, fraction: float, rounds: int, nodes: int, secure: bool, out: Path) -> dict:
    flat = load_app_defaults()
    flat.update(
        {
            "num-clients": clients,
            "num-rounds": rounds,
            "fraction-train": fraction,
            "progress": False,
            "data.synthetic.num-nodes": nodes,
            "partition": "metis",
            "checkpoint-every": 0,
            "fedavg.secure-aggregation": secure,
            "out-dir": str(out),
        }
    )
    summary = run_inprocess(flat)
    recs = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    return {
        "bytes_up": statistics.median(r["bytes_up"] for r in recs),
        "messages_up": statistics.median(r["messages_up"] for r in recs),
        "time_s": statistics.median(r["time_s"] + r.get("server_time_s", 0.0) for r in recs),
        "clients": len(recs[0]["train_clients"]),
        "acc": summary["final"]["test_acc"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--clients", default="10,100")
    ap.add_argument("--fraction", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=10_000, help="nodes of the synthetic graph")
    args = ap.parse_args()
    print(
        "| clients (per round) | bytes up, clear | SecAgg+ | messages up, clear | SecAgg+ | s/round, clear | SecAgg+ | final acc, clear / SecAgg+ |"
    )
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for k in map(int, args.clients.split(",")):
            clear = run(k, args.fraction, args.rounds, args.nodes, False, Path(tmp) / f"c{k}")
            secure = run(k, args.fraction, args.rounds, args.nodes, True, Path(tmp) / f"s{k}")
            print(
                f"| {k} ({clear['clients']}) | {clear['bytes_up']:,.0f} | {secure['bytes_up']:,.0f} | "
                f"{clear['messages_up']:.0f} | {secure['messages_up']:.0f} | {clear['time_s']:.2f} | "
                f"{secure['time_s']:.2f} | {100 * clear['acc']:.2f} / {100 * secure['acc']:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
