"""Where a node partition cuts the graph: edges kept inside clients, by connected component.

A Louvain partition (communities assigned whole to clients) never splits a small connected
component: a 2-node component is always one community. This script measures that for a
partition made here and for node-list files (e.g. the official S2FGL task converted by
``official_partition.py``), so the claim in ``docs/results/s2fgl.md`` can be re-checked::

    python experiments/s2fgl/edge_retention.py CiteSeer --clients 10 --files runs/s2fgl-partition

prints one line per partition: undirected edges inside clients (all, inside the largest
connected component, outside it), the share of 2- and 3-node components kept whole, and, over
the nodes of degree >= 3, the shares that keep none and at least 90 % of their edges inside
their client. With ``m`` equal-sized clients, random assignment keeps about ``1/m`` of the
edges (and a degree-3 node keeps none of its edges with probability ``(1 - 1/m)^3``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from fgl_flower.datasets import DataConfig, load_client_data, load_dataset
from fgl_flower.datasets.edges import undirected_edges
from fgl_flower.datasets.partition.files import partition_files


def retention(owner: np.ndarray, edges: np.ndarray) -> dict[str, float]:
    """Edge-retention statistics of ``owner`` (client per node) on undirected ``edges [2, E]``."""
    n = owner.size
    adj = sp.coo_matrix((np.ones(edges.shape[1]), (edges[0], edges[1])), shape=(n, n))
    _, comp = connected_components(adj, directed=False)
    sizes = np.bincount(comp)
    in_lcc = comp[edges[0]] == sizes.argmax()
    kept = owner[edges[0]] == owner[edges[1]]
    out = {
        "edges": float(kept.size),
        "kept": float(kept.mean()),
        "kept_lcc": float(kept[in_lcc].mean()),
        "kept_rest": float(kept[~in_lcc].mean()),
    }
    for s in (2, 3):
        comps = np.flatnonzero(sizes == s)
        whole = [np.unique(owner[comp == c]).size == 1 for c in comps]
        out[f"whole_{s}"] = float(np.mean(whole)) if whole else float("nan")
    ends = np.concatenate([edges[0], edges[1]])
    deg = np.bincount(ends, minlength=n)
    share = np.bincount(ends, weights=np.concatenate([kept, kept]), minlength=n) / np.maximum(
        deg, 1
    )
    hub = deg >= 3
    out["none_deg3"] = float((share[hub] == 0).mean())
    out["most_deg3"] = float((share[hub] >= 0.9).mean())
    return out


def _owner(parts: list[np.ndarray], n: int) -> np.ndarray:
    owner = np.full(n, -1)
    for k, ids in enumerate(parts):
        owner[ids] = k
    if (owner < 0).any():
        raise SystemExit(f"{int((owner < 0).sum())} nodes are in no client")
    return owner


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--partition", default="louvain", help="partition made here (default louvain)")
    p.add_argument("--partition-seed", type=int, default=0)
    p.add_argument("--files", type=Path, help="folder of <dataset>_<k>.txt node lists to compare")
    a = p.parse_args()

    data = load_dataset(a.dataset)
    n = data.num_nodes
    edges = undirected_edges(data.edge_index, n)

    cfg = DataConfig(a.dataset, a.partition, a.clients, a.partition_seed)
    ours = [load_client_data(cfg, k).data.global_id.numpy() for k in range(a.clients)]
    rows = [(f"{a.partition} (seed {a.partition_seed})", _owner(ours, n))]
    if a.files:
        files = partition_files(str(a.files), a.dataset)
        rows.append((str(a.files), _owner([np.loadtxt(f, dtype=np.int64) for f in files], n)))

    print(
        f"{a.dataset}: {n} nodes, {edges.shape[1]} undirected edges, {a.clients} clients "
        f"(random assignment keeps ~{1 / a.clients:.0%})"
    )
    print(
        f"{'partition':32} {'kept':>6} {'in LCC':>7} {'outside':>8} {'2-comp whole':>13} "
        f"{'3-comp whole':>13} {'deg>=3 keep none':>17} {'keep >=90%':>11}"
    )
    for name, owner in rows:
        r = retention(owner, edges)
        print(
            f"{name:32} {r['kept']:6.1%} {r['kept_lcc']:7.1%} {r['kept_rest']:8.1%} "
            f"{r['whole_2']:13.1%} {r['whole_3']:13.1%} {r['none_deg3']:17.1%} {r['most_deg3']:11.1%}"
        )


if __name__ == "__main__":
    main()
