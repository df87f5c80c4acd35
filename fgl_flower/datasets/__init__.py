"""Datasets, partitioners and per-client splits for federated graph learning.

The pipeline, one module a step: source (:mod:`.source`: a catalog name, a file or a
user's stored object) -> checks (:mod:`.checks`) -> config (:mod:`.resolve`) -> partition
(:mod:`.partition`) -> store (:mod:`.build`) -> a client's part and splits
(:mod:`.client_data`).

Entry points: :class:`DataConfig`, :func:`load_client_data`, :func:`partition_stats`,
:func:`natural_num_clients` (the client count a partition gives by itself: ``num-clients = 0``)
and :func:`with_natural_clients`; the registries :data:`DATASETS`, :data:`DATASET_GROUPS`, :data:`PARTITIONERS` and
:data:`NODE_SPLITS` list what is available.

Names are imported on first use: the registries and :func:`validate_data_config` need no
torch, so a bad dataset or partition name is refused before torch is loaded.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "DATASETS": "catalog",
    "DATASET_GROUPS": "catalog",
    "DatasetGroup": "catalog",
    "dataset_status": "source",
    "load_dataset": "source",
    "DataConfig": "resolve",
    "level_of": "resolve",
    "validate_data_config": "resolve",
    "GraphClientData": "client_data",
    "NodeClientData": "client_data",
    "load_client_data": "client_data",
    "partition_stats": "stats",
    "natural_num_clients": "build",
    "with_natural_clients": "build",
    "GraphSet": "graphset",
    "store_object": "objects",
    "PARTITIONERS": "partition",
    "Partitioner": "partition",
    "PartitionInput": "partition",
    "cache_dir": "root",
    "resolve_data_root": "root",
    "NODE_SPLITS": "splits",
    "contextual_sbm": "synthetic",
}

__all__ = [
    "DATASETS",
    "DATASET_GROUPS",
    "NODE_SPLITS",
    "PARTITIONERS",
    "DataConfig",
    "DatasetGroup",
    "GraphClientData",
    "GraphSet",
    "NodeClientData",
    "Partitioner",
    "PartitionInput",
    "cache_dir",
    "contextual_sbm",
    "dataset_status",
    "load_client_data",
    "load_dataset",
    "natural_num_clients",
    "partition_stats",
    "resolve_data_root",
    "store_object",
    "level_of",
    "validate_data_config",
    "with_natural_clients",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)


if TYPE_CHECKING:
    from fgl_flower.datasets.build import natural_num_clients, with_natural_clients
    from fgl_flower.datasets.catalog import DATASET_GROUPS, DATASETS, DatasetGroup
    from fgl_flower.datasets.client_data import GraphClientData, NodeClientData, load_client_data
    from fgl_flower.datasets.graphset import GraphSet
    from fgl_flower.datasets.objects import store_object
    from fgl_flower.datasets.partition import PARTITIONERS, Partitioner, PartitionInput
    from fgl_flower.datasets.resolve import DataConfig, level_of, validate_data_config
    from fgl_flower.datasets.root import cache_dir, resolve_data_root
    from fgl_flower.datasets.source import dataset_status, load_dataset
    from fgl_flower.datasets.splits import NODE_SPLITS
    from fgl_flower.datasets.stats import partition_stats
    from fgl_flower.datasets.synthetic import contextual_sbm
