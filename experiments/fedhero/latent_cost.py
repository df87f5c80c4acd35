"""Time per step and peak memory of FedHERO's latent graph on a partition's largest client.

For each setting: build the partition, take the client with the most nodes, and time (median
of ``--repeats``) one training step (forward + regulariser + backward + Adam) and one
evaluation forward of FedHERO's model, beside one step of the `gcn-concat` baseline on the same
client. Memory: on CUDA, ``torch.cuda.max_memory_allocated`` over a step; on the CPU, the rise
of the process's peak resident set (``ru_maxrss``) during the steps, measured in a fresh
process per setting and model (so an earlier model's peak does not hide the next one's), and
the bytes the kept latent graph holds (N·k entries of int64 index + float32 weight).

Run from the repository root (FGL_DATA_ROOT pointing at the raw data)::

    python experiments/fedhero/latent_cost.py [--device cuda] [--settings squirrel:metis:5,...]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

DEFAULT_SETTINGS = (
    "chameleon:metis:3",
    "chameleon:louvain-merge:0",
    "squirrel:metis:5",
    "squirrel:louvain-merge:0",
    "Actor:metis:5",
    "Actor:louvain-merge:0",
)


MODELS = ("fedhero", "gcn-concat")


def measure(setting: str, name: str, device: str, repeats: int) -> dict:
    """Time and memory of model ``name`` (one of :data:`MODELS`) on ``setting``'s largest client."""
    import torch
    import torch.nn.functional as F

    from fgl_flower.app_defaults import load_app_defaults
    from fgl_flower.datasets import load_client_data, natural_num_clients
    from fgl_flower.models import build_model
    from fgl_flower.models.fedhero import FedHERONet, latent_graph_bytes
    from fgl_flower.parse import parse_run_config

    dataset, partition, clients = setting.split(":")
    flat = {
        **load_app_defaults(),
        "method": "fedhero",
        "dataset": dataset,
        "partition": partition,
        "num-clients": int(clients),
        "data.undirected": True,
        "split-mode": "five-group",
        "hidden": 64,
        "num-layers": 2,
        "lr": 0.005,
        "device": device,
    }
    if int(clients) == 0:
        flat["num-clients"] = natural_num_clients(
            parse_run_config({**flat, "num-clients": 1}).data_config()
        )
    cfg = parse_run_config(flat)
    sizes = [load_client_data(cfg.data_config(), k).data.num_nodes for k in range(cfg.num_clients)]
    big = max(range(len(sizes)), key=sizes.__getitem__)
    dev = torch.device(device)
    data = load_client_data(cfg.data_config(), big).to(dev)
    g = data.data
    torch.manual_seed(0)
    if name == "fedhero":
        model = FedHERONet(data.num_features, 64, data.num_classes, 2, 0.5).to(dev)
    else:
        model = build_model(name, "node", data.num_features, data.num_classes, 64, 2, 0.5).to(dev)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize()

    out = {
        "setting": setting,
        "clients": cfg.num_clients,
        "largest_client_nodes": g.num_nodes,
        "latent_graph_kib": latent_graph_bytes(g.num_nodes, 20) / 1024,
    }
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        start_mem = torch.cuda.memory_allocated()
    steps, evals = [], []
    for _ in range(repeats):
        model.train()
        sync()
        t0 = time.perf_counter()
        opt.zero_grad()
        logits = model(g.x, g.edge_index)
        loss = F.cross_entropy(logits[g.train_mask], g.y[g.train_mask])
        if name == "fedhero":
            loss = loss + model.regularizer()
        loss.backward()
        opt.step()
        sync()
        steps.append(time.perf_counter() - t0)
        model.eval()
        t0 = time.perf_counter()
        with torch.no_grad():
            model(g.x, g.edge_index)
        sync()
        evals.append(time.perf_counter() - t0)
    out[f"{name}_step_s"] = statistics.median(steps)
    out[f"{name}_eval_s"] = statistics.median(evals)
    if dev.type == "cuda":
        out[f"{name}_peak_mib"] = (torch.cuda.max_memory_allocated() - start_mem) / 2**20
    else:  # ru_maxrss is in KiB on Linux
        out[f"{name}_peak_rss_rise_mib"] = (
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_rss
        ) / 1024
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--settings",
        default=",".join(DEFAULT_SETTINGS),
        help="dataset:partition:clients,... (clients 0: the partition's own count)",
    )
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--one", help=argparse.SUPPRESS)  # internal: one setting and model, print JSON
    p.add_argument("--model", default="fedhero", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.model, args.device, args.repeats)))
        return
    rows = []
    for setting in args.settings.split(","):
        row: dict = {}
        for name in MODELS:
            res = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    setting,
                    "--model",
                    name,
                    "--device",
                    args.device,
                    "--repeats",
                    str(args.repeats),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            row.update(json.loads(res.stdout.strip().splitlines()[-1]))
        rows.append(row)
        print(json.dumps(row), flush=True)
    mem = "peak_mib" if args.device.startswith("cuda") else "peak_rss_rise_mib"
    print(
        "\n| setting | clients | largest client (nodes) | FedHERO step s | eval s | peak MiB "
        "| latent graph KiB | gcn-concat step s | eval s | peak MiB |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    for r in rows:
        print(
            f"| {r['setting']} | {r['clients']} | {r['largest_client_nodes']} | {r['fedhero_step_s']:.3f} "
            f"| {r['fedhero_eval_s']:.3f} | {r[f'fedhero_{mem}']:.0f} | {r['latent_graph_kib']:.0f} "
            f"| {r['gcn-concat_step_s']:.3f} | {r['gcn-concat_eval_s']:.3f} | {r[f'gcn-concat_{mem}']:.0f} |"
        )


if __name__ == "__main__":
    main()
