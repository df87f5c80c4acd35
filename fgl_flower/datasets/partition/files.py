"""``files``: client node lists read from ``<dir>/<prefix>_*.txt`` (e.g. FedSpray's partitions)."""

from __future__ import annotations

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

    def _files(self, dataset: str, num_clients: int, opts: Mapping[str, Scalar | None]) -> list[Path]:
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
        parts = [np.sort(np.atleast_1d(np.loadtxt(f)).astype(np.int64))
                 for f in self._files(inp.dataset, num_clients, opts)]
        ids = np.concatenate(parts)
        if ids.size and (ids.min() < 0 or ids.max() >= inp.num_items):
            raise ConfigError(f"partition 'files': node ids outside [0, {inp.num_items}).")
        if np.unique(ids).size != ids.size:
            raise ConfigError("partition 'files': a node is listed in several files.")
        return parts
