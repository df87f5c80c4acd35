"""Do FedSage+'s generated neighbours carry anything of the node they mend?

For each client of a partition, the ``fedsageplus.owner-fit`` measure (models/fedsage.py) of
three mended graphs, each giving every kept node ``K`` attached rows:

- ``neighbour``: a true neighbour's features (what a perfect generator would recover);
- ``generator``: the client's generator after its local epochs, as FedSage+ mends (noise on);
- ``no noise``: the same generator without the noise added to its latent.

and the share of kept nodes whose predicted count reaches one (those FedSage+ mends).

    python experiments/s2fgl/fedsage_owner_fit.py --dataset Wisconsin --clients 3 --epochs 20,200
"""

from __future__ import annotations

import argparse

import torch
from flwr.app import RecordDict
from torch_geometric.utils import to_undirected

from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.clients.fedsageplus import FedSagePlusClient
from fgl_flower.clients.state import ClientState
from fgl_flower.datasets import load_client_data
from fgl_flower.models.fedsage import mend, owner_fit
from fgl_flower.parse import parse_run_config


def fit(x, edges, owners, rows, n):
    """owner-fit of ``rows [len(owners), K, D]`` attached to ``owners`` (every slot)."""
    counts = torch.full((owners.numel(),), float(rows.size(1)))
    x2, e2 = mend(x, edges, owners, counts, rows)
    return owner_fit(x2, e2, n, torch.Generator().manual_seed(0))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dataset", default="Wisconsin")
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--partition", default="louvain")
    ap.add_argument("--epochs", default="20", help="local generator epochs, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(
        "| clients' local epochs | client | nodes | count >= 1 | neighbour | generator | no noise |"
    )
    print("|---|---|---|---|---|---|---|")
    for epochs in map(int, args.epochs.split(",")):
        flat = load_app_defaults()
        flat.update(
            {
                "method": "fedsageplus",
                "dataset": args.dataset,
                "partition": args.partition,
                "num-clients": args.clients,
                "num-rounds": 2,
                "seed": args.seed,
                "model": "graphsage",
                "fedsageplus.gen-rounds": 1,
                "fedsageplus.pretrain-epochs": epochs,
                "data.undirected": "true",
                "untrained-classes": "allow",
            }
        )
        cfg = parse_run_config(flat)
        for p in range(args.clients):
            client = FedSagePlusClient(
                cfg, load_client_data(cfg.data_config(), p), ClientState(RecordDict()), p
            )
            model = client.generator()
            client.pretrain(model)
            model.eval()
            imp, g = client.impaired(), client.original.data
            x = g.x.to_dense() if g.x.is_sparse else g.x
            n, kept, k = g.num_nodes, imp["kept"], client.opts.num_pred
            with torch.no_grad():
                z = model.gen.encode(imp["x"], imp["edge_index"])
                count = model.gen.dgen(z).relu().squeeze(-1)
                noisy = model.gen.generate(z)
                h = model.gen.fgen[1](model.gen.fgen[0](z).relu()).relu()
                clean = torch.tanh(model.gen.fgen[2](h)).view(z.size(0), k, -1)
            e = to_undirected(g.edge_index, num_nodes=n)
            e = e[:, e[0] != e[1]]
            draw = torch.Generator().manual_seed(p)
            src, dst = e
            has = torch.bincount(src, minlength=n)[kept] > 0
            owners = kept[has]
            pick = []  # K true neighbours of each owner (with replacement)
            for o in owners.tolist():
                nb = dst[src == o]
                pick.append(nb[torch.randint(nb.numel(), (k,), generator=draw)])
            true_rows = x[torch.stack(pick)]
            print(
                f"| {epochs} | {p} | {n} | {float((count >= 1).float().mean()):.3f} | "
                f"{fit(x, e, owners, true_rows, n):.3f} | {fit(x, e, kept, noisy, n):.3f} | "
                f"{fit(x, e, kept, clean, n):.3f} |"
            )


if __name__ == "__main__":
    main()
