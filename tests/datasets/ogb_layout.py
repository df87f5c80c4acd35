"""Tiny datasets in OGB's on-disk layout, as its zips extract (``ogb`` 1.3.6 reads them).

A folder ``<root>/<name with - as _>`` holds ``RELEASE_v1.txt``, ``raw/*.csv.gz`` (no header,
one row per node, edge or graph) and ``split/<split type>/{train,valid,test}.csv.gz`` (one
index per row). Node datasets: ``edge`` [E, 2], ``node-feat`` [N, F] floats, ``node-label``
[N, 1], ``num-node-list`` / ``num-edge-list`` [1] and, for arxiv, ``node_year`` [N, 1].
Graph datasets: the same over all graphs, node and edge indices local to each graph, ``edge``
one way per bond (OGB adds the reverse), integer ``node-feat`` [sum n, 9] and ``edge-feat``
[sum E, 3], ``num-*-list`` [G] and ``graph-label`` [G, 1]. ``mapping/`` (ids to papers or
SMILES) is not read by ogb and not written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Written:
    """What a layout holds, to compare with what is loaded (``split``: per node or graph)."""

    folder: Path
    x: np.ndarray | list[np.ndarray]
    edges: np.ndarray | list[np.ndarray]
    y: np.ndarray
    split: np.ndarray


def _csv(path: Path, rows: np.ndarray, fmt: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(path, np.atleast_2d(rows.T).T, fmt=fmt, delimiter=",")  # .gz: gzipped


def _split(folder: Path, kind: str, split: np.ndarray) -> None:
    for code, part in enumerate(("train", "valid", "test")):
        _csv(folder / "split" / kind / f"{part}.csv.gz", np.flatnonzero(split == code), "%d")


def _release(folder: Path, version: int = 1) -> None:
    (folder / f"RELEASE_v{version}.txt").write_text(f"version {version}\n")


def write_node_dataset(
    root: Path, name: str = "ogbn-arxiv", num_nodes: int = 30, num_features: int = 6, seed: int = 0
) -> Written:
    """A directed graph of ``num_nodes`` nodes, 40 classes (labels below 5), time split with
    some nodes in no split (as papers100M has)."""
    rng = np.random.default_rng(seed)
    folder = root / name.replace("-", "_")
    edges = rng.integers(0, num_nodes, size=(3 * num_nodes, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    x = rng.normal(size=(num_nodes, num_features)).astype(np.float32) + 0.5  # never all ints
    y = rng.integers(0, 5, size=num_nodes)
    split = rng.choice([0, 1, 2, -1], size=num_nodes, p=[0.5, 0.2, 0.2, 0.1])
    raw = folder / "raw"
    _csv(raw / "edge.csv.gz", edges, "%d")
    _csv(raw / "node-feat.csv.gz", x, "%.6f")
    _csv(raw / "node-label.csv.gz", y, "%d")
    _csv(raw / "num-node-list.csv.gz", np.array([num_nodes]), "%d")
    _csv(raw / "num-edge-list.csv.gz", np.array([len(edges)]), "%d")
    if name == "ogbn-arxiv":
        _csv(raw / "node_year.csv.gz", rng.integers(1990, 2021, size=num_nodes), "%d")
    _split(folder, "time" if name == "ogbn-arxiv" else "sales_ranking", split)
    _release(folder)
    x = np.loadtxt(raw / "node-feat.csv.gz", delimiter=",", dtype=np.float32)  # as rounded
    return Written(folder, x, edges.T, y, split)


def write_graph_dataset(
    root: Path, name: str = "ogbg-molhiv", num_graphs: int = 12, seed: int = 0
) -> Written:
    """``num_graphs`` small molecules (graph 0 one atom, no bond) with a scaffold split; binary
    labels, or float targets for the regression datasets."""
    rng = np.random.default_rng(seed)
    folder = root / name.replace("-", "_")
    sizes = rng.integers(2, 7, size=num_graphs)
    sizes[0] = 1
    xs, bonds = [], []
    for n in sizes:
        xs.append(rng.integers(0, 10, size=(n, 9)))
        bonds.append(np.stack([np.arange(n - 1), np.arange(1, n)], axis=1))  # a chain
    regression = name in ("ogbg-molesol", "ogbg-molfreesolv", "ogbg-mollipo")
    y = rng.normal(size=num_graphs).round(3) if regression else rng.integers(0, 2, num_graphs)
    split = np.array([0, 1, 2] * (num_graphs // 3) + [0] * (num_graphs % 3))
    rng.shuffle(split)
    raw = folder / "raw"
    edges = np.concatenate(bonds)
    _csv(raw / "edge.csv.gz", edges, "%d")
    _csv(raw / "edge-feat.csv.gz", rng.integers(0, 4, size=(len(edges), 3)), "%d")
    _csv(raw / "node-feat.csv.gz", np.concatenate(xs), "%d")
    _csv(raw / "graph-label.csv.gz", y, "%.3f" if regression else "%d")
    _csv(raw / "num-node-list.csv.gz", sizes, "%d")
    _csv(raw / "num-edge-list.csv.gz", np.array([len(b) for b in bonds]), "%d")
    _split(folder, "scaffold", split)
    _release(folder)
    return Written(folder, xs, [b.T for b in bonds], y, split)
