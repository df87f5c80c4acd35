"""A user's graph object as a dataset: stored once in the cache, keyed by its content.

``fgl_flower.run(dataset=data)`` takes a PyG ``Data`` (a node task) or a sequence of
``Data`` / a PyG dataset of graphs (a graph task). :func:`store_object` writes it as a
``.pt`` file of plain tensors under ``<cache>/objects/`` (the name is its content's sha256,
so the same object is stored once, and a changed one gets a new file and a new partition);
the run config then names that file, which every backend (in-process, simulation,
deployment with a shared cache) reads like any dataset file
(:class:`~fgl_flower.datasets.files.FileEntry`), each client loading only its own part of
the partition built from it.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fgl_flower.datasets.cache import stored_blob
from fgl_flower.errors import ConfigError

#: The tensors of a node graph that are stored (others are dropped).
NODE_KEYS = ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask")


def _tensors(data: Any, keys: Sequence[str]) -> dict[str, Any]:
    return {k: getattr(data, k) for k in keys if getattr(data, k, None) is not None}


def as_stored(obj: Any) -> dict[str, Any]:
    """``obj`` as a dict of tensors: a node graph's :data:`NODE_KEYS`, or ``{"graphs":
    [{"x", "edge_index", "y"}, ...]}``; ``ConfigError`` for anything else."""
    from torch_geometric.data import Data

    if isinstance(obj, Data):
        return _tensors(obj, NODE_KEYS)
    try:
        graphs = [obj[i] for i in range(len(obj))]
    except TypeError:
        graphs = None
    if graphs and all(isinstance(g, Data) for g in graphs):
        return {"graphs": [_tensors(g, ("x", "edge_index", "y")) for g in graphs]}
    raise ConfigError(
        f"dataset: a {type(obj).__name__} is not a graph; give a PyG Data (node tasks), a "
        "non-empty list or Dataset of Data (graph tasks), a file path or a catalog name."
    )


def store_object(obj: Any) -> Path:
    """The cached ``.pt`` file holding ``obj`` (written once per content)."""
    import torch

    buffer = io.BytesIO()
    torch.save(as_stored(obj), buffer)
    return stored_blob("objects", "graph", ".pt", buffer.getvalue())
