"""The server side of SecAgg+: four exchanges through the run's grid, then the unmasked sum.

:func:`secure_sum` is what a strategy calls instead of asking for a record in clear: it
sends the stages of :mod:`fgl_flower.secagg` with ``send`` (the strategy's metered exchange,
which drops failed clients up to ``accept-failures``) and returns the sum of the record over
the clients that sent their masked vector. Clients that drop after sharing their keys are
left out of the sum, and their pairwise masks are removed with the secret key their
neighbours' shares rebuild; beyond what the threshold tolerates the sum cannot be rebuilt and
the run stops.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, RecordDict
from flwr.common.secure_aggregation.crypto.shamir import combine_shares
from flwr.common.secure_aggregation.crypto.symmetric_encryption import generate_shared_key
from flwr.common.secure_aggregation.secaggplus_utils import pseudo_rand_gen
from flwr.supercore.primitives.asymmetric import bytes_to_private_key, bytes_to_public_key
from torch import Tensor

from fgl_flower.errors import FGLError
from fgl_flower.records import require_record
from fgl_flower.secagg.encoding import MODULUS, decode
from fgl_flower.secagg.protocol import (
    ACTIVE, CIPHERTEXTS, CLIENTS, DEAD, DESTINATIONS, FRACTION_BITS, IDS, LAYOUT_KEYS, LAYOUT_SHAPES, MASKED,
    PUBLIC_KEY_1, PUBLIC_KEY_2, QUERY, RECORD, SECAGG, SHARES, SOURCES, STAGE, THRESHOLD,
)

Send = Callable[[list[Message]], list[Message]]


@dataclass(frozen=True)
class SecAggPlusSettings:
    """``shares``: neighbours each client shares its secrets with, itself included (0: all
    clients, i.e. SecAgg; an even number becomes the next odd one, as SecAgg+'s ring needs);
    the threshold is a majority of them, so that a server which claims a client dropped
    cannot collect both of its secrets. ``fraction_bits``: the fixed-point encoding's."""

    shares: int = 0
    fraction_bits: int = 32


@dataclass
class SecureSum:
    """The sum and what the protocol saw."""

    total: dict[str, Tensor]
    summed: list[int]  # node ids whose vectors are in the sum
    dropped: list[int]  # node ids lost after sharing their keys (recovered from shares)
    replies: list[Message] = field(default_factory=list)  # the collect replies (masked records)


def ring_neighbours(node_ids: Sequence[int], shares: int, seed: int) -> dict[int, set[int]]:
    """SecAgg+'s graph: the nodes in a seeded random order, each with the ``shares // 2``
    nodes on either side of it (all nodes when ``shares`` is 0 or covers them)."""
    order = list(node_ids)
    random.Random(seed).shuffle(order)
    n = len(order)
    if shares <= 0 or shares >= n:
        return {nid: set(order) for nid in order}
    half = shares // 2
    return {nid: {order[(i + o) % n] for o in range(-half, half + 1)} for i, nid in enumerate(order)}


def _message(nid: int, fields: dict, content: RecordDict | None = None) -> Message:
    records = RecordDict(dict(content.items()) if content is not None else {})
    records[SECAGG] = ConfigRecord(fields)
    return Message(content=records, message_type=f"{MessageType.QUERY}.{SECAGG}", dst_node_id=nid)


def _fields(reply: Message) -> ConfigRecord:
    return require_record(reply.content, SECAGG, ConfigRecord)


def _need(count: int, threshold: int, what: str) -> None:
    if count < threshold:
        raise FGLError(f"Secure aggregation: {what} ({count}) fell below the threshold {threshold}; "
                       "too many clients dropped to rebuild the sum.")


def secure_sum(send: Send, node_ids: Sequence[int], content: RecordDict, query: str, record: str,
               settings: SecAggPlusSettings, seed: int) -> SecureSum:
    """The element-wise sum of ``record`` in the replies of ``query.<query>`` (sent with
    ``content``) over ``node_ids``, without any client's record in clear."""
    if len(node_ids) < 2:
        raise FGLError("Secure aggregation needs at least 2 clients (one client's sum is its record).")
    shares = settings.shares + 1 if settings.shares and settings.shares % 2 == 0 else settings.shares
    neighbours = ring_neighbours(node_ids, shares, seed)
    threshold = len(next(iter(neighbours.values()))) // 2 + 1

    # 0: public keys
    keys = {r.metadata.src_node_id: (_fields(r)[PUBLIC_KEY_1], _fields(r)[PUBLIC_KEY_2])
            for r in send([_message(nid, {STAGE: "setup"}) for nid in node_ids])}
    # 1: encrypted shares, forwarded unread
    messages = []
    for nid in keys:
        near = sorted(neighbours[nid] & keys.keys())
        _need(len(near), threshold, f"node {nid}'s neighbours with keys")
        messages.append(_message(nid, {STAGE: "share-keys", IDS: near, THRESHOLD: threshold,
                                       PUBLIC_KEY_1: [keys[j][0] for j in near],
                                       PUBLIC_KEY_2: [keys[j][1] for j in near]}))
    inbox: dict[int, list[tuple[int, bytes]]] = {}
    shared = set()
    for r in send(messages):
        f, src = _fields(r), r.metadata.src_node_id
        shared.add(src)
        for dst, ct in zip(f[DESTINATIONS], f[CIPHERTEXTS]):
            inbox.setdefault(int(dst), []).append((src, ct))
    # 2: masked vectors
    messages = []
    for nid in sorted(shared):
        mail = [(src, ct) for src, ct in inbox.get(nid, []) if src in shared]
        messages.append(_message(nid, {STAGE: "collect", QUERY: query, RECORD: record, CLIENTS: len(node_ids),
                                       FRACTION_BITS: settings.fraction_bits, SOURCES: [s for s, _ in mail],
                                       CIPHERTEXTS: [c for _, c in mail]}, content))
    replies = send(messages)
    masked = {r.metadata.src_node_id: require_record(r.content, record, ArrayRecord)[MASKED].numpy() for r in replies}
    layouts = {(tuple(_fields(r)[LAYOUT_KEYS]), tuple(_fields(r)[LAYOUT_SHAPES])) for r in replies}
    if len(layouts) != 1:
        raise FGLError(f"Secure aggregation: the clients' {record!r} records differ in keys or shapes.")
    names, shapes = layouts.pop()
    layout = [(k, tuple(int(d) for d in s.split(",") if d)) for k, s in zip(names, shapes)]
    summed, dropped = sorted(masked), sorted(shared - masked.keys())
    # 3: the shares that remove the masks
    held: dict[int, list[bytes]] = {}
    for r in send([_message(nid, {STAGE: "unmask", ACTIVE: sorted(neighbours[nid] & masked.keys()),
                                  DEAD: sorted(neighbours[nid] & set(dropped))}) for nid in summed]):
        f = _fields(r)
        for owner, share in zip(f[IDS], f[SHARES]):
            held.setdefault(int(owner), []).append(share)
    total = np.zeros_like(next(iter(masked.values())))
    for vector in masked.values():
        total = np.mod(total + vector, MODULUS)
    for nid in summed:
        _need(len(held.get(nid, [])), threshold, f"shares of node {nid}'s mask seed")
        seed_bytes = combine_shares(held[nid])
        total = np.mod(total - pseudo_rand_gen(seed_bytes, MODULUS, [total.shape])[0], MODULUS)
    for nid in dropped:
        _need(len(held.get(nid, [])), threshold, f"shares of dropped node {nid}'s key")
        sk1 = bytes_to_private_key(combine_shares(held[nid]))
        for j in sorted(neighbours[nid] & masked.keys()):
            pair = pseudo_rand_gen(generate_shared_key(sk1, bytes_to_public_key(keys[j][0])), MODULUS,
                                   [total.shape])[0]
            total = np.mod(total - pair if j > nid else total + pair, MODULUS)  # j's mask with it
    return SecureSum(decode(total, layout, settings.fraction_bits), summed, dropped, replies)
