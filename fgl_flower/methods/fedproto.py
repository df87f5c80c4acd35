"""FedProto's spec (torch-free): clients share class prototypes instead of models."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Client -> server: ``prototypes [C, h]`` (the mean representation of the client's training
#: nodes of each class, zeros where it has none) and ``counts [C]`` (those nodes per class).
PROTOTYPES = "fedproto.prototypes"
#: Server -> client: the global ``prototypes [C, h]`` and ``present [C]`` (1 where some client
#: has the class); absent in round 1.
GLOBAL = "fedproto.global"

#: How the server averages a class's prototypes: ``official`` (the mean over the clients that
#: have the class, the official code's ``proto_aggregation``) or ``openfgl`` (weighted by
#: the clients' node counts over every client, a client without the class adding zeros).
AGGREGATIONS = ("official", "openfgl")
#: The regulariser: ``sample`` (the official code's: the mean squared error of each training
#: node's representation against its class's global prototype) or ``class`` (OpenFGL's: that
#: error averaged within each class, summed over the classes).
LOSSES = ("sample", "class")

PROBES = (
    Probe(
        "fedproto.loss-share",
        "lambda l_proto / (l_ce + lambda l_proto), mean over the round's steps (reported from "
        "the round after the first, once global prototypes exist)",
        dead_below=1e-3,
        why="The prototype regulariser adds nothing: the clients train alone (Local).",
    ),
    Probe(
        "fedproto.margin",
        "after training, mean over training nodes of (distance to the nearest other class's "
        "global prototype - distance to their own class's), over the mean distance between "
        "global prototypes: > 0 when nodes sit nearer their own class's",
    ),
    Probe(
        "fedproto.spread",
        "mean distance between the global prototypes of different classes over their mean "
        "norm (server)",
        dead_below=1e-3,
        why="The global prototypes have collapsed onto one point.",
    ),
)


@dataclass(frozen=True)
class FedProtoOptions(MethodOptions):
    """FedProto's hyperparameters (Tan et al., AAAI 2022): the regulariser's weight (the
    official code's ``ld`` = 1, OpenFGL's 1), how the server averages and the loss form."""

    weight: float = 1.0
    aggregate: str = "official"
    loss: str = "sample"


def check_config(cfg: RunConfig) -> None:
    o = FedProtoOptions.from_config(cfg)
    o.require_choice("fedproto", "aggregate", AGGREGATIONS)
    o.require_choice("fedproto", "loss", LOSSES)
    o.require_nonnegative("fedproto", "weight")
    require_prototype_backbone(cfg, "fedproto")


def require_prototype_backbone(cfg: RunConfig, method: str) -> None:
    """Stop unless the run's backbone has a hidden representation its output layer reads
    (what a prototype averages)."""
    from fgl_flower.models.registry import MODELS, model_for_task

    model = model_for_task(cfg.model, "node")
    if not MODELS.get(model).hidden or cfg.num_layers < 2:
        raise ConfigError(
            f"{method}'s prototypes are means of the representations the output layer reads; "
            f"model={model!r} with num-layers={cfg.num_layers} has none. Use gcn, graphsage, gat, "
            "mlp or acmgcn with num-layers >= 2."
        )


SPEC = MethodSpec(
    name="fedproto",
    strategy="fgl_flower.strategies.fedproto:FedProtoStrategy",
    client="fgl_flower.clients.fedproto:FedProtoClient",
    space={"weight": "0.01..10:log"},
    tasks=("node",),
    summary="Clients keep their models and share class prototypes; each local loss pulls "
    "representations towards their class's global prototype.",
    reference="Tan et al., AAAI 2022",
    options=FedProtoOptions.defaults(),
    option_help={
        "weight": "lambda: weight of the prototype regulariser",
        "aggregate": "official (mean over the clients with the class) | openfgl (node-count weights, zeros included)",
        "loss": "sample (each node against its class's prototype, the official code) | class (per-class errors summed, OpenFGL)",
    },
    check=check_config,
    probes=PROBES,
)
