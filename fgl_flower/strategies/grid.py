"""A Grid wrapper that meters traffic, orders replies by partition id and counts failures.

Flower's ServerApp sees random node ids, and replies arrive in any order. Aggregating in
arrival order makes float sums differ run to run, so every reply is sorted by the
``partition-id`` the client reports. Bytes are measured from the serialized records.
A client that replies with an error, does not reply within the timeout, or whose node
is gone is a failure: the exchange goes on with the other replies while there are at
most ``accept-failures`` of them, and :attr:`MeteredGrid.failures` says which partition
failed and why. So is a reply the server refuses: one that names another partition than
the one its node serves (a node's partition is what discovery found, never what a reply
says), and one the strategy's checks refuse (:meth:`MeteredGrid.refuse`,
:mod:`fgl_flower.strategies.screening`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from logging import INFO, WARNING

from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.supercore import log

from fgl_flower.errors import ConfigError, FGLError
from fgl_flower.protocol import CONFIG, NUM_PARTITIONS, PARTITION_ID, PARTITION_QUERY
from fgl_flower.records import require_record

#: From this many clients on, discovery takes a node's rank by registration time as its
#: partition id (the order in which Flower's simulation registers its SuperNodes) and checks
#: each node once, the first time a message is addressed to it, instead of asking every node
#: up front: Flower's simulation scans every node for each message batch, and asking 10,000
#: nodes at once took 6 minutes. A node found serving another partition sends discovery back
#: to asking every node, and the messages on to the right ones.
LAZY_DISCOVERY_MIN = 1000

#: Seconds between two looks for replies on a grid that polls an in-memory LinkState (the
#: simulation's ``InMemoryGrid``, whose default is 0.1 s): a look there is a dictionary
#: lookup, and every round waits on average half this interval after its last reply.
#: A deployment's gRPC grid, whose looks are network requests, keeps Flower's default.
IN_MEMORY_PULL_INTERVAL_S = 0.01


class ClientFailure(FGLError):
    """A client replied with an error instead of a result."""


def payload_bytes(obj) -> int:
    """Serialized size of a record (or RecordDict) and everything it references."""
    children = obj.children or {}
    return len(obj.deflate()) + sum(payload_bytes(c) for c in children.values())


class PayloadSizer:
    """:func:`payload_bytes`, without serializing and hashing every array of every message.

    Flower serializes an object as a header (its type, its children's ids, all 64 hex
    digits long) and a body; an array's body holds its dtype, shape and chunk ids, and
    its chunk holds the data. The size of an ``ArrayRecord`` whose arrays each fit one
    chunk therefore depends only on its keys, each array's dtype, shape, stype and byte
    count, and which arrays are identical (children are counted once); and a
    ``RecordDict``'s own size only on its keys and which records are identical. Both are
    computed exactly by :func:`payload_bytes` the first time such a layout is seen and
    reused after that (tested against :func:`payload_bytes`). Config and metric records
    (small, values of any length) are always serialized.
    """

    def __init__(self) -> None:
        self._sizes: dict[tuple, int] = {}

    def size(self, content: RecordDict) -> int:
        groups: dict[tuple, int] = {}  # identical records share an id: counted once
        pattern, total = [], 0
        for name, record in content.items():
            ident = self._identity(record)
            if ident not in groups:
                groups[ident] = len(groups)
                total += self._record_size(record)
            pattern.append((name, groups[ident]))
        key = ("RecordDict", tuple(pattern))
        if key not in self._sizes:
            self._sizes[key] = len(content.deflate())
        return total + self._sizes[key]

    def _record_size(self, record) -> int:
        layout = self._layout(record)
        if layout is None:
            return payload_bytes(record)
        if layout not in self._sizes:
            self._sizes[layout] = payload_bytes(record)
        return self._sizes[layout]

    @staticmethod
    def _layout(record) -> tuple | None:
        """What the size of an ArrayRecord depends on, or ``None`` (not an ArrayRecord, or
        an array of several chunks)."""
        if not isinstance(record, ArrayRecord):
            return None
        from flwr.common.constant import FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE

        seen: dict[tuple, int] = {}
        layout = []
        for key, array in record.items():
            if len(array.data) > FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE:
                return None
            ident = (array.dtype, tuple(array.shape), array.stype, array.data)
            layout.append((key, *ident[:3], len(array.data), seen.setdefault(ident, len(seen))))
        return ("ArrayRecord", tuple(layout))

    @staticmethod
    def _identity(record) -> tuple:
        if isinstance(record, ArrayRecord):
            return (
                "ArrayRecord",
                tuple((k, a.dtype, tuple(a.shape), a.stype, a.data) for k, a in record.items()),
            )
        return (type(record).__name__, record.object_id)


def reply_partition_id(msg: Message) -> int:
    """The partition id a client put into any MetricRecord/ConfigRecord of its reply (the
    grid has checked it against the node's partition before any strategy reads it)."""
    claimed = claimed_partition(msg)
    if claimed is None:
        raise FGLError(f"Reply from node {msg.metadata.src_node_id} carries no {PARTITION_ID!r}.")
    return claimed


def claimed_partition(msg: Message) -> int | None:
    """The partition id a reply names (in every record that names one), ``None`` if it names
    none, several, or one that is not a whole number."""
    named = named_partitions(msg)
    return named[0] if len(set(named)) == 1 and named[0] is not None else None


def named_partitions(msg: Message) -> list[int | None]:
    """The partition id each MetricRecord/ConfigRecord of a reply names (``None``: not a
    whole number), in record order."""
    named = []
    for rec in msg.content.values():
        if isinstance(rec, (MetricRecord, ConfigRecord)) and PARTITION_ID in rec:
            value = rec[PARTITION_ID]
            whole = (
                not isinstance(value, bool)
                and isinstance(value, (int, float))
                and math.isfinite(value)
                and value == int(value)
            )
            named.append(int(value) if whole else None)
    return named


def who(client: int | str) -> str:
    """``"partition 3"`` for a partition id, the text itself for a node not yet mapped."""
    return f"partition {client}" if isinstance(client, int) else str(client)


class MeteredGrid:
    """Wraps a Flower :class:`Grid`: counts messages/bytes, sorts replies, tolerates up to
    ``accept_failures`` failed clients per exchange and fails loudly beyond."""

    def __init__(self, grid: Grid, accept_failures: int = 0) -> None:
        self.grid = grid
        # Flower does not export InMemoryGrid: known by name, so a deployment grid is untouched
        if (
            type(grid).__name__ == "InMemoryGrid"
            and getattr(grid, "pull_interval", 0) > IN_MEMORY_PULL_INTERVAL_S
        ):
            grid.pull_interval = IN_MEMORY_PULL_INTERVAL_S
        self.accept_failures = accept_failures
        self.sizer = PayloadSizer()
        self.partitions: dict[int, int] = {}  # node id -> partition id (from discovery)
        self.unchecked: set[int] = set()  # nodes whose partition is assumed, not yet asked
        self.redirect: dict[int, int] = {}  # node assumed for a partition -> its real node
        self.num_clients = 0
        self.reset()

    def reset(self) -> None:
        """Zero the per-round counters and failures."""
        self.bytes_down = self.bytes_up = 0
        self.messages_down = self.messages_up = 0
        self.failures: dict[int, str] = {}  # partition id -> why
        self.sent = 0  # messages of the last exchange

    def get_node_ids(self) -> list[int]:
        return sorted(self.grid.get_node_ids())

    def discover(self, num_clients: int, timeout: float = 600.0) -> dict[int, int]:
        """``{partition id: node id}`` of the run's ``num_clients`` clients.

        Asks each node, as it connects, for its partition id (``query.partition``: a reply
        without building a client). Clients are then addressed, sampled and ordered by
        partition id, the same in simulation and deployment, whatever node ids Flower
        assigned. A node that serves another number of partitions stops the run at once
        (e.g. ``flwr run .`` with Flower's 2 default SuperNodes and ``num-clients=5`` set),
        with the command that fixes it; so do two nodes serving one partition.
        From :data:`LAZY_DISCOVERY_MIN` clients on, nodes are mapped by registration order and
        each is checked when first addressed (:meth:`send_and_receive`).
        """
        self.num_clients = num_clients
        if num_clients >= LAZY_DISCOVERY_MIN and (
            owners := self._by_registration(num_clients, timeout)
        ):
            return owners
        return self._ask_every_node(num_clients, timeout)

    def _by_registration(self, num_clients: int, timeout: float) -> dict[int, int] | None:
        """``{partition id: node id}`` by the nodes' registration order, once ``num_clients``
        nodes have registered, if the first and last registered serve partitions 0 and
        ``num_clients - 1``; else (another number of nodes, or another order) ``None``."""
        start = time.monotonic()
        while True:  # until every node has registered (a large simulation takes a while)
            try:
                infos = list(self.grid.get_nodes())
            except (AttributeError, NotImplementedError):
                return None
            if len(infos) >= num_clients or time.monotonic() - start > timeout:
                break
            time.sleep(0.5)
        if len(infos) != num_clients or any(not i.registered_at for i in infos):
            return None
        order = [i.node_id for i in sorted(infos, key=lambda i: (i.registered_at, i.node_id))]
        ends = {order[0]: 0, order[-1]: num_clients - 1}
        for node, pid, num in self._ask_partitions(list(ends), timeout):
            self._check_partition(node, pid, num, num_clients, {})
            if pid != ends[node]:
                return None
        self.reset()
        self.partitions = {n: p for p, n in enumerate(order)}
        self.unchecked = set(order) - set(ends)
        log(
            INFO,
            "%d nodes: partition ids taken from the registration order, each checked "
            "when first addressed",
            num_clients,
        )
        return dict(enumerate(order))

    def _ask_every_node(self, num_clients: int, timeout: float) -> dict[int, int]:
        start = time.monotonic()
        owners: dict[int, int] = {}
        asked: set[int] = set()
        while True:
            new = [n for n in self.get_node_ids() if n not in asked]
            asked.update(new)
            for node, pid, num in self._ask_partitions(new, timeout):
                self._check_partition(node, pid, num, num_clients, owners)
                owners[pid] = node
            if len(owners) == num_clients:
                break
            if time.monotonic() - start > timeout:
                missing = sorted(set(range(num_clients)) - set(owners))
                raise FGLError(
                    f"Only {len(owners)} of {num_clients} clients connected after {timeout:.0f}s "
                    f"(no SuperNode serves partition(s) {missing[:10]}): start {num_clients} "
                    f"SuperNodes (num-clients={num_clients}) or lower num-clients."
                )
            time.sleep(0.5)
        self.reset()  # discovery is not part of any round's traffic
        self.partitions = {n: p for p, n in owners.items()}
        return dict(sorted(owners.items()))

    def federation_size(self, timeout: float = 600.0) -> int:
        """The ``num-partitions`` that the federation's SuperNodes serve, asked of the first
        node to connect (one ``query.partition``, not counted as traffic); :meth:`discover`
        then holds every node to it."""
        start = time.monotonic()
        while not (nodes := self.get_node_ids()):
            if time.monotonic() - start > timeout:
                raise FGLError(
                    f"No SuperNode connected within {timeout:.0f}s: start the "
                    "federation's SuperNodes, or set num-clients."
                )
            time.sleep(0.5)
        ((_, _, num),) = self._ask_partitions(nodes[:1], timeout)
        self.reset()
        return num

    def _ask_partitions(self, nodes: list[int], timeout: float) -> list[tuple[int, int, int]]:
        """``(node id, partition id, num-partitions)`` of each node in ``nodes``."""
        if not nodes:
            return []
        return [
            self._answer(r)
            for r in self._exchange(self._queries(nodes), timeout, strict=True, identify=False)
        ]

    @staticmethod
    def _queries(nodes: list[int]) -> list[Message]:
        """A ``query.partition`` message to each of ``nodes``."""
        config = RecordDict({CONFIG: ConfigRecord()})
        return [
            Message(
                content=config, message_type=f"{MessageType.QUERY}.{PARTITION_QUERY}", dst_node_id=n
            )
            for n in nodes
        ]

    @staticmethod
    def _answer(reply: Message) -> tuple[int, int, int]:
        """``(node id, partition id, num-partitions)`` of a ``query.partition`` reply."""
        try:
            rec = require_record(reply.content, CONFIG, ConfigRecord)
            return reply.metadata.src_node_id, int(rec[PARTITION_ID]), int(rec[NUM_PARTITIONS])
        except (FGLError, KeyError, TypeError, ValueError, OverflowError):
            raise ConfigError(
                f"Node {reply.metadata.src_node_id} answered the partition query without a "
                f"whole {PARTITION_ID} and {NUM_PARTITIONS}: is it running this app?"
            ) from None

    @staticmethod
    def _check_partition(
        node: int, pid: int, num: int, num_clients: int, owners: dict[int, int]
    ) -> None:
        if num != num_clients:
            raise ConfigError(
                f"The SuperNodes serve num-partitions={num} (node {node}), but the run has "
                f"num-clients={num_clients}. Either run with num-clients={num} (flwr run . "
                f"--run-config num-clients={num}), or start {num_clients} SuperNodes (simulation: "
                f"flwr run . local --federation-config num-supernodes={num_clients}; deployment: "
                f'--node-config "partition-id=<i> num-partitions={num_clients}").'
            )
        if pid in owners:
            raise ConfigError(
                f"Two SuperNodes serve partition {pid}; give each a distinct "
                "partition-id in --node-config."
            )
        if not 0 <= pid < num_clients:
            raise ConfigError(
                f"SuperNode {node} serves partition-id={pid}, outside [0, {num_clients})."
            )

    def rediscover(
        self, owners: dict[int, int], num_clients: int, timeout: float
    ) -> dict[int, int]:
        """``owners`` updated with the nodes that joined since (e.g. a restarted SuperNode
        that serves a partition whose node is gone); traffic is not counted."""
        new = [n for n in self.get_node_ids() if n not in self.partitions]
        if not new:
            return owners
        owners = dict(owners)
        try:
            found = self._ask_partitions(new, timeout)
        except ClientFailure:
            return owners  # a node that cannot answer now is asked again after the next failure
        live = set(self.get_node_ids())
        for node, pid, num in found:
            if num != num_clients or not 0 <= pid < num_clients:
                continue
            if owners.get(pid) in live:  # a partition's node is still there: a second claim
                log(
                    WARNING,
                    "Node %d claims partition %d, whose node %d is still connected: ignored",
                    node,
                    pid,
                    owners[pid],
                )
                continue
            log(INFO, "Partition %d is now served by node %d", pid, node)
            self.partitions.pop(owners.get(pid), None)
            owners[pid] = node
            self.partitions[node] = pid
        return dict(sorted(owners.items()))

    def send_and_receive(
        self, messages: Iterable[Message], timeout: float | None = None, strict: bool = False
    ) -> list[Message]:
        """The replies, sorted by partition id. Failed clients go to :attr:`failures`;
        more than ``accept_failures`` of them (any, if ``strict``), or no reply at all,
        raise :class:`ClientFailure`. Nodes addressed for the first time under a partition
        assumed by registration order are checked first (not counted as traffic)."""
        messages = self._check_addresses(list(messages), timeout)
        if self.redirect:
            messages = [
                self._readdress(m, self.redirect.get(m.metadata.dst_node_id)) for m in messages
            ]
        return self._exchange(messages, timeout, strict)

    def _check_addresses(self, messages: list[Message], timeout: float | None) -> list[Message]:
        """``messages``, after asking the unchecked nodes among their destinations for their
        partition ids; if one serves another partition, every node is asked (discovery by
        messages) and :attr:`redirect` sends each message to the node of its partition."""
        nodes = sorted({m.metadata.dst_node_id for m in messages} & self.unchecked)
        if not nodes:
            return messages
        wrong = []
        for reply in self.grid.send_and_receive(self._queries(nodes), timeout=timeout):
            if (
                reply.has_error()
            ):  # a node that cannot answer stays unchecked; its message goes as addressed
                continue
            node, pid, num = self._answer(reply)
            self._check_partition(node, pid, num, self.num_clients, {})
            self.unchecked.discard(node)
            if pid != self.partitions[node]:
                wrong.append((node, pid))
        if not wrong:
            return messages
        node, pid = wrong[0]
        log(
            WARNING,
            "Node %d serves partition %d, not %d as its registration order said: "
            "asking every node for its partition",
            node,
            pid,
            self.partitions[node],
        )
        assumed = dict(self.partitions)
        self.unchecked = set()
        owners = self._ask_every_node(self.num_clients, timeout if timeout is not None else 600.0)
        self.redirect = {n: owners[p] for n, p in assumed.items() if owners[p] != n}
        return messages

    @staticmethod
    def _readdress(message: Message, node: int | None) -> Message:
        if node is None:
            return message
        return Message(
            content=message.content,
            dst_node_id=node,
            message_type=message.metadata.message_type,
            ttl=message.metadata.ttl,
            group_id=message.metadata.group_id,
        )

    def _exchange(
        self, messages: list[Message], timeout: float | None, strict: bool, identify: bool = True
    ) -> list[Message]:
        self.messages_down += len(messages)
        sizes: dict[int, int] = {}  # a broadcast shares one content: serialize it once
        for m in messages:
            if id(m.content) not in sizes:
                sizes[id(m.content)] = self.sizer.size(m.content)
            self.bytes_down += sizes[id(m.content)]
        replies = list(self.grid.send_and_receive(messages, timeout=timeout))
        # Flower's own error replies (node gone, message expired) come from the SuperLink:
        # find the client through the message they answer.
        sent = {
            m.metadata.message_id: m.metadata.dst_node_id for m in messages if m.metadata.message_id
        }
        answered, failures, ok = set(), {}, []
        for r in replies:
            node = sent.get(r.metadata.reply_to_message_id, r.metadata.src_node_id)
            answered.add(node)
            if r.has_error():
                failures[self._partition(node)] = r.error.reason or f"error code {r.error.code}"
            elif identify and (why := self._identity_problem(node, r)):
                failures[self._partition(node)] = f"refused: {why}"
            else:
                ok.append(r)
        for m in messages:
            if m.metadata.dst_node_id not in answered:
                failures[self._partition(m.metadata.dst_node_id)] = (
                    f"no reply within {timeout:.0f} s (round-timeout)" if timeout else "no reply"
                )
        self.failures.update(failures)
        self.sent = len(messages)
        if failures and (strict or len(failures) > self.accept_failures or not ok):
            raise ClientFailure(self._failure_message(failures, len(messages), strict))
        self.messages_up += len(ok)
        self.bytes_up += sum(self.sizer.size(r.content) for r in ok)
        return sorted(ok, key=reply_partition_id)

    def _identity_problem(self, node: int, reply: Message) -> str | None:
        """Why ``reply`` from ``node`` cannot be attributed: the node is not one discovery
        mapped, or the reply names another partition than the node serves."""
        if node not in self.partitions:
            return f"a reply from node {node}, which serves no partition of this run"
        named, own = named_partitions(reply), self.partitions[node]
        if not named:
            return f"the reply names no {PARTITION_ID}"
        if None in named:
            return f"the reply names a {PARTITION_ID} that is not a whole number"
        if (other := next((p for p in named if p != own), own)) != own:
            return f"the reply claims partition {other}, but its node serves partition {own}"
        return None

    def refuse(self, replies: list[Message], reasons: dict[int, str]) -> list[Message]:
        """``replies`` without those of the partitions in ``reasons`` (``{partition id:
        why}``), each counted as a failed client of the last exchange ("refused: why"):
        as with any failure, more than ``accept_failures`` of them, or no reply left,
        raise :class:`ClientFailure`. Their traffic stays counted: it was received."""
        if not reasons:
            return replies
        self.failures.update({p: f"refused: {why}" for p, why in reasons.items()})
        kept = [r for r in replies if reply_partition_id(r) not in reasons]
        if len(self.failures) > self.accept_failures or not kept:
            raise ClientFailure(self._failure_message(self.failures, self.sent, False))
        return kept

    def _partition(self, node: int) -> int | str:
        return self.partitions.get(node, f"node {node}")

    def _failure_message(self, failures: dict, sent: int, strict: bool) -> str:
        lines = "\n".join(f"  {who(p)}: {why}" for p, why in sorted(failures.items(), key=str))
        allowed = (
            "every client must reply here"
            if strict
            else f"accept-failures={self.accept_failures}; raise it to go on without them"
            if len(failures) < sent
            else "no reply to go on with"
        )
        return f"{len(failures)} of {sent} clients failed ({allowed}):\n{lines}"
