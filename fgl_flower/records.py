"""Fast reads and writes of Flower ``Array`` payloads.

A Flower ``Array`` holds ``np.save`` bytes; ``Array.numpy()`` parses their header with
``ast.literal_eval`` on every call (about 80 µs), and ``Array(ndarray)`` runs ``np.save``
through a buffer: together they dominated saving and restoring a client's state (model
and optimizer, a dozen arrays per message). The header's length is in its first bytes
and the array's dtype and shape are fields of the ``Array``, so the data can be viewed
directly; and the header of a dtype and shape is the same for every array, so it is made
once by ``np.save`` and reused. The bytes are identical to Flower's. Anything but a plain
C-order ``numpy.ndarray`` payload takes Flower's own path.
"""

from __future__ import annotations

import functools
import io
import struct
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from flwr.app import Array, ArrayRecord, RecordDict

if TYPE_CHECKING:
    import torch

R = TypeVar("R")

_MAGIC = b"\x93NUMPY"


def array_numpy(array: Array) -> np.ndarray:
    """The ndarray of ``array`` (a writable copy), as ``array.numpy()`` returns it."""
    data = array.data
    if (
        array.stype != "numpy.ndarray"
        or data[:6] != _MAGIC
        or b"'fortran_order': True" in data[:128]
    ):
        return array.numpy()
    major = data[6]
    if major == 1:
        offset = 10 + struct.unpack("<H", data[8:10])[0]
    elif major in (2, 3):
        offset = 12 + struct.unpack("<I", data[8:12])[0]
    else:
        return array.numpy()
    dtype = np.dtype(array.dtype)
    if dtype.hasobject:
        return array.numpy()
    return np.frombuffer(data, dtype=dtype, offset=offset).reshape(array.shape).copy()


@functools.lru_cache(maxsize=1024)
def _npy_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(shape, dtype=dtype), allow_pickle=False)
    data = buffer.getvalue()
    return data[: len(data) - int(np.prod(shape, dtype=np.int64)) * dtype.itemsize]


#: Larger arrays take Flower's path: ``np.save``'s fixed cost is small beside their copy,
#: and the header is then not made from a zero array of their size.
_HEADER_CACHE_MAX_BYTES = 1 << 24


def array_of(value: np.ndarray) -> Array:
    """``Array(value)`` with the same bytes, the ``np.save`` header made once per dtype/shape."""
    if (
        value.dtype.hasobject
        or not value.flags.c_contiguous
        or value.nbytes > _HEADER_CACHE_MAX_BYTES
    ):
        return Array(value)
    return Array(
        dtype=str(value.dtype),
        shape=tuple(value.shape),
        stype="numpy.ndarray",
        data=_npy_header(value.dtype, tuple(value.shape)) + value.tobytes(),
    )


def torch_record(tensors: dict[str, torch.Tensor]) -> ArrayRecord:
    """An ArrayRecord of ``tensors`` copied to the CPU, as ``ArrayRecord(tensors)`` (messages
    and ``context.state`` never hold GPU memory)."""
    record = ArrayRecord()  # filled in place: ArrayRecord(dict) would copy every Array
    for k, v in tensors.items():
        record[k] = array_of(v.detach().cpu().numpy())
    return record


def record_numpy(record: ArrayRecord) -> dict[str, np.ndarray]:
    """``{key: ndarray}`` of an ArrayRecord, in its order."""
    return {k: array_numpy(record[k]) for k in record.keys()}


def record_torch(record: ArrayRecord) -> dict[str, torch.Tensor]:
    """``record.to_torch_state_dict()``, without re-parsing every array's header."""
    import torch

    return {k: torch.from_numpy(v) for k, v in record_numpy(record).items()}


def sub_record(record: ArrayRecord, prefix: str) -> ArrayRecord:
    """The arrays of ``record`` under ``<prefix>.``, with that prefix removed: one model of a
    record that holds several (GCFL's clusters, FED-PUB's personalised models)."""
    head = f"{prefix}."
    return ArrayRecord({k[len(head) :]: v for k, v in record.items() if k.startswith(head)})


def prefixed(record: ArrayRecord, prefix: str) -> dict[str, Array]:
    """``record``'s arrays under ``<prefix>.<key>`` (the inverse of :func:`sub_record`)."""
    return {f"{prefix}.{k}": v for k, v in record.items()}


def get_record(content: RecordDict, key: str, kind: type[R]) -> R | None:
    """``content[key]`` if it is a ``kind`` record (``ArrayRecord``, ``MetricRecord``,
    ``ConfigRecord``), else ``None``. ``content.metric_records`` and its siblings build
    and re-validate a copy of every record of that kind on each access."""
    record = content.get(key)
    return record if isinstance(record, kind) else None


def require_record(content: RecordDict, key: str, kind: type[R]) -> R:
    """``content[key]``, which must be a ``kind`` record."""
    record = get_record(content, key, kind)
    if record is None:
        raise KeyError(f"The message carries no {kind.__name__} {key!r}.")
    return record
