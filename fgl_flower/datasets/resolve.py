"""What defines the clients' data, and its validation: no torch, no data read.

:class:`DataConfig` names a dataset (or group), a partitioner with its options, the
number of clients and the splits; :func:`validate_data_config` checks names, ratios and
options against the registries, so a bad config is refused before torch is imported.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from fgl_flower.datasets.catalog import DATASET_GROUPS, DATASETS, DatasetEntry
from fgl_flower.datasets.options import Scalar, norm_key, resolve_options, unknown_option_error
from fgl_flower.datasets.partition import PARTITIONERS, Partitioner
from fgl_flower.datasets.splits import NODE_SPLITS, check_ratios
from fgl_flower.errors import ConfigError


@dataclass(frozen=True)
class DataConfig:
    """Everything that defines the clients' data (hashable)."""

    dataset: str  # catalog name, group name or "synthetic"
    partition: str  # partitioner name
    num_clients: int
    partition_seed: int = 0
    split: tuple[float, float, float] = (0.6, 0.2, 0.2)
    split_mode: str = "random"  # "random" | "stratified"
    split_seed: int = 0
    data_root: str | None = None
    options: tuple[tuple[str, Scalar], ...] = ()  # partitioner/dataset options, sorted


# --- resolution and validation ----------------------------------------------------------
@dataclass(frozen=True)
class _Resolved:
    dataset: str  # canonical
    task: str  # "node" | "graph"
    members: tuple[str, ...] | None  # dataset group members
    partitioner: Partitioner
    partition: str  # canonical
    part_opts: tuple[tuple[str, Any], ...]
    data_opts: tuple[tuple[str, Any], ...]


def task_of(dataset: str) -> str:
    """``"node"`` or ``"graph"`` (dataset groups are graph tasks); raises ``UnknownNameError``."""
    if dataset in DATASET_GROUPS:
        return DATASET_GROUPS.get(dataset).task
    return DATASETS.get(dataset).task


def _split_options(
    cfg: DataConfig, entry: DatasetEntry | None, partitioner: Partitioner, partition: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    given = {norm_key(k): v for k, v in cfg.options}
    data_accepted = entry.options if entry is not None else {}
    known = [*partitioner.options, *data_accepted]
    for name in given:
        if name not in known:
            raise unknown_option_error(name, known, f"partition {partition!r} / dataset {cfg.dataset!r}")
    part = resolve_options(partitioner.options, {k: v for k, v in given.items() if k in partitioner.options},
                           owner=f"partition {partition!r}")
    data = resolve_options(data_accepted, {k: v for k, v in given.items() if k in data_accepted},
                           owner=f"dataset {cfg.dataset!r}")
    return part, data


@functools.lru_cache(maxsize=128)
def _resolve(cfg: DataConfig) -> _Resolved:
    if not isinstance(cfg.num_clients, int) or cfg.num_clients < 1:
        raise ConfigError(f"num_clients must be an integer >= 1, got {cfg.num_clients!r}.")
    check_ratios(cfg.split)
    NODE_SPLITS.get(cfg.split_mode)
    group = DATASET_GROUPS.get(cfg.dataset) if cfg.dataset in DATASET_GROUPS else None
    entry = None if group else DATASETS.get(cfg.dataset)
    name, task = (group.name, group.task) if group else (entry.name, entry.task)  # type: ignore[union-attr]
    partition = PARTITIONERS.canonical(cfg.partition)
    partitioner = PARTITIONERS.get(partition)()
    kind = "group" if group else task
    if kind not in partitioner.tasks:
        what = "a dataset group" if group else f"a {task}-classification dataset"
        usable = sorted(n for n, p in PARTITIONERS.items() if kind in p.tasks)
        raise ConfigError(
            f"Partitioner {partition!r} cannot split {name!r}, {what}. Use one of: {', '.join(usable)}."
        )
    if group and cfg.num_clients != len(group.members):
        raise ConfigError(
            f"Dataset group {name!r} has {len(group.members)} datasets ({', '.join(group.members)}), "
            f"one per client, but num_clients={cfg.num_clients}."
        )
    part_opts, data_opts = _split_options(cfg, entry, partitioner, partition)
    partitioner.check(name, cfg.num_clients, part_opts)
    return _Resolved(name, task, group.members if group else None, partitioner, partition,
                     tuple(sorted(part_opts.items())), tuple(sorted(data_opts.items())))


def validate_data_config(cfg: DataConfig) -> None:
    """Cheap checks (names, ratios, ``num_clients``, options, partition files); ``ConfigError``."""
    _resolve(cfg)
