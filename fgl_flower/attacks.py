r"""Malicious clients, for robustness experiments and the server's attack suite.

An attack is a Flower client mod (:func:`malicious`) that lets the chosen partitions' client
do its honest work, then rewrites its ``train`` reply (after SecAgg+'s masking: the mod
wraps the whole handler) with one of the rewrites below. It is never a run option: pass it
to :func:`fgl_flower.client_app.make_app` (``experiments/robustness/poisoning.py``, the
tests in ``tests/strategies/test_attacks.py``).

Model poisoning, on the upload :math:`w = w_0 + \Delta` of a client that started from
:math:`w_0` (the arrays it received; round 1, whose start each client builds itself, is
left honest unless the reply carries that start, :data:`~fgl_flower.protocol.START`):

- :func:`scaled`: :math:`w_0 + \lambda\Delta` (a boosted update);
- :func:`sign_flipped`: :math:`w_0 - \lambda\Delta` (the update reversed).

Protocol attacks, each a lie the server must refuse: :func:`nonfinite`, :func:`reshaped`,
:func:`extra_key`, :func:`missing_key`, :func:`huge`, :func:`weight`,
:func:`claim_partition`, :func:`masked_length`.

:func:`own_settings` is a client that trains with settings of its own (e.g. without DP's
clipping): what it uploads is honest-looking, masked by SecAgg+ like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord

from fgl_flower.protocol import (
    ARRAYS,
    CONFIG,
    METRICS,
    NUM_EXAMPLES,
    PARTITION_ID,
    SERVER_ROUND,
    START,
)
from fgl_flower.records import array_numpy, get_record

#: ``rewrite(message, reply)``: change ``reply`` (to ``message``) in place.
Rewrite = Callable[[Message, Message], None]


def malicious(
    partitions: Collection[int],
    rewrite: Rewrite,
    rounds: Collection[int] | None = None,
    message_type: str = MessageType.TRAIN,
):
    """A client mod: the replies of ``partitions`` to ``message_type`` messages (train by
    default; in ``rounds``, default all) go out rewritten by ``rewrite``; every other message
    passes through."""
    chosen = {int(p) for p in partitions}

    def mod(msg: Message, context: Context, call_next) -> Message:
        reply = call_next(msg, context)
        if (
            msg.metadata.message_type != message_type
            or reply.has_error()
            or int(context.node_config[PARTITION_ID]) not in chosen
        ):
            return reply
        config = get_record(msg.content, CONFIG, ConfigRecord)
        rnd = int(config[SERVER_ROUND]) if config is not None and SERVER_ROUND in config else 0
        if rounds is None or rnd in rounds:
            rewrite(msg, reply)
        return reply

    return mod


def own_settings(
    partitions: Collection[int], settings: dict, rounds: Collection[int] | None = None
):
    """A client mod: ``partitions`` handle their train messages (in ``rounds``, default all)
    with ``settings`` over the run config, e.g. ``{"fedavg.dp-clip": 1e12}`` (no clipping)."""
    chosen = {int(p) for p in partitions}

    def mod(msg: Message, context: Context, call_next) -> Message:
        config = get_record(msg.content, CONFIG, ConfigRecord)
        rnd = int(config[SERVER_ROUND]) if config is not None and SERVER_ROUND in config else 0
        if (
            msg.metadata.message_type != MessageType.TRAIN
            or int(context.node_config[PARTITION_ID]) not in chosen
            or (rounds is not None and rnd not in rounds)
        ):
            return call_next(msg, context)
        honest = context.run_config
        context.run_config = {**honest, **settings}
        try:
            return call_next(msg, context)
        finally:
            context.run_config = honest

    return mod


def _start(msg: Message, reply: Message) -> ArrayRecord | None:
    """:math:`w_0` of the reply: the arrays received, else the start it sends back."""
    sent = get_record(msg.content, ARRAYS, ArrayRecord)
    if sent is not None and len(sent):
        return sent
    return get_record(reply.content, START, ArrayRecord)


def _moved(factor: float) -> Rewrite:
    def rewrite(msg: Message, reply: Message) -> None:
        start = _start(msg, reply)
        upload = get_record(reply.content, ARRAYS, ArrayRecord)
        if start is None or upload is None or list(start.keys()) != list(upload.keys()):
            return  # nothing to measure the update from: the reply goes out honest
        out = ArrayRecord()
        for key, array in upload.items():
            w, w0 = array_numpy(array), array_numpy(start[key])
            if np.issubdtype(w.dtype, np.floating):
                w = (w0.astype(np.float64) + factor * (w.astype(np.float64) - w0)).astype(w.dtype)
            out[key] = Array(w)
        reply.content[ARRAYS] = out

    return rewrite


def scaled(factor: float = 10.0) -> Rewrite:
    """Upload :math:`w_0 + \\lambda\\Delta`, ``factor`` :math:`=\\lambda`."""
    return _moved(factor)


def sign_flipped(factor: float = 1.0) -> Rewrite:
    """Upload :math:`w_0 - \\lambda\\Delta`, ``factor`` :math:`=\\lambda`."""
    return _moved(-factor)


def _first_float(record: ArrayRecord) -> str:
    return next(k for k, a in record.items() if np.issubdtype(np.dtype(a.dtype), np.floating))


def _edit_arrays(edit: Callable[[ArrayRecord], ArrayRecord], record: str = ARRAYS) -> Rewrite:
    def rewrite(msg: Message, reply: Message) -> None:
        reply.content[record] = edit(
            get_record(reply.content, record, ArrayRecord) or ArrayRecord()
        )

    return rewrite


def nonfinite(value: float = float("nan")) -> Rewrite:
    """Every value of the first floating-point array set to ``value`` (NaN or :math:`\\pm\\infty`)."""

    def edit(record: ArrayRecord) -> ArrayRecord:
        key = _first_float(record)
        return ArrayRecord({**record, key: Array(np.full_like(array_numpy(record[key]), value))})

    return _edit_arrays(edit)


def reshaped(shape: tuple[int, ...] = (1, 1), record: str = ARRAYS) -> Rewrite:
    """The first floating-point array of ``record`` replaced by ones of ``shape`` (NumPy
    would broadcast a ``(1, 1)`` array into a mean)."""

    def edit(arrays: ArrayRecord) -> ArrayRecord:
        key = _first_float(arrays)
        return ArrayRecord(
            {**arrays, key: Array(np.ones(shape, dtype=array_numpy(arrays[key]).dtype))}
        )

    return _edit_arrays(edit, record)


def huge(values: int = 20_000_000) -> Rewrite:
    """The first floating-point array replaced by ``values`` float32 zeros (80 MB by default)."""
    return reshaped((values,))


def extra_key(key: str = "extra.weight") -> Rewrite:
    """One more array, under ``key``."""
    return _edit_arrays(
        lambda record: ArrayRecord({**record, key: Array(np.zeros(3, dtype=np.float32))})
    )


def missing_key() -> Rewrite:
    """The last array left out."""
    return _edit_arrays(lambda record: ArrayRecord(dict(list(record.items())[:-1])))


def weight(value: float) -> Rewrite:
    """``num-examples`` reported as ``value`` (negative, zero, huge, NaN: the client's word)."""

    def rewrite(msg: Message, reply: Message) -> None:
        metrics = get_record(reply.content, METRICS, MetricRecord)
        reply.content[METRICS] = MetricRecord({**metrics, NUM_EXAMPLES: float(value)})

    return rewrite


def claim_partition(partition: int) -> Rewrite:
    """The reply names ``partition`` as its sender."""

    def rewrite(msg: Message, reply: Message) -> None:
        metrics = get_record(reply.content, METRICS, MetricRecord)
        reply.content[METRICS] = MetricRecord({**metrics, PARTITION_ID: int(partition)})

    return rewrite


def masked_length(extra: int = 1, record: str = ARRAYS) -> Rewrite:
    """A SecAgg+ upload whose masked vector (in ``record``: the FedAvg family's ``arrays``,
    O-pFGL's ``stats``) has ``extra`` more values than its layout; replies without one (the
    protocol's other stages) go out as they are."""
    from fgl_flower.secagg.protocol import MASKED

    def rewrite(msg: Message, reply: Message) -> None:
        masked = get_record(reply.content, record, ArrayRecord)
        if masked is not None and MASKED in masked:
            vector = array_numpy(masked[MASKED])
            reply.content[record] = ArrayRecord(
                {MASKED: Array(np.concatenate([vector, np.zeros(extra, dtype=vector.dtype)]))}
            )

    return rewrite
