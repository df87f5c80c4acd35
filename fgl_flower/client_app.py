"""The ClientApp: routes each message to the run's method client for this partition.

Handlers: ``train``, ``evaluate``, ``query`` (default action) and ``query.<action>`` for
every action a registered method declares. Each message builds a fresh client from the
run config, this node's partition data and its persistent ``context.state``.

Loading this module imports Flower and the (torch-free) method registry only: in a
deployment every message runs in a fresh process, so torch, the method's code and its
data are imported by the handler that needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from fgl_flower.config import parse_run_config
from fgl_flower.errors import ConfigError
from fgl_flower.methods import METHODS
from fgl_flower.protocol import CONFIG, SERVER_ROUND

if TYPE_CHECKING:
    from fgl_flower.clients.base import FGLClient

app = ClientApp()


def build_client(context: Context) -> FGLClient:
    """The method client for this node (partition id from ``context.node_config``)."""
    cfg = parse_run_config(context.run_config)
    try:
        pid = int(context.node_config["partition-id"])
        num = int(context.node_config["num-partitions"])
    except KeyError as e:
        raise ConfigError(
            "This SuperNode has no partition id: start it with "
            "--node-config \"partition-id=<i> num-partitions=<K>\"."
        ) from e
    if num != cfg.num_clients:
        raise ConfigError(f"num-partitions={num} on this node but num-clients={cfg.num_clients}.")
    import torch

    from fgl_flower.clients.state import ClientState
    from fgl_flower.datasets import load_client_data

    torch.set_num_threads(1)  # one CPU per simulated client; also makes runs reproducible
    data = load_client_data(cfg.data_config(), pid)
    return METHODS.get(cfg.method).client_class()(cfg, data, ClientState(context.state), pid)


def _round(msg: Message) -> int:
    cfg = msg.content.config_records.get(CONFIG)
    return int(cfg[SERVER_ROUND]) if cfg is not None and SERVER_ROUND in cfg else 0


@app.train()
def train(msg: Message, context: Context) -> Message:
    return Message(content=build_client(context).train(msg.content, _round(msg)), reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    return Message(content=build_client(context).evaluate(msg.content, _round(msg)), reply_to=msg)


def _query_handler(action: str):
    def query(msg: Message, context: Context) -> Message:
        return Message(content=build_client(context).query(action, msg.content), reply_to=msg)

    query.__name__ = f"query_{action}"
    return query


app.query()(_query_handler("default"))
for _action in sorted({a for _, spec in METHODS.items() for a in spec.query_actions}):
    app.query(_action)(_query_handler(_action))
