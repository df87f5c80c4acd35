"""``files``: client node lists read from ``<dir>/<prefix>_*.txt`` (e.g. FedSpray's partitions)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from fgl_flower.datasets.options import Option, Scalar
from fgl_flower.datasets.partition.base import PARTITIONERS, Partitioner, PartitionInput
from fgl_flower.errors import ConfigError


def partition_files(directory: str | None, prefix: str) -> list[Path]:
    """The files ``<directory>/<prefix>_*.txt`` sorted by name; ``ConfigError`` if none."""
    if not directory:
        raise ConfigError("partition 'files' needs option dir=<folder with <Dataset>_*.txt files>.")
    folder = Path(directory).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"partition 'files': folder {folder} does not exist.")
    files = sorted(folder.glob(f"{prefix}_*.txt"))
    if not files:
        raise ConfigError(f"partition 'files': no files {prefix}_*.txt in {folder}.")
    return files


@PARTITIONERS.register("files")
class FilesPartitioner(Partitioner):
    """One client per file; each line a global node id (``np.loadtxt(path).astype(int)``)."""

    tasks = frozenset({"node"})
    options = {
        "dir": Option(str, None, "folder holding the node-list files"),
        "prefix": Option(str, None, "file-name prefix (default: the dataset name)"),
    }

    def _files(
        self, dataset: str, num_clients: int, opts: Mapping[str, Scalar | None]
    ) -> list[Path]:
        files = partition_files(opts["dir"], str(opts["prefix"] or dataset))  # type: ignore[arg-type]
        if len(files) != num_clients:
            raise ConfigError(
                f"partition 'files': {len(files)} files {files[0].name.split('_')[0]}_*.txt in "
                f"{files[0].parent}, but num_clients={num_clients}; they must match."
            )
        return files

    def check(self, dataset: str, num_clients: int, opts: Mapping[str, Scalar | None]) -> None:
        self._files(dataset, num_clients, opts)

    def split(
        self, inp: PartitionInput, num_clients: int, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        files = self._files(inp.dataset, num_clients, opts)
        parts = [_node_ids(f) for f in files]
        n = inp.num_items
        for f, ids in zip(files, parts):
            outside = ids[(ids < 0) | (ids >= n)]
            if outside.size:
                raise ConfigError(
                    f"partition 'files': {f} lists node ids outside [0, {n}) of "
                    f"{inp.dataset!r}: {outside[:5].tolist()}."
                )
        owner = np.full(n, -1)
        for k, ids in enumerate(parts):
            taken = ids[owner[ids] >= 0]
            if taken.size:
                other = files[int(owner[taken[0]])]
                raise ConfigError(
                    f"partition 'files': {other.name} and {files[k].name} both list "
                    f"node(s) {np.unique(taken)[:5].tolist()}; each node belongs to "
                    "one client."
                )
            owner[ids] = k
        return parts


def _node_ids(path: Path) -> np.ndarray:
    """The sorted node ids of one file (one integer per line; an empty file: none)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # numpy warns about empty files
            values = np.loadtxt(path, ndmin=1)
    except ValueError as e:
        raise ConfigError(
            f"partition 'files': {path} is not a list of node ids, one integer per line ({e})."
        ) from None
    ids = values.astype(np.int64)
    if not np.array_equal(ids, values):
        raise ConfigError(f"partition 'files': {path} holds non-integer node ids.")
    return np.sort(ids)
