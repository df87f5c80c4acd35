"""``assign``: the user's own partition, one client id per node (or graph) in an array file.

The file (option ``file``) is a ``.npy`` array or a ``.csv``/``.txt`` file with one integer per
line (a header line is skipped), ``[N]`` entries for the ``N`` nodes (graphs) in the
dataset's order: entry ``i`` is the client of item ``i``, in ``0..K-1``, or ``-1`` for an
item no client holds. ``K`` is the largest id + 1 (``num-clients = 0`` takes it; another
count is refused). From Python, ``fgl_flower.run(partition=array)`` stores the array in the
cache (:func:`store_assignment`) and sets the file, as ``fgl run --partition clients.npy``
does for a file. Node-list files (one file per client)
are the ``files`` partitioner.
"""

from __future__ import annotations

import functools
import hashlib
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fgl_flower.datasets.options import Option, Scalar
from fgl_flower.datasets.partition.base import PARTITIONERS, Partitioner, PartitionInput
from fgl_flower.errors import ConfigError

#: An item in no client.
UNASSIGNED = -1


#: File suffixes of an assignment (``--partition clients.npy`` means ``assign`` with that file).
SUFFIXES = (".npy", ".csv", ".txt")


def is_assignment_file(partition: str) -> bool:
    """Whether a ``partition`` value names an assignment file rather than a partitioner."""
    return partition.lower().endswith(SUFFIXES)


@functools.lru_cache(maxsize=8)
def _read(path: str, stamp: int) -> np.ndarray:
    p = Path(path)
    try:
        if p.suffix.lower() == ".npy":
            values = np.load(p, allow_pickle=False)
        else:
            lines = [ln.strip().split(",")[-1] for ln in p.read_text().splitlines() if ln.strip()]
            if lines and not lines[0].lstrip("-").isdigit():  # a header
                lines = lines[1:]
            values = np.array([float(v) for v in lines])
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"partition 'assign': {p} is not an array of client ids ({type(exc).__name__}: {exc})."
        ) from None
    values = np.asarray(values).reshape(-1)
    if values.size and not np.all(np.mod(values, 1) == 0):
        raise ConfigError(f"partition 'assign': {p} holds non-integer client ids.")
    ids = values.astype(np.int64)
    if ids.size and ids.min() < UNASSIGNED:
        raise ConfigError(
            f"partition 'assign': {p} holds client id {ids.min()}; use 0..K-1, or -1 for no client."
        )
    ids.setflags(write=False)
    return ids


def read_assignment(file: str | None) -> np.ndarray:
    """The ``[N]`` client ids of ``file`` (``ConfigError`` if absent or not ids)."""
    if not file:
        raise ConfigError("partition 'assign' needs option file=<.npy or .csv of client ids>.")
    path = Path(file).expanduser()
    if not path.is_file():
        raise ConfigError(f"partition 'assign': file {path} does not exist.")
    return _read(str(path.resolve()), path.stat().st_mtime_ns)


def store_assignment(assignment: Any) -> Path:
    """The cached ``.npy`` of a client-id array (written once per content)."""
    from fgl_flower.datasets.cache import stored_blob

    ids = np.asarray(assignment)
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise ConfigError(
            f"partition: an array of one integer client id per node (or graph), got shape "
            f"{list(ids.shape)} of {ids.dtype}."
        )
    buffer = io.BytesIO()
    np.save(buffer, ids.astype(np.int64))
    return stored_blob("assignments", "assign", ".npy", buffer.getvalue())


@PARTITIONERS.register("assign")
class AssignPartitioner(Partitioner):
    """Client ``k`` holds the items whose entry is ``k`` (see the module)."""

    tasks = frozenset({"node", "graph"})
    natural_clients = True
    options = {"file": Option(str, None, ".npy or .csv: one client id per node (graph)")}

    def check(self, dataset: str, num_clients: int, opts: Mapping[str, Scalar | None]) -> None:
        ids = read_assignment(opts["file"])  # type: ignore[arg-type]
        found = int(ids.max()) + 1 if ids.size else 0
        if num_clients not in (0, found):
            raise self.count_error("assign", dataset, found, num_clients, opts)

    def fingerprint(self, opts: Mapping[str, Scalar | None]) -> str:
        ids = read_assignment(opts["file"])  # type: ignore[arg-type]
        return hashlib.sha256(ids.tobytes()).hexdigest()[:16]

    def natural_rule(self, opts: Mapping[str, Scalar | None]) -> str:
        return f"the client ids of {opts['file']}"

    def natural_split(
        self, inp: PartitionInput, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        ids = read_assignment(opts["file"])  # type: ignore[arg-type]
        if ids.size != inp.num_items:
            raise ConfigError(
                f"partition 'assign': {opts['file']} has {ids.size} entries but {inp.dataset!r} "
                f"has {inp.num_items} items (nodes or graphs); give one client id per item."
            )
        parts = [np.flatnonzero(ids == k) for k in range(int(ids.max()) + 1)]
        empty = [k for k, p in enumerate(parts) if p.size == 0]
        if empty:
            raise ConfigError(
                f"partition 'assign': clients {empty[:5]} of {opts['file']} hold no item; "
                "number the clients 0..K-1 without gaps."
            )
        return parts

    def split(
        self, inp: PartitionInput, num_clients: int, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        parts = self.natural_split(inp, seed, opts)
        if num_clients not in (0, len(parts)):
            raise self.count_error("assign", inp.dataset, len(parts), num_clients, opts)
        return parts
