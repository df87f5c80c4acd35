"""Datasets, partitioners and per-client splits for federated graph learning.

Entry points: :class:`DataConfig`, :func:`load_client_data`, :func:`partition_stats`;
the registries :data:`DATASETS`, :data:`DATASET_GROUPS`, :data:`PARTITIONERS` and
:data:`NODE_SPLITS` list what is available.
"""

from fgl_flower.datasets.catalog import (
    DATASET_GROUPS,
    DATASETS,
    DatasetGroup,
    dataset_status,
    load_dataset,
)
from fgl_flower.datasets.federated import (
    DataConfig,
    GraphClientData,
    NodeClientData,
    load_client_data,
    partition_stats,
    task_of,
    validate_data_config,
)
from fgl_flower.datasets.partition import PARTITIONERS, Partitioner, PartitionInput
from fgl_flower.datasets.root import cache_dir, resolve_data_root
from fgl_flower.datasets.splits import NODE_SPLITS
from fgl_flower.datasets.synthetic import contextual_sbm

__all__ = [
    "DATASETS", "DATASET_GROUPS", "NODE_SPLITS", "PARTITIONERS",
    "DataConfig", "DatasetGroup", "GraphClientData", "NodeClientData", "Partitioner",
    "PartitionInput", "cache_dir", "contextual_sbm", "dataset_status", "load_client_data",
    "load_dataset", "partition_stats", "resolve_data_root", "task_of", "validate_data_config",
]
