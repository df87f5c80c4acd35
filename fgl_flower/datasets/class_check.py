"""Before a run: every client has a training example, and every class that occurs has one
on some client.

The answer depends only on the partition and the split (``split``, ``split_mode``,
``split_seed``, ``split_fold``), so it is remembered in the partition's cache folder
(``classes.json``, one entry per split). A run on a cached partition and split is then
checked without loading a client, and without importing torch: the launcher of a
simulation needs torch for nothing else (importing it takes seconds).
"""

from __future__ import annotations

import json
from logging import WARNING
from pathlib import Path

from flwr.common.logger import log

from fgl_flower.datasets.cache import atomic_write, partition_tag, stored_partition
from fgl_flower.datasets.resolve import DataConfig, _resolve
from fgl_flower.datasets.root import file_lock
from fgl_flower.errors import ConfigError
from fgl_flower.tasks import TASKS

#: The file in a partition's cache folder that holds the answers, keyed by split.
CLASSES_FILE = "classes.json"

#: dataset -> (kind, labels that occur, labels trained, clients without a training example)
Labels = dict[str, tuple[str, list[int], list[int], list[int]]]


def check_training_classes(cfg: DataConfig, allow: bool = False) -> None:
    """Every client has a training example (a loss over none is NaN), always a
    :class:`ConfigError`; and every class that occurs in the data has one on some client
    (else no model can learn it): a :class:`ConfigError` naming the classes, or with
    ``allow`` (run option ``untrained-classes = allow``) a logged warning. Dataset groups
    are checked per member dataset (their label spaces differ). ``num_clients = 0`` is
    resolved first."""
    split = ",".join(f"{r:g}" for r in cfg.split)
    if not TASKS.get(_resolve(cfg).task).classes:
        return _check_training_examples(cfg, split)
    found = labels(cfg)
    for name, (kind, _, _, idle) in found.items():
        if idle:
            raise ConfigError(
                f"{name}: client(s) {idle[:10]}{' ...' if len(idle) > 10 else ''} have no training "
                f"{kind} (split={split}, split-mode={cfg.split_mode}), so they cannot train. Raise "
                "the train ratio, use split-mode=stratified or fewer clients."
            )
    for name, (kind, present, trained, _) in found.items():
        missing = sorted(set(present) - set(trained))
        if not missing:
            continue
        what = (
            f"{name}: class(es) {missing[:10]} have no training {kind} on any client (they "
            "occur only in validation/test splits), so no model can learn them."
        )
        if allow:
            log(WARNING, "%s Going on (untrained-classes=allow).", what)
            continue
        raise ConfigError(
            f"{what} Raise the train ratio (split={split}), use "
            "split-mode=stratified or fewer clients, or set untrained-classes=allow to run "
            "the protocol as it is."
        )


def _check_training_examples(cfg: DataConfig, split: str) -> None:
    """Tasks without classes: every client loads (link prediction splits its edges, and
    says when a client has too few) and has a training example."""
    from fgl_flower.datasets.build import with_natural_clients
    from fgl_flower.datasets.client_data import load_client_data  # torch

    cfg = with_natural_clients(cfg)
    idle = [k for k in range(cfg.num_clients) if load_client_data(cfg, k).num_train == 0]
    if idle:
        kind = load_client_data(cfg, idle[0]).kind
        raise ConfigError(
            f"{cfg.dataset}: client(s) {idle[:10]} have no training {kind} (split={split}), "
            "so they cannot train. Raise the train ratio or use fewer clients."
        )


def labels(cfg: DataConfig) -> Labels:
    """``{dataset: (kind, labels that occur, labels with a training example, clients with
    none)}``, from the partition's ``classes.json`` when it holds this split (an answer
    written before the last item was kept is computed again), else computed by loading every
    client (:func:`~fgl_flower.datasets.stats.class_labels`) and remembered there."""
    key = split_key(cfg)
    folder = _folder(cfg)
    known = _read(folder).get(key) if folder is not None else None
    if known is not None and all(len(entry) == 4 for entry in known.values()):
        return {name: tuple(entry) for name, entry in known.items()}
    from fgl_flower.datasets.stats import class_labels  # torch

    found = {
        name: (kind, sorted(p), sorted(t), sorted(i))
        for name, (kind, p, t, i) in class_labels(cfg).items()
    }
    if (folder := _folder(cfg)) is not None:  # built by now (dataset groups have none)
        with file_lock(folder / f"{CLASSES_FILE}.lock"):
            entries = {**_read(folder), key: found}
            atomic_write(
                folder / CLASSES_FILE, lambda p: p.write_text(json.dumps(entries, sort_keys=True))
            )
    return found


def split_key(cfg: DataConfig) -> str:
    """What, besides the partition's folder, decides which nodes or graphs train (edge flips
    do not; the client count is in the folder's name except for natural partitioners)."""
    return json.dumps(
        {
            "clients": cfg.num_clients,
            "split": list(cfg.split),
            "mode": cfg.split_mode,
            "seed": cfg.split_seed,
            "fold": cfg.split_fold,
        },
        sort_keys=True,
    )


def _folder(cfg: DataConfig) -> Path | None:
    """The complete cache folder of ``cfg``'s partition, or ``None`` (not built yet, a dataset
    group, or a natural count still to resolve)."""
    r = _resolve(cfg)
    if r.members is not None or (cfg.num_clients == 0 and not r.partitioner.natural_clients):
        return None
    return stored_partition(partition_tag(r, cfg)[0])


def _read(folder: Path) -> dict:
    try:
        return json.loads((folder / CLASSES_FILE).read_text())
    except (OSError, ValueError):  # absent, or written by a run that was killed: recompute
        return {}
