"""Time one shuffled pass over each client's training graphs: PyG's DataLoader (collate per
batch, then ``.to(device)``) against :class:`~fgl_flower.datasets.packed.PackedGraphs`
(packed once, batches cut on the device), side by side in one process.

    python experiments/platform/graph_batching.py --dataset tu-cross-sim --clients 9 [--device cuda]

Prints per client: graphs, milliseconds per pass (median of ``--repeats``) and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="tu-cross-sim")
    p.add_argument("--clients", type=int, default=9)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()

    from torch_geometric.loader import DataLoader

    from fgl_flower.api import run_config
    from fgl_flower.datasets import load_client_data
    from fgl_flower.datasets.encodings import attach_graph_inputs
    from fgl_flower.parse import parse_run_config

    cfg = parse_run_config(
        run_config(
            "feddense",
            dataset=args.dataset,
            partition="per-dataset",
            clients=args.clients,
            model="gin",
            split="0.8,0.1,0.1",
            split_mode="stratified",
            split_seed=123,
            out="runs/graph-batching",
        )
    )
    device = torch.device(args.device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    print(f"{'client':<14}{'graphs':>7}{'DataLoader ms':>15}{'packed ms':>11}{'ratio':>7}")
    for k in range(args.clients):
        data = load_client_data(cfg.data_config(), k)
        attach_graph_inputs(data, ["stc_enc"])
        packed = data.packed("train", device, ("stc_enc",))
        loader_ms, packed_ms = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            for b in DataLoader(data.train, batch_size=args.batch_size, shuffle=True):
                b.to(device)
            sync()
            t1 = time.perf_counter()
            for _b in packed.batches(args.batch_size, shuffle=True):
                pass
            sync()
            t2 = time.perf_counter()
            loader_ms.append(1e3 * (t1 - t0))
            packed_ms.append(1e3 * (t2 - t1))
        a, b = statistics.median(loader_ms), statistics.median(packed_ms)
        print(f"{data.dataset:<14}{len(data.train):>7}{a:>15.1f}{b:>11.1f}{a / b:>6.1f}x")


if __name__ == "__main__":
    main()
