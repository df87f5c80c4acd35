"""The ClientApp: routes each message to the run's method client for this partition.

Handlers: ``train`` (which first evaluates the received global model when the message
asks for it, see :data:`~fgl_flower.protocol.EVALUATE_ROUND`), ``evaluate``, ``query``
(default action), ``query.partition`` (this node's partition id, for the server's
sampling) and ``query.<action>`` for every action a registered method declares. Each
message builds a fresh client from the run config, this node's partition data and its
persistent ``context.state``.

Loading this module imports Flower and the (torch-free) method registry only: in a
deployment every message runs in a fresh process, so torch, the method's code and its
data are imported by the handler that needs them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from fgl_flower.config import RunConfig, parse_run_config
from fgl_flower.errors import ConfigError
from fgl_flower.methods import METHODS
from fgl_flower.protocol import (
    CONFIG, EVALUATE_ROUND, EVALUATION, METRICS, NUM_PARTITIONS, PARTITION_ID, PARTITION_QUERY,
    SERVER_ROUND,
)

if TYPE_CHECKING:
    from fgl_flower.clients.base import FGLClient

app = ClientApp()


def node_partition(context: Context) -> tuple[int, int]:
    """``(partition id, number of partitions)`` of this node (``context.node_config``)."""
    try:
        return int(context.node_config[PARTITION_ID]), int(context.node_config[NUM_PARTITIONS])
    except KeyError as e:
        raise ConfigError(
            "This SuperNode has no partition id: start it with "
            "--node-config \"partition-id=<i> num-partitions=<K>\"."
        ) from e


@functools.lru_cache(maxsize=8)
def _parsed(items: tuple) -> RunConfig:
    return parse_run_config(dict(items))


def build_client(context: Context) -> FGLClient:
    """The method client for this node (partition id from ``context.node_config``)."""
    cfg = _parsed(tuple(sorted(context.run_config.items())))
    pid, num = node_partition(context)
    if num != cfg.num_clients:
        raise ConfigError(f"num-partitions={num} on this node but num-clients={cfg.num_clients}.")
    import torch

    from fgl_flower.clients.state import ClientState
    from fgl_flower.datasets import load_client_data

    if torch.get_num_threads() != cfg.cpus_per_client:
        # The CPUs this client was given; a fixed count also keeps sums reproducible.
        torch.set_num_threads(cfg.cpus_per_client)
    data = load_client_data(cfg.data_config(), pid)
    return METHODS.get(cfg.method).client_class()(cfg, data, ClientState(context.state), pid)


def _round(msg: Message) -> int:
    cfg = msg.content.config_records.get(CONFIG)
    return int(cfg[SERVER_ROUND]) if cfg is not None and SERVER_ROUND in cfg else 0


@app.train()
def train(msg: Message, context: Context) -> Message:
    client = build_client(context)
    config = msg.content.config_records.get(CONFIG)
    evaluation = None
    if config is not None and EVALUATE_ROUND in config:  # fused: the received model first
        evaluation = client.evaluate(msg.content, int(config[EVALUATE_ROUND]))
    reply = client.train(msg.content, _round(msg))
    if evaluation is not None:
        reply[EVALUATION] = evaluation.metric_records[METRICS]
    return Message(content=reply, reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    return Message(content=build_client(context).evaluate(msg.content, _round(msg)), reply_to=msg)


def _query_handler(action: str):
    def query(msg: Message, context: Context) -> Message:
        return Message(content=build_client(context).query(action, msg.content), reply_to=msg)

    query.__name__ = f"query_{action}"
    return query


@app.query(PARTITION_QUERY)
def query_partition(msg: Message, context: Context) -> Message:
    pid, num = node_partition(context)
    return Message(RecordDict({CONFIG: ConfigRecord({PARTITION_ID: pid, NUM_PARTITIONS: num})}),
                   reply_to=msg)


app.query()(_query_handler("default"))
for _action in sorted({a for _, spec in METHODS.items() for a in spec.query_actions}):
    app.query(_action)(_query_handler(_action))
