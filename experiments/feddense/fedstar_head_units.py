"""Look inside a FedStar client's checkpointed models: for each round whose client checkpoint
is kept, the test accuracy of the client's own model (after its local training), the size of
its node states and pooled graph vectors, and how many of the ReLU units of the head's
hidden layer are positive for at least one test graph. All dead means constant logits.

    python experiments/feddense/fedstar_head_units.py runs/feddense/tu-cross-diff-per-dataset-8-fedstar-gin/seed1 --client 2

Needs a run folder with ``checkpoint/`` (a run of ``checkpoint-every > 0``; the last few
rounds' client files are kept, privately in this machine's cache:
:func:`fgl_flower.checkpoint.client_dir`) and the run's data under ``FGL_DATA_ROOT``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path

import torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="a FedStar run folder with checkpoint/")
    p.add_argument(
        "--client", type=int, default=2, help="partition id (2 = COLLAB in tu-cross-diff)"
    )
    args = p.parse_args()

    from fgl_flower.checkpoint import SERVER_FILE, client_dir, read_records, run_checkpoint_dir
    from fgl_flower.datasets import load_client_data
    from fgl_flower.datasets.encodings import attach_graph_inputs
    from fgl_flower.models.fedstar import FedStarGIN
    from fgl_flower.parse import parse_run_config

    ckpt = run_checkpoint_dir(args.run)
    meta = json.loads(str(read_records(ckpt / SERVER_FILE)["config"]["json"]))
    cfg = parse_run_config(meta["config"])
    if cfg.method != "fedstar":
        raise SystemExit(f"{args.run} is a {cfg.method} run; this script reads FedStar models.")
    data = load_client_data(cfg.data_config(), args.client)
    attach_graph_inputs(data, FedStarGIN.graph_inputs)
    model = FedStarGIN(data.num_features, cfg.hidden, data.num_classes, cfg.num_layers, cfg.dropout)
    files = sorted(client_dir(ckpt, args.client).glob("round-*.records"))
    print(
        f"client {args.client}: {data.dataset}, {len(data.test)} test graphs, {len(files)} checkpointed rounds"
    )
    print("round  acc    alive  |h|       |g|")
    for f in files:
        arrays = read_records(f)["learner.model"]
        model.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in arrays.items()})
        batches = data.packed("test", torch.device("cpu"), FedStarGIN.graph_inputs).batches(
            cfg.batch_size, False
        )
        st = head_stats(model, batches)
        print(
            f"{int(f.stem[6:]):5d}  {st['acc']:.3f}  {st['alive']:2d}/{cfg.hidden}  "
            f"{st['h_abs']:8.1f}  {st['g_abs']:9.0f}"
        )


@torch.no_grad()
def head_stats(model, batches: Iterable) -> dict[str, float]:
    """Over ``batches`` (graph mini-batches with ``x``, ``edge_index``, ``batch``, ``y`` and
    ``stc_enc``) of a ``FedStarGIN`` in eval mode: accuracy, the number of units of the
    head's hidden layer ``ReLU(W_post g + b_post)`` positive for at least one graph, and the
    mean absolute node state ``|h|`` (``[N, 2h]``) and summed graph vector ``|g|``
    (``[B, h]``), both weighted by graphs."""
    from torch_geometric.nn import global_add_pool

    from fgl_flower.models.fedstar import adjacencies

    model.eval()
    alive = torch.zeros(model.head.post.out_features, dtype=torch.bool)
    correct, h_abs, g_abs, n = 0, 0.0, 0.0, 0
    for b in batches:
        h = model.node_states(b.x, adjacencies(b.edge_index, b.x.size(0)), b["stc_enc"])
        g = global_add_pool(model.head.proj(h), b.batch)
        z = model.head.post(g)
        alive |= (z > 0).any(0)
        correct += int((model.head.cls(z.relu()).argmax(1) == b.y).sum())
        h_abs += float(h.abs().mean()) * b.num_graphs
        g_abs += float(g.abs().mean()) * b.num_graphs
        n += b.num_graphs
    return {"acc": correct / n, "alive": int(alive.sum()), "h_abs": h_abs / n, "g_abs": g_abs / n}


if __name__ == "__main__":
    main()
