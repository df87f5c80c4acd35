"""How far O-pFGL's statistics summed through SecAgg+ are from the same sums in clear.

Builds the run's clients on an in-process grid, asks them once for their statistics in
clear (``query.stats``) and once through SecAgg+ (``fgl_flower.secagg``), and prints per
statistic the largest absolute difference, the largest relative difference over the
elements whose clear sum is at least 1e-6 of the statistic's largest, and the bytes the
clients sent in each case.

    python experiments/opfgl/secagg_error.py --dataset Cora --partition louvain-plus --clients 10
"""

from __future__ import annotations

import argparse

from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, RecordDict

from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.clients.opfgl import STATS
from fgl_flower.inprocess import InProcessGrid
from fgl_flower.parse import parse_run_config
from fgl_flower.protocol import CONFIG, SERVER_ROUND
from fgl_flower.records import require_record
from fgl_flower.secagg.server import SecAggPlusSettings, secure_sum
from fgl_flower.strategies.grid import payload_bytes
from fgl_flower.strategies.opfgl import clear_sum


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dataset", default="Cora")
    ap.add_argument("--partition", default="louvain-plus")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--fraction-bits", type=int, default=32)
    ap.add_argument("--shares", type=int, default=0)
    ap.add_argument(
        "--set", action="append", default=[], help="run option key=value (e.g. opfgl.topk=1)"
    )
    args = ap.parse_args()
    flat = load_app_defaults()
    flat.update(
        {
            "method": "opfgl",
            "dataset": args.dataset,
            "partition": args.partition,
            "num-clients": args.clients,
            "num-rounds": 1,
            "split": "0.2,0.4,0.4",
            "split-mode": "stratified",
            "split-seed": 42,
            "partition-seed": 42,
            "progress": False,
        }
    )
    flat.update(dict(kv.split("=", 1) for kv in args.set))
    cfg = parse_run_config(flat)
    grid = InProcessGrid(flat, cfg.num_clients, serialize=True)
    nodes = sorted(grid.get_node_ids())
    content = RecordDict({CONFIG: ConfigRecord({SERVER_ROUND: 1})})
    sent = {"clear": 0, "secure": 0}

    def send(kind):
        def go(messages):
            replies = grid.send_and_receive(messages)
            sent[kind] += sum(payload_bytes(r.content) for r in replies)
            return replies

        return go

    replies = send("clear")(
        [
            Message(content=content, message_type=f"{MessageType.QUERY}.stats", dst_node_id=n)
            for n in nodes
        ]
    )
    clear = clear_sum(
        [require_record(r.content, STATS, ArrayRecord).to_torch_state_dict() for r in replies]
    )
    secure = secure_sum(
        send("secure"),
        nodes,
        content,
        "stats",
        STATS,
        SecAggPlusSettings(args.shares, args.fraction_bits),
        seed=0,
    ).total
    print(
        f"{args.dataset} {args.partition}, {args.clients} clients, {args.fraction_bits} fraction bits"
    )
    print(
        "| statistic | shape | largest clear value | max abs difference | max relative difference |"
    )
    print("|---|---|---|---|---|")
    for key in clear:
        c, s = clear[key], secure[key]
        diff = (c - s).abs()
        big = c.abs() >= 1e-6 * float(c.abs().max()) if c.numel() else c.bool()
        rel = float((diff[big] / c.abs()[big]).max()) if bool(big.any()) else 0.0
        print(
            f"| {key} | {list(c.shape)} | {float(c.abs().max()):.4g} | {float(diff.max()):.3g} | {rel:.3g} |"
        )
    print(f"bytes up: clear {sent['clear']:,}, SecAgg+ {sent['secure']:,} (all four stages)")


if __name__ == "__main__":
    main()
