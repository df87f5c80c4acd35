"""Federated data API: partition a dataset once, then hand each client its own part.

A partition is a deterministic function of (dataset, partitioner, options, number of
clients, partition seed). It is computed once, cached on disk (node tasks: a few arrays
for all clients, :mod:`fgl_flower.datasets.node_store`; graph tasks: a file per client, see
:mod:`fgl_flower.datasets.cache`) and memoised in-process; splits are recomputed
from ``(split, split_mode, split_seed, split_fold)`` on every load (they are cheap), and so
is the edge-flip noise (:mod:`fgl_flower.datasets.noise`, from ``split_seed`` and the client).

A partitioner with a natural number of clients (``louvain-merge``) is cached once under
``num_clients = 0``; :func:`natural_num_clients` builds it and reads its size, and a
config asking for another count is refused with the right one. Members of a node dataset
group (``syn-cora``) are whole graphs, loaded by their client without a cache.

Client ``x`` is stored sparse (COO, coalesced) where its density is below 10 %, see
:mod:`fgl_flower.datasets.features`. Loading a node client's cached part imports no PyG
(its graph is a :class:`NodeGraph`); building a partition does.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from fgl_flower.datasets.cache import (
    ensure_partition,
    load_part,
    num_parts,
    partition_tag,
    write_client_files,
)
from fgl_flower.datasets.catalog import DATASETS, load_dataset
from fgl_flower.datasets.features import compact_features, select_rows
from fgl_flower.datasets.homophily import edge_homophily, node_homophily
from fgl_flower.datasets.node_store import load_node_part, write_node_parts
from fgl_flower.datasets.noise import EDGE_FLIP_STREAM, flip_edges
from fgl_flower.datasets.packed import PackedGraphs
from fgl_flower.datasets.partition import PartitionInput
from fgl_flower.datasets.resolve import (
    DataConfig,
    _resolve,
    _Resolved,
    task_of,
    validate_data_config,
)
from fgl_flower.datasets.splits import (
    GLOBAL_SPLITS,
    NODE_SPLITS,
    SEQUENTIAL_SPLITS,
    NodeGroups,
    NodeSplitFn,
    Ratios,
    check_ratios,
    graph_split,
    node_groups,
)
from fgl_flower.errors import ConfigError
from fgl_flower.progress import step as _step

__all__ = [
    "DataConfig",
    "GraphClientData",
    "NodeClientData",
    "NodeGraph",
    "class_labels",
    "load_client_data",
    "natural_num_clients",
    "partition_stats",
    "task_of",
    "validate_data_config",
    "with_natural_clients",
]

if TYPE_CHECKING:
    from torch_geometric.data import Data


@dataclass(frozen=True)
class NodeGraph:
    """One client's subgraph, as tensors on one device.

    ``x`` [n, F] (dense float32 or sparse COO), ``edge_index`` [2, E] (local ids, induced
    from PyG's stored edges, so both directions for undirected datasets), ``y`` [n] long,
    ``train_mask``/``val_mask``/``test_mask`` [n] bool and ``global_id`` [n] long (node
    ids in the full graph).
    """

    x: Tensor
    edge_index: Tensor
    y: Tensor
    train_mask: Tensor
    val_mask: Tensor
    test_mask: Tensor
    global_id: Tensor

    @property
    def num_nodes(self) -> int:
        return int(self.y.size(0))

    def to(self, device: torch.device | str) -> NodeGraph:
        """A copy with every tensor on ``device`` (``self`` if they already are)."""
        device = torch.device(device)
        if all(getattr(self, f.name).device == device for f in fields(self)):
            return self
        return replace(self, **{f.name: getattr(self, f.name).to(device) for f in fields(self)})


@dataclass
class NodeClientData:
    """One client's subgraph (:class:`NodeGraph`) and the dataset's dimensions."""

    data: NodeGraph
    num_features: int
    num_classes: int  # of the whole dataset
    partition_id: int
    num_clients: int
    _copies: dict = field(default_factory=dict, repr=False, compare=False)
    kind = "node"

    @property
    def num_train(self) -> int:
        """Training nodes: the FedAvg weight."""
        return int(self.data.train_mask.sum())

    @property
    def num_local(self) -> int:
        """All local nodes (train, val, test and unlabelled)."""
        return self.data.num_nodes

    def to(self, device: torch.device | str) -> NodeClientData:
        """The same client with its graph on ``device`` (``self`` if it already is).

        The copy is kept, so a process serving many messages for this client (a
        simulation actor) moves it once and its graph-derived caches keep hitting.
        """
        device = torch.device(device)
        if device not in self._copies:
            graph = self.data.to(device)
            self._copies[device] = (
                self if graph is self.data else replace(self, data=graph, _copies={})
            )
        return self._copies[device]


@dataclass
class GraphClientData:
    """One client's graphs, already split."""

    train: list[Data]
    val: list[Data]
    test: list[Data]
    num_features: int
    num_classes: int  # of this client's dataset
    dataset: str
    partition_id: int
    num_clients: int
    _packed: dict = field(default_factory=dict, repr=False, compare=False)
    kind = "graph"

    @property
    def num_train(self) -> int:
        """Training graphs: the FedAvg weight."""
        return len(self.train)

    @property
    def num_local(self) -> int:
        """All local graphs (train, val and test)."""
        return len(self.train) + len(self.val) + len(self.test)

    def packed(
        self, split: str, device: torch.device | str, inputs: tuple[str, ...] = ()
    ) -> PackedGraphs:
        """``split``'s graphs packed on ``device`` with the per-node ``inputs``
        (:class:`~fgl_flower.datasets.packed.PackedGraphs`). Kept, so a process serving
        many messages for this client packs and moves them once."""
        key = (split, torch.device(device), inputs)
        if key not in self._packed:
            self._packed[key] = PackedGraphs(getattr(self, split), inputs, device)
        return self._packed[key]


# --- building partitions ----------------------------------------------------------------
def undirected_edges(edge_index: torch.Tensor, num_nodes: int) -> np.ndarray:
    """``[2, E']`` unique undirected edges ``u < v`` (self-loops removed)."""
    ei = edge_index.numpy()
    u, v = np.minimum(ei[0], ei[1]), np.maximum(ei[0], ei[1])
    keys = np.unique(u[u != v].astype(np.int64) * num_nodes + v[u != v])
    return np.stack([keys // num_nodes, keys % num_nodes])


def _check_parts(r: _Resolved, parts: list[np.ndarray], num_clients: int) -> None:
    if len(parts) != num_clients or any(p.size == 0 for p in parts):
        empty = [k for k, p in enumerate(parts) if p.size == 0]
        raise ConfigError(
            f"partition {r.partition!r} of {r.dataset!r} left clients {empty} empty; "
            "use fewer clients or other options."
        )


def _split_items(r: _Resolved, cfg: DataConfig, inp: PartitionInput, what: str) -> list[np.ndarray]:
    """The partitioner's clients of ``inp`` (natural partitioners: as many as the data give)."""
    opts = dict(r.part_opts)
    if r.partitioner.natural_clients:
        with _step(f"Partitioning {r.dataset} ({r.partition})"):
            return r.partitioner.natural_split(inp, cfg.partition_seed, opts)
    if cfg.num_clients > inp.num_items:
        raise ConfigError(
            f"num_clients={cfg.num_clients} exceeds the {inp.num_items} {what} of {r.dataset!r}."
        )
    with _step(f"Partitioning {r.dataset} into {cfg.num_clients} clients ({r.partition})"):
        parts = r.partitioner.split(inp, cfg.num_clients, cfg.partition_seed, opts)
    _check_parts(r, parts, cfg.num_clients)
    return parts


def _node_part(data: Data, ids: np.ndarray) -> dict[str, Any]:
    """The part of the nodes ``ids`` of ``data``: their induced subgraph (local ids)."""
    from torch_geometric.utils import subgraph

    n = data.num_nodes
    idx = torch.from_numpy(np.asarray(ids, dtype=np.int64))
    edge_index, _ = subgraph(idx, data.edge_index, relabel_nodes=True, num_nodes=n)
    return {
        "x": compact_features(select_rows(data.x, idx)),
        "edge_index": edge_index,
        "y": data.y[idx],
        "global_id": idx,
        "num_classes": int(data.num_classes),
        "num_nodes_total": int(n),
    }


def _write_node_parts(r: _Resolved, cfg: DataConfig, folder: Path) -> dict[str, Any]:
    with _step(f"Loading {r.dataset}"):
        data = load_dataset(r.dataset, cfg.data_root, dict(r.data_opts))
    inp = PartitionInput(
        r.dataset, data.y.numpy(), undirected_edges(data.edge_index, data.num_nodes)
    )
    parts = _split_items(r, cfg, inp, "nodes")
    with _step(f"Storing {len(parts)} clients' subgraphs of {r.dataset}"):
        return write_node_parts(folder, data, parts)


def _write_graph_parts(r: _Resolved, cfg: DataConfig, folder: Path) -> dict[str, Any]:
    dataset = load_dataset(r.dataset, cfg.data_root, dict(r.data_opts))
    y = dataset.y.view(-1).numpy()
    parts = _split_items(r, cfg, PartitionInput(r.dataset, y), "graphs")
    return write_client_files(
        folder,
        (
            {
                "graphs": [dataset[int(i)].to_dict() for i in ids],
                "dataset": r.dataset,
                "num_classes": int(dataset.num_classes),
                "num_features": int(dataset.num_features),
            }
            for ids in parts
        ),
    )


def _part_config(cfg: DataConfig) -> DataConfig:
    """``cfg`` without the split and noise fields: the key of a partition."""
    return DataConfig(
        cfg.dataset,
        cfg.partition,
        cfg.num_clients,
        cfg.partition_seed,
        data_root=cfg.data_root,
        options=cfg.options,
    )


def _partition_folder(cfg: DataConfig) -> Path:
    """The cached partition of ``cfg`` (built if absent); natural partitioners: any count."""
    r = _resolve(cfg)
    tag, meta = partition_tag(r, cfg)
    write = _write_node_parts if r.task == "node" else _write_graph_parts
    return ensure_partition(tag, meta, lambda folder: write(r, cfg, folder))


def natural_num_clients(cfg: DataConfig) -> int | None:
    """The number of clients ``cfg``'s partition gives by itself, whatever ``cfg.num_clients``:
    a dataset group's member count, or the clients of a natural partitioner such as
    ``louvain-merge`` (its partition is built and cached on first call); ``None`` for
    partitioners that split into as many clients as asked."""
    r = _resolve(cfg)
    if r.members is not None:
        return len(r.members)
    if not r.partitioner.natural_clients:
        return None
    return num_parts(_partition_folder(replace(_part_config(cfg), num_clients=0)))


def with_natural_clients(cfg: DataConfig) -> DataConfig:
    """``cfg`` with ``num_clients = 0`` replaced by :func:`natural_num_clients` (else ``cfg``)."""
    if cfg.num_clients != 0:
        return cfg
    count = natural_num_clients(cfg)
    assert count is not None  # validation refuses 0 for partitioners without a natural count
    return replace(cfg, num_clients=count)


def _group_part(r: _Resolved, cfg: DataConfig, partition_id: int) -> dict[str, Any]:
    """Client ``partition_id`` of a dataset group: member ``partition_id``, whole."""
    member = r.members[partition_id]  # type: ignore[index]
    loaded = load_dataset(member, cfg.data_root)
    if r.task == "node":
        part = _node_part(loaded, np.arange(loaded.num_nodes))
        if getattr(loaded, "source_id", None) is not None:  # members built on shared nodes
            part["split_id"] = loaded.source_id
        return part
    return {
        "graphs": list(loaded),
        "dataset": DATASETS.canonical(member),
        "num_classes": int(loaded.num_classes),
        "num_features": int(loaded.num_features),
    }


@functools.lru_cache(maxsize=64)
def _client_part(cfg: DataConfig, partition_id: int) -> dict[str, Any]:
    r = _resolve(cfg)
    if r.members is not None:  # dataset groups: client k loads only its own dataset
        return _group_part(r, cfg, partition_id)
    folder = _partition_folder(cfg)
    if r.partitioner.natural_clients and num_parts(folder) != cfg.num_clients:
        raise r.partitioner.count_error(
            r.partition, r.dataset, num_parts(folder), cfg.num_clients, dict(r.part_opts)
        )
    if r.task == "node":
        return load_node_part(folder, partition_id)
    part = load_part(folder, partition_id)
    if r.task == "graph":
        from torch_geometric.data import Data

        part["graphs"] = [Data.from_dict(g) for g in part["graphs"]]
    return part


def _split_source(
    cfg: DataConfig, partition_id: int, split: NodeSplitFn, ratios: Ratios, part: dict[str, Any]
) -> np.random.Generator | random.Random | NodeGroups:
    """The split's random source; for :data:`SEQUENTIAL_SPLITS` the shared stream after
    ``split`` has drawn clients ``0..partition_id-1``; for :data:`GLOBAL_SPLITS` the groups
    of the client's nodes in the whole graph (by ``split_id`` where the members of a dataset
    group share their nodes, e.g. syn-cora) and the fold."""
    mode = NODE_SPLITS.canonical(cfg.split_mode)
    if mode in GLOBAL_SPLITS:
        groups = node_groups(int(part["num_nodes_total"]), cfg.split_seed)
        return NodeGroups(groups[part.get("split_id", part["global_id"]).numpy()], cfg.split_fold)
    if mode not in SEQUENTIAL_SPLITS:
        return np.random.default_rng([cfg.split_seed, partition_id])
    rng = random.Random(cfg.split_seed)
    for k in range(partition_id):  # replay the earlier clients' draws
        split(_client_part(_part_config(cfg), k)["y"].numpy(), ratios, rng)
    return rng


def _noisy_edges(edge_index: Tensor, num_nodes: int, p: float, seed: list[int]) -> Tensor:
    """``edge_index`` after :func:`~fgl_flower.datasets.noise.flip_edges` with probability ``p``
    (drawn from ``default_rng(seed)``): both directions of every edge, self-loops kept; the
    input itself if ``p == 0``."""
    if not p:
        return edge_index
    edges = flip_edges(
        undirected_edges(edge_index, num_nodes), num_nodes, p, np.random.default_rng(seed)
    )
    loops = edge_index[:, edge_index[0] == edge_index[1]].numpy()
    both = np.concatenate([edges, edges[::-1], loops], axis=1)
    return torch.from_numpy(np.ascontiguousarray(both[:, np.lexsort((both[1], both[0]))]))


def _mask(n: int, idx: np.ndarray) -> torch.Tensor:
    mask = torch.zeros(n, dtype=torch.bool)
    mask[torch.from_numpy(np.asarray(idx, dtype=np.int64))] = True
    return mask


@functools.lru_cache(maxsize=64)
def load_client_data(cfg: DataConfig, partition_id: int) -> NodeClientData | GraphClientData:
    """Client ``partition_id``'s data, split by ``cfg.split`` / ``split_mode`` / ``split_seed``
    / ``split_fold``, its edges flipped with probability ``cfg.edge_flip``.

    The first call for a partition may load the full dataset and write the cache;
    later calls (in any process) read only this client's file. The result is memoised
    per process (a simulation actor serves many messages): treat it as read-only.
    ``cfg.num_clients`` must be known: resolve 0 first (:func:`with_natural_clients`).
    """
    r = _resolve(cfg)
    if cfg.num_clients == 0:
        raise ConfigError(
            "num_clients=0 (the partition's natural number of clients) must be resolved "
            "before loading a client: use with_natural_clients(cfg) (fgl run and "
            "fgl partition-stats do), or set num-clients to the count."
        )
    if not 0 <= partition_id < cfg.num_clients:
        raise ConfigError(f"partition_id {partition_id} not in [0, {cfg.num_clients}).")
    part = _client_part(_part_config(cfg), partition_id)
    ratios = check_ratios(cfg.split)
    if r.task == "graph":
        graphs = part["graphs"]
        y = np.array([int(g.y.view(-1)[0]) for g in graphs])
        stratified = NODE_SPLITS.canonical(cfg.split_mode) == "stratified"
        tr, va, te = graph_split(y, ratios, cfg.split_seed, stratified=stratified)
        return GraphClientData(
            [graphs[i] for i in tr],
            [graphs[i] for i in va],
            [graphs[i] for i in te],
            part["num_features"],
            part["num_classes"],
            part["dataset"],
            partition_id,
            cfg.num_clients,
        )
    y = part["y"]
    n = y.numel()
    split = NODE_SPLITS.get(cfg.split_mode)
    tr, va, te = split(y.numpy(), ratios, _split_source(cfg, partition_id, split, ratios, part))
    edge_index = _noisy_edges(
        part["edge_index"], n, cfg.edge_flip, [cfg.split_seed, partition_id, EDGE_FLIP_STREAM]
    )
    data = NodeGraph(
        x=part["x"],
        edge_index=edge_index,
        y=y,
        global_id=part["global_id"],
        train_mask=_mask(n, tr),
        val_mask=_mask(n, va),
        test_mask=_mask(n, te),
    )
    return NodeClientData(
        data, int(part["x"].size(1)), part["num_classes"], partition_id, cfg.num_clients
    )


def class_labels(cfg: DataConfig) -> dict[str, tuple[str, set[int], set[int], set[int]]]:
    """``{dataset: (kind, labels that occur, labels with a training example, clients with no
    training example)}`` over all clients of ``cfg`` (``kind``: ``"node"`` or ``"graph"``;
    dataset groups per member dataset, whose label spaces differ). Loads every client once;
    ``num_clients = 0`` is resolved first. :mod:`fgl_flower.datasets.class_check` judges
    (and remembers) it."""
    cfg = with_natural_clients(cfg)
    if _resolve(cfg).members is None:
        _partition_folder(_part_config(cfg))  # built (and reported) before the clients are read
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


# --- statistics -------------------------------------------------------------------------
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
