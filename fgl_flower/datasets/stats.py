"""Per-client statistics of a federated dataset: sizes, classes, homophily, and the labels
each client can train on (what :mod:`fgl_flower.datasets.class_check` judges)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fgl_flower.datasets.build import part_config, partition_folder, with_natural_clients
from fgl_flower.datasets.client_data import GraphClientData, NodeClientData, load_client_data
from fgl_flower.datasets.edges import undirected_edges
from fgl_flower.datasets.homophily import edge_homophily, node_homophily
from fgl_flower.datasets.resolve import DataConfig, _resolve
from fgl_flower.progress import step as _step


def class_labels(cfg: DataConfig) -> dict[str, tuple[str, set[int], set[int], set[int]]]:
    """``{dataset: (kind, labels that occur, labels with a training example, clients with no
    training example)}`` over all clients of ``cfg`` (``kind``: ``"node"`` or ``"graph"``;
    dataset groups per member dataset, whose label spaces differ). Loads every client once;
    ``num_clients = 0`` is resolved first. :mod:`fgl_flower.datasets.class_check` judges
    (and remembers) it."""
    cfg = with_natural_clients(cfg)
    if _resolve(cfg).members is None:
        partition_folder(part_config(cfg))  # built (and reported) before the clients are read
    found: dict[str, tuple[str, set[int], set[int], set[int]]] = {}
    with _step(f"Checking the training classes of {cfg.num_clients} clients"):
        for k in range(cfg.num_clients):
            c = load_client_data(cfg, k)
            if isinstance(c, NodeClientData):
                name, kind = cfg.dataset, "node"
                every, train = c.data.y.tolist(), c.data.y[c.data.train_mask].tolist()
            else:
                name, kind = c.dataset, "graph"
                every = [int(g.y.view(-1)[0]) for g in c.train + c.val + c.test]
                train = [int(g.y.view(-1)[0]) for g in c.train]
            _, present, trained, idle = found.setdefault(name, (kind, set(), set(), set()))
            present.update(every)
            trained.update(train)
            if not train:
                idle.add(k)
    return found


def _node_stats(c: NodeClientData) -> dict[str, Any]:
    d = c.data
    edges = undirected_edges(d.edge_index, d.num_nodes)
    y = d.y.numpy()
    return {
        "client": c.partition_id,
        "nodes": int(d.num_nodes),
        "edges": int(edges.shape[1]),
        "class_counts": np.bincount(y, minlength=c.num_classes).tolist(),
        "edge_homophily": edge_homophily(edges, y),
        "node_homophily": node_homophily(edges, y),
    }


def _graph_stats(c: GraphClientData) -> dict[str, Any]:
    y = [int(g.y.view(-1)[0]) for g in c.train + c.val + c.test]
    return {
        "client": c.partition_id,
        "dataset": c.dataset,
        "graphs": len(y),
        "class_counts": np.bincount(y, minlength=c.num_classes).tolist(),
    }


def partition_stats(cfg: DataConfig) -> list[dict[str, Any]]:
    """Per client: nodes, undirected edges, class counts, edge and node homophily
    (:mod:`~fgl_flower.datasets.homophily`; node tasks, after any edge flip), or graphs, class
    counts and dataset name (graph tasks). ``num_clients = 0`` is resolved first."""
    cfg = with_natural_clients(cfg)
    clients = [load_client_data(cfg, k) for k in range(cfg.num_clients)]
    return [_node_stats(c) if isinstance(c, NodeClientData) else _graph_stats(c) for c in clients]
