"""The server side of SecAgg+: four exchanges through the run's grid, then the unmasked sum.

:func:`secure_sum` is what a strategy calls instead of asking for a query's record in clear
(O-pFGL's statistics): it sends the stages of :mod:`fgl_flower.secagg` with ``send`` (the
strategy's metered exchange, which drops failed clients up to ``accept-failures``) and
returns the sum of the record over the clients that sent their masked vector.
:class:`SecAggPlusRound` is the same protocol cut around a message the strategy sends itself
(the FedAvg family's train message, built by :meth:`SecAggPlusRound.collect_message`: keys
before it, the masked upload in its reply, the unmasking after it). Clients that drop after sharing their keys are
left out of the sum, and their pairwise masks are removed with the secret key their
neighbours' shares rebuild; beyond what the threshold tolerates the sum cannot be rebuilt and
the run stops.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, RecordDict
from flwr.common.secure_aggregation.crypto.shamir import combine_shares
from flwr.supercore.primitives.asymmetric import (
    bytes_to_private_key,
    bytes_to_public_key,
    public_key_to_bytes,
)
from torch import Tensor

from fgl_flower.errors import FGLError
from fgl_flower.records import get_record, require_record
from fgl_flower.secagg.encoding import MODULUS, decode
from fgl_flower.secagg.masks import pairwise_mask, private_mask
from fgl_flower.secagg.protocol import (
    ACTIVE,
    CIPHERTEXTS,
    CLIENTS,
    COMMITMENT,
    DEAD,
    DESTINATIONS,
    FRACTION_BITS,
    IDS,
    LAYOUT_KEYS,
    LAYOUT_SHAPES,
    MASKED,
    PUBLIC_KEY_1,
    PUBLIC_KEY_2,
    QUERY,
    RECORD,
    SECAGG,
    SHARES,
    SOURCES,
    STAGE,
    THRESHOLD,
    WEIGHT,
)
from fgl_flower.strategies.screening import majority

Send = Callable[[list[Message]], list[Message]]


@dataclass(frozen=True)
class SecAggPlusSettings:
    """``shares``: neighbours each client shares its secrets with, itself included (0:
    SecAgg+'s logarithmic default, :func:`default_shares`; at least the number of clients:
    all of them, i.e. SecAgg; an even number becomes the next odd one, as the ring needs);
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
    refused: dict[int, str] = field(default_factory=dict)  # node id -> why its vector was left out


def default_shares(clients: int) -> int:
    r"""SecAgg+'s neighbourhood size, logarithmic in the clients: :math:`2\lceil\log_2 n\rceil
    + 1` (all ``n`` clients up to 9 of them). Every client's cost grows with it: Shamir
    shares, key agreements and masks per neighbour (SecAgg among 100 clients took 80 s a
    round on this machine's CPU, docs/privacy.md)."""
    return min(clients, 2 * math.ceil(math.log2(max(clients, 2))) + 1)


def ring_neighbours(node_ids: Sequence[int], shares: int, seed: int) -> dict[int, set[int]]:
    """SecAgg+'s graph: the nodes in a seeded random order, each with the ``shares // 2``
    nodes on either side of it (all nodes when ``shares`` covers them; 0: the default)."""
    order = list(node_ids)
    random.Random(seed).shuffle(order)
    n = len(order)
    shares = shares or default_shares(n)
    if shares >= n:
        return {nid: set(order) for nid in order}
    half = shares // 2
    return {
        nid: {order[(i + o) % n] for o in range(-half, half + 1)} for i, nid in enumerate(order)
    }


#: The message type of the protocol's own stages (and of a wrapped query's collect stage).
SECAGG_QUERY = f"{MessageType.QUERY}.{SECAGG}"


def _message(
    nid: int, fields: dict, content: RecordDict | None = None, message_type: str = SECAGG_QUERY
) -> Message:
    """A message to ``nid`` with ``content``'s records (copied: broadcast messages share one)
    and the stage's ``fields``."""
    records = RecordDict(dict(content.items()) if content is not None else {})
    records[SECAGG] = ConfigRecord(fields)
    return Message(content=records, message_type=message_type, dst_node_id=nid)


def _fields(reply: Message) -> ConfigRecord:
    return require_record(reply.content, SECAGG, ConfigRecord)


def declared_layout(reply: Message) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    """The layout a collect reply declares for its masked vector (``None``: unreadable)."""
    try:
        f = _fields(reply)
        return tuple(
            (str(k), tuple(int(d) for d in str(s).split(",") if d))
            for k, s in zip(f[LAYOUT_KEYS], f[LAYOUT_SHAPES], strict=True)
        )
    except (FGLError, KeyError, TypeError, ValueError):
        return None


def masked_problem(
    reply: Message, record: str, layout: Sequence[tuple[str, tuple[int, ...]]]
) -> str | None:
    """Why a collect reply's masked ``record`` cannot enter the sum: a declared layout other
    than ``layout`` (the server's: what the sum must decode to), or not exactly one ``int64``
    vector of that layout's length with values in ``[0, 2^62)``; ``None`` if it can."""
    want = tuple((k, tuple(s)) for k, s in layout)
    declared = declared_layout(reply)
    if declared is None:
        return "no readable layout of its masked vector"
    if declared != want:
        return f"its masked vector declares the layout {_brief(declared)}, expected {_brief(want)}"
    masked = get_record(reply.content, record, ArrayRecord)
    if masked is None or list(masked.keys()) != [MASKED]:
        return f"no masked vector (the record holds {sorted(masked.keys()) if masked is not None else 'nothing'})"
    vector = masked[MASKED].numpy()
    size = sum(math.prod(s) for _, s in want)
    if vector.dtype != np.int64 or vector.shape != (size,):
        return f"its masked vector is {vector.dtype}{vector.shape}, expected int64({size},)"
    if vector.size and (vector.min() < 0 or vector.max() >= MODULUS):
        return "its masked vector leaves [0, 2^62)"
    return None


#: The most subsets of ``threshold`` shares :func:`recover_secret` tries to find the wrong ones.
MAX_SHARE_SUBSETS = 5000


def recover_secret(
    shares: dict[int, bytes], threshold: int, verify: Callable[[bytes], bool]
) -> tuple[bytes | None, set[int]]:
    """``(the secret, the holders whose share is wrong)`` from Shamir ``shares`` (by holder):
    all of them if they rebuild a secret that ``verify`` accepts, else the first subset of
    ``threshold`` that does (at most :data:`MAX_SHARE_SUBSETS` tried), every other share
    then checked against it; ``(None, set())`` when none is found."""
    holders = sorted(shares)

    def rebuild(subset) -> bytes | None:
        try:
            secret = combine_shares([shares[h] for h in subset])
        except Exception:  # noqa: BLE001 - a malformed share is a wrong one
            return None
        return secret if verify(secret) else None

    if (secret := rebuild(holders)) is not None:
        return secret, set()
    for subset in itertools.islice(itertools.combinations(holders, threshold), MAX_SHARE_SUBSETS):
        if (secret := rebuild(subset)) is not None:
            base = list(subset[: threshold - 1])
            return secret, {h for h in holders if h not in subset and rebuild([*base, h]) is None}
    return None, set()


def _public_key_of(secret_key: bytes) -> bytes | None:
    try:
        return public_key_to_bytes(bytes_to_private_key(secret_key).public_key())
    except Exception:  # noqa: BLE001 - not a key
        return None


def _is_public_key(value) -> bool:
    try:
        bytes_to_public_key(bytes(value))
        return True
    except Exception:  # noqa: BLE001
        return False


def _keys_problem(reply: Message) -> str | None:
    """Why a setup reply's public keys cannot be used."""
    try:
        f = _fields(reply)
        keys = (f[PUBLIC_KEY_1], f[PUBLIC_KEY_2])
    except (FGLError, KeyError):
        return "no public keys"
    if not all(isinstance(k, bytes) and _is_public_key(k) for k in keys) or keys[0] == keys[1]:
        return "its public keys are not two distinct public keys"
    return None


def _shares_sent_problem(reply: Message, neighbours: set[int]) -> str | None:
    """Why a share-keys reply cannot be forwarded: not one encrypted share per neighbour, or
    no 32-byte seed commitment."""
    try:
        f = _fields(reply)
        dsts, cts, commitment = list(f[DESTINATIONS]), list(f[CIPHERTEXTS]), f[COMMITMENT]
    except (FGLError, KeyError, TypeError):
        return "no destinations, ciphertexts or seed commitment"
    if not isinstance(commitment, bytes) or len(commitment) != 32:
        return "its seed commitment is not 32 bytes"
    if (
        len(dsts) != len(cts)
        or not all(isinstance(c, bytes) for c in cts)
        or sorted(map(int, dsts)) != sorted(neighbours)
    ):
        return "not one encrypted share for each of its neighbours"
    return None


def _shares_returned_problem(reply: Message, asked: set[int]) -> str | None:
    """Why an unmask reply's shares cannot be used: not one byte string for each of some
    of the owners asked about."""
    try:
        f = _fields(reply)
        ids, shares = list(f[IDS]), list(f[SHARES])
    except (FGLError, KeyError, TypeError):
        return "no ids or shares"
    if len(ids) != len(shares) or not all(isinstance(s, bytes) and len(s) >= 20 for s in shares):
        return "its shares are not one byte string for each id"
    if not {int(i) for i in ids} <= asked or len(set(ids)) != len(ids):
        return "shares of nodes it was not asked about"
    return None


def _brief(layout) -> str:
    return f"{len(layout)} arrays of {sum(math.prod(s) for _, s in layout)} values"


def _need(count: int, threshold: int, what: str) -> None:
    if count < threshold:
        raise FGLError(
            f"Secure aggregation: {what} ({count}) fell below the threshold {threshold}; "
            "too many clients dropped to rebuild the sum."
        )


class SecAggPlusRound:
    """One run of the protocol over ``node_ids``, in three calls: :meth:`share_keys` (stages
    0 and 1, before the message whose reply is summed), :meth:`collect_message` (that message
    to one node, with its stage-2 fields) and :meth:`unmask` (stage 3 on its replies)."""

    def __init__(self, node_ids: Sequence[int], settings: SecAggPlusSettings, seed: int) -> None:
        if len(node_ids) < 2:
            raise FGLError(
                "Secure aggregation needs at least 2 clients (one client's sum is its record)."
            )
        self.node_ids, self.settings = list(node_ids), settings
        shares = (
            settings.shares + 1 if settings.shares and settings.shares % 2 == 0 else settings.shares
        )
        self.neighbours = ring_neighbours(node_ids, shares, seed)
        self.threshold = len(next(iter(self.neighbours.values()))) // 2 + 1
        self.keys: dict[int, tuple[bytes, bytes]] = {}
        self.inbox: dict[int, list[tuple[int, bytes]]] = {}
        self.shared: set[int] = set()
        self.commitments: dict[int, bytes] = {}  # node -> SHA-256 of its private mask seed
        self.refused: dict[
            int, str
        ] = {}  # node -> why a reply of it was left out or its shares ignored

    def share_keys(self, send: Send) -> set[int]:
        """Stages 0 and 1; returns the nodes that shared their keys. A reply whose fields are
        malformed (keys that are not public keys, shares sent to nodes that are not the
        sender's neighbours, no seed commitment) leaves its node out, named in
        :attr:`refused`."""
        for r in send([_message(nid, {STAGE: "setup"}) for nid in self.node_ids]):
            if (why := _keys_problem(r)) is None:
                self.keys[r.metadata.src_node_id] = (
                    _fields(r)[PUBLIC_KEY_1],
                    _fields(r)[PUBLIC_KEY_2],
                )
            else:
                self.refused[r.metadata.src_node_id] = f"setup: {why}"
        messages = []
        for nid in self.keys:
            near = sorted(self.neighbours[nid] & self.keys.keys())
            _need(len(near), self.threshold, f"node {nid}'s neighbours with keys")
            messages.append(
                _message(
                    nid,
                    {
                        STAGE: "share-keys",
                        IDS: near,
                        THRESHOLD: self.threshold,
                        PUBLIC_KEY_1: [self.keys[j][0] for j in near],
                        PUBLIC_KEY_2: [self.keys[j][1] for j in near],
                    },
                )
            )
        for r in send(messages):
            src = r.metadata.src_node_id
            if (
                why := _shares_sent_problem(r, self.neighbours[src] & self.keys.keys() - {src})
            ) is not None:
                self.refused[src] = f"share-keys: {why}"
                continue
            f = _fields(r)
            self.shared.add(src)
            self.commitments[src] = bytes(f[COMMITMENT])
            for dst, ct in zip(f[DESTINATIONS], f[CIPHERTEXTS]):
                self.inbox.setdefault(int(dst), []).append((src, ct))
        return set(self.shared)

    def collect_message(
        self,
        nid: int,
        content: RecordDict,
        record: str,
        *,
        query: str = "",
        weight: str = "",
        message_type: str = SECAGG_QUERY,
    ) -> Message:
        """Stage 2 for ``nid``: a ``message_type`` message with ``content`` that also asks to
        mask ``record`` of the reply (each value times the reply's metric ``weight``, with the
        weight itself summed as ``WEIGHT_KEY``, if given). ``query``: the wrapped query's action
        of a ``query.secagg`` message; a ``train`` message is itself the one whose reply is
        masked."""
        mail = [(src, ct) for src, ct in self.inbox.get(nid, []) if src in self.shared]
        fields = {
            STAGE: "collect",
            QUERY: query,
            RECORD: record,
            WEIGHT: weight,
            CLIENTS: len(self.node_ids),
            FRACTION_BITS: self.settings.fraction_bits,
            SOURCES: [s for s, _ in mail],
            CIPHERTEXTS: [c for _, c in mail],
        }
        return _message(nid, fields, content, message_type)

    def unmask(
        self,
        replies: Sequence[Message],
        record: str,
        send: Send,
        layout: Sequence[tuple[str, tuple[int, ...]]] | None = None,
    ) -> SecureSum:
        """Stage 3 on the replies that carry masked ``record``s; the decoded sum.

        Each vector must have ``layout`` (default: the one a strict majority of the replies
        declares) and its length (:func:`masked_problem`); one that has not is left out as
        if its client had dropped (its pairwise masks removed, its private mask kept), and
        :attr:`SecureSum.refused` says why."""
        declared = [declared_layout(r) for r in replies]
        want = tuple((k, tuple(s)) for k, s in layout) if layout is not None else majority(declared)
        if want is None:
            raise FGLError(
                f"Secure aggregation: the clients' {record!r} records declare different layouts "
                "and no majority shares one; nothing tells the honest ones apart."
            )
        refused = {
            r.metadata.src_node_id: why for r in replies if (why := masked_problem(r, record, want))
        }
        masked = {
            r.metadata.src_node_id: require_record(r.content, record, ArrayRecord)[MASKED].numpy()
            for r in replies
            if r.metadata.src_node_id not in refused
        }
        if not masked:
            raise FGLError(
                "Secure aggregation: no client sent a usable masked vector"
                + (f" ({'; '.join(refused.values())})." if refused else ".")
            )
        layout = [(k, s) for k, s in want]
        summed, dropped = sorted(masked), sorted(self.shared - masked.keys())
        held: dict[int, dict[int, bytes]] = {}  # owner -> {holder: its share of the owner's secret}
        for r in send(
            [
                _message(
                    nid,
                    {
                        STAGE: "unmask",
                        ACTIVE: sorted(self.neighbours[nid] & masked.keys()),
                        DEAD: sorted(self.neighbours[nid] & set(dropped)),
                    },
                )
                for nid in summed
            ]
        ):
            holder = r.metadata.src_node_id
            asked = self.neighbours[holder] & (masked.keys() | set(dropped))
            if (why := _shares_returned_problem(r, asked)) is not None:
                self.refused[holder] = f"unmask: {why}"
                continue
            f = _fields(r)
            for owner, share in zip(f[IDS], f[SHARES]):
                held.setdefault(int(owner), {})[holder] = bytes(share)
        total = np.zeros_like(next(iter(masked.values())))
        for vector in masked.values():
            total = np.mod(total + vector, MODULUS)
        for nid in summed:
            seed = self._recover(
                held.get(nid, {}),
                f"node {nid}'s mask seed",
                lambda secret, nid=nid: hashlib.sha256(secret).digest() == self.commitments[nid],
            )
            total = np.mod(total - private_mask(seed, total.shape), MODULUS)
        for nid in dropped:
            sk1 = self._recover(
                held.get(nid, {}),
                f"dropped node {nid}'s key",
                lambda secret, nid=nid: _public_key_of(secret) == self.keys[nid][0],
            )
            for j in sorted(self.neighbours[nid] & masked.keys()):
                pair = pairwise_mask(sk1, self.keys[j][0], total.shape)
                total = np.mod(
                    total - pair if j > nid else total + pair, MODULUS
                )  # j's mask with it
        return SecureSum(
            decode(total, layout, self.settings.fraction_bits),
            summed,
            dropped,
            list(replies),
            {**self.refused, **refused},
        )

    def _recover(
        self, shares: dict[int, bytes], what: str, verify: Callable[[bytes], bool]
    ) -> bytes:
        """The secret ``shares`` (by holder) rebuild, checked by ``verify``; holders whose share
        does not fit the others' are named in :attr:`refused` and left out."""
        _need(len(shares), self.threshold, f"shares of {what}")
        secret, liars = recover_secret(shares, self.threshold, verify)
        for holder in liars:
            self.refused[holder] = f"unmask: its share of {what} does not fit the others'"
        if secret is None:
            raise FGLError(
                f"Secure aggregation: the shares of {what} do not rebuild it (holders "
                f"{sorted(shares)}; too many wrong ones to find which): the round's sum is lost."
            )
        return secret


def secure_sum(
    send: Send,
    node_ids: Sequence[int],
    content: RecordDict,
    query: str,
    record: str,
    settings: SecAggPlusSettings,
    seed: int,
) -> SecureSum:
    """The element-wise sum of ``record`` in the replies of ``query.<query>`` (sent with
    ``content``) over ``node_ids``, without any client's record in clear."""
    run = SecAggPlusRound(node_ids, settings, seed)
    shared = run.share_keys(send)
    replies = send(
        [run.collect_message(nid, content, record, query=query) for nid in sorted(shared)]
    )
    return run.unmask(replies, record, send)
