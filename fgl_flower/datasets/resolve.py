"""What defines the clients' data, and its validation: no data read (but a ``.pt`` dataset
file, opened to tell a node task from a graph task).

:class:`DataConfig` names a dataset (or group), a partitioner with its options, the
number of clients, the splits and the edge noise; :func:`validate_data_config` checks names,
ratios and options against the registries, so a bad config is refused before torch is
imported. ``num_clients = 0`` asks for the partition's natural number of clients (dataset
groups: one per member; ``louvain-merge``: its large communities), see
:func:`fgl_flower.datasets.build.natural_num_clients`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fgl_flower.datasets.catalog import DATASET_GROUPS, DatasetEntry, DatasetGroup
from fgl_flower.datasets.files import source_stamp
from fgl_flower.datasets.options import Scalar, norm_key, resolve_options, unknown_option_error
from fgl_flower.datasets.partition import PARTITIONERS, Partitioner
from fgl_flower.datasets.source import cache_key, entry_of, real_targets
from fgl_flower.datasets.splits import (
    GLOBAL_SPLITS,
    NODE_SPLITS,
    STORED_SPLITS,
    check_five_group,
    check_ratios,
)
from fgl_flower.errors import ConfigError
from fgl_flower.tasks import AUTO, TASKS, Task, resolve_task

if TYPE_CHECKING:
    from fgl_flower.config import RunConfig


@dataclass(frozen=True)
class DataConfig:
    """Everything that defines the clients' data (hashable)."""

    dataset: str  # catalog name, group name, "synthetic" or a dataset file's path
    partition: str  # partitioner name
    num_clients: int  # 0: the partition's natural number of clients
    partition_seed: int = 0
    split: tuple[float, float, float] = (0.6, 0.2, 0.2)
    split_mode: str = "random"  # a name in NODE_SPLITS ("random", "stratified", "five-group", ...)
    split_seed: int = 0
    data_root: str | None = None
    options: tuple[tuple[str, Scalar], ...] = ()  # partitioner/dataset options, sorted
    split_fold: int = 0  # five-group: test on group j, validate on group j + 1 (0..4)
    edge_flip: float = 0.0  # probability that a client edge is replaced by a random non-edge
    task: str = "auto"  # a name in fgl_flower.tasks.TASKS, or "auto": the dataset's own


# --- resolution and validation ----------------------------------------------------------
@dataclass(frozen=True)
class _Resolved:
    dataset: str  # canonical (a file: the path as given)
    key: str  # its name in cache folders (a file: <stem>-<content digest>)
    level: str  # "node" | "graph": the data
    task: str  # what the run learns (a name in fgl_flower.tasks.TASKS)
    members: tuple[str, ...] | None  # dataset group members
    partitioner: Partitioner
    partition: str  # canonical
    part_opts: tuple[tuple[str, Any], ...]
    data_opts: tuple[tuple[str, Any], ...]


def level_of(dataset: str) -> str:
    """``"node"`` or ``"graph"``: the level of a dataset's data (dataset groups: their
    members'); raises ``UnknownNameError``."""
    if dataset in DATASET_GROUPS:
        return DATASET_GROUPS.get(dataset).task
    return entry_of(dataset).task


def _split_options(
    cfg: DataConfig, entry: DatasetEntry | None, partitioner: Partitioner, partition: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    given = {norm_key(k): v for k, v in cfg.options}
    data_accepted = entry.options if entry is not None else {}
    known = [*partitioner.options, *data_accepted]
    for name in given:
        if name not in known:
            raise unknown_option_error(
                name, known, f"partition {partition!r} / dataset {cfg.dataset!r}"
            )
    part = resolve_options(
        partitioner.options,
        {k: v for k, v in given.items() if k in partitioner.options},
        owner=f"partition {partition!r}",
    )
    data = resolve_options(
        data_accepted,
        {k: v for k, v in given.items() if k in data_accepted},
        owner=f"dataset {cfg.dataset!r}",
    )
    return part, data


def _check_splits(cfg: DataConfig, level: str, learns: str) -> None:
    """Ratios, split mode (``five-group``: node tasks, fixed ratios, a fold; link prediction:
    a random edge split; regression: no classes to stratify by) and edge flip."""
    ratios = check_ratios(cfg.split)
    mode = NODE_SPLITS.canonical(cfg.split_mode)
    if learns == "link" and (mode != "random" or cfg.edge_flip):
        raise ConfigError(
            f"task=link splits each client's edges at random (split-mode={mode}, edge-flip="
            f"{cfg.edge_flip:g}): set split-mode=random and edge-flip=0."
        )
    if learns == "graph-regression" and mode not in ("random", *STORED_SPLITS):
        raise ConfigError(
            f"split-mode={mode}: graph regression has no classes to split by; use "
            "split-mode=random (or official)."
        )
    if mode in GLOBAL_SPLITS:
        if level != "node":
            raise ConfigError(
                f"split-mode={mode} splits the nodes of a graph; {cfg.dataset!r} is a "
                "graph-classification dataset: use split-mode=random or stratified."
            )
        check_five_group(ratios, cfg.split_fold)
    p = cfg.edge_flip
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
        raise ConfigError(
            f"edge-flip={p!r}: give the probability in [0, 1) that each edge of a "
            "client is replaced by a random non-edge (0: none)."
        )
    if p and level != "node":
        raise ConfigError(
            f"edge-flip={p} rewires the edges of node-classification clients; "
            f"{cfg.dataset!r} is a graph-classification dataset: set edge-flip=0."
        )


def _check_num_clients(
    cfg: DataConfig, name: str, group: DatasetGroup | None, partitioner: Partitioner, partition: str
) -> None:
    """``num_clients`` is >= 1, or 0 where the partition has a natural count; groups: their size."""
    n = cfg.num_clients
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(
            f"num_clients must be an integer >= 1 (or 0: the partition's natural "
            f"number of clients), got {n!r}."
        )
    if group and n not in (0, len(group.members)):
        raise ConfigError(
            f"Dataset group {name!r} has {len(group.members)} datasets ({', '.join(group.members)}), "
            f"one per client, but num_clients={n}; set num-clients={len(group.members)} or 0."
        )
    if n == 0 and not group and not partitioner.natural_clients:
        natural = sorted(k for k, p in PARTITIONERS.items() if p.natural_clients)
        raise ConfigError(
            f"num-clients=0 asks for the partition's natural number of clients, but partition "
            f"{partition!r} splits into as many clients as asked: set num-clients >= 1 (a natural "
            f"count comes from {', '.join(natural)} and from dataset groups with per-dataset)."
        )


def _resolve(cfg: DataConfig) -> _Resolved:
    """``cfg`` checked and resolved (memoised; a dataset file: until it changes)."""
    return _resolve_at(cfg, source_stamp(cfg.dataset))


@functools.lru_cache(maxsize=128)
def _resolve_at(cfg: DataConfig, stamp: tuple[int, ...] | None) -> _Resolved:
    group = DATASET_GROUPS.get(cfg.dataset) if cfg.dataset in DATASET_GROUPS else None
    entry = None if group else entry_of(cfg.dataset)
    name, level = (group.name, group.task) if group else (entry.name, entry.task)  # type: ignore[union-attr]
    partition = PARTITIONERS.canonical(cfg.partition)
    partitioner = PARTITIONERS.get(partition)()
    kind = "group" if group else level
    if kind not in partitioner.tasks:
        what = "a dataset group" if group else f"a {level}-level dataset"
        usable = sorted(n for n, p in PARTITIONERS.items() if kind in p.tasks)
        raise ConfigError(
            f"Partitioner {partition!r} cannot split {name!r}, {what}. Use one of: {', '.join(usable)}."
        )
    _check_num_clients(cfg, name, group, partitioner, partition)
    part_opts, data_opts = _split_options(cfg, entry, partitioner, partition)
    regression = entry is not None and real_targets(entry, data_opts)
    task = resolve_task(cfg.task, level, regression, name)
    _check_splits(cfg, level, task.name)
    if partitioner.label_skew and not task.classes:
        raise ConfigError(
            f"partition {partition!r} skews the classes among clients; task {task.name} has "
            "none to skew: use random, or a structural partitioner (louvain, metis) for nodes."
        )
    partitioner.check(name, cfg.num_clients, part_opts)
    return _Resolved(
        name,
        cache_key(entry, data_opts) if entry is not None else name,
        level,
        task.name,
        group.members if group else None,
        partitioner,
        partition,
        tuple(sorted(part_opts.items())),
        tuple(sorted(data_opts.items())),
    )


def validate_data_config(cfg: DataConfig) -> None:
    """Cheap checks (names, ratios, split mode and fold, edge flip, ``num_clients``, options,
    partition files); ``ConfigError``."""
    _resolve(cfg)


def dataset_task(asked: str, dataset: str, options: Mapping[str, Any]) -> Task:
    """What a run asking for task ``asked`` (a name or ``auto``) learns on ``dataset`` with
    data ``options``: read from the dataset's entry alone (no partition is checked or built);
    ``ConfigError`` where they disagree."""
    if dataset in DATASET_GROUPS:
        return resolve_task(asked, DATASET_GROUPS.get(dataset).task, False, dataset)
    entry = entry_of(dataset)
    return resolve_task(asked, entry.task, real_targets(entry, options), entry.name)


def run_task(cfg: RunConfig) -> Task:
    """What the run ``cfg`` learns: its ``task``, or with ``auto`` its dataset's own (the
    clients' data are checked against it before any trains)."""
    if cfg.task != AUTO:
        return TASKS.get(cfg.task)
    return dataset_task(cfg.task, cfg.dataset, dict(cfg.data_config().options))
