"""Source -> partition -> store: build a partition once and read one client's raw part.

A partition is a deterministic function of (dataset, partitioner, options, number of
clients, partition seed). It is computed once, cached on disk (node tasks: a few arrays for
all clients, :mod:`fgl_flower.datasets.node_store`; graph tasks: a file per client, see
:mod:`fgl_flower.datasets.cache`) and memoised in-process; :mod:`fgl_flower.datasets.client_data`
then splits a client's part. The source is whatever the dataset reference names
(:mod:`fgl_flower.datasets.source`): a catalog dataset, a file or a user's stored object.

A partitioner with a natural number of clients (``louvain-merge``) is cached once under
``num_clients = 0``; :func:`natural_num_clients` builds it and reads its size, and a
config asking for another count is refused with the right one. Members of a node dataset
group (``syn-cora``) are whole graphs, loaded by their client without a cache.

Loading a node client's cached part imports no PyG; building a partition does.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from fgl_flower.datasets.cache import (
    ensure_partition,
    load_part,
    num_parts,
    partition_tag,
    write_client_files,
)
from fgl_flower.datasets.catalog import DATASETS
from fgl_flower.datasets.edges import undirected_edges
from fgl_flower.datasets.features import compact_features, select_rows
from fgl_flower.datasets.files import source_stamp
from fgl_flower.datasets.node_store import load_node_part, write_node_parts
from fgl_flower.datasets.partition import PartitionInput
from fgl_flower.datasets.resolve import DataConfig, _resolve, _Resolved
from fgl_flower.datasets.source import load_dataset
from fgl_flower.errors import ConfigError
from fgl_flower.progress import step as _step

if TYPE_CHECKING:
    from torch_geometric.data import Data


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
    official = getattr(dataset, "official_split", None)  # GraphSet: the source's split
    return write_client_files(
        folder,
        (
            {
                "graphs": [dataset[int(i)].to_dict() for i in ids],
                "dataset": r.dataset,
                "num_classes": 1 if r.task == "graph-regression" else int(dataset.num_classes),
                "num_features": int(dataset.num_features),
                **({} if official is None else {"official_split": torch.as_tensor(official[ids])}),
            }
            for ids in parts
        ),
    )


def part_config(cfg: DataConfig) -> DataConfig:
    """``cfg`` without the split and noise fields: the key of a partition."""
    return DataConfig(
        cfg.dataset,
        cfg.partition,
        cfg.num_clients,
        cfg.partition_seed,
        data_root=cfg.data_root,
        options=cfg.options,
    )


def partition_folder(cfg: DataConfig) -> Path:
    """The cached partition of ``cfg`` (built if absent); natural partitioners: any count."""
    return _folder(_resolve(cfg), cfg)


def _folder(r: _Resolved, cfg: DataConfig) -> Path:
    """:func:`partition_folder` of ``cfg`` resolved as ``r``."""
    tag, meta = partition_tag(r, cfg)
    write = _write_node_parts if r.level == "node" else _write_graph_parts
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
    return num_parts(partition_folder(replace(part_config(cfg), num_clients=0)))


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
    if r.level == "node":
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


def client_part(cfg: DataConfig, partition_id: int) -> dict[str, Any]:
    """Client ``partition_id``'s stored part of ``cfg``'s partition (built if absent;
    memoised, a dataset file until it changes)."""
    return stored_part(cfg, partition_id, source_stamp(cfg.dataset))


@functools.lru_cache(maxsize=64)
def stored_part(
    cfg: DataConfig, partition_id: int, stamp: tuple[int, ...] | None
) -> dict[str, Any]:
    """:func:`client_part` of a dataset at ``stamp`` (:func:`~fgl_flower.datasets.files.
    source_stamp`; the memo's key)."""
    r = _resolve(cfg)
    if r.members is not None:  # dataset groups: client k loads only its own dataset
        return _group_part(r, cfg, partition_id)
    folder = _folder(r, cfg)
    if r.partitioner.natural_clients and num_parts(folder) != cfg.num_clients:
        raise r.partitioner.count_error(
            r.partition, r.dataset, num_parts(folder), cfg.num_clients, dict(r.part_opts)
        )
    if r.level == "node":
        return load_node_part(folder, partition_id)
    part = load_part(folder, partition_id)
    if r.level == "graph":
        from torch_geometric.data import Data

        part["graphs"] = [Data.from_dict(g) for g in part["graphs"]]
    return part


client_part.cache_clear = stored_part.cache_clear  # type: ignore[attr-defined]
