"""Checkpoints of a run, so that a crashed or stopped run can be resumed.

Two kinds, both Flower :class:`~flwr.app.RecordDict` s in one file each, written atomically
(a temporary file, then ``os.replace``):

* the **server** checkpoint ``<checkpoint-dir>/server.records``, written after every
  ``checkpoint-every``-th round: the round, the flat run config, the global arrays, the
  strategy's state (:attr:`~fgl_flower.strategies.base.FGLStrategy.checkpointed`) and the
  round whose evaluation is still pending (fused evaluation);
* a **client** checkpoint ``<client folder>/partition-<i>/round-<r>.records`` of the
  client's ``context.state`` after each of its train messages. A resumed run that restarts
  from server round ``R`` gives each client the newest of its checkpoints of a round
  ``<= R`` (its state as it was when round ``R`` ended); later ones are from rounds that are
  trained again. Older files than that one are deleted as rounds go by; a finished run
  keeps up to ``checkpoint-every + 1`` of them per client (diagnostics read them, e.g.
  ``experiments/feddense/fedstar_head_units.py``).

A client's checkpoint holds what it never sends: its trained model before any clipping, its
optimizer state, its personal parameters. So it is kept apart from the run's results, where
the client runs, private to the user (folders ``0o700``, files ``0o600``): by default in
``<cache>/client-checkpoints/<key>/`` of the client's machine (:func:`client_root`: ``key``
names the run's ``<checkpoint-dir>``, so a resumed run finds it); a SuperNode started with
``--node-config "checkpoint-dir=..."`` keeps it under that folder's ``clients/`` instead, and
must be restarted with it to resume. The server's checkpoint holds what the server knows
anyway and stays with the results.

File format: an 8-byte little-endian header length, a JSON header (per record: its kind,
and per array its dtype, shape, stype and byte range; config and metric records inline),
then the arrays' bytes. No pickle.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from pathlib import Path
from typing import Any

from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from fgl_flower.errors import FGLError
from fgl_flower.results import atomic_write_bytes

SERVER_FILE = "server.records"
_ROUND_FILE = re.compile(r"round-(\d+)\.records$")
_KINDS = {"array": ArrayRecord, "config": ConfigRecord, "metric": MetricRecord}


class CheckpointError(FGLError):
    """A checkpoint is missing or unreadable."""


def write_records(
    path: Path, records: RecordDict, durable: bool = True, private: bool = False
) -> None:
    """Write ``records`` to ``path`` atomically (``durable``: fsync before the rename;
    ``private``: readable by the user alone)."""
    header: dict[str, Any] = {}
    blobs: list[bytes] = []
    offset = 0
    for name, record in records.items():
        if isinstance(record, ArrayRecord):
            arrays = []
            for key, array in record.items():
                arrays.append(
                    [key, array.dtype, list(array.shape), array.stype, offset, len(array.data)]
                )
                blobs.append(array.data)
                offset += len(array.data)
            header[name] = {"kind": "array", "arrays": arrays}
        else:
            kind = "config" if isinstance(record, ConfigRecord) else "metric"
            try:
                items = json.loads(json.dumps(dict(record)))
            except TypeError as e:
                raise CheckpointError(f"Record {name!r} cannot be checkpointed: {e}") from None
            header[name] = {"kind": kind, "items": items}
    head = json.dumps(header).encode()
    atomic_write_bytes(
        path, [struct.pack("<Q", len(head)), head, *blobs], durable=durable, private=private
    )


def read_records(path: Path) -> RecordDict:
    """The :class:`RecordDict` that :func:`write_records` wrote to ``path``."""
    try:
        data = path.read_bytes()
        (size,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + size])
    except (OSError, struct.error, ValueError) as e:
        raise CheckpointError(f"Cannot read checkpoint {path}: {e}") from None
    body = memoryview(data)[8 + size :]
    expected = sum(a[5] for e in header.values() if e["kind"] == "array" for a in e["arrays"])
    if len(body) != expected:
        raise CheckpointError(f"Checkpoint {path} is truncated ({len(body)} of {expected} bytes).")
    records = RecordDict()
    for name, entry in header.items():
        if entry["kind"] == "array":
            record = ArrayRecord()
            for key, dtype, shape, stype, start, length in entry["arrays"]:
                record[key] = Array(
                    dtype=dtype,
                    shape=tuple(shape),
                    stype=stype,
                    data=bytes(body[start : start + length]),
                )
        else:
            record = _KINDS[entry["kind"]](entry["items"])
        records[name] = record
    return records


# -- client checkpoints ----------------------------------------------------------------------
def client_root(checkpoint_dir: str | Path, node_dir: str | Path | None = None) -> Path:
    """The folder of a run's client checkpoints on this machine: ``<node_dir>/clients`` where
    a SuperNode names its own folder, else ``<cache>/client-checkpoints/<key>`` with ``key``
    the first 16 hex digits of the SHA-256 of the run's absolute ``checkpoint_dir``."""
    if node_dir:
        return Path(node_dir).expanduser() / "clients"
    from fgl_flower.datasets.root import cache_dir

    key = hashlib.sha256(str(Path(checkpoint_dir).expanduser().resolve()).encode()).hexdigest()[:16]
    return cache_dir() / "client-checkpoints" / key


def client_dir(
    checkpoint_dir: str | Path, partition_id: int, node_dir: str | Path | None = None
) -> Path:
    """The folder of one client's checkpoints (:func:`client_root`)."""
    return client_root(checkpoint_dir, node_dir) / f"partition-{partition_id}"


def _private_dirs(root: Path, folder: Path) -> None:
    """Create ``root`` and ``folder`` (inside it) with mode ``0o700``, their parents as usual."""
    root.parent.mkdir(parents=True, exist_ok=True)
    for path in (root, folder):
        path.mkdir(mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)  # also one an older version made, and against the umask


def _client_files(folder: Path) -> dict[int, Path]:
    if not folder.is_dir():
        return {}
    return {int(m.group(1)): p for p in folder.iterdir() if (m := _ROUND_FILE.match(p.name))}


def save_client_state(
    checkpoint_dir: str | Path,
    partition_id: int,
    server_round: int,
    state: RecordDict,
    every: int,
    first: bool = False,
    node_dir: str | Path | None = None,
) -> None:
    """Checkpoint a client's ``state`` after its train message of ``server_round`` (privately,
    :func:`client_dir`), and delete the files no resume can need: a server checkpoint (taken
    every ``every`` rounds) is at most the last multiple of ``every`` below
    ``server_round``, and a resume from it needs the client's newest file up to it.
    ``first``: the client's first train message of a new (not resumed) run, whose folder
    may hold another run's files."""
    folder = client_dir(checkpoint_dir, partition_id, node_dir)
    if first:
        for old in _client_files(folder).values():
            old.unlink(missing_ok=True)
    _private_dirs(client_root(checkpoint_dir, node_dir), folder)
    write_records(folder / f"round-{server_round:06d}.records", state, durable=False, private=True)
    oldest_server_round = every * ((server_round - 1) // every)
    files = _client_files(folder)
    older = sorted(r for r in files if r <= oldest_server_round)
    for r in older[:-1]:
        files[r].unlink(missing_ok=True)


def load_client_state(
    checkpoint_dir: str | Path,
    partition_id: int,
    up_to_round: int,
    node_dir: str | Path | None = None,
) -> RecordDict | None:
    """The client's state as it was when ``up_to_round`` ended (``None``: it had not
    trained yet)."""
    files = {
        r: p
        for r, p in _client_files(client_dir(checkpoint_dir, partition_id, node_dir)).items()
        if r <= up_to_round
    }
    return read_records(files[max(files)]) if files else None


# -- the server's checkpoint -----------------------------------------------------------------
def run_checkpoint_dir(folder: Path) -> Path:
    """The ``<checkpoint-dir>`` of the run in ``folder`` (from its ``config.json``)."""
    saved = json.loads((folder / "config.json").read_text())
    return Path(saved.get("checkpoint_dir") or folder / "checkpoint")


def resumable(folder: Path) -> bool:
    """Whether ``folder`` holds a run that stopped after a server checkpoint and has no
    summary yet (``fgl run --resume folder`` continues it)."""
    if (folder / "summary.json").exists() or not (folder / "config.json").is_file():
        return False
    return (run_checkpoint_dir(folder) / SERVER_FILE).is_file()


class Checkpointer:
    """Where a run's checkpoints go (``<checkpoint-dir>``) and how often the server writes
    its own (every ``every`` rounds, and after the last)."""

    def __init__(self, directory: str | Path, every: int) -> None:
        self.directory = Path(directory)
        self.every = every

    def due(self, server_round: int, num_rounds: int) -> bool:
        return server_round % self.every == 0 or server_round == num_rounds

    def save(self, records: RecordDict) -> None:
        write_records(self.directory / SERVER_FILE, records)

    def load(self) -> RecordDict:
        path = self.directory / SERVER_FILE
        if not path.is_file():
            raise CheckpointError(
                f"No checkpoint to resume from in {self.directory}: the run stopped before its "
                "first checkpointed round (or ran with checkpoint-every=0). Start it again."
            )
        return read_records(path)
