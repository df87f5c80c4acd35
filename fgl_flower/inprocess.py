"""Run the app in one process, without a SuperLink or Ray.

:class:`InProcessGrid` implements the part of Flower's ``Grid`` that strategies use and
delivers each message straight to the :mod:`fgl_flower.client_app` of a virtual node, with
one persistent :class:`~flwr.app.Context` per node (as a SuperNode keeps it). With
``serialize=True`` message contents are serialized and rebuilt on the way, as on the wire
(the tests do this for every method); by default records are handed over as they are,
which gives the same numbers for less work. It runs the same ServerApp/ClientApp code as
``flwr run``; it exists for fast tests, notebooks and the framework-overhead measurement.
``flwr run`` is the real runtime.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from logging import ERROR
from typing import Any

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.constant import ErrorCode
from flwr.proto.node_pb2 import NodeInfo  # pylint: disable=E0611
from flwr.supercore import log
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents
from flwr.supercore.task_identity import TaskIdentity

from fgl_flower.config import FOLLOW_FEDERATION
from fgl_flower.errors import ConfigError
from fgl_flower.parse import parse_run_config


def _roundtrip(content: RecordDict) -> RecordDict:
    """Copy ``content`` through Flower's serialization, as the wire would."""
    objects: dict[str, bytes] = {}

    def collect(obj) -> None:
        objects[obj.object_id] = obj.deflate()
        for child in (obj.children or {}).values():
            collect(child)

    collect(content)
    return inflate_object_from_contents(content.object_id, objects, keep_object_contents=False)


class InProcessGrid:
    """A Grid whose nodes are ClientApp calls in this process.

    Args:
        run_config: The flat run config every node sees.
        num_nodes: Number of virtual SuperNodes (partition ids ``0..num_nodes-1``).
        client_app: The ClientApp to call (default: this package's).
        serialize: Round-trip message contents through Flower's serialization.
    """

    def __init__(
        self,
        run_config: Mapping[str, Any],
        num_nodes: int,
        client_app: ClientApp | None = None,
        serialize: bool = False,
    ) -> None:
        if client_app is None:
            from fgl_flower.client_app import app as client_app
        self.client_app = client_app
        self.serialize = serialize
        self.registration: list[int] | None = None  # partition ids in registration order
        # Messages read the process's task identity, which a SuperLink would set.
        for attr in ("run_id", "node_id", "task_id"):
            if getattr(TaskIdentity, f"_{attr}") is None:
                setattr(TaskIdentity, attr, 0)
        # Node ids are arbitrary, as in Flower; deliberately not in partition order.
        self._nodes = {
            1000 + 7919 * (num_nodes - i): Context(
                run_id=0,
                node_id=1000 + 7919 * (num_nodes - i),
                node_config={"partition-id": i, "num-partitions": num_nodes},
                state=RecordDict(),
                run_config=dict(run_config),
            )
            for i in range(num_nodes)
        }

    def get_node_ids(self) -> Iterable[int]:
        return list(self._nodes)

    def get_nodes(self) -> Iterable[NodeInfo]:
        """The nodes as Flower's simulation registers them: in partition order, one
        microsecond apart (``registration`` reorders them, for tests)."""
        start = datetime(2026, 1, 1, tzinfo=UTC)
        order = sorted(self._nodes.values(), key=lambda c: int(c.node_config["partition-id"]))
        if self.registration is not None:
            order = [order[i] for i in self.registration]
        return [
            NodeInfo(
                node_id=c.node_id, registered_at=(start + timedelta(microseconds=k)).isoformat()
            )
            for k, c in enumerate(order)
        ]

    def context(self, partition_id: int) -> Context:
        """The context (and persistent state) of the node with ``partition_id``."""
        return next(
            c for c in self._nodes.values() if c.node_config["partition-id"] == partition_id
        )

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> list[Message]:
        replies = []
        for msg in messages:
            ctx = self._nodes[msg.metadata.dst_node_id]
            if self.serialize:
                msg = Message(
                    content=_roundtrip(msg.content),
                    dst_node_id=msg.metadata.dst_node_id,
                    message_type=msg.metadata.message_type,
                )
            try:
                reply = self.client_app(msg, ctx)
            except Exception as e:  # as Flower's runtimes do: an error reply, the run goes on
                log(ERROR, "ClientApp of node %d raised:\n%s", ctx.node_id, traceback.format_exc())
                reply = Message(
                    Error(
                        code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION,
                        reason=f"{type(e).__name__}: {e}",
                    ),
                    reply_to=msg,
                )
            if self.serialize and reply.has_content():
                reply = Message(content=_roundtrip(reply.content), reply_to=msg)
            replies.append(reply)
        return replies


def run_inprocess(flat_config: Mapping[str, Any], serialize: bool = False) -> dict:
    """Run a whole experiment in this process; returns the run summary."""
    from fgl_flower.client_app import release_clients
    from fgl_flower.server_app import run

    cfg = parse_run_config(flat_config)
    if cfg.num_clients == FOLLOW_FEDERATION:
        raise ConfigError(
            f"num-clients={FOLLOW_FEDERATION} follows a federation's SuperNodes, but "
            "run_inprocess makes its own: set num-clients."
        )
    try:
        return run(InProcessGrid(flat_config, cfg.num_clients, serialize=serialize), cfg)
    finally:
        release_clients()  # the run's live clients (and their device memory) go with it
