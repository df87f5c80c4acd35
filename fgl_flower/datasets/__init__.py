"""Datasets, partitioners and per-client splits for federated graph learning.

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
    "dataset_status": "catalog",
    "load_dataset": "catalog",
    "DataConfig": "resolve",
    "task_of": "resolve",
    "validate_data_config": "resolve",
    "GraphClientData": "federated",
    "NodeClientData": "federated",
    "load_client_data": "federated",
    "partition_stats": "federated",
    "natural_num_clients": "federated",
    "with_natural_clients": "federated",
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
    "task_of",
    "validate_data_config",
    "with_natural_clients",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)


if TYPE_CHECKING:
    from fgl_flower.datasets.catalog import (
        DATASET_GROUPS,
        DATASETS,
        DatasetGroup,
        dataset_status,
        load_dataset,
    )
    from fgl_flower.datasets.federated import (
        GraphClientData,
        NodeClientData,
        load_client_data,
        natural_num_clients,
        partition_stats,
        with_natural_clients,
    )
    from fgl_flower.datasets.partition import PARTITIONERS, Partitioner, PartitionInput
    from fgl_flower.datasets.resolve import DataConfig, task_of, validate_data_config
    from fgl_flower.datasets.root import cache_dir, resolve_data_root
    from fgl_flower.datasets.splits import NODE_SPLITS
    from fgl_flower.datasets.synthetic import contextual_sbm
