"""A client's part -> its data: the splits, the edge noise and the dataclasses a client trains on.

Node classification splits the client's nodes, link prediction its edges
(:mod:`fgl_flower.datasets.link_splits`), graph tasks its graphs. Splits are recomputed from ``(split, split_mode, split_seed, split_fold)`` on every load
(they are cheap), and so is the edge-flip noise (:mod:`fgl_flower.datasets.noise`, from
``split_seed`` and the client). The raw part comes from :mod:`fgl_flower.datasets.build`.

Client ``x`` is stored sparse (COO, coalesced) where its density is below 10 %, see
:mod:`fgl_flower.datasets.features`.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from fgl_flower.datasets.build import client_part, part_config, stored_part
from fgl_flower.datasets.edges import undirected_edges
from fgl_flower.datasets.files import source_stamp
from fgl_flower.datasets.link_splits import LinkSplit, split_edges
from fgl_flower.datasets.noise import EDGE_FLIP_STREAM, flip_edges
from fgl_flower.datasets.packed import PackedGraphs
from fgl_flower.datasets.resolve import DataConfig, _resolve
from fgl_flower.datasets.splits import (
    GLOBAL_SPLITS,
    NODE_SPLITS,
    SEQUENTIAL_SPLITS,
    STORED_SPLITS,
    NodeGroups,
    NodeSplitFn,
    Ratios,
    check_ratios,
    graph_split,
    node_groups,
)
from fgl_flower.errors import ConfigError

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


class _KeptOnDevice:
    """``to(device)`` of a full-batch client's data: its graph ``data`` (and what
    :meth:`moved_with_graph` names) on ``device``, ``self`` if already there. The copy is
    kept, so a process serving many messages for this client (a simulation actor) moves it
    once and its graph-derived caches keep hitting."""

    data: NodeGraph
    _copies: dict

    def moved_with_graph(self, device: torch.device) -> dict[str, Any]:
        """Fields besides ``data`` that move with it (none)."""
        return {}

    def to(self, device: torch.device | str):
        device = torch.device(device)
        if device not in self._copies:
            graph = self.data.to(device)
            self._copies[device] = (
                self
                if graph is self.data
                else replace(self, data=graph, **self.moved_with_graph(device), _copies={})
            )
        return self._copies[device]


@dataclass
class NodeClientData(_KeptOnDevice):
    """One client's subgraph (:class:`NodeGraph`) and the dataset's dimensions."""

    data: NodeGraph
    num_features: int
    num_classes: int  # of the whole dataset
    partition_id: int
    num_clients: int
    _copies: dict = field(default_factory=dict, repr=False, compare=False)
    kind = "node"
    task = "node"

    @property
    def num_train(self) -> int:
        """Training nodes: the FedAvg weight."""
        return int(self.data.train_mask.sum())

    @property
    def num_local(self) -> int:
        """All local nodes (train, val, test and unlabelled)."""
        return self.data.num_nodes


@dataclass
class LinkClientData(_KeptOnDevice):
    """One client's subgraph for link prediction: :class:`NodeGraph` whose ``edge_index`` is
    the message-passing graph (the training edges, both directions; no node masks), and
    its edge split :class:`~fgl_flower.datasets.link_splits.LinkSplit`."""

    data: NodeGraph
    edges: LinkSplit
    num_features: int
    num_classes: int  # of the node labels (not used by link prediction)
    partition_id: int
    num_clients: int
    _copies: dict = field(default_factory=dict, repr=False, compare=False)
    kind = "edge"
    task = "link"

    @property
    def num_train(self) -> int:
        """Training edges: the FedAvg weight."""
        return int(self.edges.train_pos.size(1))

    @property
    def num_local(self) -> int:
        """All the client's edges (train, val and test)."""
        e = self.edges
        return int(e.train_pos.size(1) + e.val_pos.size(1) + e.test_pos.size(1))

    def moved_with_graph(self, device: torch.device) -> dict[str, Any]:
        return {"edges": self.edges.to(device)}


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
    task: str = "graph"  # or "graph-regression" (y real-valued)
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


def _split_source(
    cfg: DataConfig, partition_id: int, split: NodeSplitFn, ratios: Ratios, part: dict[str, Any]
) -> np.random.Generator | random.Random | NodeGroups | np.ndarray:
    """The split's random source; for :data:`SEQUENTIAL_SPLITS` the shared stream after
    ``split`` has drawn clients ``0..partition_id-1``; for :data:`STORED_SPLITS` the client's
    official split; for :data:`GLOBAL_SPLITS` the groups
    of the client's nodes in the whole graph (by ``split_id`` where the members of a dataset
    group share their nodes, e.g. syn-cora) and the fold."""
    mode = NODE_SPLITS.canonical(cfg.split_mode)
    if mode in STORED_SPLITS:
        return stored_split(cfg, part)
    if mode in GLOBAL_SPLITS:
        groups = node_groups(int(part["num_nodes_total"]), cfg.split_seed)
        return NodeGroups(groups[part.get("split_id", part["global_id"]).numpy()], cfg.split_fold)
    if mode not in SEQUENTIAL_SPLITS:
        return np.random.default_rng([cfg.split_seed, partition_id])
    rng = random.Random(cfg.split_seed)
    for k in range(partition_id):  # replay the earlier clients' draws
        split(client_part(part_config(cfg), k)["y"].numpy(), ratios, rng)
    return rng


def _link_client(
    cfg: DataConfig, part: dict[str, Any], partition_id: int, ratios: Ratios
) -> LinkClientData:
    """Link prediction: the client's edges split by ``split`` (train/val/test, from
    ``[split_seed, client]``), val/test negatives drawn inside the client; its graph keeps the
    training edges only (:func:`~fgl_flower.datasets.link_splits.split_edges`)."""
    y = part["y"]
    n = y.numel()
    try:
        edges = split_edges(part["edge_index"], n, ratios, [cfg.split_seed, partition_id])
    except ConfigError as exc:
        raise ConfigError(f"client {partition_id}: {exc}") from None
    none = torch.zeros(n, dtype=torch.bool)
    graph = NodeGraph(
        x=part["x"],
        edge_index=edges.message_edges,
        y=y,
        global_id=part["global_id"],
        train_mask=none,
        val_mask=none,
        test_mask=none,
    )
    return LinkClientData(
        graph, edges, int(part["x"].size(1)), part["num_classes"], partition_id, cfg.num_clients
    )


def stored_split(cfg: DataConfig, part: dict[str, Any]) -> np.ndarray:
    """The client's ``[n]`` official split (``ConfigError`` if the dataset ships none)."""
    split = part.get("official_split")
    if split is None:
        raise ConfigError(
            f"split-mode=official: {cfg.dataset!r} ships no split (OGB datasets do, and user "
            "graphs with train/val/test masks); use split-mode=random or stratified."
        )
    return np.asarray(split)


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


def load_client_data(
    cfg: DataConfig, partition_id: int
) -> NodeClientData | GraphClientData | LinkClientData:
    """Client ``partition_id``'s data, split by ``cfg.split`` / ``split_mode`` / ``split_seed``
    / ``split_fold``, its edges flipped with probability ``cfg.edge_flip``: its nodes
    (:class:`NodeClientData`), its edges for link prediction (:class:`LinkClientData`) or its
    graphs (:class:`GraphClientData`), as ``cfg.task`` says.

    The first call for a partition may load the full dataset and write the cache;
    later calls (in any process) read only this client's file. The result is memoised
    per process (a simulation actor serves many messages): treat it as read-only.
    ``cfg.num_clients`` must be known: resolve 0 first (:func:`with_natural_clients`).
    """
    return _load_at(cfg, partition_id, source_stamp(cfg.dataset))


@functools.lru_cache(maxsize=64)
def _load_at(
    cfg: DataConfig, partition_id: int, stamp: tuple[int, ...] | None
) -> NodeClientData | GraphClientData | LinkClientData:
    r = _resolve(cfg)
    if cfg.num_clients == 0:
        raise ConfigError(
            "num_clients=0 (the partition's natural number of clients) must be resolved "
            "before loading a client: use with_natural_clients(cfg) (fgl run and "
            "fgl partition-stats do), or set num-clients to the count."
        )
    if not 0 <= partition_id < cfg.num_clients:
        raise ConfigError(f"partition_id {partition_id} not in [0, {cfg.num_clients}).")
    part = stored_part(part_config(cfg), partition_id, stamp)
    ratios = check_ratios(cfg.split)
    if r.level == "graph":
        graphs = part["graphs"]
        regression = r.task == "graph-regression"
        y = np.array([g.y.view(-1)[0].item() for g in graphs])
        mode = NODE_SPLITS.canonical(cfg.split_mode)
        if mode in STORED_SPLITS:
            tr, va, te = NODE_SPLITS.get(mode)(y, ratios, stored_split(cfg, part))
        else:
            stratified = mode == "stratified" and not regression
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
            r.task,
        )
    if r.task == "link":
        return _link_client(cfg, part, partition_id, ratios)
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


load_client_data.cache_clear = _load_at.cache_clear  # type: ignore[attr-defined]
