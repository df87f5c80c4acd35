"""The ClientApp: routes each message to the run's method client for this partition.

Handlers: ``train`` (which first evaluates the received global model when the message
asks for it, see :data:`~fgl_flower.protocol.EVALUATE_ROUND`), ``evaluate``, ``query``
(default action), ``query.partition`` (this node's partition id, for the server's
sampling), ``query.secagg`` (SecAgg+'s stages, :mod:`fgl_flower.secagg`, whose mod also
wraps ``train``) and ``query.<action>`` for every action a registered method declares. Each
message gets a client built from the run config, this node's partition data and its
persistent ``context.state``; a process that served the node's previous message with the
state the message brings reuses that client instead (:class:`LiveClients`).

Loading this module imports Flower and the (torch-free) method registry only: in a
deployment every message runs in a fresh process, so torch, the method's code and its
data are imported by the handler that needs them.
"""

from __future__ import annotations

import functools
import itertools
import uuid
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from flwr.app import ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from fgl_flower.config import FOLLOW_FEDERATION, RunConfig
from fgl_flower.errors import ConfigError, FGLError
from fgl_flower.methods import METHODS
from fgl_flower.parse import parse_run_config
from fgl_flower.progress import step
from fgl_flower.protocol import (
    CONFIG,
    EVALUATE_ROUND,
    EVALUATION,
    METRICS,
    NUM_PARTITIONS,
    PARTITION_ID,
    PARTITION_QUERY,
    RESUME_ROUND,
    SERVER_ROUND,
)
from fgl_flower.records import get_record, require_record
from fgl_flower.secagg.protocol import QUERY as SECAGG_INNER_QUERY
from fgl_flower.secagg.protocol import SECAGG, SECAGG_STATE

if TYPE_CHECKING:
    from flwr.clientapp.typing import Mod

    from fgl_flower.clients.base import FGLClient


def node_partition(context: Context) -> tuple[int, int]:
    """``(partition id, number of partitions)`` of this node (``context.node_config``)."""
    try:
        return int(context.node_config[PARTITION_ID]), int(context.node_config[NUM_PARTITIONS])
    except KeyError as e:
        raise ConfigError(
            "This SuperNode has no partition id: start it with "
            '--node-config "partition-id=<i> num-partitions=<K>".'
        ) from e


@functools.lru_cache(maxsize=8)
def _parsed(items: tuple) -> RunConfig:
    return parse_run_config(dict(items))


def node_run_config(context: Context) -> RunConfig:
    """The run config as this node runs it: ``num-clients`` left to follow the federation
    (:data:`~fgl_flower.config.FOLLOW_FEDERATION`) becomes the node's ``num-partitions``;
    a count that differs from it is a :class:`ConfigError`."""
    cfg = _parsed(tuple(sorted(context.run_config.items())))
    num = node_partition(context)[1]
    if cfg.num_clients == FOLLOW_FEDERATION:
        return _parsed(tuple(sorted({**context.run_config, "num-clients": num}.items())))
    if num != cfg.num_clients:
        raise ConfigError(f"num-partitions={num} on this node but num-clients={cfg.num_clients}.")
    return cfg


#: ``context.state`` key of the token that names the state a client saved last.
LIVE_TOKEN = "fgl.live-token"
#: ``context.state`` key set once a resumed run has restored the client's checkpoint.
RESTORED = "fgl.restored"
#: ``context.state`` key set once the client has written a checkpoint in this run (its first
#: write clears the files another run left in its folder).
CHECKPOINTED = "fgl.checkpointed"
#: Bookkeeping keys of ``context.state`` that are not the client's state (never checkpointed).
_NOT_STATE = (LIVE_TOKEN, RESTORED, CHECKPOINTED, SECAGG_STATE)


class LiveClients:
    """The clients this process served, kept alive between messages of the same node.

    Building a client (model, optimizer, restoring both from ``context.state``) costs more
    than a local epoch on a small graph. After each message the client's state gets a new
    token (``context.state[LIVE_TOKEN]``), and the client is kept under its node, run and
    config. The next message of that node reuses it only when it brings the same token,
    i.e. exactly the state this client saved: any other process, a resumed or replaced
    state, or a message after a failure builds a fresh client from the state. Reuse calls
    :meth:`~fgl_flower.clients.base.FGLClient.refresh`, so a reused client computes what a
    fresh one would (checked for every method by the tests). Least recently used clients
    beyond ``maxsize`` are dropped.
    """

    def __init__(self, maxsize: int = 64) -> None:
        self.maxsize = maxsize
        self._clients: OrderedDict[tuple, tuple[str, FGLClient]] = OrderedDict()
        self._prefix = f"{uuid.uuid4().hex}-"  # tokens of different processes never match
        self._counter = itertools.count()

    def __len__(self) -> int:
        return len(self._clients)

    def clear(self) -> None:
        self._clients.clear()

    def serve(
        self,
        key: tuple,
        context: Context,
        build: Callable[[], FGLClient],
        handle: Callable[[FGLClient], RecordDict],
    ) -> RecordDict:
        """``handle(client)`` with the live client of ``key`` if ``context.state`` is the one
        it saved, else with ``build()``; the client is kept only if ``handle`` returns."""
        from fgl_flower.clients.state import ClientState

        entry = self._clients.pop(key, None)
        token = get_record(context.state, LIVE_TOKEN, ConfigRecord)
        if entry is not None and token is not None and token["token"] == entry[0]:
            client = entry[1]
            client.state = ClientState(context.state)
            client.refresh()
        else:
            client = build()
        reply = handle(client)
        token = f"{self._prefix}{next(self._counter)}"
        context.state[LIVE_TOKEN] = ConfigRecord({"token": token})
        self._clients[key] = (token, client)
        while len(self._clients) > self.maxsize:
            self._clients.popitem(last=False)
        return reply


_LIVE = LiveClients()


def release_clients() -> None:
    """Drop the clients this process keeps alive (at the end of an in-process run)."""
    _LIVE.clear()


def build_client(context: Context) -> FGLClient:
    """A fresh method client for this node (partition id from ``context.node_config``)."""
    cfg = node_run_config(context)
    pid = node_partition(context)[0]
    with warnings.catch_warnings():
        # torch.jit's deprecation notice when PyG is first imported: nothing a user can act on
        warnings.filterwarnings(
            "ignore", message=r"`torch\.jit\.script` is deprecated", category=DeprecationWarning
        )
        import torch

        from fgl_flower.clients.state import ClientState
        from fgl_flower.datasets import load_client_data

        if torch.get_num_threads() != cfg.cpus_per_client:
            # The CPUs this client was given; a fixed count also keeps sums reproducible.
            torch.set_num_threads(cfg.cpus_per_client)
        data = load_client_data(cfg.data_config(), pid)
        return METHODS.get(cfg.method).client_class()(cfg, data, ClientState(context.state), pid)


def _round(msg: Message) -> int:
    cfg = get_record(msg.content, CONFIG, ConfigRecord)
    return int(cfg[SERVER_ROUND]) if cfg is not None and SERVER_ROUND in cfg else 0


def with_client(
    msg: Message, context: Context, handle: Callable[[FGLClient], RecordDict]
) -> RecordDict:
    """``handle`` applied to this node's client: a live one (``reuse-clients``) or a fresh
    one. In a resumed run, the client's state first comes from its checkpoint; after a
    train message it is checkpointed (:mod:`fgl_flower.checkpoint`)."""
    items = tuple(sorted(context.run_config.items()))
    cfg = node_run_config(context)
    config = get_record(msg.content, CONFIG, ConfigRecord)
    where = _checkpoint_dir(context, cfg)
    resumed = config is not None and RESUME_ROUND in config
    if where is not None and resumed and RESTORED not in context.state:
        _restore_state(context, where, int(config[RESUME_ROUND]))
    # this run's first checkpoint of the client: older files are another run's (a query may
    # have filled the state before, e.g. FedSage+'s generator)
    first = not resumed and CHECKPOINTED not in context.state
    if cfg.reuse_clients:
        key = (context.run_id, context.node_id, items)
        reply = _LIVE.serve(key, context, lambda: build_client(context), handle)
    else:
        reply = handle(build_client(context))
    if where is not None and msg.metadata.message_type == MessageType.TRAIN:
        from fgl_flower.checkpoint import client_root, save_client_state

        state = RecordDict({k: v for k, v in context.state.items() if k not in _NOT_STATE})
        try:
            save_client_state(
                where[0],
                node_partition(context)[0],
                _round(msg),
                state,
                cfg.checkpoint_every,
                first=first,
                node_dir=where[1],
            )
            context.state[CHECKPOINTED] = ConfigRecord({"round": _round(msg)})
        except OSError as e:
            raise FGLError(
                f"Cannot write the client checkpoint in {client_root(*where)}: {e}. Give this "
                'SuperNode a writable folder (--node-config "checkpoint-dir=..."), '
                "or run without checkpoints (checkpoint-every=0)."
            ) from None
    return reply


def _checkpoint_dir(context: Context, cfg: RunConfig) -> tuple[str, str | None] | None:
    """``(the run's checkpoint folder, this node's own or None)``: the run's is
    ``checkpoint-dir``, or ``<out-dir>/checkpoint``; the client's checkpoints go to its node's
    ``checkpoint-dir`` if set, else to a private folder named after the run's
    (:func:`fgl_flower.checkpoint.client_root`). ``None`` without checkpoints or without a
    run folder (``out-dir`` left to the server)."""
    if not cfg.checkpoint_every:
        return None
    folder = cfg.checkpoint_dir
    if not folder and cfg.out_dir:
        folder = str(Path(cfg.out_dir).expanduser() / "checkpoint")
    node = context.node_config.get("checkpoint-dir") or None
    if not folder and not node:
        return None
    return str(folder or node), (str(node) if node else None)


def _restore_state(context: Context, where: tuple[str, str | None], server_round: int) -> None:
    """Replace ``context.state`` by the client's checkpoint as of ``server_round``."""
    from fgl_flower.checkpoint import load_client_state

    saved = load_client_state(where[0], node_partition(context)[0], server_round, node_dir=where[1])
    for key in list(context.state.keys()):
        del context.state[key]
    for key, record in (saved or {}).items():
        context.state[key] = record
    context.state[RESTORED] = ConfigRecord({"round": server_round})


def train(msg: Message, context: Context) -> Message:
    config = get_record(msg.content, CONFIG, ConfigRecord)

    def handle(client: FGLClient) -> RecordDict:
        evaluation = None
        if config is not None and EVALUATE_ROUND in config:  # fused: the received model first
            evaluation = client.evaluate(msg.content, int(config[EVALUATE_ROUND]))
        client.check_can_train()
        reply = client.train(msg.content, _round(msg))
        if evaluation is not None:
            reply[EVALUATION] = require_record(evaluation, METRICS, MetricRecord)
        return reply

    return Message(content=with_client(msg, context, handle), reply_to=msg)


def evaluate(msg: Message, context: Context) -> Message:
    reply = with_client(msg, context, lambda client: client.evaluate(msg.content, _round(msg)))
    return Message(content=reply, reply_to=msg)


def _query_handler(action: str):
    def query(msg: Message, context: Context) -> Message:
        reply = with_client(msg, context, lambda client: client.query(action, msg.content))
        return Message(content=reply, reply_to=msg)

    query.__name__ = f"query_{action}"
    return query


def query_secagg(msg: Message, context: Context) -> Message:
    """A SecAgg+ stage (:mod:`fgl_flower.secagg`): the mod answers it; in its ``collect``
    stage this handler runs the wrapped query, whose reply the mod masks."""
    action = str(require_record(msg.content, SECAGG, ConfigRecord)[SECAGG_INNER_QUERY])
    return Message(
        content=with_client(msg, context, lambda client: client.query(action, msg.content)),
        reply_to=msg,
    )


def secaggplus_mod(msg: Message, context: Context, call_next) -> Message:
    """:func:`fgl_flower.secagg.client.secaggplus_mod`, imported at the first SecAgg+ message."""
    from fgl_flower.secagg.client import secaggplus_mod as mod

    return mod(msg, context, call_next)


#: Seconds one client's handling of a message runs before :func:`progress_mod` reports it.
CLIENT_REPORT_AFTER_S = 30.0


def progress_mod(msg: Message, context: Context, call_next) -> Message:
    """A line when this client's work on a message (its training, its evaluation) has run
    :data:`CLIENT_REPORT_AFTER_S`, and one with its time when it ends
    (:func:`fgl_flower.progress.step`): a round whose clients take minutes (FedLoG's first
    round on CiteSeer, 100 local epochs on a large graph) says which are at work, while quick
    clients stay quiet. Off with ``progress=false``; a query passes through."""
    kind = str(msg.metadata.message_type)
    if (
        kind not in (MessageType.TRAIN, MessageType.EVALUATE)
        or not node_run_config(context).progress
    ):
        return call_next(msg, context)
    with step(
        f"client {node_partition(context)[0]}: {kind} of round {_round(msg)}",
        after=CLIENT_REPORT_AFTER_S,
    ):
        return call_next(msg, context)


def query_partition(msg: Message, context: Context) -> Message:
    pid, num = node_partition(context)
    return Message(
        RecordDict({CONFIG: ConfigRecord({PARTITION_ID: pid, NUM_PARTITIONS: num})}), reply_to=msg
    )


def make_app(mods: Sequence[Mod] = ()) -> ClientApp:
    """This package's ClientApp, with Flower ``mods`` wrapped around every handler (e.g.
    Flower's DP or SecAgg+ client mods, or the fault injection of the tests), inside
    :func:`progress_mod`."""
    client_app = ClientApp(mods=[progress_mod, *mods])
    client_app.train(mods=[secaggplus_mod])(train)  # the mod passes plain train messages through
    client_app.evaluate()(evaluate)
    client_app.query(PARTITION_QUERY)(query_partition)
    client_app.query(SECAGG, mods=[secaggplus_mod])(query_secagg)
    client_app.query()(_query_handler("default"))
    for action in sorted({a for _, spec in METHODS.items() for a in spec.query_actions}):
        client_app.query(action)(_query_handler(action))
    return client_app


app = make_app()
