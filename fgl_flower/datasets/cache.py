"""On-disk partition cache: a folder per partition, complete once its ``meta.json`` exists.

Layout: ``<cache_dir()>/partitions/<tag>/`` holds the partition's files (node tasks: a few
arrays for all clients, :mod:`fgl_flower.datasets.node_store`; graph tasks: one
``torch.save`` file per client, :func:`write_client_files`) and ``meta.json``, written last.
Creators serialise on ``<tag>.lock``; readers of a complete partition take no lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fgl_flower.datasets.root import cache_dir, file_lock

if TYPE_CHECKING:
    from fgl_flower.datasets.resolve import DataConfig, _Resolved

#: Bump when the stored format changes (part of every cache tag; a partitioner whose
#: output changes bumps its own ``Partitioner.version`` instead).
#: 2: node parts hold ``num_nodes_total`` (the whole graph's node count).
#: 3: node partitions are arrays for all clients (``node_store``), not a file per client.
FORMAT_VERSION = 3


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary sibling of ``path``, then rename it into place."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def stored_blob(folder: str, prefix: str, suffix: str, blob: bytes) -> Path:
    """``<cache>/<folder>/<prefix>-<sha256 of blob>.<suffix>`` holding ``blob``, written once
    (atomically) per content: a user's object or array, named by what it holds."""
    path = cache_dir() / folder / f"{prefix}-{hashlib.sha256(blob).hexdigest()[:16]}{suffix}"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda tmp: tmp.write_bytes(blob))
    return path


def partition_dir(tag: str) -> Path:
    return cache_dir() / "partitions" / tag


def partition_tag(r: _Resolved, cfg: DataConfig) -> tuple[str, dict[str, Any]]:
    """The cache tag and metadata of ``cfg``'s partition (``r``: ``cfg`` resolved); natural
    partitioners are keyed with ``num_clients`` 0, whatever count they give."""
    num_clients = 0 if r.partitioner.natural_clients else cfg.num_clients
    meta = {
        "dataset": r.key,
        "partition": r.partition,
        "num_clients": num_clients,
        "partition_seed": cfg.partition_seed,
        "options": dict(r.part_opts + r.data_opts),
        "format": FORMAT_VERSION,
        "partitioner_version": r.partitioner.version,
    }
    fingerprint = r.partitioner.fingerprint(dict(r.part_opts))
    if fingerprint:  # the content of its input files (a key without it is unchanged)
        meta["input"] = fingerprint
    digest = hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:16]
    return f"{r.key}-{r.partition}-{num_clients}-{digest}", meta


def stored_partition(tag: str) -> Path | None:
    """The folder of partition ``tag`` if it is complete, else ``None`` (nothing is built)."""
    folder = partition_dir(tag)
    return folder if (folder / "meta.json").exists() else None


def client_file(folder: Path, partition_id: int) -> Path:
    return folder / f"client_{partition_id:04d}.pt"


def ensure_partition(
    tag: str, meta: Mapping[str, Any], write: Callable[[Path], Mapping[str, Any]]
) -> Path:
    """Return the folder of partition ``tag``, creating it with ``write(folder)`` if absent.

    ``write`` stores the clients' parts in the folder and returns what ``meta.json`` adds
    to ``meta`` about them (at least ``num_parts``).
    """
    folder = partition_dir(tag)
    done = folder / "meta.json"
    if done.exists():
        return folder
    with file_lock(folder.parent / f"{tag}.lock"):
        if done.exists():  # another process finished meanwhile
            return folder
        folder.mkdir(parents=True, exist_ok=True)
        info = {**meta, **write(folder), "format": FORMAT_VERSION}
        atomic_write(done, lambda p: p.write_text(json.dumps(info, indent=1, sort_keys=True)))
    return folder


def write_client_files(folder: Path, parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Store one ``torch.save`` file per client (``parts`` in client order)."""
    import torch

    count = 0
    for k, part in enumerate(parts):
        atomic_write(client_file(folder, k), lambda p, obj=part: torch.save(obj, p))
        count += 1
    return {"layout": "client-files", "num_parts": count}


def num_parts(folder: Path) -> int:
    """The number of clients of the complete partition in ``folder`` (from its ``meta.json``)."""
    return int(json.loads((folder / "meta.json").read_text())["num_parts"])


def load_part(folder: Path, partition_id: int) -> dict[str, Any]:
    """Load one client's stored dict (tensors only, ``weights_only``)."""
    import torch

    return torch.load(client_file(folder, partition_id), weights_only=True)
