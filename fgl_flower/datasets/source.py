"""The first step of the pipeline: a dataset reference -> its entry -> the graph(s).

A reference is a catalog name (``Cora``, ``ogbn-arxiv``, ``synthetic``; :data:`~fgl_flower.
datasets.catalog.DATASETS`) or the path of a dataset file (``.pt``, ``.npz``, ``.csv``;
:class:`~fgl_flower.datasets.files.FileEntry`), which is also what a user's object becomes
(:mod:`fgl_flower.datasets.objects`). Then, in order: :mod:`~fgl_flower.datasets.resolve`
(the config, checked), :mod:`~fgl_flower.datasets.build` (partition and store),
:mod:`~fgl_flower.datasets.client_data` (a client's part and its splits).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from fgl_flower.datasets.catalog import DATASETS, DatasetEntry
from fgl_flower.datasets.files import FileEntry, is_file_reference
from fgl_flower.datasets.options import Scalar, resolve_options
from fgl_flower.datasets.root import resolve_data_root

if TYPE_CHECKING:
    from torch_geometric.data import Data, Dataset

    from fgl_flower.datasets.graphset import GraphSet


def entry_of(name: str) -> DatasetEntry:
    """The entry a reference names: a file, or a catalog name (``UnknownNameError``, with
    close names, when it is neither)."""
    if is_file_reference(name):
        return FileEntry.of(name)
    return DATASETS.get(name)


def cache_key(entry: DatasetEntry, options: Mapping[str, Scalar]) -> str:
    """The entry's name in cache folders: a catalog name, or a file's ``<stem>-<digest>``."""
    key = getattr(entry, "cache_key", None)
    return key(options) if key is not None else entry.name


def real_targets(entry: DatasetEntry, options: Mapping[str, Scalar]) -> bool:
    """Whether the entry's graphs have real-valued targets (a graph regression dataset): an
    entry says so by a ``real_targets(options)`` method (OGB's regression sets, a file of
    graphs with float ``y``, ``synthetic-graphs`` with ``target = regression``)."""
    check = getattr(entry, "real_targets", None)
    return bool(check(options)) if check is not None else False


def load_dataset(
    name: str, root: str | Path | None = None, options: Mapping[str, Scalar] | None = None
) -> Data | Dataset | GraphSet:
    """Load a dataset by reference.

    Args:
        name: Catalog name (case-insensitive) or dataset file path.
        root: Data root (see :func:`~fgl_flower.datasets.root.resolve_data_root`).
        options: Dataset options (``synthetic``: its generator; node datasets:
            ``undirected``; files: the edge and column options); defaults fill the rest.

    Returns:
        Node tasks: one ``Data`` (``x`` dense or sparse COO, ``edge_index``, ``y``,
        ``num_classes``). Graph tasks: the graphs (a PyG dataset or a
        :class:`~fgl_flower.datasets.graphset.GraphSet`).

    Raises:
        UnknownNameError: ``name`` is neither in the catalog nor a file name.
        DataUnavailableError: files are missing and cannot be downloaded.
        DataError: a user's graph cannot be trained on.
    """
    entry = entry_of(name)
    opts = resolve_options(entry.options, options or {}, owner=f"dataset {entry.name!r}")
    return entry.load(resolve_data_root(root), opts)


def dataset_status(name: str, root: str | Path | None = None) -> tuple[bool, Path]:
    """``(present, folder)``: whether ``name``'s files are available, and where they go."""
    return entry_of(name).status(resolve_data_root(root))
